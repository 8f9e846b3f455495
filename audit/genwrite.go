package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/iqdgateway/gateway/events"
)

// write appends one message through the ledger's write loop and counts it.
func (g *generator) write(ctx context.Context, w *genWrite) error {
	if err := g.w.Write(ctx, w); err != nil {
		return err
	}
	if w.err != nil {
		return w.err
	}
	g.total += w.n
	g.msgs++
	g.last = w.pos.Seq
	if g.o.Progress != nil {
		g.o.Progress(g.total)
	}
	return nil
}

// genWrite is one generated message as the ledger's write loop sees it.
// The generator is its history's only writer: another writer's message is
// an error, not something to catch up with.
type genWrite struct {
	subject string
	pos     *events.Position
	decide  func(now time.Time) ([]events.Event, error)
	stored  func(seq uint64, evs []events.Event) error
	// err is decide's error; n the number of events stored.
	err error
	n   int
}

func (w *genWrite) Subject() string           { return w.subject }
func (w *genWrite) Position() events.Position { return *w.pos }

// HandingOver is false: the generator is its history's only writer.
func (w *genWrite) HandingOver() bool { return false }

func (w *genWrite) Decide(now time.Time) []events.Event {
	evs, err := w.decide(now)
	if w.err = err; err != nil {
		return nil
	}
	return evs
}

func (w *genWrite) Stored(seq uint64, evs []events.Event) error {
	next, err := w.pos.Next(seq, evs)
	if err != nil {
		return err
	}
	if err := w.stored(seq, evs); err != nil {
		return err
	}
	*w.pos, w.n = next, len(evs)
	return nil
}

func (w *genWrite) CatchUp(context.Context) error {
	return fmt.Errorf("%s: another writer appended to a generated history: %w", w.subject, events.ErrConflict)
}
