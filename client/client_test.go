package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/client"
	"github.com/iqdgateway/gateway/internal/gatewaytest"
)

func deposit(pid, user string, amount int64) client.DepositRequest {
	return client.DepositRequest{BankID: "ZAINCASH", ProcessID: pid, Amount: amount, UserID: user, UserName: user + "_n", Name: "Ali Kareem"}
}

// TestClient runs every call against a real gateway: the records, the
// repeats, and every refusal as a typed error.
func TestClient(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(map[string]any{"hostedPage": true}, 100_000)
	c := client.New(g.URL, site.AppKey, site.Secret)
	ctx := context.Background()

	d, err := c.CreateDeposit(ctx, deposit("c-1", "u1", 25000))
	require.NoError(t, err)
	assert.Equal(t, client.TypeDeposit, d.Type)
	assert.Equal(t, client.StatusPending, d.Status)
	assert.Equal(t, int64(25000), d.Amount)
	assert.NotNil(t, d.URL)
	assert.False(t, d.Final())
	again, err := c.CreateDeposit(ctx, deposit("c-1", "u1", 25000))
	require.NoError(t, err)
	assert.Equal(t, d.TransactionID, again.TransactionID, "a repeat returns the same transaction")
	pending, err := c.CreateDeposit(ctx, deposit("c-2", "u1", 25000))
	require.NoError(t, err)
	assert.True(t, pending.AlreadyPending)

	byID, err := c.Transaction(ctx, d.TransactionID)
	require.NoError(t, err)
	assert.Equal(t, d.ProcessID, byID.ProcessID)
	byPid, err := c.TransactionByProcessID(ctx, "c-1")
	require.NoError(t, err)
	assert.Equal(t, d.TransactionID, byPid.TransactionID)
	g.Approve(d.TransactionID, 24000)
	byID, err = c.Transaction(ctx, d.TransactionID)
	require.NoError(t, err)
	assert.Equal(t, client.StatusApproved, byID.Status)
	assert.Equal(t, int64(24000), byID.Amount, "the hash is checked on the approved amount")

	w, err := c.CreateWithdrawal(ctx, client.WithdrawalRequest{BankID: "ZAINCASH", ProcessID: "cw-1", Amount: 10000,
		UserID: "u9", UserName: "u9", Name: "Sara", AccountName: "Sara", IBAN: "07712345678"})
	require.NoError(t, err)
	assert.Equal(t, client.TypeWithdrawal, w.Type)
	assert.Equal(t, "07712345678", w.IBAN)
	b, err := c.Balance(ctx)
	require.NoError(t, err)
	assert.Equal(t, client.Balance{Balance: 124000, PendingWithdrawals: 10000, Available: 114000, Currency: "IQD"}, *b)
	methods, err := c.Banks(ctx, "deposit", "ar")
	require.NoError(t, err)
	require.Len(t, methods, 1)
	assert.Equal(t, "ZAINCASH ar", methods[0].Name)

	refusals := []struct {
		name  string
		call  func() error
		code  string
		field string
	}{
		{"unknown method", func() error {
			_, err := c.CreateDeposit(ctx, client.DepositRequest{BankID: "NOPE", ProcessID: "x", Amount: 5000, UserID: "u", UserName: "u", Name: "n"})
			return err
		}, "unknown_bank", "bankId"},
		{"out of range", func() error { _, err := c.CreateDeposit(ctx, deposit("c-3", "u3", 5)); return err }, "amount_out_of_range", "amount"},
		{"processId reused", func() error { _, err := c.CreateDeposit(ctx, deposit("c-1", "u1", 99000)); return err }, "process_id_conflict", "processId"},
		{"treasury", func() error {
			_, err := c.CreateWithdrawal(ctx, client.WithdrawalRequest{BankID: "ZAINCASH", ProcessID: "cw-2", Amount: 900000,
				UserID: "u9", UserName: "u9", Name: "Sara", AccountName: "Sara", IBAN: "07712345678"})
			return err
		}, "insufficient_site_balance", "amount"},
		{"bad identifier", func() error {
			_, err := c.CreateWithdrawal(ctx, client.WithdrawalRequest{BankID: "ZAINCASH", ProcessID: "cw-3", Amount: 1000,
				UserID: "u9", UserName: "u9", Name: "Sara", AccountName: "Sara", IBAN: "12"})
			return err
		}, "invalid_identifier", "iban"},
		{"no such transaction", func() error { _, err := c.Transaction(ctx, site.ID+"-999"); return err }, "not_found", ""},
		{"no such processId", func() error { _, err := c.TransactionByProcessID(ctx, "nope"); return err }, "not_found", ""},
		{"wrong secret", func() error { _, err := client.New(g.URL, site.AppKey, "wrong").Balance(ctx); return err }, "invalid_signature", "sign"},
		{"unknown appKey", func() error { _, err := client.New(g.URL, "ak_nope", site.Secret).Balance(ctx); return err }, "unknown_app_key", "appKey"},
		{"bad type", func() error { _, err := c.Banks(ctx, "sideways", ""); return err }, "invalid_request", "type"},
		{"outside the allowlist", func() error {
			walled := g.NewSite(map[string]any{"ipAllowlist": []string{"203.0.113.0/24"}}, 0)
			_, err := client.New(g.URL, walled.AppKey, walled.Secret).Balance(ctx)
			return err
		}, "not_authorized", ""},
		{"rate limited", func() error {
			limited := g.NewSite(map[string]any{"rateLimit": 1}, 0)
			lc := client.New(g.URL, limited.AppKey, limited.Secret, client.WithRetries(1, 0))
			var err error
			for range 3 { // a burst of 2
				_, err = lc.Balance(ctx)
			}
			return err
		}, "rate_limited", ""},
		{"too large", func() error {
			r := deposit("c-9", "u9", 5000)
			r.SenderName = strings.Repeat("x", 17<<10)
			_, err := c.CreateDeposit(ctx, r)
			return err
		}, "body_too_large", ""},
		{"a sandbox call on a live site", func() error { _, err := c.Sandbox(ctx, client.SandboxExpire, d.TransactionID, nil); return err }, "forbidden", ""},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			err := r.call()
			var e *client.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, r.code, e.Code)
			assert.Equal(t, r.code, client.Code(err))
			assert.Equal(t, r.field, e.Field)
			assert.NotEmpty(t, e.Message)
			assert.NotEmpty(t, e.RequestID)
			assert.Equal(t, "docs/errors.md#"+r.code, e.DocURL)
			assert.Equal(t, g.URL+"/docs/errors#"+r.code, e.DocLink)
			assert.ErrorIs(t, err, &client.Error{Code: r.code})
			assert.NotErrorIs(t, err, &client.Error{Code: "something_else"})
		})
	}
}

// A creation whose answer is lost, or refused as unavailable, is sent
// again with the same processId: one transaction, whatever happened.
func TestClient_retries(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(nil, 0)
	target, err := url.Parse(g.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var n atomic.Int32
	var plan []string // what the proxy does to each request, in turn
	var mu sync.Mutex
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		mu.Lock()
		step := "pass"
		if len(plan) > 0 {
			step, plan = plan[0], plan[1:]
		}
		mu.Unlock()
		switch step {
		case "unavailable":
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"data":null,"status":503,"code":"unavailable","message":"try again","requestId":"r1"}`)
		case "lose the answer":
			// The gateway stores it; the client never hears.
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			conn, _, err := w.(http.Hijacker).Hijack()
			require.NoError(t, err)
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(front.Close)
	c := client.New(front.URL, site.AppKey, site.Secret, client.WithRetries(4, time.Millisecond))
	ctx := context.Background()

	mu.Lock()
	plan = []string{"unavailable", "lose the answer", "pass"}
	mu.Unlock()
	d, err := c.CreateDeposit(ctx, deposit("r-1", "u1", 25000))
	require.NoError(t, err)
	assert.Equal(t, int32(3), n.Load())
	assert.False(t, d.AlreadyPending)
	var list struct {
		Items []struct {
			TransactionID string `json:"transactionId"`
		} `json:"items"`
	}
	g.Ops("GET", "/ops/v1/transactions?processId=r-1", nil, &list)
	require.Len(t, list.Items, 1)
	assert.Equal(t, d.TransactionID, list.Items[0].TransactionID)

	// Out of tries: the last refusal is the answer.
	n.Store(0)
	mu.Lock()
	plan = []string{"unavailable", "unavailable", "unavailable", "unavailable"}
	mu.Unlock()
	_, err = c.CreateDeposit(ctx, deposit("r-2", "u2", 25000))
	assert.Equal(t, "unavailable", client.Code(err))
	assert.Equal(t, int32(4), n.Load())

	// A refusal of the request itself is not repeated.
	n.Store(0)
	_, err = c.CreateDeposit(ctx, deposit("r-3", "u3", 5))
	assert.Equal(t, "amount_out_of_range", client.Code(err))
	assert.Equal(t, int32(1), n.Load())

	// Nor is anything once the context ends.
	n.Store(0)
	mu.Lock()
	plan = []string{"unavailable", "unavailable"}
	mu.Unlock()
	cctx, cancel := context.WithCancel(ctx)
	slow := client.New(front.URL, site.AppKey, site.Secret, client.WithRetries(4, time.Hour))
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err = slow.CreateDeposit(cctx, deposit("r-4", "u4", 25000))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int32(1), n.Load())
}

// An answer that is not the gateway's envelope (a proxy's 502 page after
// the gateway stored the creation, a 200 cut short, an envelope whose data
// does not decode, a proxy's own JSON) says nothing of the outcome: it is a
// *NetworkError, never the gateway's refusal, and a creation is repeated
// with its processId, which finds the one transaction stored.
func TestClient_unreadableAnswers(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(nil, 0)
	target, err := url.Parse(g.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mode atomic.Value
	mode.Store("")
	var n atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := mode.Load().(string)
		if n.Add(1) > 1 && !strings.HasPrefix(m, "always ") {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r) // the gateway carries it out
		switch strings.TrimPrefix(m, "always ") {
		case "502 page":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		case "200 cut short":
			conn, bw, err := w.(http.Hijacker).Hijack()
			require.NoError(t, err)
			_, _ = bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
			_, _ = bw.Write(rec.Body.Bytes()[:20])
			_ = bw.Flush()
			_ = conn.Close()
		case "200 data that does not decode":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"data":"approved","status":200}`)
		case "502 proxy JSON":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `{"error":"upstream reset"}`)
		}
	}))
	t.Cleanup(front.Close)
	c := client.New(front.URL, site.AppKey, site.Secret, client.WithRetries(4, time.Millisecond))
	direct := client.New(g.URL, site.AppKey, site.Secret)
	ctx := context.Background()

	for i, m := range []string{"502 page", "200 cut short", "200 data that does not decode", "502 proxy JSON"} {
		t.Run(m, func(t *testing.T) {
			mode.Store(m)
			n.Store(0)
			pid := "un-" + strconv.Itoa(i)
			d, err := c.CreateDeposit(ctx, deposit(pid, "u"+strconv.Itoa(i), 25000))
			require.NoError(t, err)
			assert.Equal(t, int32(2), n.Load(), "tried again")
			stored, err := direct.TransactionByProcessID(ctx, pid)
			require.NoError(t, err)
			assert.Equal(t, stored.TransactionID, d.TransactionID, "the one stored")

			mode.Store("always " + m)
			_, err = c.Balance(ctx)
			var ne *client.NetworkError
			require.ErrorAs(t, err, &ne)
			assert.ErrorIs(t, err, client.ErrUnreadableAnswer)
			assert.NotEqual(t, 0, ne.Status)
			var e *client.Error
			assert.False(t, errors.As(err, &e), "not the gateway's refusal: %v", err)
			assert.Empty(t, client.Code(err))
		})
	}

	// Out of tries: the outcome is still unknown.
	mode.Store("always 502 page")
	n.Store(0)
	_, err = c.CreateDeposit(ctx, deposit("un-9", "u9", 25000))
	var ne *client.NetworkError
	require.ErrorAs(t, err, &ne)
	assert.ErrorIs(t, err, client.ErrUnreadableAnswer)
	assert.Equal(t, http.StatusBadGateway, ne.Status)
	assert.Equal(t, int32(4), n.Load())
	stored, err := direct.TransactionByProcessID(ctx, "un-9")
	require.NoError(t, err)
	assert.Equal(t, "un-9", stored.ProcessID, "stored once, though never read back")
}

// A record whose hash is not the site's is refused, with the record.
func TestClient_badHash(t *testing.T) {
	const secret = "s3cret"
	amount := int64(25000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := map[string]any{"transactionId": "s-1", "bankId": "b", "amount": amount, "type": "deposit", "status": "pending",
			"hash": client.Sign(secret, []byte("s-1b25000"))}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": rec, "status": 200})
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "ak", secret)
	_, err := c.Transaction(context.Background(), "s-1")
	require.NoError(t, err)
	amount = 99000 // the answer was changed on the way
	tx, err := c.Transaction(context.Background(), "s-1")
	assert.ErrorIs(t, err, client.ErrBadHash)
	require.NotNil(t, tx)
	_, err = client.New(srv.URL, "ak", "another").Transaction(context.Background(), "s-1")
	assert.ErrorIs(t, err, client.ErrBadHash)
}

// Callbacks from the real gateway pass VerifyWebhook and ParseCallback,
// and the Standard Webhooks library agrees.
func TestClient_callbacks(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	got := make(chan *client.Callback, 4)
	var site gatewaytest.Site
	var ready sync.WaitGroup
	ready.Add(1)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ready.Wait()
		body, _ := io.ReadAll(r.Body)
		wh, err := standardwebhooks.NewWebhook(site.WebhookSecret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err != nil {
			w.WriteHeader(400)
			return
		}
		cb, err := client.ParseCallback(site.WebhookSecret, site.Secret, r.Header, body, time.Now())
		if err != nil {
			w.WriteHeader(400)
			return
		}
		got <- cb
	}))
	t.Cleanup(rcv.Close)
	site = g.NewSite(map[string]any{"callbackUrl": rcv.URL + "/cb"}, 0)
	ready.Done()
	c := client.New(g.URL, site.AppKey, site.Secret)
	d, err := c.CreateDeposit(context.Background(), deposit("cb-1", "u1", 25000))
	require.NoError(t, err)
	g.Approve(d.TransactionID, 20000)
	select {
	case cb := <-got:
		assert.Equal(t, "deposit.approved", cb.Type)
		assert.Equal(t, d.TransactionID, cb.Data.TransactionID)
		assert.Equal(t, int64(20000), cb.Data.Amount)
		assert.Equal(t, client.StatusPending, cb.Data.PreviousStatus)
		assert.NotEmpty(t, cb.ID)
	case <-time.After(10 * time.Second):
		t.Fatal("no verified callback")
	}
}

func TestVerifyWebhook(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"type":"deposit.approved"}`)
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := "v1," + client.WebhookSignature(secret, "7-0", ts, body)
	hdr := func(id, ts, sig string) http.Header {
		h := http.Header{}
		for k, v := range map[string]string{"webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h
	}
	// The library and this package sign alike.
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	libSig, err := wh.Sign("7-0", now, body)
	require.NoError(t, err)
	assert.Equal(t, sig, libSig)

	tests := []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"valid", hdr("7-0", ts, sig), body, nil},
		{"during a rotation, the second one", hdr("7-0", ts, "v1,bm90IGl0 "+sig), body, nil},
		{"another body", hdr("7-0", ts, sig), []byte(`{}`), client.ErrWebhookSignature},
		{"another id", hdr("7-1", ts, sig), body, client.ErrWebhookSignature},
		{"another version", hdr("7-0", ts, "v2,"+sig[3:]), body, client.ErrWebhookSignature},
		{"old", hdr("7-0", strconv.FormatInt(now.Add(-6*time.Minute).Unix(), 10), sig), body, client.ErrWebhookTimestamp},
		{"future", hdr("7-0", strconv.FormatInt(now.Add(6*time.Minute).Unix(), 10), sig), body, client.ErrWebhookTimestamp},
		{"garbled timestamp", hdr("7-0", "soon", sig), body, client.ErrWebhookTimestamp},
		{"no signature", hdr("7-0", ts, ""), body, client.ErrWebhookHeaders},
		{"no id", hdr("", ts, sig), body, client.ErrWebhookHeaders},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := client.VerifyWebhook(secret, tc.h, tc.body, now)
			if tc.want == nil {
				assert.NoError(t, err)
			} else {
				assert.True(t, errors.Is(err, tc.want), "%v", err)
			}
		})
	}
}

// A sandbox site's merchant moves its own transactions; a live site's is
// refused.
func TestClient_sandbox(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	sb := g.NewSite(map[string]any{"sandbox": true}, 100_000)
	live := g.NewSite(nil, 0)
	ctx := context.Background()
	c := client.New(g.URL, sb.AppKey, sb.Secret)
	d, err := c.CreateDeposit(ctx, deposit("s-1", "u1", 25000))
	require.NoError(t, err)
	got, err := c.Sandbox(ctx, client.SandboxApprove, d.TransactionID, url.Values{"amount": {"24000"}})
	require.NoError(t, err)
	assert.Equal(t, client.StatusApproved, got.Status)
	assert.Equal(t, int64(24000), got.Amount)
	w, err := c.CreateWithdrawal(ctx, client.WithdrawalRequest{BankID: "ZAINCASH", ProcessID: "sw-1", Amount: 1000,
		UserID: "u9", UserName: "u9", Name: "Sara", AccountName: "Sara", IBAN: "07712345678"})
	require.NoError(t, err)
	for _, a := range []client.SandboxAction{client.SandboxProcess, client.SandboxPay} {
		_, err := c.Sandbox(ctx, a, w.TransactionID, nil)
		require.NoError(t, err, a.String())
	}
	_, err = c.Sandbox(ctx, client.SandboxPay, w.TransactionID, nil)
	assert.Equal(t, "invalid_transition", client.Code(err))
	// A plain string does not compile (TestClient_fromAnotherModule);
	// a conversion of a number that names no action is refused.
	_, err = c.Sandbox(ctx, client.SandboxAction(42), w.TransactionID, nil)
	assert.ErrorContains(t, err, "use one of the client.Sandbox constants")
	assert.Equal(t, "withdrawals/reject", client.SandboxRejectWithdrawal.String())

	lc := client.New(g.URL, live.AppKey, live.Secret)
	ld, err := lc.CreateDeposit(ctx, deposit("l-1", "u1", 25000))
	require.NoError(t, err)
	_, err = lc.Sandbox(ctx, client.SandboxApprove, ld.TransactionID, nil)
	assert.Equal(t, "forbidden", client.Code(err))
}
