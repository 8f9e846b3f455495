package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/internal/testkit"
)

// hook is one callback a receiver got.
type hook struct {
	id, tx string
	valid  bool
}

// hookReceiver is a merchant endpoint that verifies every callback with the
// Standard Webhooks library. onHook, when set, runs after the 200 has been
// sent and flushed.
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	wh     *standardwebhooks.Webhook
	got    []hook
	onHook func(h hook)
	// refuse makes it answer 500 (the callback is still counted).
	refuse atomic.Bool
	// hold, when set, keeps each answer until the channel closes or the
	// caller goes (the callback is counted first).
	hold atomic.Pointer[chan struct{}]
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var msg struct {
			Data struct {
				TransactionID string `json:"transactionId"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &msg)
		r.mu.Lock()
		h := hook{id: req.Header.Get("webhook-id"), tx: msg.Data.TransactionID,
			valid: r.wh != nil && r.wh.Verify(body, req.Header) == nil}
		r.got = append(r.got, h)
		on := r.onHook
		r.mu.Unlock()
		if hold := r.hold.Load(); hold != nil {
			select {
			case <-*hold:
			case <-req.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Length", "0")
		if r.refuse.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if on != nil {
			on(h)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) setSecret(t *testing.T, secret string) {
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	r.mu.Lock()
	r.wh = wh
	r.mu.Unlock()
}

func (r *hookReceiver) hooks() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hook(nil), r.got...)
}

func (r *hookReceiver) count(pred func(hook) bool) int {
	n := 0
	for _, h := range r.hooks() {
		if pred(h) {
			n++
		}
	}
	return n
}

// siteWithHooks creates a method, a site whose callbackUrl is rcv and n
// approved deposits; it returns the approved transaction ids.
func siteWithHooks(t *testing.T, base string, rcv *hookReceiver, n int) []string {
	opsCall(t, base, "POST", "/ops/v1/banks", map[string]any{"code": "ZAINCASH", "name": map[string]string{"en": "ZainCash"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 1_000_000, "deposit": true, "withdraw": true,
		"accounts": []map[string]string{{"accountName": "Store", "accountNumber": "07801234567"}}}, nil)
	var site struct {
		creds
		WebhookSecret string `json:"webhookSecret"`
	}
	opsCall(t, base, "POST", "/ops/v1/sites", map[string]any{"name": "Hooks", "callbackUrl": rcv.srv.URL + "/hook"}, &site)
	rcv.setSecret(t, site.WebhookSecret)
	var txs []string
	for i := 0; i < n; i++ {
		v := url.Values{"bankId": {"ZAINCASH"}, "processId": {"h-" + strconv.Itoa(i)}, "amount": {"5000"},
			"userId": {"u" + strconv.Itoa(i)}, "userName": {"u"}, "name": {"U"}}
		e, err := merchant(site.creds, "POST", base, "/v1/transactions/deposit", v.Encode())
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, e.Code)
		var rec struct {
			TransactionID string `json:"transactionId"`
		}
		require.NoError(t, json.Unmarshal(e.Data, &rec))
		opsCall(t, base, "POST", "/ops/v1/deposits/"+rec.TransactionID+"/approve", nil, nil)
		txs = append(txs, rec.TransactionID)
	}
	return txs
}

type deliveryItem struct {
	EventID        string `json:"eventId"`
	TransactionID  string `json:"transactionId"`
	Type           string `json:"type"`
	Status         string `json:"status"`
	Attempts       int    `json:"attempts"`
	LastStatusCode *int   `json:"lastStatusCode"`
	Resends        int    `json:"resends"`
}

// waitDelivered waits until GET /ops/v1/callbacks?status=delivered lists
// n deliveries, and returns them.
func waitDelivered(t *testing.T, base string, n int) []deliveryItem {
	var page struct {
		Items []deliveryItem `json:"items"`
	}
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		opsCall(t, base, "GET", "/ops/v1/callbacks?status=delivered", nil, &page)
		return len(page.Items) == n
	}, "%d deliveries listed", n)
	return page.Items
}

// TestCallbacks_deliveredByTheGateway: an approval through the running
// gateway reaches the site's callbackUrl, signed so that the Standard
// Webhooks library verifies it, and the operator listing shows it.
func TestCallbacks_deliveredByTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	rcv := newHookReceiver(t)
	addr := testkit.FreeAddr(t)
	startWith(t, addr, "--data", t.TempDir(), "--callback-allow-private")
	base := "http://" + addr
	txs := siteWithHooks(t, base, rcv, 2)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.hooks()) >= 2 }, "two callbacks")
	for _, h := range rcv.hooks() {
		assert.True(t, h.valid, "callback %s verifies", h.id)
	}
	items := waitDelivered(t, base, 2)
	for i, it := range items {
		assert.Equal(t, txs[i], it.TransactionID)
		assert.Equal(t, "deposit.approved", it.Type)
		assert.Equal(t, 1, it.Attempts)
		require.NotNil(t, it.LastStatusCode)
		assert.Equal(t, 200, *it.LastStatusCode)
	}
}

// startDispatcher runs 'gateway callbacks' against the NATS at natsAddr
// with the credential flags natsFlags.
func startDispatcher(t *testing.T, natsAddr string, natsFlags []string) *exec.Cmd {
	cmd, _ := spawn(t, append([]string{"callbacks", "--nats", "nats://" + natsAddr, "--http", "127.0.0.1:0", "--callback-allow-private",
		"--callback-ack-wait", "3s", "--callback-lease-ttl", "2s", "--log-level", "warn"}, natsFlags...)...)
	return cmd
}

// consumerState reads the callbacks consumer over the exposed NATS port.
func consumerState(t *testing.T, natsAddr string, auth nats.Option) *jetstream.ConsumerInfo {
	nc, err := nats.Connect("nats://"+natsAddr, auth)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, "LEDGER", "callbacks")
	require.NoError(t, err)
	info, err := c.Info(ctx)
	require.NoError(t, err)
	return info
}

// TestCallbacks_standaloneDispatcherKilledAfter2xx runs the dispatcher as
// its own process next to a gateway started with --callbacks=false, kills
// it with SIGKILL right after the merchant answered 2xx and before the
// dispatcher could acknowledge, and starts another: the callback is
// delivered again with the same webhook-id and none is lost. The gateway,
// which delivers nothing itself, lists the deliveries and forwards a
// resend to the dispatcher process.
func TestCallbacks_standaloneDispatcherKilledAfter2xx(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	natsFlags, auth := natsSeed(t)
	addr, natsAddr, _ := startOnOwnPorts(t, true, append([]string{"--data", t.TempDir(), "--callbacks=false"}, natsFlags...)...)
	base := "http://" + addr
	rcv := newHookReceiver(t)
	txs := siteWithHooks(t, base, rcv, 3)
	time.Sleep(300 * time.Millisecond)
	require.Empty(t, rcv.hooks(), "the gateway itself delivers nothing with --callbacks=false")

	first := startDispatcher(t, natsAddr, natsFlags)
	var killed atomic.Value
	rcv.mu.Lock()
	rcv.onHook = func(h hook) {
		if killed.CompareAndSwap(nil, h.id) {
			_ = first.Process.Kill()
		}
	}
	rcv.mu.Unlock()
	testkit.Eventually(t, testkit.WaitFor, func() bool { return killed.Load() != nil }, "first callback")
	rcv.mu.Lock()
	rcv.onHook = nil
	rcv.mu.Unlock()
	_ = first.Wait()
	id := killed.Load().(string)
	require.Equal(t, 1, rcv.count(func(h hook) bool { return h.id == id }))
	require.Positive(t, consumerState(t, natsAddr, auth).NumAckPending, "killed before its acknowledgement")

	startDispatcher(t, natsAddr, natsFlags)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return rcv.count(func(h hook) bool { return h.id == id }) == 2 },
		"the unacknowledged callback delivered again with the same webhook-id")
	for _, tx := range txs {
		testkit.Eventually(t, testkit.WaitFor, func() bool { return rcv.count(func(h hook) bool { return h.tx == tx }) >= 1 },
			"callback of %s", tx)
	}
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		info := consumerState(t, natsAddr, auth)
		return info.NumAckPending == 0 && info.NumPending == 0
	}, "every message acknowledged")
	for _, h := range rcv.hooks() {
		assert.True(t, h.valid, "callback %s verifies", h.id)
	}

	items := waitDelivered(t, base, 3) // the other process's deliveries, listed by the gateway
	var resent deliveryItem
	// The callback resent may be the one delivered twice already.
	sameID := func(h hook) bool { return h.id == items[2].EventID }
	before := rcv.count(sameID)
	opsCall(t, base, "POST", "/ops/v1/callbacks/"+items[2].EventID+"/resend", nil, &resent)
	assert.Equal(t, 1, resent.Resends)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return rcv.count(sameID) == before+1 },
		"resend forwarded to the dispatcher process")
}

// TestCallbacks_gracefulStopHandsBackAtOnce: a gateway on its embedded
// server stopped with SIGTERM while a callback waits for its retry hands
// that callback back so that its next start resumes it at once, not after
// --callback-ack-wait (here far longer than the test waits).
func TestCallbacks_gracefulStopHandsBackAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	rcv := newHookReceiver(t)
	rcv.refuse.Store(true)
	dir := t.TempDir()
	args := []string{"--data", dir, "--callback-allow-private", "--callback-ack-wait", "10m", "--callback-retry", "5s,5s"}
	addr := testkit.FreeAddr(t)
	cmd, out := startWith(t, addr, args...)
	txs := siteWithHooks(t, "http://"+addr, rcv, 1)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.hooks()) >= 1 }, "the first attempt, refused")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "gateway did not stop cleanly; log:\n%s", out.String())
	rcv.refuse.Store(false)
	before := rcv.hooks()
	require.Len(t, before, 1, "one attempt before the stop")

	startWith(t, testkit.FreeAddr(t), args...)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.hooks()) == 2 },
		"the retry made by the next start, well before the ack wait of 10m")
	got := rcv.hooks()[1]
	assert.Equal(t, before[0].id, got.id, "the same callback")
	assert.Equal(t, txs[0], got.tx)
	assert.True(t, got.valid)
}
