package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/iqdgateway/gateway/events"
)

// Writable is one aggregate as the write loop sees it: where its events
// are stored, where its state stands, how to decide the commands waiting
// for it, how to apply what was stored and how to catch up with other
// writers. Sites (a batch of queued commands), the catalog, the operators
// and the audit's history generator are all written through it.
type Writable interface {
	// Subject is the subject the aggregate's events are stored on.
	Subject() string
	// Position is where the aggregate's state stands in the stream.
	Position() events.Position
	// Decide decides the waiting commands against the state and returns
	// the events to append. The state is left as it was: a decision
	// counts once it is stored. Refusals stay with the commands.
	Decide(now time.Time) []events.Event
	// Stored applies evs, now stored in the message at seq.
	Stored(seq uint64, evs []events.Event) error
	// CatchUp applies the messages the subject holds after the state.
	CatchUp(ctx context.Context) error
	// HandingOver reports whether this write has asked the other writers
	// of its subject to hold their appends for it (docs/ARCHITECTURE.md
	// "Two writers of one site"): then a conflict is decided again at
	// once, without the pause that would spend the hold. An aggregate
	// that never asks answers false.
	HandingOver() bool
}

// WriteStore is what the write loop needs of the event store.
type WriteStore interface {
	Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error)
	Next(ctx context.Context, subject string, seq uint64) (events.Msg, error)
	LastFor(ctx context.Context, subject string) (uint64, error)
}

// Writer runs the program's one write loop: load → decide → append with
// the expected sequence → on a conflict catch up and decide again, a
// bounded number of times (docs/ARCHITECTURE.md, invariant 2). Every
// append in the program goes through Write.
type Writer struct {
	Store WriteStore
	// MaxRetries bounds how often a conflicting decision is made again
	// (the deadline of ctx bounds it too).
	MaxRetries int
	// Now is the clock the decisions are made at.
	Now func() time.Time
	// Settle is how long past ctx's deadline an unanswered append is
	// settled (SettleTime when 0).
	Settle time.Duration
}

// Write decides a's waiting commands and stores their events as one
// message, expected at the sequence the state was read at. A conflict
// means another writer got there first: a is caught up from the stream and
// decided again. A decision that appends nothing (a refusal, a repeat)
// stands only once the subject is known to hold nothing newer than the
// state it was made against. When Write returns an error nothing of this
// call is stored, or events.ErrOutcomeUnknown says the outcome could not
// be learnt within SettleTime past ctx's deadline.
//
// A first conflict is decided again at once: the catch-up brought in the
// message that won. Later ones wait a random while first (up to 1 ms,
// doubling to 64 ms): when two gateways keep writing one site, the one
// that just won decides its next batch without a read and would otherwise
// win every race, starving the other until its callers give up; the wait
// shifts the loser into the gaps between the winner's batches. On a
// replicated stream the conflicting message may not even be readable yet
// (the leader refuses an append while another one on the subject is in
// flight), and deciding again from the same state would only conflict
// again: a catch-up that found nothing new always waits. The bound is
// MaxRetries or the callers' deadline, whichever comes first.
func (w Writer) Write(ctx context.Context, a Writable) error {
	for attempt := 0; ; attempt++ {
		err := w.attempt(ctx, a)
		if !errors.Is(err, events.ErrConflict) {
			return err
		}
		if attempt >= w.MaxRetries {
			return fmt.Errorf("%s: %d conflicting attempts: %w", a.Subject(), attempt+1, events.ErrUnavailable)
		}
		before := a.Position().Seq
		if err := a.CatchUp(ctx); err != nil {
			return fmt.Errorf("%w: %v", events.ErrUnavailable, err)
		}
		if attempt == 0 && a.Position().Seq != before {
			continue
		}
		wait := conflictPause(attempt)
		if a.HandingOver() {
			// The other writers hold their appends for this one
			// (handover.go): a long wait would spend the hold. Only an
			// append of theirs still in flight, which the catch-up could
			// not read yet, is waited for, briefly.
			if a.Position().Seq != before {
				continue
			}
			wait = conflictPause(0)
		}
		if err := pause(ctx, wait); err != nil {
			return fmt.Errorf("%s: %d conflicting attempts before the deadline: %w", a.Subject(), attempt+1, err)
		}
	}
}

// conflictPause is the wait before the decision after the n-th conflict in
// a row: drawn at random up to 1 ms doubling to 64 ms.
func conflictPause(n int) time.Duration {
	return rand.N(time.Millisecond<<min(n, 6) + 1)
}

// pause waits d, or answers ErrUnavailable when ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", events.ErrUnavailable, ctx.Err())
	case <-t.C:
		return nil
	}
}

// attempt makes one decision and stores it; events.ErrConflict asks for
// another.
func (w Writer) attempt(ctx context.Context, a Writable) error {
	pos := a.Position()
	evs := a.Decide(w.Now())
	if len(evs) == 0 {
		last, err := w.Store.LastFor(ctx, a.Subject())
		if err != nil {
			return fmt.Errorf("%w: %v", events.ErrUnavailable, err)
		}
		if last != pos.Seq {
			return events.ErrConflict
		}
		return nil
	}
	data, _, err := events.Seal(pos.Hash, evs)
	if err != nil {
		return err
	}
	seq, err := w.Store.Append(ctx, a.Subject(), pos.Seq, data)
	if err != nil {
		seq, err = w.resolve(ctx, a.Subject(), pos.Seq, data, err)
	}
	if err != nil {
		return err
	}
	return a.Stored(seq, evs)
}

// checkTime bounds the read that double-checks a failed append.
const checkTime = 5 * time.Second

// resolve finds out, after a failed append, whether the message was stored
// after all. The message after expect on the subject settles it: ours (the
// same bytes, which carry a hash chain and timestamps no other writer
// produces), another writer's (a conflict: ours can never be stored now),
// or none.
//
// A conflict is settled like an unanswered append (see settle): on a
// replicated stream, a leader that is losing its place can refuse an
// append it had already proposed, which the next leader then commits, so
// "conflict" says the subject moved, not by whom. Deciding again while our
// own message is on its way would decide the batch twice. A refusal that
// is not a conflict (events.ErrUnavailable) says the message was not
// stored; the one read is a safety net for a store that retried an attempt
// it had stored. It returns the message's sequence when ours was stored.
func (w Writer) resolve(ctx context.Context, subject string, expect uint64, data []byte, appendErr error) (uint64, error) {
	if errors.Is(appendErr, events.ErrOutcomeUnknown) || errors.Is(appendErr, events.ErrConflict) {
		return w.settle(ctx, subject, expect, data, appendErr)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTime)
	defer cancel()
	m, err := w.Store.Next(cctx, subject, expect+1)
	switch {
	case err != nil:
		return 0, appendErr
	case bytes.Equal(m.Data, data):
		return m.Seq, nil
	}
	return 0, fmt.Errorf("%s: another writer appended at %d: %w", subject, m.Seq, events.ErrConflict)
}

// SettleTime is how long, past its callers' deadline, a write whose append
// went unanswered keeps trying to learn its outcome: long enough for a
// replicated stream to elect a new leader (seconds). Its callers are
// answered once it is known, so that no one is told "not stored" about a
// message that is.
const SettleTime = 20 * time.Second

// settle learns the outcome of an append that was sent and not answered.
// Until it is known the subject is read after expect: our message there is
// stored; another's means ours never will be (the expected sequence fences
// it out). When nothing is there the same bytes are appended again at the
// same expected sequence, which either stores them now (once: whichever
// attempt lands, the other conflicts) or conflicts with what got there,
// which the next read shows. It gives up with events.ErrOutcomeUnknown
// w.Settle after ctx's deadline.
func (w Writer) settle(ctx context.Context, subject string, expect uint64, data []byte, appendErr error) (uint64, error) {
	st, limit := w.Store, w.Settle
	if limit <= 0 {
		limit = SettleTime
	}
	deadline := time.Now()
	if d, ok := ctx.Deadline(); ok && d.After(deadline) {
		deadline = d
	}
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(limit))
	defer cancel()
	var last error
	for stalls := 0; ; stalls++ {
		m, err := st.Next(sctx, subject, expect+1)
		switch {
		case err == nil && bytes.Equal(m.Data, data):
			return m.Seq, nil
		case err == nil:
			return 0, fmt.Errorf("%s: another writer appended at %d: %w", subject, m.Seq, events.ErrConflict)
		case errors.Is(err, events.ErrNotFound):
			seq, err := st.Append(sctx, subject, expect, data)
			if err == nil {
				return seq, nil
			}
			last = err
		default:
			last = err
		}
		if pause(sctx, settlePause(stalls)) != nil {
			return 0, fmt.Errorf("%s: %w (still not known after %s: %v; the append said: %v)", subject, events.ErrOutcomeUnknown, limit, last, appendErr)
		}
	}
}

// settlePause is the wait between two tries to settle an outcome: 10 ms
// doubling to 640 ms, drawn between half and all of it.
func settlePause(n int) time.Duration {
	d := 10 * time.Millisecond << min(n, 6)
	return d/2 + rand.N(d/2+1)
}
