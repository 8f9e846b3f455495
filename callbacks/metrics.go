package callbacks

import (
	"context"
	"time"
)

// Metrics receives the dispatcher's measurements (docs/metrics.md
// "Callbacks"); the process's metrics package implements it. Its methods
// must be cheap and safe for concurrent use.
type Metrics interface {
	// CallbackAttempted observes one POST to a callbackUrl: delivered
	// (2xx) or failed, how long it took, and how long after its event it
	// ended.
	CallbackAttempted(delivered bool, took, sinceEvent time.Duration)
	// CallbackGivenUp counts a callback parked as failed.
	CallbackGivenUp()
}

// nopMetrics is the default: a dispatcher without metrics measures nothing.
type nopMetrics struct{}

func (nopMetrics) CallbackAttempted(bool, time.Duration, time.Duration) {}
func (nopMetrics) CallbackGivenUp()                                     {}

// Backlog is what the dispatcher holds at one moment (docs/metrics.md
// "Callbacks").
type Backlog struct {
	// Active: this process holds the lease and delivers.
	Active bool
	// Queued is the callbacks taken from the stream (or resent) and not
	// yet delivered or parked.
	Queued int
	// Oldest is when the oldest ledger message with a callback not yet
	// delivered or parked was stored; zero when there is none.
	Oldest time.Time
	// StreamPending is the ledger messages the consumer has not handed to
	// the dispatcher yet; -1 when unknown (a standby, or the store did not
	// answer within ctx).
	StreamPending int64
}

// Backlog reports the dispatcher's backlog. It reads the consumer's state
// from the store (one call) only while this process delivers; the rest is
// in memory.
func (d *Dispatcher) Backlog(ctx context.Context) Backlog {
	b := Backlog{StreamPending: -1}
	t := d.active.Load()
	if t == nil {
		return b
	}
	b.Active = true
	t.mu.Lock()
	b.Queued, b.Oldest = t.order.backlog()
	t.mu.Unlock()
	if info, err := t.cons.Info(ctx); err == nil {
		b.StreamPending = int64(info.NumPending)
	}
	return b
}
