package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// recorder is a ledger.Metrics that keeps what it is told.
type recorder struct {
	mu         sync.Mutex
	redecided  int
	asked      int
	held       int
	committed  []int
	sweeps     int
	expired    int
	incomplete []error
}

func (r *recorder) Redecided() { r.mu.Lock(); r.redecided++; r.mu.Unlock() }

func (r *recorder) HandOver(asked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if asked {
		r.asked++
	} else {
		r.held++
	}
}

func (r *recorder) Committed(n int) { r.mu.Lock(); r.committed = append(r.committed, n); r.mu.Unlock() }

func (r *recorder) Swept(_ time.Duration, expired int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweeps++
	r.expired += expired
	if err != nil {
		r.incomplete = append(r.incomplete, err)
	}
}

func (r *recorder) snapshot() recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorder{redecided: r.redecided, asked: r.asked, held: r.held, committed: append([]int(nil), r.committed...), sweeps: r.sweeps,
		expired: r.expired, incomplete: append([]error(nil), r.incomplete...)}
}

// heldStore is the real store whose appends, while armed, first wait for
// release and then fail with err (nil: go through), without being stored.
type heldStore struct {
	ledger.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	err     error
	// before, when set, runs first (another writer, say).
	before func()
}

func (s *heldStore) Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	if s.armed.CompareAndSwap(true, false) {
		if s.before != nil {
			s.before()
		}
		if s.entered != nil {
			close(s.entered)
			<-s.release
		}
		if s.err != nil {
			return 0, fmt.Errorf("injected: %w", s.err)
		}
	}
	return s.Store.Append(ctx, subject, expectLast, data)
}

// TestLedger_metrics_batches: every stored message is observed with the
// commands it holds, so group commit shows as batches above one; a refusal
// stores nothing and is not observed.
func TestLedger_metrics_batches(t *testing.T) { onEachStore(t, ledgerMetricsBatches) }

func ledgerMetricsBatches(t *testing.T, e *env) {
	ctx := context.Background()
	rec := &recorder{}
	st := &heldStore{Store: e.store("a")}
	l := e.ledger(st, ledger.Config{Metrics: rec})
	setup(t, l, 0, 0)
	b := bank(t, l)
	before := len(rec.snapshot().committed)
	require.Equal(t, 2, before, "the catalog and the site so far")

	// The first deposit's append is held until three more wait behind it.
	st.entered, st.release = make(chan struct{}), make(chan struct{})
	st.armed.Store(true)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Execute(ctx, siteID, testkit.Deposit(b, fmt.Sprint("p", i), fmt.Sprint("u", i), 5_000), events.ActorMerchant)
		}()
	}
	start(0)
	<-st.entered
	for i := 1; i < 4; i++ {
		start(i)
	}
	testkit.Eventually(t, testkit.WaitFor, func() bool { n, _ := ledger.QueueState(l, siteID); return n == 3 }, "three commands queued")
	close(st.release)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	// A repeat in a batch of its own: decided, nothing stored.
	_, err := l.Execute(ctx, siteID, testkit.Deposit(b, "p0", "u0", 6_000), events.ActorMerchant)
	require.ErrorIs(t, err, aggregates.ErrProcessIDConflict)

	got := rec.snapshot()
	assert.Equal(t, []int{1, 3}, got.committed[before:], "one message of one command, then one of the three that waited")
	assert.Zero(t, got.redecided)
}

// TestLedger_metrics_redecided: a conflict makes the batch be decided
// again, and that is counted; the message finally stored is observed once.
func TestLedger_metrics_redecided(t *testing.T) { onEachStore(t, ledgerMetricsRedecided) }

func ledgerMetricsRedecided(t *testing.T, e *env) {
	rec := &recorder{}
	st := &heldStore{Store: e.store("a")}
	l := e.ledger(st, ledger.Config{Metrics: rec})
	setup(t, l, 0, 0)
	before := len(rec.snapshot().committed)
	// Another process appends to the site between the decision and the
	// append: a real conflict.
	other := e.ledger(e.store("b"), ledger.Config{})
	st.before = func() {
		_, err := other.Execute(context.Background(), siteID, aggregates.AdjustTreasury{Amount: 1, Reason: "other"}, "op-2")
		require.NoError(t, err)
	}

	st.armed.Store(true)
	_, err := l.Execute(context.Background(), siteID, aggregates.AdjustTreasury{Amount: 500, Reason: "top-up"}, "op-1")
	require.NoError(t, err)
	got := rec.snapshot()
	assert.Equal(t, 1, got.redecided)
	assert.Equal(t, []int{1}, got.committed[before:])
}

// TestLedger_metrics_sweeps: every expiry sweep is observed with the
// deposits it expired, and one that could not store an expiry as
// incomplete.
func TestLedger_metrics_sweeps(t *testing.T) { onEachStore(t, ledgerMetricsSweeps) }

func ledgerMetricsSweeps(t *testing.T, e *env) {
	ctx := context.Background()
	clk := newClock(epoch)
	rec := &recorder{}
	st := &heldStore{Store: e.store("a"), err: events.ErrUnavailable}
	l := e.ledger(st, ledger.Config{Now: clk.Now, Metrics: rec})
	setup(t, l, 0, 0)
	b := bank(t, l)
	for _, pid := range []string{"d0", "d1"} {
		_, err := l.Execute(ctx, siteID, testkit.Deposit(b, pid, "user-"+pid, 5_000), events.ActorMerchant)
		require.NoError(t, err)
	}
	clk.Add(aggregates.DefaultDepositTTLSeconds * time.Second)

	// The first expiry's append fails: that sweep is incomplete; a later
	// one expires both.
	st.armed.Store(true)
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.RunExpiry(sctx, time.Millisecond)
	}()
	testkit.Eventually(t, testkit.WaitFor, func() bool { return rec.snapshot().expired == 2 }, "both deposits expired")
	stop()
	<-done
	got := rec.snapshot()
	require.Len(t, got.incomplete, 1)
	assert.ErrorIs(t, got.incomplete[0], events.ErrUnavailable)
	assert.GreaterOrEqual(t, got.sweeps, 2)
}
