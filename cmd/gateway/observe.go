package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/metrics"
)

// Observability shared by the gateway and 'gateway callbacks': the log
// format, the event store's measurements, and the dispatcher's own listener
// for probes and metrics (docs/metrics.md).

func logFormatFlag(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "log-format", env("GATEWAY_LOG_FORMAT", "text"), "text or json (one JSON object per line) [GATEWAY_LOG_FORMAT]")
}

// newLogger is the process's logger at the --log-level, in the
// --log-format (docs/metrics.md "Logs"). Its errors are usage errors.
func newLogger(level, format string, stderr io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}

// observedStore is the event store, measured (docs/metrics.md "Ledger and
// store"): every round trip by operation, and every append by outcome. It
// is the store the ledger, the records and the dispatcher all read, so
// what they ask of it is measured in one place. Follow is not a round trip
// (it lasts as long as the process) and is not measured.
type observedStore struct {
	*jsstore.Store
	m *metrics.Metrics
}

// Store operations (label values of gateway_store_request_duration_seconds).
const (
	opAppend        = "append"
	opGet           = "get"
	opNext          = "next"
	opLastSeq       = "last_seq"
	opLastFor       = "last_for"
	opRead          = "read"
	opSaveSnapshot  = "save_snapshot"
	opLoadSnapshot  = "load_snapshot"
	opListSnapshots = "list_snapshots"
)

// done observes one round trip. Not found and a conflict are answers the
// callers expect, not failures of the store.
func (s *observedStore) done(op string, start time.Time, err error) {
	failed := err != nil && !errors.Is(err, events.ErrNotFound) && !errors.Is(err, events.ErrConflict)
	s.m.StoreCall(op, time.Since(start), failed)
}

// Append counts the append by the store's answer. An unanswered append
// that the write loop then settles as stored (ledger.settle) counts as
// unknown here: this is what the store said, not what the command became.
func (s *observedStore) Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	start := time.Now()
	seq, err := s.Store.Append(ctx, subject, expectLast, data)
	s.done(opAppend, start, err)
	switch {
	case err == nil:
		s.m.Appended(metrics.AppendStored)
	case errors.Is(err, events.ErrConflict):
		s.m.Appended(metrics.AppendConflict)
	case errors.Is(err, events.ErrOutcomeUnknown):
		s.m.Appended(metrics.AppendUnknown)
	default:
		s.m.Appended(metrics.AppendUnavailable)
	}
	return seq, err
}

func (s *observedStore) Get(ctx context.Context, seq uint64) (events.Msg, error) {
	start := time.Now()
	m, err := s.Store.Get(ctx, seq)
	s.done(opGet, start, err)
	return m, err
}

func (s *observedStore) Next(ctx context.Context, subject string, seq uint64) (events.Msg, error) {
	start := time.Now()
	m, err := s.Store.Next(ctx, subject, seq)
	s.done(opNext, start, err)
	return m, err
}

func (s *observedStore) LastSeq(ctx context.Context) (uint64, error) {
	start := time.Now()
	seq, err := s.Store.LastSeq(ctx)
	s.done(opLastSeq, start, err)
	return seq, err
}

func (s *observedStore) LastFor(ctx context.Context, subject string) (uint64, error) {
	start := time.Now()
	seq, err := s.Store.LastFor(ctx, subject)
	s.done(opLastFor, start, err)
	return seq, err
}

// Read is measured whole, the caller's own work on each message included:
// it is the bulk path (start-up, rebuilds, history scans). An error of the
// caller's own (one that stops the read early) is not the store's.
func (s *observedStore) Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	start := time.Now()
	var own error
	err := s.Store.Read(ctx, filter, from, func(m events.Msg) error {
		own = fn(m)
		return own
	})
	if err != nil && err == own {
		s.done(opRead, start, nil)
	} else {
		s.done(opRead, start, err)
	}
	return err
}

func (s *observedStore) SaveSnapshot(ctx context.Context, name string, seq uint64, data []byte) error {
	start := time.Now()
	err := s.Store.SaveSnapshot(ctx, name, seq, data)
	s.done(opSaveSnapshot, start, err)
	return err
}

func (s *observedStore) LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error) {
	start := time.Now()
	seq, data, err := s.Store.LoadSnapshot(ctx, name)
	s.done(opLoadSnapshot, start, err)
	return seq, data, err
}

func (s *observedStore) ListSnapshots(ctx context.Context) ([]string, error) {
	start := time.Now()
	names, err := s.Store.ListSnapshots(ctx)
	s.done(opListSnapshots, start, err)
	return names, err
}

// Ping checks that the stream answers, measured as the stream-info call it
// is.
func (s *observedStore) Ping(ctx context.Context) error {
	_, err := s.LastSeq(ctx)
	return err
}

// observeDispatcher reports d's backlog at every scrape.
func observeDispatcher(m *metrics.Metrics, d *callbacks.Dispatcher) {
	m.CallbackBacklog(func(ctx context.Context) metrics.Backlog {
		b := d.Backlog(ctx)
		return metrics.Backlog{Active: b.Active, Queued: b.Queued, Oldest: b.Oldest, StreamPending: b.StreamPending}
	})
}

// probes answers a standalone dispatcher's /healthz, /readyz and /metrics
// (docs/metrics.md "Dispatcher listener"). Its ledger is set once opened:
// until then the process is up but not ready.
type probes struct {
	ls atomic.Pointer[ledgerState]
}

// readyTimeout bounds the store check of one /readyz.
const readyTimeout = 2 * time.Second

func (p *probes) handler(m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeProbe(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ls := p.ls.Load()
		switch {
		case ls == nil:
			writeProbe(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "reason": "the ledger stream is not open yet"})
			return
		case !ls.led.Ready():
			writeProbe(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "reason": "the ledger is still catching up with the event store"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := ls.store.Ping(ctx); err != nil {
			writeProbe(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "reason": "the event store cannot be reached"})
			return
		}
		writeProbe(w, http.StatusOK, map[string]any{"status": "ready", "sequence": ls.led.Followed()})
	})
	mux.Handle("GET /metrics", m.Handler())
	return mux
}

func writeProbe(w http.ResponseWriter, status int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// serveProbes serves h on ln until the returned function is called, which
// waits (briefly) for the scrapes under way.
func serveProbes(ln net.Listener, h http.Handler, log *slog.Logger) func() {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("dispatcher listener", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}
