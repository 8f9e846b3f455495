package ledger

// The write path: a command queued on its site (Execute), the site's
// commit loop on a committer, and the commit of each batch.

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// A batch is given until the latest deadline of its callers, at most
// maxCommitTime; when its append goes unanswered, up to SettleTime more is
// spent finding out whether the message was stored before anyone is
// answered (see settle).
const maxCommitTime = 30 * time.Second

// commit decides a batch against the site's state and appends the events as
// one message expected at the state's sequence. On a conflict another writer
// got there first: the site is caught up from the stream and the whole
// batch decided again, a bounded number of times. Results (errors included)
// are only handed out once the batch is settled, so nothing is answered
// from a state that turned out to be stale.
//
// A panic while deciding answers the batch with ErrInternal and rebuilds
// the site's state from its snapshot and the stream: the state it left
// behind is in doubt, and the other sites' commands go on.
func (l *Ledger) commit(e *entry, batch []*op) {
	deadline := batchDeadline(batch)
	l.waitHold(e, deadline)
	e.mu.Lock()
	defer e.mu.Unlock()
	// Whatever way the batch ends, a panic included, a turn whose queue
	// is empty ends with it.
	defer l.endTurn(e)
	defer func() {
		if v := recover(); v != nil {
			l.log.Error("panic while deciding a batch; the site's state is rebuilt from the store",
				"site", e.id, "commands", len(batch), "panic", v, "stack", string(debug.Stack()))
			fail(batch, fmt.Errorf("site %s: %w: %v", e.id, ErrInternal, v))
			e.fault.Store(&fault{err: fmt.Errorf("%w: state rebuilt after a panic", ErrInternal), rebuild: true})
			if err := l.rebuildLocked(e); err != nil {
				l.log.Error("site state not rebuilt", "site", e.id, "err", err)
			}
		}
	}()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if f := e.fault.Load(); f != nil && f.rebuild {
		if err := l.rebuildLocked(e); err != nil {
			fail(batch, fmt.Errorf("site %s: %w: %v", e.id, events.ErrUnavailable, err))
			return
		}
	}
	if err := e.unavailable(); err != nil {
		fail(batch, err)
		return
	}
	if e.behind {
		if err := l.catchUpLocked(ctx, e, nil); err != nil {
			fail(batch, fmt.Errorf("%w: %v", events.ErrUnavailable, err))
			return
		}
	}
	w := &siteWrite{l: l, e: e, batch: batch}
	if err := l.write(ctx, w); err != nil {
		// The outcome of an append, or what the subject holds, is in
		// doubt: the next batch catches up first.
		e.behind = true
		fail(batch, err)
		return
	}
	w.answer()
}

// ErrInternal answers commands whose decision failed in a way no input
// should cause (a panic); the HTTP layer answers 500.
var ErrInternal = errors.New("internal error")

// batchDeadline is the latest deadline among the callers still waiting,
// capped: no caller waits for an append that outlives every request.
func batchDeadline(batch []*op) time.Time {
	limit := time.Now().Add(maxCommitTime)
	var latest time.Time
	for _, o := range batch {
		d, ok := o.ctx.Deadline()
		if !ok {
			return limit
		}
		if d.After(latest) {
			latest = d
		}
	}
	if latest.After(limit) {
		return limit
	}
	return latest
}

func fail(batch []*op, err error) {
	for _, o := range batch {
		o.res, o.err = Result{Decision: aggregates.Decision{Tx: -1}}, err
	}
}

// siteWrite is a batch of a site's commands as the write loop sees it
// (e.mu held throughout).
type siteWrite struct {
	l     *Ledger
	e     *entry
	batch []*op
	// seq is the sequence of the message the batch was stored in.
	seq uint64
	// conflicts counts the write's conflicts in a row; askedAt is when
	// the site was last asked of the other processes (see askHandOver).
	conflicts int
	askedAt   time.Time
}

func (w *siteWrite) Subject() string                     { return w.e.subj }
func (w *siteWrite) Position() events.Position           { return w.e.pos }
func (w *siteWrite) Decide(now time.Time) []events.Event { return w.l.decide(w.e, w.batch, now) }

// CatchUp follows a conflict: the site is handed over from the
// handOverAfter-th in a row on, then caught up.
func (w *siteWrite) CatchUp(ctx context.Context) error {
	w.askHandOver()
	return w.l.catchUpLocked(ctx, w.e, w.renewHandOver)
}

// Stored applies the batch's events: now the state may change, as every
// other process applies the message, and readers see it at once.
func (w *siteWrite) Stored(seq uint64, evs []events.Event) error {
	e := w.e
	err := e.mutate(func() error {
		next, err := e.pos.Next(seq, evs)
		if err != nil {
			return err
		}
		if err := e.state.ApplyMessage(seq, evs); err != nil {
			return err
		}
		e.pos = next
		return nil
	})
	if err != nil {
		// Events this process decided a moment ago: the state is in
		// doubt.
		panic(fmt.Sprintf("apply own message %d: %v", seq, err))
	}
	w.seq = seq
	return nil
}

// answer hands each command its outcome once the batch is settled.
func (w *siteWrite) answer() {
	w.l.published(w.e)
	s := w.e.state
	for _, o := range w.batch {
		if o.err != nil {
			continue
		}
		if len(o.res.Events) > 0 {
			o.res.Seq = w.seq
		}
		if i := o.res.Decision.Tx; i >= 0 && int(i) < len(s.Txs) {
			o.res.Tx = s.Txs[i]
			o.res.Reason = s.Reason(i)
		}
	}
}

// writer is the write loop with the ledger's store, retries and clock.
func (l *Ledger) writer() Writer {
	return Writer{Store: l.store, MaxRetries: l.cfg.MaxRetries, Now: l.cfg.Now}
}

// decide decides the batch's commands one after the other, each against
// the state the earlier ones leave, and returns their events. The state is
// as it was when decide returns: readers never see a decision before it is
// stored; once stored, the events are applied for good (siteWrite.Stored).
func (l *Ledger) decide(e *entry, batch []*op, now time.Time) []events.Event {
	s := e.state
	e.rw.Lock()
	defer e.rw.Unlock()
	s.Begin()
	defer s.Rollback()
	var all []events.Event
	for _, o := range batch {
		o.res, o.err = Result{}, nil
		if !o.claim() {
			// The caller gave up before the decision: do not commit
			// something nobody will be told about.
			o.res.Decision.Tx, o.err = -1, fmt.Errorf("%w: caller gave up", events.ErrUnavailable)
			continue
		}
		d, err := s.Decide(o.cmd, now, o.actor)
		o.res.Decision, o.err = d, err
		if err != nil {
			continue
		}
		for _, ev := range d.Events {
			s.Apply(ev)
		}
		o.res.Events = d.Events
		all = append(all, d.Events...)
	}
	return all
}

// rebuildLocked replaces the site's state with one read from its snapshot
// and the stream after it, and serves the site again (e.mu held).
func (l *Ledger) rebuildLocked(e *entry) error {
	ctx, cancel := context.WithTimeout(context.Background(), maxCommitTime)
	defer cancel()
	s, pos := aggregates.NewSite(e.id), events.Position{}
	_, data, err := l.store.LoadSnapshot(ctx, snapSitePrefix+string(e.id))
	switch {
	case err == nil:
		if snap, at, err := aggregates.UnmarshalSiteSnapshot(data); err == nil && snap.ID == e.id {
			s, pos = snap, at
		}
	case !errors.Is(err, events.ErrNotFound):
		return fmt.Errorf("rebuild site %s: %w", e.id, err)
	}
	var bad error
	err = l.store.Read(ctx, e.subj, pos.Seq+1, func(m events.Msg) error {
		if m.Seq <= pos.Seq {
			return nil
		}
		if err := safely(func() (err error) { pos, err = applyMessage(s, pos, m); return err }); err != nil {
			bad = fmt.Errorf("message %d: %w", m.Seq, err)
			return bad
		}
		return nil
	})
	if bad != nil {
		// The stored history itself cannot be applied: rebuilding again
		// would fail again. The site stays out of service.
		l.log.Error("site message not applied; the site is not served until its history is repaired",
			"site", e.id, "subject", e.subj, "err", bad)
		e.fault.Store(&fault{err: bad})
		return fmt.Errorf("rebuild site %s: %w", e.id, bad)
	}
	if err != nil {
		return fmt.Errorf("rebuild site %s: %w", e.id, err)
	}
	_ = e.mutate(func() error { e.state, e.pos = s, pos; return nil })
	e.behind = false
	e.fault.Store(nil)
	l.published(e)
	l.log.Info("site state rebuilt from the store", "site", e.id, "seq", pos.Seq)
	return nil
}

// panicError is a recovered panic, with its stack.
type panicError struct {
	v     any
	stack string
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.v) }

// safely runs fn, turning a panic into a *panicError.
func safely(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{v: v, stack: string(debug.Stack())}
		}
	}()
	return fn()
}

// Execute runs a command on a site and waits for its outcome. Commands for
// one site queue up while an append is in flight and are committed together.
func (l *Ledger) Execute(ctx context.Context, siteID ids.SiteID, cmd aggregates.Command, actor string) (Result, error) {
	none := Result{Decision: aggregates.Decision{Tx: -1}}
	if l.closed.Load() {
		return none, ErrClosed
	}
	_, isCreate := cmd.(aggregates.CreateSite)
	e, err := l.entry(siteID, isCreate)
	if err != nil {
		return none, err
	}
	if e == nil {
		// The site may have been created through another process: wait
		// for the follower to bring it here.
		if e, err = l.awaitSite(ctx, siteID); err != nil {
			return none, err
		}
	}
	o := &op{cmd: cmd, actor: actor, ctx: ctx, done: make(chan struct{})}
	e.qmu.Lock()
	e.queue = append(e.queue, o)
	start := !e.running
	e.running = true
	e.qmu.Unlock()
	if start {
		l.startLoop(e)
	}
	select {
	case <-o.done:
		return o.res, o.err
	case <-ctx.Done():
	}
	if o.state.CompareAndSwap(opQueued, opAbandoned) {
		// Not yet taken by the committer, and now it never will be.
		return none, fmt.Errorf("%w: %v", events.ErrUnavailable, ctx.Err())
	}
	// Taken: its batch ends by the latest deadline of its callers (plus
	// the time to resolve a failed append), and the answer must be what
	// actually happened to it.
	<-o.done
	return o.res, o.err
}

// commitLoop drains a site's queue batch by batch until it is empty.
func (l *Ledger) commitLoop(e *entry) {
	for l.commitBatch(e) {
	}
}

// startLoop runs the site's commit loop on an idle committer, or a new
// one. Committers are kept a while between loops because a fresh
// goroutine per loop spent a share of every write growing its stack: over
// many sites, most loops commit one batch.
func (l *Ledger) startLoop(e *entry) {
	select {
	case l.loops <- e:
	default:
		l.committers.Add(1)
		go l.committer(e)
	}
}

// committer runs commit loops, the first for e, until it has been idle
// for committerIdle.
func (l *Ledger) committer(e *entry) {
	idle := time.NewTimer(committerIdle)
	defer idle.Stop()
	for {
		l.commitLoop(e)
		idle.Reset(committerIdle)
		select {
		case e = <-l.loops:
		case <-idle.C:
			return
		}
	}
}

// committerIdle is how long a committer waits for another site's loop.
const committerIdle = 2 * time.Second

// commitBatch commits the next batch of the site's queue and answers its
// callers; it reports false, and ends the site's loop, when the queue is
// empty.
func (l *Ledger) commitBatch(e *entry) bool {
	e.qmu.Lock()
	n := len(e.queue)
	if n == 0 {
		e.running = false
		e.qmu.Unlock()
		return false
	}
	if n > l.cfg.MaxBatch {
		n = l.cfg.MaxBatch
	}
	batch := e.queue[:n:n]
	e.queue = append([]*op(nil), e.queue[n:]...)
	e.qmu.Unlock()
	l.commit(e, batch)
	for _, o := range batch {
		close(o.done)
	}
	return true
}
