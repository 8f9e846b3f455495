package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/client"
	"github.com/iqdgateway/gateway/internal/gatewaytest"
)

// delivered is one callback a merchant's endpoint received.
type delivered struct {
	header http.Header
	body   []byte
}

// callbackEndpoint is a merchant's callback URL that hands over what it
// gets.
func callbackEndpoint(t *testing.T) (string, <-chan delivered) {
	t.Helper()
	got := make(chan delivered, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivered{r.Header.Clone(), b}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/cb", got
}

func nextDelivery(t *testing.T, got <-chan delivered) delivered {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("no callback came")
		return delivered{}
	}
}

// TestClient_secretRotation: through a rotation's overlap, a client still
// holding the old secret creates, looks up and verifies callbacks as
// before, and one given the new secret and the old verifies the same
// callbacks (docs/merchant-api.md "Response hash").
func TestClient_secretRotation(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	cbURL, got := callbackEndpoint(t)
	site := g.NewSite(map[string]any{"callbackUrl": cbURL}, 100_000)
	ctx := context.Background()
	old := client.New(g.URL, site.AppKey, site.Secret)
	d, err := old.CreateDeposit(ctx, deposit("rot-1", "u1", 25000))
	require.NoError(t, err)

	var rotated struct {
		Secret string `json:"secret"`
	}
	g.Ops("POST", "/ops/v1/sites/"+site.ID+"/secret", map[string]any{"overlapSeconds": 3600}, &rotated)
	require.NotEqual(t, site.Secret, rotated.Secret)
	updated := client.New(g.URL, site.AppKey, rotated.Secret, client.WithPreviousSecret(site.Secret))
	newOnly := client.New(g.URL, site.AppKey, rotated.Secret)

	for name, c := range map[string]*client.Client{"the old secret": old, "the new and the old": updated, "the new secret": newOnly} {
		_, err := c.Transaction(ctx, d.TransactionID)
		require.NoError(t, err, "a lookup with %s", name)
		_, err = c.TransactionByProcessID(ctx, "rot-1")
		require.NoError(t, err, "a lookup by processId with %s", name)
		again, err := c.CreateDeposit(ctx, deposit("rot-1", "u1", 25000))
		require.NoError(t, err, "a repeated creation with %s", name)
		assert.Equal(t, d.TransactionID, again.TransactionID)
	}
	_, err = old.CreateWithdrawal(ctx, client.WithdrawalRequest{BankID: "ZAINCASH", ProcessID: "rot-w", Amount: 1000,
		UserID: "u9", UserName: "u9", Name: "Sara", AccountName: "Sara", IBAN: "07712345678"})
	require.NoError(t, err, "a creation with the old secret")

	// A callback made during the overlap is hashed with the previous
	// secret: the client that has not taken the new one verifies it, so
	// does one given both; one given only the new secret cannot.
	g.Approve(d.TransactionID, 0)
	cb := nextDelivery(t, got)
	now := time.Now()
	for name, c := range map[string]*client.Client{"the old secret": old, "the new and the old": updated} {
		parsed, err := c.ParseCallback(site.WebhookSecret, cb.header, cb.body, now)
		require.NoError(t, err, "a callback checked with %s", name)
		assert.Equal(t, d.TransactionID, parsed.Data.TransactionID)
		assert.False(t, parsed.Test)
	}
	_, err = client.ParseCallback(site.WebhookSecret, site.Secret, cb.header, cb.body, now)
	require.NoError(t, err)
	_, err = newOnly.ParseCallback(site.WebhookSecret, cb.header, cb.body, now)
	assert.ErrorIs(t, err, client.ErrBadHash)
	var nilClient *client.Client
	_, err = nilClient.ParseCallback(site.WebhookSecret, cb.header, cb.body, now)
	require.NoError(t, err, "no client, no hash to check")
}

// rawData returns the data of a signed GET as the gateway wrote it.
func rawData(t *testing.T, base string, site gatewaytest.Site, path, query string) []byte {
	t.Helper()
	u := base + path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("appKey", site.AppKey)
	req.Header.Set("sign", client.Sign(site.Secret, []byte(query)))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var env struct{ Data json.RawMessage }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&env))
	return env.Data
}

// TestTransaction_JSONIsTheGateways: a record the client decoded encodes
// to exactly what the gateway sent, field for field and in its order, for
// every kind of record and for a callback's data: what the merchant CLI
// prints is what the API answers.
func TestTransaction_JSONIsTheGateways(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	cbURL, got := callbackEndpoint(t)
	live := g.NewSite(map[string]any{"callbackUrl": cbURL, "hostedPage": true}, 100_000)
	plain := g.NewSite(nil, 0)
	sandbox := g.NewSite(map[string]any{"sandbox": true}, 100_000)
	ctx := context.Background()
	type made struct {
		site gatewaytest.Site
		tx   *client.Transaction
	}
	var all []made
	for _, s := range []gatewaytest.Site{live, plain, sandbox} {
		c := client.New(g.URL, s.AppKey, s.Secret)
		d, err := c.CreateDeposit(ctx, deposit("js-d", "u1", 25000))
		require.NoError(t, err)
		withSender := deposit("js-s", "u2", 30000)
		withSender.SenderName, withSender.Lang = "Ali K", "ar"
		ds, err := c.CreateDeposit(ctx, withSender)
		require.NoError(t, err)
		pending, err := c.CreateDeposit(ctx, deposit("js-p", "u1", 25000))
		require.NoError(t, err)
		require.True(t, pending.AlreadyPending)
		all = append(all, made{s, d}, made{s, ds})
		if s != plain {
			w, err := c.CreateWithdrawal(ctx, client.WithdrawalRequest{BankID: "ZAINCASH", ProcessID: "js-w", Amount: 1000,
				UserID: "u9", UserName: "u9", Name: "Sara", AccountName: "Sara", IBAN: "07712345678"})
			require.NoError(t, err)
			all = append(all, made{s, w})
		}
	}
	for _, m := range all {
		want := rawData(t, g.URL, m.site, "/v1/transactions/"+m.tx.TransactionID, "")
		fresh, err := client.New(g.URL, m.site.AppKey, m.site.Secret).Transaction(ctx, m.tx.TransactionID)
		require.NoError(t, err)
		b, err := json.Marshal(fresh)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(b), "%s %s", m.tx.Type, m.tx.TransactionID)
	}
	// The answer's alreadyPending is in the JSON as the gateway gave it.
	b, err := json.Marshal(client.Transaction{Type: client.TypeDeposit})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"senderName":null`)
	assert.Contains(t, string(b), `"alreadyPending":false`)
	assert.NotContains(t, string(b), `"iban"`)

	g.Approve(all[0].tx.TransactionID, 24000)
	cb := nextDelivery(t, got)
	parsed, err := client.ParseCallback(live.WebhookSecret, live.Secret, cb.header, cb.body, time.Now())
	require.NoError(t, err)
	var body struct{ Data json.RawMessage }
	require.NoError(t, json.Unmarshal(cb.body, &body))
	b, err = json.Marshal(parsed.Data)
	require.NoError(t, err)
	var want bytes.Buffer
	require.NoError(t, json.Compact(&want, body.Data))
	assert.Equal(t, want.String(), string(b), "a callback's data, previousStatus included")
}

// TestCallback_testMarked: a sandbox test callback is told apart from a
// real one by Callback.Test, and leaves the status its type's real
// callbacks leave, whatever the transaction's own.
func TestCallback_testMarked(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	cbURL, got := callbackEndpoint(t)
	site := g.NewSite(map[string]any{"sandbox": true, "callbackUrl": cbURL}, 100_000)
	c := client.New(g.URL, site.AppKey, site.Secret)
	ctx := context.Background()
	d, err := c.CreateDeposit(ctx, deposit("tm-1", "u1", 25000))
	require.NoError(t, err)
	_, err = c.Sandbox(ctx, client.SandboxRejectDeposit, d.TransactionID, nil)
	require.NoError(t, err)
	_, err = c.SandboxCallback(ctx, d.TransactionID, "deposit.approved")
	require.NoError(t, err)
	for _, want := range []struct {
		typ  string
		test bool
	}{{"deposit.rejected", false}, {"deposit.approved", true}} {
		cb := nextDelivery(t, got)
		parsed, err := c.ParseCallback(site.WebhookSecret, cb.header, cb.body, time.Now())
		require.NoError(t, err)
		assert.Equal(t, want.typ, parsed.Type)
		assert.Equal(t, want.test, parsed.Test, want.typ)
		assert.Equal(t, client.StatusPending, parsed.Data.PreviousStatus, want.typ)
	}
}
