package ledger

import (
	"context"
	"time"

	"github.com/iqdgateway/gateway/events"
)

// Metrics receives the ledger's measurements (docs/metrics.md "Ledger and
// store"); the process's metrics package implements it. Its methods are
// called on the write path, so they must be cheap and safe for concurrent
// use. Appends and store round trips are measured at the store, not here.
type Metrics interface {
	// Redecided counts a batch decided again after a conflict.
	Redecided()
	// HandOver counts a hand-over of a busy site between processes:
	// asked of the others (asked) or held for one of them (see
	// handover.go).
	HandOver(asked bool)
	// Committed observes one stored message and the commands it holds.
	Committed(commands int)
	// Swept observes one expiry sweep: how long it took, how many
	// deposits it expired, and why it was incomplete (nil when it was not).
	Swept(took time.Duration, expired int, err error)
}

// nopMetrics is the default: a ledger without metrics measures nothing.
type nopMetrics struct{}

func (nopMetrics) Redecided()                      {}
func (nopMetrics) Committed(int)                   {}
func (nopMetrics) HandOver(bool)                   {}
func (nopMetrics) Swept(time.Duration, int, error) {}

// write runs a through the write loop, measured.
func (l *Ledger) write(ctx context.Context, a Writable) error {
	return l.writer().Write(ctx, &measured{Writable: a, m: l.cfg.Metrics})
}

// measured is a Writable as the write loop sees it, counting its decisions
// and what it stores. Wrapping leaves the write loop itself untouched.
type measured struct {
	Writable
	m       Metrics
	decided int
}

func (w *measured) Decide(now time.Time) []events.Event {
	if w.decided++; w.decided > 1 {
		w.m.Redecided()
	}
	return w.Writable.Decide(now)
}

func (w *measured) Stored(seq uint64, evs []events.Event) error {
	n := 1
	if c, ok := w.Writable.(interface{ commands() int }); ok {
		n = c.commands()
	}
	w.m.Committed(n)
	return w.Writable.Stored(seq, evs)
}

// commands is how many of the batch's commands the stored message holds
// events of (repeats and refusals hold none).
func (w *siteWrite) commands() int {
	n := 0
	for _, o := range w.batch {
		if o.err == nil && len(o.res.Events) > 0 {
			n++
		}
	}
	return n
}
