package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// TestDemoSite_balance: a demo site gets its opening balance once: also on
// the start after one stopped between the creation and the balance, never
// again on later starts, and never on a site already in use.
func TestDemoSite_balance(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	led := ledger.New(srv.Store("demo"), ledger.Config{Logger: testkit.NewLog(t, slog.LevelWarn).Logger})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitFor)
	defer cancel()
	require.NoError(t, led.Start(ctx))
	require.NoError(t, led.WaitReady(ctx))
	t.Cleanup(func() { _ = led.Close(context.Background()) })
	name := "Demo"
	named := aggregates.SiteSettings{Name: &name}
	balance := func(id string) (b int64) {
		require.NoError(t, led.Read(ctx, ids.SiteID(id), ledger.Fresh, func(s *aggregates.Site) error {
			b = s.Balance
			return nil
		}))
		return b
	}

	require.NoError(t, demoSite(ctx, led, "fresh", named))
	require.Equal(t, int64(demoBalance), balance("fresh"))
	require.NoError(t, demoSite(ctx, led, "fresh", named))
	require.Equal(t, int64(demoBalance), balance("fresh"), "a second start adds nothing")

	// A start stopped after the creation: the next one gives the balance.
	_, err := led.Execute(ctx, "cut", aggregates.CreateSite{AppKey: "ak_cut_1", Secret: "s3cret-s3cret-s3cret", WebhookSecret: "whsec_x", Settings: named}, events.ActorSystem)
	require.NoError(t, err)
	require.Zero(t, balance("cut"))
	require.NoError(t, demoSite(ctx, led, "cut", named))
	require.Equal(t, int64(demoBalance), balance("cut"))

	// A site funded otherwise (an older demo's unkeyed opening) is left alone.
	_, err = led.Execute(ctx, "old", aggregates.CreateSite{AppKey: "ak_old_1", Secret: "s3cret-s3cret-s3cret", WebhookSecret: "whsec_y", Settings: named}, events.ActorSystem)
	require.NoError(t, err)
	_, err = led.Execute(ctx, "old", aggregates.AdjustTreasury{Amount: 500, Reason: "opening"}, events.ActorSystem)
	require.NoError(t, err)
	require.NoError(t, demoSite(ctx, led, "old", named))
	require.Equal(t, int64(500), balance("old"))
}
