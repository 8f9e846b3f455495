package projections

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
)

// TestCatchUp_rate measures CatchUp with the fold model over a stored
// history, when PROJECTIONS_RATE_DATA names its data directory (a copy:
// the embedded server runs on it):
//
//	go run ./cmd/ledgerctl generate --data /tmp/h1m --events 1000000 --sites 100
//	PROJECTIONS_RATE_DATA=/tmp/h1m go test -run TestCatchUp_rate -v ./projections/
//
// The rate is in the INFO line "read models caught up".
func TestCatchUp_rate(t *testing.T) {
	dir := os.Getenv("PROJECTIONS_RATE_DATA")
	if dir == "" {
		t.Skip("PROJECTIONS_RATE_DATA names no history")
	}
	srv, err := jsstore.RunServer(jsstore.ServerConfig{Dir: dir})
	require.NoError(t, err)
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := jsstore.ConnectInProcess(srv, "rate")
	require.NoError(t, err)
	defer nc.Close()
	ctx := context.Background()
	st, err := jsstore.OpenExisting(ctx, nc, jsstore.Options{})
	require.NoError(t, err)
	d, err := Open(t.TempDir(), slog.New(slog.NewTextHandler(os.Stderr, nil)), fold{})
	require.NoError(t, err)
	defer d.Close()
	start := time.Now()
	require.NoError(t, d.CatchUp(ctx, st))
	t.Logf("caught up to %d in %s", d.Applied(), time.Since(start))
}
