package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"gateway/callbacks"
	"gateway/events"
	"gateway/events/jsstore"
	"gateway/httpapi"
	"gateway/ledger"
	"gateway/records"
)

// The concrete types wired here are what the dispatcher's and the
// operator API's own interfaces ask for.
var (
	_ callbacks.Store   = (*jsstore.Store)(nil)
	_ callbacks.Ledger  = (*ledger.Ledger)(nil)
	_ callbacks.Records = (*records.Reader)(nil)
	_ httpapi.Callbacks = (*callbacks.Dispatcher)(nil)
	_ records.State     = (*ledger.Ledger)(nil)
	_ records.Store     = (*jsstore.Store)(nil)
)

// ledgerState is what a process serves from: the ledger stream, the ledger
// following it and the record reader over both. The gateway and a
// standalone callback dispatcher both build it with openLedger.
type ledgerState struct {
	store  *jsstore.Store
	led    *ledger.Ledger
	reader *records.Reader
	log    *slog.Logger
}

// ledgerOptions say how a process opens the ledger.
type ledgerOptions struct {
	// create creates the stream or updates its configuration: the gateway
	// owns it. Otherwise the stream must exist, and openLedger waits for a
	// gateway to create it.
	create bool
	// replicas is the stream's replication when create is set.
	replicas int
	// snapshotEvery is how often the ledger snapshots changed sites (0:
	// only when it closes).
	snapshotEvery time.Duration
	// publicURL is the base of hosted page links in records.
	publicURL string
}

// openTimeout bounds opening (creating or updating) the ledger stream.
const openTimeout = 60 * time.Second

// waitStreamEvery is how often a process that does not create the stream
// looks for it again.
const waitStreamEvery = 2 * time.Second

// openLedger opens the ledger stream on nc, starts a ledger following it
// and makes the record reader over both. The ledger catches up in the
// background (ledger.WaitReady); close stops it.
func openLedger(ctx context.Context, nc *nats.Conn, o ledgerOptions, log *slog.Logger) (*ledgerState, error) {
	store, err := openStore(ctx, nc, o, log)
	if err != nil {
		return nil, err
	}
	led := ledger.New(store, ledger.Config{SnapshotEvery: o.snapshotEvery, Logger: log})
	if err := led.Start(ctx); err != nil {
		return nil, fmt.Errorf("start ledger: %w", err)
	}
	return &ledgerState{store: store, led: led, reader: records.NewReader(led, store, o.publicURL), log: log}, nil
}

// openStore opens the ledger stream: created or updated by the gateway;
// awaited, never configured, by a process that only follows it (Open would
// rewrite the configuration, e.g. scale a replicated stream down).
func openStore(ctx context.Context, nc *nats.Conn, o ledgerOptions, log *slog.Logger) (*jsstore.Store, error) {
	if o.create {
		octx, cancel := context.WithTimeout(ctx, openTimeout)
		defer cancel()
		return jsstore.Open(octx, nc, jsstore.Options{Replicas: o.replicas})
	}
	for {
		store, err := jsstore.OpenExisting(ctx, nc, jsstore.Options{})
		if err == nil {
			return store, nil
		}
		if !errors.Is(err, events.ErrNotFound) {
			return nil, fmt.Errorf("open ledger: %w", err)
		}
		log.Info("waiting for the ledger stream to be created by a gateway", "stream", events.StreamName)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(waitStreamEvery):
		}
	}
}

// close stops the ledger (which snapshots what changed).
func (l *ledgerState) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.led.Close(ctx); err != nil {
		l.log.Warn("ledger close", "err", err)
	}
}
