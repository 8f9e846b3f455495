package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/projections"
)

// catchUpLimit bounds one attempt of the read models' catch-up at start.
// It commits as it goes, so an attempt cut short is not lost: the next
// one goes on from the last chunk's checkpoint.
const catchUpLimit = 30 * time.Minute

// readModels is the process's read models (docs/ARCHITECTURE.md "Read
// models"): caught up with the stream before the gateway reports ready,
// then following it until close.
type readModels struct {
	db   *projections.DB
	stop context.CancelFunc
	done chan struct{}
	log  *slog.Logger
}

// openReadModels opens the read models' store in dir, catches it up with
// the stream (waiting for the store as openLedger does) and starts
// following. Without models it opens nothing: no store, no follower.
// A model that fails is no reason not to serve the ledger: it is logged,
// kept in the DB's Err, and /readyz answers 503 (check).
func openReadModels(ctx context.Context, dir string, models []projections.Model, store events.Store, log *slog.Logger) (*readModels, error) {
	if len(models) == 0 {
		return &readModels{}, nil
	}
	db, err := projections.Open(dir, log, models...)
	if err != nil {
		return nil, fmt.Errorf("read models: %w", err)
	}
	err = waitFor(ctx, log, "catch up the read models", catchUpLimit, func(actx context.Context) error {
		if err := db.CatchUp(actx, store); err != nil && db.Err() == nil {
			return err
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r := &readModels{db: db, stop: stop, done: make(chan struct{}), log: log}
	go func() {
		defer close(r.done)
		_ = db.Follow(fctx, store) // a fault is in db.Err, logged
	}()
	return r, nil
}

// check says whether the read models can be trusted: nil, or the fault
// that stopped them (/readyz answers 503 with it).
func (r *readModels) check() error {
	if r.db == nil {
		return nil
	}
	if err := r.db.Err(); err != nil {
		return fmt.Errorf("read models stopped: %w", err)
	}
	return nil
}

// close stops following and closes the store.
func (r *readModels) close() {
	if r.db == nil {
		return
	}
	r.stop()
	<-r.done
	if err := r.db.Close(); err != nil {
		r.log.Warn("read models close", "err", err)
	}
}
