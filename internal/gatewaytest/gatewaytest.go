// Package gatewaytest serves a whole gateway inside a test's process (the
// embedded JetStream server in a temporary directory, the ledger, the
// records, the merchant and operator APIs and the callback dispatcher),
// for the tests of packages that use the gateway from outside, as a
// merchant's integration does: the client and the merchant CLI.
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// AdminToken is the gateway's bootstrap admin token.
const AdminToken = "gatewaytest-admin-token-0123456789abcdef"

// Gateway is a gateway serving at URL.
type Gateway struct {
	URL string
	t   testing.TB
}

// Start serves a gateway until the test ends; its dispatcher delivers
// callbacks (to private addresses too) with retries after 20 and 40 ms.
func Start(t testing.TB) *Gateway {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	nc := srv.Conn("gateway")
	store := testkit.OpenStore(t, nc, jsstore.Options{})
	led := ledger.New(store, ledger.Config{Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, led.Start(ctx))
	rctx, rcancel := context.WithTimeout(ctx, testkit.WaitFor)
	defer rcancel()
	require.NoError(t, led.WaitReady(rctx))

	hs := httptest.NewUnstartedServer(nil)
	hs.Start()
	reader := records.NewReader(led, store, hs.URL)
	cbConn := srv.Conn("callbacks")
	d, err := callbacks.New(ctx, callbacks.Config{Conn: cbConn, Store: store, Ledger: led, Records: reader, AllowPrivate: true,
		Schedule: callbacks.Schedule{20 * time.Millisecond, 40 * time.Millisecond}, LeaseTTL: time.Second,
		AckWait: 3 * time.Second, Logger: log})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx)
	}()
	hs.Config.Handler = httpapi.New(httpapi.Config{Ledger: led, Reader: reader, AdminToken: AdminToken, AppVersion: "test",
		StoreReady: store.Ping, Logger: log, Callbacks: d, Events: store})
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
		d.Close()
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = led.Close(cctx)
		cbConn.Close()
		nc.Close()
	})
	testkit.Eventually(t, testkit.WaitFor, d.Active, "the callback dispatcher is active")
	return &Gateway{URL: hs.URL, t: t}
}

// Ops calls the operator API as the admin and decodes the answer's data
// into out (when not nil); it fails the test on anything but 200.
func (g *Gateway) Ops(method, path string, body, out any) {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(g.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.URL+path, rd)
	require.NoError(g.t, err)
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(g.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(g.t, err)
	require.Equal(g.t, 200, res.StatusCode, "%s %s: %s", method, path, raw)
	if out != nil {
		var env struct{ Data json.RawMessage }
		require.NoError(g.t, json.Unmarshal(raw, &env))
		require.NoError(g.t, json.Unmarshal(env.Data, out))
	}
}

// Site is a site as the operator API creates it.
type Site struct {
	ID            string `json:"id"`
	AppKey        string `json:"appKey"`
	Secret        string `json:"secret"`
	WebhookSecret string `json:"webhookSecret"`
}

// NewSite creates a site with settings (a name is added when missing) and
// funds its treasury with fund IQD.
func (g *Gateway) NewSite(settings map[string]any, fund int64) Site {
	g.t.Helper()
	if settings == nil {
		settings = map[string]any{}
	}
	if _, ok := settings["name"]; !ok {
		settings["name"] = "Test Shop"
	}
	var s Site
	g.Ops("POST", "/ops/v1/sites", settings, &s)
	if fund != 0 {
		g.Ops("POST", "/ops/v1/sites/"+s.ID+"/adjustments", map[string]any{"amount": fund, "reason": "opening"}, nil)
	}
	return s
}

// NewMethod creates a method for deposits and withdrawals of 1,000 to
// 1,000,000 IQD with one recipient account; kind is its identifierKind.
func (g *Gateway) NewMethod(code, kind string) {
	g.t.Helper()
	g.Ops("POST", "/ops/v1/banks", map[string]any{"code": code,
		"name":           map[string]string{"en": code + " en", "ar": code + " ar", "ku": code + " ku"},
		"identifierKind": kind, "minAmount": 1000, "maxAmount": 1_000_000, "deposit": true, "withdraw": true,
		"accounts": []map[string]string{{"accountName": "Store", "accountNumber": "07801234567"}}}, nil)
}

// Approve approves a deposit as the admin, with amount when not 0.
func (g *Gateway) Approve(txID string, amount int64) {
	g.t.Helper()
	body := map[string]any{}
	if amount != 0 {
		body["amount"] = amount
	}
	g.Ops("POST", "/ops/v1/deposits/"+txID+"/approve", body, nil)
}
