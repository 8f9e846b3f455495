package httpapi_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// TestUnavailableNothingRecordedAfterOutage stops the NATS server (reached
// over TCP, as an external cluster is), sends a deposit, which is answered
// 503 unavailable, brings the server back and checks the contract's promise
// for 503: "nothing was recorded".
//
// The ledger answers only once the append's outcome is settled (bounded by
// the request deadline), and the connection never buffers a publish while
// disconnected, so nothing reaches the stream after the 503.
func TestUnavailableNothingRecordedAfterOutage(t *testing.T) {
	// The log first: its check then runs last, after the ledger closed.
	tlog := testkit.NewLog(t, slog.LevelInfo)
	// Every request refused while the server is down.
	tlog.ExpectErrors("status=503 code=unavailable")
	log := tlog.Logger
	ns := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1"})
	nc, err := jsstore.Connect(ns.URL(), "outage")
	require.NoError(t, err)
	ctx := context.Background()
	store := testkit.OpenStore(t, nc, jsstore.Options{})
	led := ledger.New(store, ledger.Config{Logger: log})
	require.NoError(t, led.Start(ctx))
	require.NoError(t, led.WaitReady(ctx))
	srv := httptest.NewServer(nil)
	srv.Config.Handler = httpapi.New(httpapi.Config{Ledger: led, Reader: records.NewReader(led, store, srv.URL),
		AdminToken: adminToken, AppVersion: "test", StoreReady: store.Ping, Logger: log, RequestTimeout: 2 * time.Second})
	t.Cleanup(func() {
		srv.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = led.Close(cctx)
		nc.Close()
	})
	s := &stack{t: t, URL: srv.URL, Ledger: led}
	s.seedBanks()
	st := s.newSite(nil, 0)

	ns.Stop()
	// Only a publish the client knows it never sent is answered 503; one
	// sent on a connection the server has just closed has an unknown
	// outcome (504, tested in ledger). Send once the client has noticed.
	testkit.Eventually(t, 10*time.Second, func() bool { return !nc.IsConnected() }, "the client noticed the server is gone")
	requireErr(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "outage", "u1", 25000)), 503, "unavailable", "")
	// Reads have a deadline too: they answer 503 rather than hang.
	requireErr(t, s.get(st, "/v1/balance", ""), 503, "unavailable", "")

	ns.Restart()
	// A later command of the site queues behind the one still in flight,
	// so once it is answered the outcome of the first is settled.
	testkit.Eventually(t, 60*time.Second, func() bool {
		return s.ops("POST", "/ops/v1/sites/"+st.ID+"/adjustments", map[string]any{"amount": 1, "reason": "probe"}).HTTP == 200
	}, "a later command of the site is applied")
	requireErr(t, s.get(st, "/v1/transactions", "processId=outage"), 404, "not_found", "")
}
