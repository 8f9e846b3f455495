package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/iqdgateway/gateway/events/jsstore"
)

// handlerSwitch serves one handler and then another: the starting page
// while the ledger opens, the API once it is open. Listening before the
// event store answers is what lets an orchestrator see a waiting gateway
// (/healthz 200, /readyz 503) rather than one that exits and restarts.
type handlerSwitch struct {
	h atomic.Pointer[http.Handler]
}

func (s *handlerSwitch) set(h http.Handler) { s.h.Store(&h) }

func (s *handlerSwitch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// Retries while the event store is not there yet: a cluster that is still
// electing leaders answers within seconds, one that is down may take
// minutes, and the log should say so without flooding.
const (
	firstRetry = 250 * time.Millisecond
	maxRetry   = 5 * time.Second
)

// createLimit bounds one attempt to create or update streams and buckets.
// On a cluster, a create that races an identical one from another gateway
// (two gateways deployed together) can go unanswered; the next attempt
// finds the stream made and is answered at once, so attempts are short.
const createLimit = 5 * time.Second

// waitFor runs fn until it succeeds or ctx ends, each attempt bounded by
// limit, backing off between attempts and logging each failure with what
// is awaited. It returns ctx's error when ctx ends first.
//
// Every error is retried: on a cluster that is forming, "no responders",
// timeouts, "insufficient resources" (too few peers for the replicas) and
// leaderless streams all clear by themselves, and a configuration mistake
// shows as the same warning repeated, with /readyz answering 503.
func waitFor(ctx context.Context, log *slog.Logger, what string, limit time.Duration, fn func(context.Context) error) error {
	pause := firstRetry
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, limit)
		err := fn(actx)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("event store answered", "for", what, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
		if errors.Is(err, jsstore.ErrHistoryLost) || errors.Is(err, jsstore.ErrDataDir) {
			// Waiting does not bring lost messages back, nor mend a
			// file of the data directory.
			return fmt.Errorf("%s: %w", what, err)
		}
		log.Warn("waiting for the event store", "for", what, "attempt", attempt, "retryIn", pause, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, maxRetry)
	}
}
