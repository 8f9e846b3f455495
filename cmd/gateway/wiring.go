package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/metrics"
	"github.com/iqdgateway/gateway/records"
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
	// The measured store stands in for the store everywhere, and one
	// registry takes every package's measurements.
	_ ledger.Store      = (*observedStore)(nil)
	_ callbacks.Store   = (*observedStore)(nil)
	_ records.Store     = (*observedStore)(nil)
	_ ledger.Metrics    = (*metrics.Metrics)(nil)
	_ callbacks.Metrics = (*metrics.Metrics)(nil)
	_ httpapi.Metrics   = (*metrics.Metrics)(nil)
)

// ledgerState is what a process serves from: the ledger stream, the ledger
// following it and the record reader over both. The gateway and a
// standalone callback dispatcher both build it with openLedger.
type ledgerState struct {
	store  *observedStore
	led    *ledger.Ledger
	reader *records.Reader
	log    *slog.Logger
	// metrics is the process's registry, which the store and the ledger
	// feed (and the dispatcher, given it).
	metrics *metrics.Metrics
}

// ledgerOptions say how a process opens the ledger.
type ledgerOptions struct {
	// create creates the stream or updates its configuration: the gateway
	// owns it. Otherwise the stream must exist, and openLedger waits for a
	// gateway to create it.
	create bool
	// replicas is the stream's replication when create is set.
	replicas int
	// batchMin is jsstore.Options.BatchMin.
	batchMin int
	// files is the embedded server's directory (jsstore.Options.Files);
	// empty with an external server.
	files string
	// syncFiles is jsstore.Options.SyncFiles: the gateway fsyncs the
	// embedded server's block files (see storeSyncs).
	syncFiles bool
	// tailMayBeLost is jsstore.Options.TailMayBeLost and
	// ledger.Config.TailMayBeLost: the embedded server with --sync
	// interval, which a machine crash may take the last moments from.
	tailMayBeLost bool
	// snapshotEvery is how often the ledger snapshots changed sites (0:
	// only when it closes).
	snapshotEvery time.Duration
	// publicURL is the base of hosted page links in records.
	publicURL string
	// metrics is the process's registry (nil: one of its own, which
	// nobody scrapes).
	metrics *metrics.Metrics
}

// openLedger opens the ledger stream on nc, starts a ledger following it
// and makes the record reader over both. The ledger catches up in the
// background (ledger.WaitReady); close stops it. Until the event store
// answers (a cluster forming or without a leader, a stream no gateway has
// created yet) it waits, retrying and logging what it waits for; it fails
// only when ctx ends.
func openLedger(ctx context.Context, nc *nats.Conn, o ledgerOptions, log *slog.Logger) (*ledgerState, error) {
	what := "open the ledger stream"
	if !o.create {
		what = "the ledger stream, created by a gateway"
	}
	var js *jsstore.Store
	err := waitFor(ctx, log, what, createLimit, func(actx context.Context) (err error) {
		js, err = openStore(actx, nc, o)
		return err
	})
	if err != nil {
		return nil, err
	}
	if o.metrics == nil {
		o.metrics = metrics.New()
	}
	store := &observedStore{Store: js, m: o.metrics}
	if b := js.Batches(); b != nil {
		o.metrics.StoreBatches(func() metrics.Batches {
			return metrics.Batches{Stored: b.Stored.Load(), Refused: b.Refused.Load(), Unknown: b.Unknown.Load(), Appends: b.Appends.Load()}
		})
	}
	if f := js.Fsyncs(); f != nil {
		o.metrics.StoreFsyncs(func() metrics.Fsyncs {
			return metrics.Fsyncs{Done: f.Done.Load(), Failed: f.Failed.Load(), Waits: f.Waits.Load()}
		})
	}
	var led *ledger.Ledger
	// Loading the snapshots of many sites takes longer than a create.
	err = waitFor(ctx, log, "load the ledger", startLimit, func(actx context.Context) error {
		led = ledger.New(store, ledger.Config{SnapshotEvery: o.snapshotEvery, SnapshotPace: snapshotPace, TailMayBeLost: o.tailMayBeLost,
			Logger: log, Metrics: o.metrics, HandOver: js})
		if err := led.Start(actx); err != nil {
			return fmt.Errorf("start ledger: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	o.metrics.FollowerLag(store.LastSeq, led.Followed)
	return &ledgerState{store: store, led: led, reader: records.NewReader(led, store, o.publicURL), log: log, metrics: o.metrics}, nil
}

// openDispatcher makes the callback dispatcher over ls, waiting (as
// openLedger does) until its buckets can be created or opened, and has the
// process's metrics read its backlog. The gateway and 'gateway callbacks'
// both open it so.
func openDispatcher(ctx context.Context, cfg callbacks.Config, m *metrics.Metrics, log *slog.Logger) (*callbacks.Dispatcher, error) {
	var d *callbacks.Dispatcher
	err := waitFor(ctx, log, "the callback streams", createLimit, func(actx context.Context) (err error) {
		d, err = callbacks.New(actx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("callback dispatcher: %w", err)
	}
	observeDispatcher(m, d)
	return d, nil
}

// defaultBatchMin is the fewest appends of different sites worth one
// atomic batch (jsstore.Options.BatchMin) for the store the gateway
// writes to (BENCHMARKS.md, "Many sites at once"). On one file store that
// fsyncs every message a batch has a fixed cost of a few fsyncs and file
// operations, about as much as fifteen single fsyncs, and saves one fsync
// per append. Without that fsync (--sync interval) it saves nothing. On a
// replicated stream Raft already packs the proposals in flight together
// into one append entry, and batches measured no faster: off. An external
// single server is taken to fsync, as a durable deployment does.
func defaultBatchMin(o options) int {
	switch {
	case o.nats != "" && o.replicas > 1:
		return 0
	case o.nats == "" && (o.sync == "interval" || storeSyncs(o)):
		return 0
	}
	return 16
}

// storeSyncs says the gateway itself makes its embedded server's writes
// durable (jsstore.Options.SyncFiles): with --sync always and no port for
// other clients, the server writes every message through to its files
// before acknowledging it and does not fsync; the gateway fsyncs the
// stream's files once per group of acknowledged appends of any sites, and
// answers them after (docs/ARCHITECTURE.md, "One fsync for many sites").
// A server that other processes write to fsyncs every message itself,
// since they cannot fsync its files.
func storeSyncs(o options) bool {
	return o.nats == "" && o.sync == "always" && o.natsListen == ""
}

// serverSyncInterval is how often an embedded server that is not asked to
// fsync every message fsyncs all it wrote: with storeSyncs the ledger
// stream is fsynced by the gateway before every answer, and this bounds
// what a power loss can take of the rest (the callback delivery log, the
// consumers' positions, the snapshots) to one second; with --sync interval
// it bounds what a power loss can take of anything to nats-server's
// default, 2 minutes.
func serverSyncInterval(o options) time.Duration {
	if storeSyncs(o) {
		return time.Second
	}
	return 0
}

// startLimit bounds one attempt to load the ledger's snapshots.
const startLimit = 2 * time.Minute

// openStore opens the ledger stream: created or updated by the gateway;
// bound to, never configured, by a process that only follows it (Open would
// rewrite the configuration, e.g. scale a replicated stream down).
func openStore(ctx context.Context, nc *nats.Conn, o ledgerOptions) (*jsstore.Store, error) {
	if o.create {
		return jsstore.Open(ctx, nc, jsstore.Options{Replicas: o.replicas, BatchMin: o.batchMin, Files: o.files, SyncFiles: o.syncFiles,
			TailMayBeLost: o.tailMayBeLost})
	}
	return jsstore.OpenExisting(ctx, nc, jsstore.Options{})
}

// snapshotPace is how fast a background snapshot round writes site state
// (ledger.Config.SnapshotPace): a million transactions' state, about
// 100 MiB, in some thirteen seconds of each minute.
const snapshotPace = 8 << 20

// close stops the ledger (which snapshots what changed).
func (l *ledgerState) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The final snapshot round writes every changed site at once: it
	// starts from the live heap rather than on top of the garbage the
	// load left (the process's peak memory counts its shutdown too).
	debug.FreeOSMemory()
	if err := l.led.Close(ctx); err != nil {
		l.log.Warn("ledger close", "err", err)
	}
}

// embeddedDir is the embedded server's directory, whose block files the
// store reads old messages from; empty with an external server.
func embeddedDir(o options) string {
	if o.nats != "" {
		return ""
	}
	return o.data
}
