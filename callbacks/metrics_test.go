package callbacks

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// recorder is a Metrics that keeps what it is told.
type recorder struct {
	mu        sync.Mutex
	delivered int
	failed    int
	givenUp   int
	since     []time.Duration
}

func (r *recorder) CallbackAttempted(delivered bool, took, sinceEvent time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if delivered {
		r.delivered++
		r.since = append(r.since, sinceEvent)
	} else {
		r.failed++
	}
}

func (r *recorder) CallbackGivenUp() { r.mu.Lock(); r.givenUp++; r.mu.Unlock() }

func (r *recorder) counts() (delivered, failed, givenUp int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.delivered, r.failed, r.givenUp
}

// TestDispatcher_metrics_outcomes: every attempt is observed as delivered
// or failed, and a callback parked after its schedule as given up.
func TestDispatcher_metrics_outcomes(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, func(c callback, n int) (int, http.Header) {
		if c.Msg.Type == TypeWithdrawalRejected || n == 1 {
			return http.StatusInternalServerError, nil
		}
		return http.StatusOK, nil
	})
	f.createSite("s1", rcv.url("/hook"))
	dep := f.deposit("s1", 500)
	approvedAt := time.Now().Add(-time.Minute)
	f.append("s1", ev(&events.DepositApproved{TxID: dep, Amount: 500, Requested: 500}, approvedAt))
	wd := f.withdrawal("s1", 900)
	f.append("s1", ev(&events.WithdrawalRejected{TxID: wd, Reason: "limits"}, time.Now()))
	rec := &recorder{}
	f.dispatcher(Config{Schedule: Schedule{10 * time.Millisecond}, Metrics: rec})

	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "both callbacks settled")
	delivered, failed, givenUp := rec.counts()
	assert.Equal(t, 1, delivered, "the deposit's second attempt")
	assert.Equal(t, 3, failed, "the deposit's first attempt and both of the withdrawal's")
	assert.Equal(t, 1, givenUp, "the withdrawal, parked")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.since, 1)
	assert.GreaterOrEqual(t, rec.since[0], time.Minute, "measured from the event")
}

// TestDispatcher_backlog: the active dispatcher reports the callbacks it
// holds, since when, and what its consumer has not handed over; a standby
// reports nothing held and the stream's pending as unknown.
func TestDispatcher_backlog(t *testing.T) {
	f := newFixture(t)
	hanging := newReceiver(t, func(callback, int) (int, http.Header) { return -1, nil })
	f.createSite("s1", hanging.url("/"))
	start := time.Now()
	for i := 0; i < 3; i++ {
		tx := f.deposit("s1", 10)
		f.append("s1", ev(&events.DepositExpired{TxID: tx}, time.Now()))
	}
	d, _ := f.dispatcher(Config{Timeout: time.Minute})
	ctx := context.Background()
	testkit.Eventually(t, testkit.WaitFor, func() bool { return d.Backlog(ctx).Queued == 3 }, "three callbacks held")
	b := d.Backlog(ctx)
	assert.True(t, b.Active)
	assert.False(t, b.Oldest.IsZero())
	assert.False(t, b.Oldest.Before(start.Add(-time.Second)), "the oldest held message was stored in this test: %v", b.Oldest)
	assert.Zero(t, b.StreamPending, "every message was handed over")

	standby, err := New(ctx, Config{Conn: f.conn("standby"), Store: f.store, Ledger: f.led, Records: f.reader, Logger: f.log.Logger})
	require.NoError(t, err)
	defer standby.Close()
	assert.Equal(t, Backlog{StreamPending: -1}, standby.Backlog(ctx))

	// A consumer that does not answer in time leaves the stream's pending
	// unknown; the rest is in memory.
	expired, cancel := context.WithCancel(ctx)
	cancel()
	b = d.Backlog(expired)
	assert.Equal(t, int64(-1), b.StreamPending)
	assert.Equal(t, 3, b.Queued)
}
