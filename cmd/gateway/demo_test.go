package main

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/client"
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

// TestDemoSite_callbackURL: a demo site that exists is pointed at the
// receiver when its callbackUrl is one --demo set (an earlier version's
// discard port, the receiver of another --http), never when an operator
// chose it or removed it.
func TestDemoSite_callbackURL(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	led := ledger.New(srv.Store("demo"), ledger.Config{Logger: testkit.NewLog(t, slog.LevelWarn).Logger})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitFor)
	defer cancel()
	require.NoError(t, led.Start(ctx))
	require.NoError(t, led.WaitReady(ctx))
	t.Cleanup(func() { _ = led.Close(context.Background()) })
	const receiver = "http://127.0.0.1:8080/demo/callbacks"
	for i, tc := range []struct {
		name, stored, want string
	}{
		{"an earlier version's discard port", "http://127.0.0.1:9/callbacks", receiver},
		{"the receiver of another --http", "http://127.0.0.1:8081/demo/callbacks", receiver},
		{"the receiver on IPv6 loopback", "http://[::1]:8080/demo/callbacks", receiver},
		{"already the receiver", receiver, receiver},
		{"an operator's", "https://shop.example/callbacks", "https://shop.example/callbacks"},
		{"an operator's on this machine", "http://127.0.0.1:3000/callbacks", "http://127.0.0.1:3000/callbacks"},
		{"removed", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "cb" + strconv.Itoa(i)
			name, stored := "Demo", tc.stored
			_, err := led.Execute(ctx, ids.SiteID(id), aggregates.CreateSite{AppKey: "ak_cb_" + id, Secret: "s3cret-s3cret-s3cret",
				WebhookSecret: "whsec_x", Settings: aggregates.SiteSettings{Name: &name, CallbackURL: &stored}}, events.ActorSystem)
			require.NoError(t, err)
			want := receiver
			require.NoError(t, demoSite(ctx, led, id, aggregates.SiteSettings{Name: &name, CallbackURL: &want}))
			cfg, ok := led.SiteConfig(ids.SiteID(id))
			require.True(t, ok)
			assert.Equal(t, tc.want, cfg.CallbackURL)
		})
	}
	// A site --demo creates gets the receiver.
	name, want := "Demo", receiver
	require.NoError(t, demoSite(ctx, led, "fresh", aggregates.SiteSettings{Name: &name, CallbackURL: &want}))
	cfg, ok := led.SiteConfig("fresh")
	require.True(t, ok)
	assert.Equal(t, receiver, cfg.CallbackURL)
}

func TestDemoCallbackURL(t *testing.T) {
	for _, tc := range []struct{ listen, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080/demo/callbacks"},
		{"0.0.0.0:8080", "http://127.0.0.1:8080/demo/callbacks"},
		{"[::]:8080", "http://[::1]:8080/demo/callbacks"},
		{"[::1]:9090", "http://[::1]:9090/demo/callbacks"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.listen)
		require.NoError(t, err)
		assert.Equal(t, tc.want, demoCallbackURL(addr), tc.listen)
		assert.True(t, demoOwnsCallbackURL(tc.want), "the receiver's URL is --demo's")
	}
}

// TestDemoReceiver: a callback signed with its site's webhook secret (or
// the previous one, during a rotation's overlap) is logged and answered
// 204; anything else is logged as refused and answered 4xx.
func TestDemoReceiver(t *testing.T) {
	now := time.Now()
	site := &aggregates.Config{WebhookSecret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("the-current-webhook-secret")),
		PrevWebhookSecret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("the-previous-webhook-secret")), PrevWebhookSecretUntil: now.Add(time.Hour).UnixMilli()}
	log := &testkit.Buffer{}
	rcv := &demoReceiver{site: func(id ids.SiteID) (*aggregates.Config, bool) { return site, id == "sandbox" },
		log: slog.New(slog.NewTextHandler(log, nil)), now: func() time.Time { return now }}
	body := `{"type":"deposit.approved","timestamp":"x","data":{"transactionId":"sandbox-1","status":"approved","amount":24000}}`
	signed := func(secret, body string) http.Header {
		ts := strconv.FormatInt(now.Unix(), 10)
		h := http.Header{}
		h.Set("webhook-id", "57-0")
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", "v1,"+client.WebhookSignature(secret, "57-0", ts, []byte(body)))
		return h
	}
	for _, tc := range []struct {
		name, method, body string
		header             http.Header
		status             int
		logged             string
	}{
		{"signed", "POST", body, signed(site.WebhookSecret, body), 204,
			`msg="demo callback received" site=sandbox type=deposit.approved webhookId=57-0 transactionId=sandbox-1 status=approved amount=24000`},
		{"signed with the previous secret", "POST", body, signed(site.PrevWebhookSecret, body), 204, `msg="demo callback received"`},
		{"signed with another secret", "POST", body, signed("whsec_b3RoZXI=", body), 401, `msg="demo callback refused" webhookId=57-0 status=401`},
		{"body changed", "POST", strings.Replace(body, "24000", "25000", 1), signed(site.WebhookSecret, body), 401, "no webhook signature matches"},
		{"another site's transaction", "POST", strings.Replace(body, "sandbox-1", "shop-1", 1), signed(site.WebhookSecret, body), 401, "no site's"},
		{"not a callback", "POST", `{"hello":1}`, signed(site.WebhookSecret, `{"hello":1}`), 400, "not a callback"},
		{"a wildcard id", "POST", `{"type":"deposit.approved","data":{"transactionId":"sandbox.*-1"}}`, signed(site.WebhookSecret, `{"type":"deposit.approved","data":{"transactionId":"sandbox.*-1"}}`), 401, "no site's"},
		{"a dotted id", "POST", `{"type":"deposit.approved","data":{"transactionId":"../sandbox-1"}}`, signed(site.WebhookSecret, `{"type":"deposit.approved","data":{"transactionId":"../sandbox-1"}}`), 401, "no site's"},
		{"a subject wildcard", "POST", `{"type":"deposit.approved","data":{"transactionId":">"}}`, signed(site.WebhookSecret, `{"type":"deposit.approved","data":{"transactionId":">"}}`), 401, "no site's"},
		{"a control character", "POST", `{"type":"deposit.approved","data":{"transactionId":"sandbox\u0000-1"}}`, signed(site.WebhookSecret, `{"type":"deposit.approved","data":{"transactionId":"sandbox\u0000-1"}}`), 401, "no site's"},
		{"a GET", "GET", "", nil, 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, demoCallbackPath, strings.NewReader(tc.body))
			for k, v := range tc.header {
				req.Header[k] = v
			}
			w := httptest.NewRecorder()
			before := len(log.String())
			rcv.ServeHTTP(w, req)
			assert.Equal(t, tc.status, w.Code, w.Body.String())
			assert.Contains(t, log.String()[before:], tc.logged)
		})
	}
}

// TestDemo_callbacksReachTheReceiver: on a --demo gateway, a sandbox
// approval's callback, and a live demo site's, are delivered to the
// gateway's own receiver, which verifies and logs each: the operator
// listing shows them delivered (204). A callback it cannot verify is
// refused.
func TestDemo_callbacksReachTheReceiver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	_, out := startWith(t, addr, "--demo", "--data", t.TempDir(), "--log-level", "info")
	var exports []string
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		exports = regexp.MustCompile(` APP_KEY='([^']+)' SECRET='([^']+)' SANDBOX_APP_KEY='([^']+)' SANDBOX_SECRET='([^']+)'`).
			FindStringSubmatch(out.String())
		return exports != nil
	}, "the demo's variables printed")
	live := creds{ID: "demo", AppKey: exports[1], Secret: exports[2]}
	sb := creds{ID: "sandbox", AppKey: exports[3], Secret: exports[4]}

	deposit := func(c creds, pid string) string {
		t.Helper()
		e, err := merchant(c, "POST", base, "/v1/transactions/deposit", txForm("deposit", pid, 25000))
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, e.Code)
		return decodeTx(t, e).TransactionID
	}
	sbTx := deposit(sb, "try-1")
	e, err := merchant(sb, "POST", base, "/v1/sandbox/deposits/"+sbTx+"/approve", "amount=24000")
	require.NoError(t, err)
	require.Equal(t, 200, e.Status, e.Code)
	liveTx := deposit(live, "order-1")
	opsCall(t, base, "POST", "/ops/v1/deposits/"+liveTx+"/approve", nil, nil)

	for _, want := range []string{
		`msg="demo callback received" site=sandbox type=deposit.approved webhookId=`,
		` transactionId=` + sbTx + ` status=approved amount=24000`,
		`msg="demo callback received" site=demo type=deposit.approved webhookId=`,
		` transactionId=` + liveTx + ` status=approved amount=25000`,
	} {
		testkit.Eventually(t, testkit.WaitFor, func() bool { return strings.Contains(out.String(), want) }, "logged: %s", want)
	}
	for _, tx := range []string{sbTx, liveTx} {
		var page struct{ Items []deliveryItem }
		opsCall(t, base, "GET", "/ops/v1/callbacks?site="+string(ids.TxID(tx).Site()), nil, &page)
		require.Len(t, page.Items, 1)
		it := page.Items[0]
		assert.Equal(t, tx, it.TransactionID)
		assert.Equal(t, "delivered", it.Status)
		assert.Equal(t, 1, it.Attempts, "delivered at the first attempt")
		if assert.NotNil(t, it.LastStatusCode) {
			assert.Equal(t, http.StatusNoContent, *it.LastStatusCode)
		}
	}

	// Signed with another secret: refused, and said so in the log.
	body := `{"type":"deposit.approved","data":{"transactionId":"` + sbTx + `","status":"approved","amount":1}}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	res, err := http.Post(base+"/demo/callbacks", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "unsigned")
	req, err := http.NewRequest("POST", base+"/demo/callbacks", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("webhook-id", "1-0")
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+client.WebhookSignature("whsec_Zm9yZ2Vk", "1-0", ts, []byte(body)))
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "signed with another secret")
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		return strings.Contains(out.String(), `msg="demo callback refused" webhookId=1-0 status=401`)
	}, "the refusal logged")
}

// TestDemoReceiver_onlyWithDemo: without --demo the receiver's path is
// no endpoint.
func TestDemoReceiver_onlyWithDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	addr := testkit.FreeAddr(t)
	startWith(t, addr, "--data", t.TempDir())
	e, err := call("POST", "http://"+addr+"/demo/callbacks", map[string]string{"Content-Type": "application/json"}, "{}")
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, e.Status)
	assert.Equal(t, "not_found", e.Code)
}
