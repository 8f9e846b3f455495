package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"gateway/events"
)

// sharedAggregate is an aggregate that every site shares and that lives on a
// subject of its own (the catalog, the operators). Its values are copied on
// write: Apply runs on a fresh Clone, so readers never see a change half made.
type sharedAggregate[T any] interface {
	*T
	Apply(events.Event)
	Clone() *T
}

// shared holds one shared aggregate and runs its commands. Writers hold mu
// from decide to apply; readers load cur without locking.
type shared[T any, P sharedAggregate[T]] struct {
	name    string
	subject string
	// pos returns the aggregate's stream sequence and chain hash fields.
	pos func(P) (*uint64, *[32]byte)
	mu  sync.Mutex
	cur atomic.Pointer[T]
}

func newShared[T any, P sharedAggregate[T]](name, subject string, empty P, pos func(P) (*uint64, *[32]byte)) *shared[T, P] {
	s := &shared[T, P]{name: name, subject: subject, pos: pos}
	s.cur.Store(empty)
	return s
}

// get returns the current value. It is never modified.
func (s *shared[T, P]) get() P { return s.cur.Load() }

func (s *shared[T, P]) seq() uint64 {
	seq, _ := s.pos(s.get())
	return *seq
}

// load reads the whole subject (start-up).
func (s *shared[T, P]) load(ctx context.Context, store Store) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := store.Read(ctx, s.subject, 1, func(m events.Msg) error {
		if m.Seq <= s.seq() {
			return nil
		}
		return s.applyLocked(m)
	}); err != nil {
		return fmt.Errorf("load %s: %w", s.name, err)
	}
	return nil
}

// follow applies a message the ledger's follower delivered, unless it was
// already applied (written by this process, or read at start-up).
func (s *shared[T, P]) follow(m events.Msg, log *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Seq <= s.seq() {
		return
	}
	if err := s.applyLocked(m); err != nil {
		log.Error(s.name+" message not applied", "seq", m.Seq, "err", err)
	}
}

// applyLocked folds one message into a fresh copy and publishes it (mu held).
func (s *shared[T, P]) applyLocked(m events.Msg) error {
	evs, err := events.Decode(m.Data)
	if err != nil {
		return err
	}
	n := P(s.get().Clone())
	seq, hash := s.pos(n)
	for _, ev := range evs {
		n.Apply(ev)
	}
	if len(evs) > 0 {
		if *hash, err = events.Hash(evs[len(evs)-1]); err != nil {
			return err
		}
	}
	*seq = m.Seq
	s.cur.Store((*T)(n))
	return nil
}

// catchUpLocked applies the subject's messages after the current value and
// reports whether there were any (mu held).
func (s *shared[T, P]) catchUpLocked(ctx context.Context, store Store) (bool, error) {
	moved := false
	for {
		m, err := store.Next(ctx, s.subject, s.seq()+1)
		if errors.Is(err, events.ErrNotFound) {
			return moved, nil
		}
		if err != nil {
			return moved, err
		}
		if err := s.applyLocked(m); err != nil {
			return moved, fmt.Errorf("catch up %s at %d: %w", s.name, m.Seq, err)
		}
		moved = true
	}
}

// execute runs decide with the same load → decide → append(expected
// sequence) → bounded retry loop as site commands. A refusal is final only
// once the value it was decided against is the subject's latest: another
// process may have created the method or operator the command names.
func (s *shared[T, P]) execute(ctx context.Context, l *Ledger, decide func(P) ([]events.Event, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 0; attempt <= l.cfg.MaxRetries; attempt++ {
		cur := s.get()
		seq, hash := s.pos(cur)
		evs, err := decide(cur)
		if err != nil {
			// When the store cannot be read the refusal stands, as
			// decided against what this process knows.
			if moved, _ := s.catchUpLocked(ctx, l.store); moved {
				continue
			}
			return err
		}
		if len(evs) == 0 {
			// A repeat (a keyed creation the aggregate already holds):
			// it is in the stream, so nothing newer can undo it.
			return nil
		}
		data, _, err := events.Seal(*hash, evs)
		if err != nil {
			return err
		}
		got, err := l.store.Append(ctx, s.subject, *seq, data)
		if err != nil {
			got, err = l.resolve(s.subject, *seq, data, err)
		}
		if err == nil {
			return s.applyLocked(events.Msg{Seq: got, Subject: s.subject, Data: data})
		}
		if !errors.Is(err, events.ErrConflict) {
			return err
		}
		if _, err := s.catchUpLocked(ctx, l.store); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: too many conflicting attempts: %w", s.name, events.ErrUnavailable)
}

// loadShared reads the shared aggregates' subjects (start-up).
func (l *Ledger) loadShared(ctx context.Context) error {
	if err := l.catalog.load(ctx, l.store); err != nil {
		return err
	}
	return l.operators.load(ctx, l.store)
}

// followShared applies m when it belongs to a shared aggregate and reports
// whether it did.
func (l *Ledger) followShared(m events.Msg) bool {
	switch m.Subject {
	case events.CatalogSubject:
		l.catalog.follow(m, l.log)
	case events.OperatorsSubject:
		l.operators.follow(m, l.log)
	default:
		return false
	}
	return true
}
