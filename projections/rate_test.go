package projections

import (
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/events/memstore"
)

// BenchmarkCatchUp measures CatchUp with the fold model, in events/s: over
// the stored history PROJECTIONS_RATE_DATA names (a copy of a data
// directory: the embedded server runs on it), or else over 200,000
// generated events in memory.
//
//	go run ./cmd/ledgerctl generate --data /tmp/h1m --events 1000000 --sites 100
//	PROJECTIONS_RATE_DATA=/tmp/h1m go test -run X -bench BenchmarkCatchUp -benchtime 3x ./projections/
func BenchmarkCatchUp(b *testing.B) {
	ctx := context.Background()
	st := rateStore(b)
	last, err := st.LastSeq(ctx)
	require.NoError(b, err)
	folded := 0
	for b.Loop() {
		b.StopTimer()
		d, err := Open(b.TempDir(), slog.New(slog.DiscardHandler), fold{})
		require.NoError(b, err)
		b.StartTimer()
		require.NoError(b, d.CatchUp(ctx, st))
		b.StopTimer()
		require.Equal(b, last, d.Applied())
		folded += foldedEvents(b, d)
		require.NoError(b, d.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(folded)/b.Elapsed().Seconds(), "events/s")
}

// rateStore is the history BenchmarkCatchUp folds.
func rateStore(b *testing.B) events.Store {
	dir := os.Getenv("PROJECTIONS_RATE_DATA")
	if dir == "" {
		mem := memstore.New()
		_, err := audit.Generate(context.Background(), mem, audit.GenOptions{Events: 200_000, Sites: 20, Batch: 100, Seed: 3})
		require.NoError(b, err)
		return mem
	}
	srv, err := jsstore.RunServer(jsstore.ServerConfig{Dir: dir})
	require.NoError(b, err)
	b.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := jsstore.ConnectInProcess(srv, "rate")
	require.NoError(b, err)
	b.Cleanup(nc.Close)
	st, err := jsstore.OpenExisting(context.Background(), nc, jsstore.Options{})
	require.NoError(b, err)
	return st
}

// foldedEvents is how many events the fold model counted, by name.
func foldedEvents(b *testing.B, d *DB) int {
	n := 0
	require.NoError(b, d.View("fold").Scan([]byte("e\x00"), []byte("e\x01"), false, func(_, v []byte) bool {
		n += int(binary.BigEndian.Uint64(v))
		return true
	}))
	return n
}
