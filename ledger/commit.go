package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"gateway/aggregates"
	"gateway/events"
)

// Commit timing. A batch is given until the latest deadline of its callers
// (at most maxCommitTime); when its append fails, resolveTime is spent
// finding out whether the message was stored anyway before anyone is
// answered.
const (
	maxCommitTime = 30 * time.Second
	resolveTime   = 5 * time.Second
)

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
	e.mu.Lock()
	defer e.mu.Unlock()
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
	ctx, cancel := context.WithDeadline(context.Background(), batchDeadline(batch))
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
		if err := l.catchUpLocked(ctx, e); err != nil {
			fail(batch, fmt.Errorf("%w: %v", events.ErrUnavailable, err))
			return
		}
	}
	for attempt := 0; ; attempt++ {
		err := l.tryCommit(ctx, e, batch)
		if err == nil {
			return
		}
		if !errors.Is(err, events.ErrConflict) || attempt >= l.cfg.MaxRetries {
			if errors.Is(err, events.ErrConflict) {
				err = fmt.Errorf("site %s: %d conflicting attempts: %w", e.id, attempt+1, events.ErrUnavailable)
			}
			e.behind = true
			fail(batch, err)
			return
		}
		if err := l.catchUpLocked(ctx, e); err != nil {
			e.behind = true
			fail(batch, fmt.Errorf("%w: %v", events.ErrUnavailable, err))
			return
		}
	}
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

// tryCommit makes one attempt; it returns events.ErrConflict to retry.
func (l *Ledger) tryCommit(ctx context.Context, e *entry, batch []*op) error {
	s := e.state
	all := l.decide(e, batch, l.cfg.Now())
	var seq uint64
	if len(all) > 0 {
		data, _, err := events.Seal(s.Hash, all)
		if err != nil {
			return err
		}
		expect := s.Seq
		seq, err = l.store.Append(ctx, e.subj, expect, data)
		if err != nil {
			seq, err = l.resolve(e.subj, expect, data, err)
		}
		if err != nil {
			return err
		}
		// Stored: now the state may change, as every other process
		// applies the message, and readers see it at once.
		if err := e.mutate(func() error { return s.ApplyMessage(seq, all) }); err != nil {
			// Events this process decided a moment ago: the state
			// is in doubt.
			panic(fmt.Sprintf("apply own message %d: %v", seq, err))
		}
	} else if err := l.fresh(ctx, e); err != nil {
		// Nothing was appended, so no expected-sequence check has proved
		// the state current. Refusals and repeats answered from a state
		// another process has moved on from would be wrong: check that
		// the subject has nothing newer first.
		return err
	}
	l.published(e)
	for _, o := range batch {
		if o.err != nil {
			continue
		}
		if len(o.res.Events) > 0 {
			o.res.Seq = seq
		}
		if i := o.res.Decision.Tx; i >= 0 && int(i) < len(s.Txs) {
			o.res.Tx = s.Txs[i]
			o.res.Reason = s.Reason(i)
		}
	}
	return nil
}

// decide decides the batch's commands one after the other, each against
// the state the earlier ones leave, and returns their events. The state is
// as it was when decide returns: readers never see a decision before it is
// stored; once stored, the events are applied for good (tryCommit).
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
	s := aggregates.NewSite(e.id)
	_, data, err := l.store.LoadSnapshot(ctx, snapSitePrefix+string(e.id))
	switch {
	case err == nil:
		if snap, err := aggregates.UnmarshalSiteSnapshot(data); err == nil && snap.ID == e.id {
			s = snap
		}
	case !errors.Is(err, events.ErrNotFound):
		return fmt.Errorf("rebuild site %s: %w", e.id, err)
	}
	var bad error
	err = l.store.Read(ctx, e.subj, s.Seq+1, func(m events.Msg) error {
		if m.Seq <= s.Seq {
			return nil
		}
		if err := safely(func() error { return applyMessage(s, m) }); err != nil {
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
	_ = e.mutate(func() error { e.state = s; return nil })
	e.behind = false
	e.fault.Store(nil)
	l.published(e)
	l.log.Info("site state rebuilt from the store", "site", e.id, "seq", s.Seq)
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

// resolve finds out, after a failed append, whether the message was stored
// anyway: an attempt whose acknowledgement was lost and whose retry then
// conflicted with itself, or a timeout after the server had stored it. The
// message after expect on the subject settles it: ours (the same bytes,
// which carry a hash chain and timestamps no other writer produces), another
// writer's (a conflict to retry), or none (not stored). It returns the
// message's sequence when ours was stored, and ErrUnavailable when the
// store cannot tell.
func (l *Ledger) resolve(subject string, expect uint64, data []byte, appendErr error) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTime)
	defer cancel()
	m, err := l.store.Next(ctx, subject, expect+1)
	switch {
	case errors.Is(err, events.ErrNotFound):
		return 0, appendErr
	case err != nil:
		return 0, fmt.Errorf("append outcome unknown (%v): %w", appendErr, events.ErrUnavailable)
	case bytes.Equal(m.Data, data):
		return m.Seq, nil
	}
	return 0, fmt.Errorf("%s: another writer appended at %d: %w", subject, m.Seq, events.ErrConflict)
}

// fresh returns ErrConflict when the site's subject has messages the state
// has not applied.
func (l *Ledger) fresh(ctx context.Context, e *entry) error {
	last, err := l.store.LastFor(ctx, e.subj)
	if err != nil {
		return fmt.Errorf("%w: %v", events.ErrUnavailable, err)
	}
	if last != e.state.Seq {
		return events.ErrConflict
	}
	return nil
}
