package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ledger"
)

// counter is the smallest aggregate: each decision appends one treasury
// adjustment of 1 to a subject of its own; it catches up by reading the
// subject. It counts what the write loop asks of it.
type counter struct {
	st      ledger.WriteStore
	subject string
	pos     events.Position
	total   int64
	// refuse makes Decide append nothing.
	refuse bool
	// catchUpErr fails CatchUp.
	catchUpErr error

	decided, stored, caughtUp int
}

func (c *counter) Subject() string           { return c.subject }
func (c *counter) Position() events.Position { return c.pos }

func (c *counter) Decide(now time.Time) []events.Event {
	c.decided++
	if c.refuse {
		return nil
	}
	return []events.Event{{Name: events.TreasuryAdjustedName, Time: now.UnixMilli(), Actor: "t",
		Payload: &events.TreasuryAdjusted{Amount: 1, Reason: "count"}}}
}

func (c *counter) Stored(seq uint64, evs []events.Event) error {
	next, err := c.pos.Next(seq, evs)
	if err != nil {
		return err
	}
	c.pos, c.total = next, c.total+int64(len(evs))
	c.stored++
	return nil
}

// HandingOver is false: a counter never asks the other writers to hold.
func (c *counter) HandingOver() bool { return false }

func (c *counter) CatchUp(ctx context.Context) error {
	c.caughtUp++
	if c.catchUpErr != nil {
		return c.catchUpErr
	}
	for {
		m, err := c.st.Next(ctx, c.subject, c.pos.Seq+1)
		if errors.Is(err, events.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		evs, err := events.Decode(m.Data)
		if err != nil {
			return err
		}
		if err := c.Stored(m.Seq, evs); err != nil {
			return err
		}
		c.stored--
	}
}

// TestWriter covers the write loop on the real store: every append is
// expected at the position the decision was made against, a conflict is
// caught up and decided again (boundedly), and a decision that appends
// nothing stands only against the subject's latest message.
func TestWriter(t *testing.T) {
	const subject = "ledger.writer-test"
	clock := func() time.Time { return epoch }
	tests := []struct {
		name string
		// others is how many messages another writer appends before
		// each of the first attempts (see conflicts).
		others     int
		conflicts  int
		maxRetries int
		refuse     bool
		catchUpErr error
		wantErr    error
		wantMsg    string
		// want: decisions made, messages this writer stored, catch-ups.
		decided, stored, caughtUp int
	}{
		{name: "append at the position", maxRetries: 3, decided: 1, stored: 1},
		{name: "another writer first: catch up, decide again", others: 2, conflicts: 1, maxRetries: 3,
			decided: 2, stored: 1, caughtUp: 1},
		{name: "conflicts beyond the bound", others: 1, conflicts: 3, maxRetries: 2,
			wantErr: events.ErrUnavailable, wantMsg: "3 conflicting attempts", decided: 3, caughtUp: 2},
		{name: "a refusal against the latest message stands", refuse: true, maxRetries: 3, decided: 1},
		{name: "a refusal against a stale state is decided again", others: 1, conflicts: 1, refuse: true, maxRetries: 3,
			decided: 2, caughtUp: 1},
		{name: "catching up fails", others: 1, conflicts: 1, maxRetries: 3, catchUpErr: errors.New("store gone"),
			wantErr: events.ErrUnavailable, wantMsg: "store gone", decided: 1, caughtUp: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st := e.store("w")
			other := &counter{st: st, subject: subject}
			c := &counter{st: st, subject: subject, refuse: tc.refuse, catchUpErr: tc.catchUpErr}
			w := ledger.Writer{Store: st, MaxRetries: tc.maxRetries, Now: clock}
			// Another writer moves the subject before each of the
			// first tc.conflicts decisions of c: every one of them
			// was made against a position that is no longer the last.
			ctx := context.Background()
			written := 0
			racing := &racer{Writable: c, before: func() {
				if c.decided < tc.conflicts {
					for range tc.others {
						require.NoError(t, ledger.Writer{Store: st, Now: clock}.Write(ctx, other))
						written++
					}
				}
			}}
			err := w.Write(ctx, racing)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Contains(t, err.Error(), tc.wantMsg)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.decided, c.decided, "decisions")
			assert.Equal(t, tc.stored, c.stored, "messages stored by this writer")
			assert.Equal(t, tc.caughtUp, c.caughtUp, "catch-ups")
			last, err := st.LastFor(ctx, subject)
			require.NoError(t, err)
			// The subject is the stream's only one: its last sequence
			// counts its messages, each an adjustment of 1.
			assert.Equal(t, uint64(written+c.stored), last, "messages on the subject")
			if tc.wantErr == nil {
				assert.Equal(t, last, c.pos.Seq, "the state is the subject's latest")
				assert.Equal(t, int64(last), c.total, "the state holds every message")
			}
		})
	}
}

// racer runs before ahead of every decision of the wrapped aggregate.
type racer struct {
	ledger.Writable
	before func()
}

func (r *racer) Decide(now time.Time) []events.Event {
	r.before()
	return r.Writable.Decide(now)
}

// unanswered wraps the real store: the first append is answered with
// events.ErrOutcomeUnknown, after storing it or not (stored), as when the
// stream leader is lost with the append in flight; the next nextFails
// reads of the subject fail, as while a new leader is elected; before
// answers, another writer may append (race).
type unanswered struct {
	ledger.WriteStore
	stored    bool
	nextFails int
	race      func()
	appends   int
}

func (s *unanswered) Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	s.appends++
	if s.appends > 1 {
		return s.WriteStore.Append(ctx, subject, expectLast, data)
	}
	if s.stored {
		if _, err := s.WriteStore.Append(ctx, subject, expectLast, data); err != nil {
			return 0, err
		}
	}
	if s.race != nil {
		s.race()
	}
	return 0, fmt.Errorf("injected: %w", events.ErrOutcomeUnknown)
}

func (s *unanswered) Next(ctx context.Context, subject string, seq uint64) (events.Msg, error) {
	if s.nextFails > 0 {
		s.nextFails--
		return events.Msg{}, fmt.Errorf("injected: %w", events.ErrUnavailable)
	}
	return s.WriteStore.Next(ctx, subject, seq)
}

// TestWriter_unansweredAppend: an append sent and not answered is settled
// before anyone is told anything: found stored, stored now by sending it
// again at the same expected sequence, or fenced out by another writer's
// message (then decided again). Never stored twice; given up on only
// after the settle time, as events.ErrOutcomeUnknown, never as "not
// stored".
func TestWriter_unansweredAppend(t *testing.T) {
	const subject = "ledger.unanswered-test"
	clock := func() time.Time { return epoch }
	tests := []struct {
		name      string
		stored    bool
		nextFails int
		race      bool
		wantErr   error
		// messages is how many the subject holds in the end.
		messages int
	}{
		{name: "stored, acknowledgement lost", stored: true, messages: 1},
		{name: "not stored: sent again", messages: 1},
		{name: "stored, reads fail for a while", stored: true, nextFails: 3, messages: 1},
		{name: "not stored, reads fail for a while", nextFails: 3, messages: 1},
		{name: "another writer took the place: decided again", race: true, messages: 2},
		{name: "never answered", nextFails: 1 << 30, wantErr: events.ErrOutcomeUnknown},
		{name: "stored and never answered", stored: true, nextFails: 1 << 30, wantErr: events.ErrOutcomeUnknown, messages: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := newEnv(t).store("w")
			other := &counter{st: st, subject: subject}
			us := &unanswered{WriteStore: st, stored: tc.stored, nextFails: tc.nextFails}
			if tc.race {
				us.race = func() { require.NoError(t, ledger.Writer{Store: st, Now: clock}.Write(ctx, other)) }
			}
			c := &counter{st: st, subject: subject}
			w := ledger.Writer{Store: us, MaxRetries: 3, Now: clock, Settle: 300 * time.Millisecond}
			err := w.Write(ctx, c)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.NotErrorIs(t, err, events.ErrUnavailable, "an unknown outcome is not \"not stored\"")
			} else {
				require.NoError(t, err)
				assert.Equal(t, 1, c.stored, "applied once")
			}
			last, err := st.LastFor(ctx, subject)
			require.NoError(t, err)
			// One message per decision stored: the other writer's,
			// if it raced, and this writer's at most once.
			assert.Equal(t, uint64(tc.messages), last, "messages on the subject")
			if tc.wantErr == nil {
				assert.Equal(t, last, c.pos.Seq, "the state is the subject's latest")
				assert.Equal(t, int64(last), c.total, "the state holds every message once")
			}
		})
	}
}
