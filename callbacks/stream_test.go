package callbacks

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// readCounting is the real store, counting its reads.
type readCounting struct {
	*jsstore.Store
	reads atomic.Int64
}

func (s *readCounting) Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	s.reads.Add(1)
	return s.Store.Read(ctx, filter, from, fn)
}

// TestStream_idleReadsNothing: a stream whose site stores nothing does not
// read the store, whatever other sites store, and reads it once its site
// has something to stream.
func TestStream_idleReadsNothing(t *testing.T) {
	f := newFixture(t)
	f.createSite("s1", "")
	f.createSite("s2", "")
	store := &readCounting{Store: f.store}
	polls := make(chan struct{}, 64)
	cfg := StreamConfig{Store: store, Ledger: f.led, Records: f.reader, Poll: time.Millisecond, Applied: f.led.SiteApplied,
		Check: func(context.Context) error {
			select {
			case polls <- struct{}{}:
			default:
			}
			return nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	after, err := Head(ctx, store)
	require.NoError(t, err)
	got := make(chan StreamEvent, 4)
	done := make(chan error, 1)
	go func() {
		done <- Stream(ctx, cfg, "s1", after, func(ev StreamEvent) error { got <- ev; return nil })
	}()
	waitPolls := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-polls:
			case <-time.After(testkit.WaitFor):
				t.Fatal("the stream does not poll")
			}
		}
	}
	waitPolls(3)
	other := f.deposit("s2", 1000)
	seq := f.append("s2", ev(&events.DepositApproved{TxID: other, Amount: 1000, Requested: 1000}, time.Now()))
	testkit.Eventually(t, testkit.WaitFor, func() bool { return f.led.SiteApplied("s2") >= seq }, "s2 applied")
	waitPolls(3)
	assert.Zero(t, store.reads.Load(), "reads of an idle stream")

	tx := f.deposit("s1", 2000)
	seq = f.append("s1", ev(&events.DepositApproved{TxID: tx, Amount: 2000, Requested: 2000}, time.Now()))
	select {
	case e := <-got:
		assert.Equal(t, WebhookID(seq, 0), e.ID)
		assert.Equal(t, "deposit.approved", e.Type)
	case <-time.After(testkit.WaitFor):
		t.Fatal("the site's callback was not streamed")
	}
	assert.NotZero(t, store.reads.Load())
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}

// TestStream_afterParsed: a stream starts after a webhook-id or a position
// from Head; anything else ("" included) is refused before the store is
// read.
func TestStream_afterParsed(t *testing.T) {
	store := &readCounting{}
	for _, after := range []string{"", "*", ">", ".", "..", "1-0.>", "0-0", "1-x", "1-0\x00", "\t1-0"} {
		err := Stream(context.Background(), StreamConfig{Store: store}, "s1", after,
			func(StreamEvent) error { t.Fatal("an event streamed"); return nil })
		require.ErrorIs(t, err, ErrEventNotFound, "after %q", after)
	}
	require.Zero(t, store.reads.Load())
}

// TestFilterCursor: a listing cursor is taken only as List spells it, and
// only with the filters it was issued for; one of the format before, a
// bare webhook id, with any.
func TestFilterCursor(t *testing.T) {
	f := Filter{Status: StatusDelivered, SiteID: "s1", Limit: 10}
	c := *f.cursorAt(key{12, 3})
	g := f
	g.Cursor, g.Limit = c, 500
	k, err := g.after()
	require.NoError(t, err, "the page size is no filter")
	assert.Equal(t, key{12, 3}, k)

	enc := base64.RawURLEncoding.EncodeToString
	for _, other := range []Filter{{}, {Status: StatusDelivered}, {SiteID: "s1"}, {Status: StatusFailed, SiteID: "s1"},
		{Status: StatusDelivered, SiteID: "s2"}, {Status: "s1", SiteID: StatusDelivered}} {
		other.Cursor = c
		_, err := other.after()
		assert.ErrorIs(t, err, ErrCursorFilters, "%+v", other)
	}

	for _, old := range []Filter{{}, f, {SiteID: "s2"}} {
		old.Cursor = enc([]byte("12-3"))
		k, err := old.after()
		require.NoError(t, err, "%+v", old)
		assert.Equal(t, key{12, 3}, k)
	}

	fp := fmt.Sprintf("%08x", f.fingerprint())
	last := c[len(c)-1]
	padding := c[:len(c)-1] + string(last+1) // the same bytes, other padding bits
	for _, bad := range []string{"garbage!", enc([]byte("012-3")), enc([]byte("12-03")), enc([]byte("12")), padding,
		enc([]byte(cursorVersion + ":" + fp + ":012-3")), enc([]byte(cursorVersion + ":" + strings.ToUpper(fp) + ":12-3")),
		enc([]byte(cursorVersion + ":" + fp[1:] + ":12-3")), enc([]byte(cursorVersion + ":" + fp + ":12")),
		enc([]byte(cursorVersion + ":" + fp)), enc([]byte("k1:" + fp + ":12-3")), enc([]byte(cursorVersion + ":zz:12-3")),
		enc([]byte(cursorVersion + ":" + fp + ":12-3:")), enc([]byte(":12-3"))} {
		g := f
		g.Cursor = bad
		_, err := g.after()
		assert.ErrorIs(t, err, ErrBadCursor, bad)
	}
}
