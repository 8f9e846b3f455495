package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/memstore"
	"github.com/iqdgateway/gateway/ids"
)

// handOverRecorder counts hand-overs and nothing else.
type handOverRecorder struct {
	nopMetrics
	asked, held int
}

func (r *handOverRecorder) HandOver(asked bool) {
	if asked {
		r.asked++
	} else {
		r.held++
	}
}

// sent is a HandOver that keeps the requests it is given.
type sent struct{ reqs []string }

func (s *sent) HandOver(subject string, hold bool) error {
	op := "-"
	if hold {
		op = "+"
	}
	s.reqs = append(s.reqs, op+subject)
	return nil
}

func (s *sent) OnHandOver(ctx context.Context, fn func(string, bool)) error { return nil }

// What a request does to the site it names: a hold, extended by the next
// request, ended by the asker's end of its turn or by lapsing;
// nothing for a site this process does not know or a subject of no site.
func TestHandOver_holds(t *testing.T) {
	rec := &handOverRecorder{}
	l := New(memstore.New(), Config{Metrics: rec})
	id := ids.SiteID("s1")
	e, err := l.entry(id, true)
	require.NoError(t, err)
	subj := e.subj

	for _, other := range []string{"ledger.site.s2", events.CatalogSubject, "", "ledger.site.s1.x", "ledger.site.*",
		"ledger.site.>", "ledger.site.", "ledger.site..", "ledger.site.s1\x00", "ledger.site.s1\n", ">", "*"} {
		l.handOverAsked(other, true)
	}
	assert.Nil(t, e.hold.Load(), "no hold for another site, or a subject of no site")
	assert.Zero(t, rec.held)

	l.handOverAsked(subj, true)
	h := e.hold.Load()
	require.NotNil(t, h)
	first := h.until.Load()
	time.Sleep(2 * time.Millisecond)
	l.handOverAsked(subj, true)
	assert.Same(t, h, e.hold.Load(), "a request while held extends the hold")
	assert.Greater(t, h.until.Load(), first)
	assert.Equal(t, 1, rec.held, "one hold counted")

	l.handOverAsked(subj, false)
	assert.Nil(t, e.hold.Load(), "the asker's end ends the hold")
	select {
	case <-h.over:
	default:
		t.Fatal("a writer waiting on the hold is let go")
	}

	// Ended directly, as the asker's end does.
	l.handOverAsked(subj, true)
	h = e.hold.Load()
	require.NotNil(t, h)
	e.endHold()
	assert.Nil(t, e.hold.Load())
	_, open := <-h.over
	assert.False(t, open)

	// A hold that lapsed is replaced, not extended.
	l.handOverAsked(subj, true)
	h = e.hold.Load()
	h.until.Store(time.Now().Add(-time.Millisecond).UnixNano())
	l.handOverAsked(subj, true)
	assert.NotSame(t, h, e.hold.Load())
	assert.Equal(t, 4, rec.held)

	// However often renewed, a hold ends handOverMaxHold after it began.
	h = e.hold.Load()
	h.began = time.Now().Add(-handOverMaxHold + time.Millisecond).UnixNano()
	before := h.until.Load()
	time.Sleep(2 * time.Millisecond)
	l.handOverAsked(subj, true)
	assert.Equal(t, before, h.until.Load(), "not extended past its bound")
}

// The early returns of a batch (a site out of service here) end a turn
// whose queue is empty, as a write does.
func TestHandOver_turnEndsOnEveryReturn(t *testing.T) {
	ho := &sent{}
	l := New(memstore.New(), Config{HandOver: ho})
	e, err := l.entry(ids.SiteID("s1"), true)
	require.NoError(t, err)
	e.turn.Store(time.Now().Add(handOverHold).UnixNano())
	e.fault.Store(&fault{err: errors.New("chain broken")})
	batch := []*op{{ctx: context.Background(), done: make(chan struct{})}}
	l.commit(e, batch)
	require.ErrorIs(t, batch[0].err, events.ErrUnavailable)
	assert.Equal(t, []string{"-" + e.subj}, ho.reqs)
	assert.Zero(t, e.turn.Load())
}

// A process whose own turn runs does not hold for another that asks (two
// requests crossed: each would wait for the other until both lapsed), and
// a batch of a closing ledger waits for no hold. The holds here would last
// an hour; the bound only keeps a failure from hanging the test.
func TestHandOver_noHoldInOwnTurnOrClosing(t *testing.T) {
	l := New(memstore.New(), Config{})
	e, err := l.entry(ids.SiteID("s1"), true)
	require.NoError(t, err)
	e.turn.Store(time.Now().Add(time.Hour).UnixNano())
	l.handOverAsked(e.subj, true)
	assert.Nil(t, e.hold.Load(), "no hold during its own turn")
	e.turn.Store(0)
	l.handOverAsked(e.subj, true)
	require.NotNil(t, e.hold.Load(), "a hold once its turn is over")

	const bound = 30 * time.Second
	e.hold.Load().until.Store(time.Now().Add(time.Hour).UnixNano())
	close(l.closing)
	start := time.Now()
	l.waitHold(e, start.Add(bound))
	assert.Less(t, time.Since(start), bound, "a closing ledger holds for nobody")
	assert.Nil(t, e.hold.Load(), "the hold is over")
}

// A batch waits while its site is held, until the hold ends or its own
// deadline, whichever comes first, and then the hold is over.
func TestHandOver_waitHold(t *testing.T) {
	l := New(memstore.New(), Config{})
	e, err := l.entry(ids.SiteID("s1"), true)
	require.NoError(t, err)

	l.waitHold(e, time.Now().Add(time.Hour)) // nothing held: returns at once

	// The batch's deadline has passed: no wait, and the hold is over.
	l.handOverAsked(e.subj, true)
	l.waitHold(e, time.Now().Add(-time.Second))
	assert.Nil(t, e.hold.Load())

	// Held far longer than the test runs: the end of the hold lets the
	// batch go.
	l.handOverAsked(e.subj, true)
	e.hold.Load().until.Store(time.Now().Add(time.Hour).UnixNano())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.waitHold(e, time.Now().Add(time.Hour))
	}()
	e.endHold()
	<-done
	assert.Nil(t, e.hold.Load())
}

// A write asks from its handOverAfter-th conflict in a row and renews
// while it catches up once handOverRenew has passed; its turn ends, and
// the others are told, once the site's queue is empty after a write, or
// with nothing told once the hold has lapsed. A write that never asked
// says nothing.
func TestHandOver_turns(t *testing.T) {
	ho, rec := &sent{}, &handOverRecorder{}
	l := New(memstore.New(), Config{HandOver: ho, Metrics: rec})
	e, err := l.entry(ids.SiteID("s1"), true)
	require.NoError(t, err)
	plus, minus := "+"+e.subj, "-"+e.subj

	quiet := &siteWrite{l: l, e: e}
	quiet.askHandOver()
	quiet.renewHandOver()
	l.endTurn(e)
	assert.Empty(t, ho.reqs, "one conflict asks nothing")

	w := &siteWrite{l: l, e: e}
	w.askHandOver()
	w.askHandOver()
	require.True(t, w.HandingOver())
	w.renewHandOver() // too soon
	assert.Equal(t, []string{plus}, ho.reqs)
	w.askedAt = w.askedAt.Add(-handOverRenew)
	w.renewHandOver()
	w.askHandOver()
	assert.Equal(t, []string{plus, plus, plus}, ho.reqs)
	assert.Equal(t, 1, rec.asked, "one write that asked")

	// Commands wait: the turn goes on into the next batch.
	e.qmu.Lock()
	e.queue = append(e.queue, &op{})
	e.qmu.Unlock()
	l.endTurn(e)
	assert.Equal(t, []string{plus, plus, plus}, ho.reqs)
	assert.NotZero(t, e.turn.Load())

	// None wait: the others are told.
	e.qmu.Lock()
	e.queue = nil
	e.qmu.Unlock()
	l.endTurn(e)
	assert.Equal(t, []string{plus, plus, plus, minus}, ho.reqs)
	assert.Zero(t, e.turn.Load())
	l.endTurn(e)
	assert.Len(t, ho.reqs, 4, "a turn ends once")

	// A turn that outlasted its hold ends without a word: the others
	// already write.
	w = &siteWrite{l: l, e: e}
	w.askHandOver()
	w.askHandOver()
	e.turn.Store(time.Now().Add(-time.Millisecond).UnixNano())
	e.qmu.Lock()
	e.queue = append(e.queue, &op{})
	e.qmu.Unlock()
	l.endTurn(e)
	assert.Equal(t, []string{plus, plus, plus, minus, plus}, ho.reqs)
	assert.Zero(t, e.turn.Load())
}
