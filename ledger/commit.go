package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gateway/aggregates"
	"gateway/events"
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.behind {
		if err := l.catchUpLocked(ctx, e); err != nil {
			fail(batch, err)
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
			// The outcome of a failed append may be unknown: read the
			// stream before the next decision.
			e.behind = true
			fail(batch, err)
			return
		}
		if err := l.catchUpLocked(ctx, e); err != nil {
			e.behind = true
			fail(batch, err)
			return
		}
	}
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
		if o.ctx.Err() != nil {
			// The caller gave up before the decision: do not commit
			// something nobody will be told about.
			o.res.Decision.Tx, o.err = -1, fmt.Errorf("%w: %v", events.ErrUnavailable, o.ctx.Err())
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
		seq, err = l.store.Append(ctx, events.SiteSubject(e.id), s.Seq, data)
		if err != nil {
			s.Rollback()
			return err
		}
		s.Commit(seq, last)
	} else {
		s.Rollback()
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
