package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// TestOpenLedger_followerWaitsForTheGateway: a process that only follows
// the ledger ('gateway callbacks') waits for the stream rather than
// creating it, and is wired like the gateway once the gateway has created
// it; one that is stopped while waiting says so.
func TestOpenLedger_followerWaitsForTheGateway(t *testing.T) {
	// The log first: its check then runs after the ledgers have closed.
	log := testkit.NewLog(t, slog.LevelInfo).Logger
	nc := testkit.StartServer(t, jsstore.ServerConfig{}).Conn("test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("stopped while waiting", func(t *testing.T) {
		sctx, stop := context.WithTimeout(ctx, 100*time.Millisecond)
		defer stop()
		_, err := openLedger(sctx, nc, ledgerOptions{}, log)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})

	type opened struct {
		ls  *ledgerState
		err error
	}
	follower := make(chan opened, 1)
	go func() {
		ls, err := openLedger(ctx, nc, ledgerOptions{publicURL: "http://gw.test"}, log)
		follower <- opened{ls, err}
	}()
	select {
	case o := <-follower:
		t.Fatalf("the follower opened a ledger no gateway created: %v", o.err)
	case <-time.After(200 * time.Millisecond):
	}

	gw, err := openLedger(ctx, nc, ledgerOptions{create: true, snapshotEvery: time.Minute}, log)
	require.NoError(t, err)
	defer gw.close()
	require.NoError(t, gw.led.WaitReady(ctx))

	var o opened
	select {
	case o = <-follower:
	case <-ctx.Done():
		t.Fatal("the follower did not open the stream the gateway created")
	}
	require.NoError(t, o.err)
	defer o.ls.close()
	require.NoError(t, o.ls.led.WaitReady(ctx))
	assert.Equal(t, "http://gw.test", o.ls.reader.PublicURL())
}
