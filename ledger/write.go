package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"gateway/events"
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
	// MaxRetries bounds how often a conflicting decision is made again.
	MaxRetries int
	// Now is the clock the decisions are made at.
	Now func() time.Time
}

// Write decides a's waiting commands and stores their events as one
// message, expected at the sequence the state was read at. A conflict
// means another writer got there first: a is caught up from the stream
// and decided again. A decision that appends nothing (a refusal, a repeat)
// stands only once the subject is known to hold nothing newer than the
// state it was made against. When Write returns an error nothing of this
// call is stored, or ErrUnavailable says the outcome could not be learnt.
func (w Writer) Write(ctx context.Context, a Writable) error {
	for attempt := 0; ; attempt++ {
		err := w.attempt(ctx, a)
		if !errors.Is(err, events.ErrConflict) {
			return err
		}
		if attempt >= w.MaxRetries {
			return fmt.Errorf("%s: %d conflicting attempts: %w", a.Subject(), attempt+1, events.ErrUnavailable)
		}
		if err := a.CatchUp(ctx); err != nil {
			return fmt.Errorf("%w: %v", events.ErrUnavailable, err)
		}
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
		seq, err = resolve(w.Store, a.Subject(), pos.Seq, data, err)
	}
	if err != nil {
		return err
	}
	return a.Stored(seq, evs)
}

// resolveTime bounds finding out whether a failed append was stored.
const resolveTime = 5 * time.Second

// resolve finds out, after a failed append, whether the message was stored
// anyway: an attempt whose acknowledgement was lost and whose retry then
// conflicted with itself, or a timeout after the server had stored it. The
// message after expect on the subject settles it: ours (the same bytes,
// which carry a hash chain and timestamps no other writer produces), another
// writer's (a conflict to retry), or none (not stored). It returns the
// message's sequence when ours was stored, and ErrUnavailable when the
// store cannot tell.
func resolve(st WriteStore, subject string, expect uint64, data []byte, appendErr error) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTime)
	defer cancel()
	m, err := st.Next(ctx, subject, expect+1)
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
