package ledger

// Hand-over of a busy site between gateway processes.
//
// Two processes writing one site are fenced by the expected sequence, which
// keeps money safe but not the two fair: the process that wins an append
// decides its next batch from its own state at once, while the one that
// lost must read what won, decide again and send, a round trip or more
// later. With a full queue the winner appends back to back and the loser's
// append never fits between two of them; its callers wait out their
// deadline (docs/ARCHITECTURE.md, "Two writers of one site"). So a process
// that conflicts twice in a row on a site asks the others to hold their
// appends on it (HandOver): that starts its turn, which lasts until its
// queue of the site is empty or handOverHold has passed, whichever comes
// first; then the others write again, until one of them asks in turn. The
// hold is never what keeps a write safe: a lost or late request only costs
// the asker more conflicts, as without it.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/iqdgateway/gateway/events"
)

// HandOver carries requests to hold appends between the processes writing
// one stream (events/jsstore implements it over core NATS).
type HandOver interface {
	// HandOver asks every other process writing the stream to hold its
	// appends on subject for a moment (hold), or tells them this one no
	// longer needs them to (its turn ended).
	HandOver(subject string, hold bool) error
	// OnHandOver calls fn with each request another process makes, in the
	// order that process made them, until ctx ends. fn must not block.
	OnHandOver(ctx context.Context, fn func(subject string, hold bool)) error
}

// handOverHold is how long a request holds a site's appends, the longest a
// turn lasts: long enough for the asker's catch-up and append across a
// cluster (a few round trips) and a few batches more while its queue is
// full, short enough to be the latency the held process adds to its own
// callers. A writer asks again while it still catches up towards its
// first append (handOverRenew); a request nobody follows up (the asker
// died) costs the site at most this long.
const handOverHold = 50 * time.Millisecond

// handOverMaxHold bounds one hold, however often it is renewed: an asker
// that keeps conflicting (a third writer, a catch-up that does not end)
// cannot keep the others from writing for longer; after it they write a
// batch before a new request holds them again.
const handOverMaxHold = 4 * handOverHold

// handOverRenew is how often a writer that asked asks again while it
// catches up: well within handOverHold, so the hold does not lapse while
// the asker reads what it lacks.
const handOverRenew = handOverHold / 3

// handOverAfter is the conflicts in a row on a site, within one write,
// after which its writer asks for the site to be handed over: a single
// conflict is the ordinary race of two writers, settled by one catch-up.
const handOverAfter = 2

// hold is a request to hold a site's appends: until the time given (unix
// nanoseconds; each request of the asker extends it), or until over is
// closed because the asker said its turn ended.
type hold struct {
	until atomic.Int64
	// began is when the hold began (unix nanoseconds): it lasts no longer
	// than handOverMaxHold from then.
	began int64
	over  chan struct{}
}

// handOverAsked holds the appends on subject's site for the process that
// asked, or extends the hold under way; or ends it, once that process says
// its turn ended. A process in its own turn does not hold for another. A
// site this process does not hold, or a subject that is no site's, has
// nothing to hold.
func (l *Ledger) handOverAsked(subject string, asked bool) {
	id, ok := events.SiteOf(subject)
	if !ok {
		return
	}
	e := l.lookup(id)
	if e == nil {
		return
	}
	if !asked {
		e.endHold()
		return
	}
	now := time.Now().UnixNano()
	if now < e.turn.Load() {
		// This process asked first and its turn runs: the requests
		// crossed (the other's write was under way when ours reached
		// it). Holding for it too would leave both waiting for each
		// other until both lapsed, the site idle; the other holds for
		// this one, and asks again once its turn is over.
		return
	}
	until := now + int64(handOverHold)
	old := e.hold.Load()
	if old != nil && now < old.until.Load() {
		if until = min(until, old.began+int64(handOverMaxHold)); old.until.Load() < until {
			old.until.Store(until)
		}
		return
	}
	h := &hold{began: now, over: make(chan struct{})}
	h.until.Store(until)
	if e.hold.CompareAndSwap(old, h) {
		l.cfg.Metrics.HandOver(false)
	}
}

// waitHold waits while the site's appends are held for another process
// (see handOverAsked), at most until deadline, and ends the hold. A ledger
// that is closing holds for nobody.
func (l *Ledger) waitHold(e *entry, deadline time.Time) {
	h := e.hold.Load()
	if h == nil {
		return
	}
	defer e.hold.CompareAndSwap(h, nil)
	for {
		d := min(time.Until(time.Unix(0, h.until.Load())), time.Until(deadline))
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-h.over:
			t.Stop()
			return
		case <-l.closing:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// endHold ends a hold on e: the process that asked says its turn ended.
func (e *entry) endHold() {
	if e.hold.Load() == nil {
		return
	}
	if h := e.hold.Swap(nil); h != nil {
		close(h.over)
	}
}

// HandingOver reports whether w asked the other processes to hold the
// site during this write.
func (w *siteWrite) HandingOver() bool { return !w.askedAt.IsZero() }

// askHandOver counts a conflict of w's write and, from the handOverAfter-th
// in a row, asks the other processes to hand the site over.
func (w *siteWrite) askHandOver() {
	w.conflicts++
	if w.conflicts >= handOverAfter {
		w.ask()
	}
}

// renewHandOver asks again, while w catches up, once handOverRenew has
// passed since w last asked.
func (w *siteWrite) renewHandOver() {
	if w.HandingOver() && time.Since(w.askedAt) >= handOverRenew {
		w.ask()
	}
}

func (w *siteWrite) ask() {
	ho := w.l.cfg.HandOver
	if ho == nil {
		return
	}
	if err := ho.HandOver(w.e.subj, true); err != nil {
		w.l.log.Debug("hand-over not asked", "site", w.e.id, "err", err)
		return
	}
	if !w.HandingOver() {
		w.l.cfg.Metrics.HandOver(true)
	}
	w.askedAt = time.Now()
	w.e.turn.Store(w.askedAt.Add(handOverHold).UnixNano())
}

// endTurn runs after each write of e: once e's turn is over (its queue is
// empty, or the hold has lapsed), the other processes are told they need
// not hold any longer. While commands wait, the next batch is written in
// the same turn, without the conflicts that start one.
func (l *Ledger) endTurn(e *entry) {
	until := e.turn.Load()
	if until == 0 {
		return
	}
	if time.Now().UnixNano() < until {
		e.qmu.Lock()
		more := len(e.queue) > 0
		e.qmu.Unlock()
		if more {
			return
		}
		if err := l.cfg.HandOver.HandOver(e.subj, false); err != nil {
			l.log.Debug("end of turn not told", "site", e.id, "err", err)
		}
	}
	e.turn.Store(0)
}
