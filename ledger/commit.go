package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
// got there first: the batch is rolled back, the site caught up from the
// stream and the whole batch decided again, a bounded number of times.
// Results (errors included) are only handed out once the batch is settled,
// so nothing is answered from a state that turned out to be stale.
func (l *Ledger) commit(e *entry, batch []*op) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx, cancel := context.WithDeadline(context.Background(), batchDeadline(batch))
	defer cancel()
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
	now := l.cfg.Now()
	s.Begin()
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
	var seq uint64
	if len(all) > 0 {
		data, last, err := events.Seal(s.Hash, all)
		if err != nil {
			s.Rollback()
			return err
		}
		expect := s.Seq
		seq, err = l.store.Append(ctx, events.SiteSubject(e.id), expect, data)
		if err != nil {
			seq, err = l.resolve(events.SiteSubject(e.id), expect, data, err)
		}
		if err != nil {
			s.Rollback()
			return err
		}
		s.Commit(seq, last)
	} else {
		s.Rollback()
		// Nothing was appended, so no expected-sequence check has proved
		// the state current. Refusals and repeats answered from a state
		// another process has moved on from would be wrong: check that
		// the subject has nothing newer first.
		if err := l.fresh(ctx, e); err != nil {
			return err
		}
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
	last, err := l.store.LastFor(ctx, events.SiteSubject(e.id))
	if err != nil {
		return fmt.Errorf("%w: %v", events.ErrUnavailable, err)
	}
	if last != e.state.Seq {
		return events.ErrConflict
	}
	return nil
}
