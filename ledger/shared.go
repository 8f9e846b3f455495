package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
)

// The catalog and the operators are aggregates every site shares, each on
// a subject of its own. They are small and rarely written, and read on
// every request, so readers get an immutable copy: a message is applied
// to a Clone that then replaces the current value.

// sharedAggregate is the contract the catalog and the operators share with
// the site aggregate (see aggregates/aggregate.go), plus Clone.
type sharedAggregate[T, C any] interface {
	*T
	Decide(cmd C, now time.Time, actor string) (aggregates.Decision, error)
	ApplyMessage(seq uint64, evs []events.Event) error
	Clone() *T
}

// shared holds one shared aggregate and where it stands in the stream.
// Writers, the follower and catch-ups hold mu; readers load cur without
// locking.
type shared[T, C any, P sharedAggregate[T, C]] struct {
	name    string
	subject string
	mu      sync.Mutex
	cur     atomic.Pointer[T]
	pos     events.Position
}

func newShared[T, C any, P sharedAggregate[T, C]](name, subject string, empty P) *shared[T, C, P] {
	s := &shared[T, C, P]{name: name, subject: subject}
	s.cur.Store(empty)
	return s
}

// get returns the current value. It is never modified.
func (s *shared[T, C, P]) get() P { return s.cur.Load() }

// load reads the whole subject (start-up).
func (s *shared[T, C, P]) load(ctx context.Context, store Store) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := store.Read(ctx, s.subject, 1, func(m events.Msg) error {
		if m.Seq <= s.pos.Seq {
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
func (s *shared[T, C, P]) follow(m events.Msg, log *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Seq <= s.pos.Seq {
		return
	}
	if err := s.applyLocked(m); err != nil {
		log.Error(s.name+" message not applied", "seq", m.Seq, "err", err)
	}
}

// applyLocked decodes and applies one stored message (mu held).
func (s *shared[T, C, P]) applyLocked(m events.Msg) error {
	evs, err := events.Decode(m.Data)
	if err != nil {
		return err
	}
	return s.storedLocked(m.Seq, evs)
}

// storedLocked folds the events stored at seq into a fresh copy and
// publishes it (mu held).
func (s *shared[T, C, P]) storedLocked(seq uint64, evs []events.Event) error {
	next, err := s.pos.Next(seq, evs)
	if err != nil {
		return fmt.Errorf("%s: %w", s.subject, err)
	}
	n := P(s.get().Clone())
	if err := n.ApplyMessage(seq, evs); err != nil {
		return err
	}
	s.pos = next
	s.cur.Store((*T)(n))
	return nil
}

// catchUpLocked applies the subject's messages after the current value
// (mu held).
func (s *shared[T, C, P]) catchUpLocked(ctx context.Context, store Store) error {
	for {
		m, err := store.Next(ctx, s.subject, s.pos.Seq+1)
		if errors.Is(err, events.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.applyLocked(m); err != nil {
			return fmt.Errorf("catch up %s at %d: %w", s.name, m.Seq, err)
		}
	}
}

// execute runs one command through the ledger's write loop and returns
// what the aggregate decided.
func (s *shared[T, C, P]) execute(ctx context.Context, l *Ledger, cmd C, actor string) (aggregates.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &sharedWrite[T, C, P]{s: s, store: l.store, cmd: cmd, actor: actor}
	if err := l.write(ctx, w); err != nil {
		return aggregates.Decision{Tx: -1}, err
	}
	return w.d, w.err
}

// sharedWrite is one command of a shared aggregate as the write loop sees
// it (s.mu held).
type sharedWrite[T, C any, P sharedAggregate[T, C]] struct {
	s     *shared[T, C, P]
	store Store
	cmd   C
	actor string
	d     aggregates.Decision
	err   error
}

func (w *sharedWrite[T, C, P]) Subject() string           { return w.s.subject }
func (w *sharedWrite[T, C, P]) Position() events.Position { return w.s.pos }

// HandingOver is false: the catalog and the operators are written seldom,
// and a conflict's pause costs them nothing worth a hand-over.
func (w *sharedWrite[T, C, P]) HandingOver() bool { return false }

func (w *sharedWrite[T, C, P]) Decide(now time.Time) []events.Event {
	w.d, w.err = w.s.get().Decide(w.cmd, now, w.actor)
	if w.err != nil {
		return nil
	}
	return w.d.Events
}

func (w *sharedWrite[T, C, P]) Stored(seq uint64, evs []events.Event) error {
	return w.s.storedLocked(seq, evs)
}

func (w *sharedWrite[T, C, P]) CatchUp(ctx context.Context) error {
	return w.s.catchUpLocked(ctx, w.store)
}

type (
	sharedCatalog   = shared[aggregates.Catalog, aggregates.CatalogCommand, *aggregates.Catalog]
	sharedOperators = shared[aggregates.Operators, aggregates.OperatorsCommand, *aggregates.Operators]
)

// Catalog returns the current methods. The value is never modified.
func (l *Ledger) Catalog() *aggregates.Catalog { return l.catalog.get() }

// Operators returns the current operators. The value is never modified.
func (l *Ledger) Operators() *aggregates.Operators { return l.operators.get() }

// ExecuteCatalog runs a catalog command through the write loop.
func (l *Ledger) ExecuteCatalog(ctx context.Context, cmd aggregates.CatalogCommand, actor string) (aggregates.Decision, error) {
	if l.closed.Load() {
		return aggregates.Decision{Tx: -1}, ErrClosed
	}
	return l.catalog.execute(ctx, l, cmd, actor)
}

// ExecuteOperators runs an operators command through the write loop.
func (l *Ledger) ExecuteOperators(ctx context.Context, cmd aggregates.OperatorsCommand, actor string) (aggregates.Decision, error) {
	if l.closed.Load() {
		return aggregates.Decision{Tx: -1}, ErrClosed
	}
	return l.operators.execute(ctx, l, cmd, actor)
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
