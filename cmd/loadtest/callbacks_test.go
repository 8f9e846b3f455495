package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func testSecretText() string { return "whsec_" + base64.StdEncoding.EncodeToString(testKey) }

// signed returns the headers the Standard Webhooks library puts on body.
func signed(t *testing.T, id string, body []byte) http.Header {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(testSecretText())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", sig)
	return h
}

func TestVerifyWebhook(t *testing.T) {
	key, err := webhookKey(testSecretText())
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"deposit.approved"}`)
	h := signed(t, "7-0", body)
	id, ts, sig := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	cases := []struct {
		name string
		key  []byte
		id   string
		sigs string
		body []byte
		want bool
	}{
		{"as signed", key, id, sig, body, true},
		{"second of two signatures", key, id, "v1,AAAA " + sig, body, true},
		{"tampered body", key, id, sig, []byte(`{"type":"deposit.rejected"}`), false},
		{"other id", key, "8-0", sig, body, false},
		{"other key", []byte("another key of thirty-two bytes!"), id, sig, body, false},
		{"no v1 prefix", key, id, sig[3:], body, false},
		{"no signature", key, id, "", body, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := verifyWebhook(c.key, c.id, ts, c.sigs, c.body); got != c.want {
				t.Fatalf("verify = %v, want %v", got, c.want)
			}
		})
	}
	if _, err := webhookKey("plain"); err == nil {
		t.Fatal("a secret without whsec_ must be refused")
	}
}

// TestReceiverChecksCallbacks: the receiver counts what arrives per
// transaction, repeats of a webhook-id, and every callback that is badly
// signed, not an approval, for a transaction not awaited, or at another
// site's callbackUrl.
func TestReceiverChecksCallbacks(t *testing.T) {
	rcv, err := startReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.close()
	rcv.keys = [][]byte{testKey, testKey}
	done := rcv.await([]string{"tx1", "tx2", "tx3"}, []int{0, 0, 1})
	post := func(path, id string, typ, status, prev, tx string, tamper bool) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"type": typ, "timestamp": "2026-01-01T00:00:00Z",
			"data": map[string]any{"transactionId": tx, "status": status, "previousStatus": prev}})
		h := signed(t, id, body)
		if tamper {
			body = append(body, ' ')
		}
		req, _ := http.NewRequest(http.MethodPost, rcv.base+path, bytes.NewReader(body))
		req.Header = h
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("receiver answered %d", res.StatusCode)
		}
	}
	post("/s/0", "1-0", "deposit.approved", "approved", "pending", "tx1", false)
	post("/s/0", "1-0", "deposit.approved", "approved", "pending", "tx1", false) // a repeat
	select {
	case <-done:
		t.Fatal("done before tx2 arrived")
	default:
	}
	if n, sample := rcv.missing(); n != 2 || !slices.Contains(sample, "tx2") || !slices.Contains(sample, "tx3") {
		t.Fatalf("missing = %d %v", n, sample)
	}
	post("/s/0", "2-0", "deposit.approved", "approved", "pending", "tx2", false)
	post("/s/1", "3-0", "deposit.approved", "approved", "pending", "tx3", false)
	<-done
	if rcv.fails.has(catCallbacks) {
		t.Fatalf("good callbacks failed: %v", rcv.fails.lines())
	}
	if d := rcv.duplicates(); d != 1 {
		t.Fatalf("duplicates = %d, want 1", d)
	}
	// Later callbacks of awaited transactions: only their own faults count.
	post("/s/0", "4-0", "deposit.approved", "approved", "pending", "tx1", true)
	post("/s/0", "5-0", "deposit.rejected", "rejected", "pending", "tx2", false)
	post("/s/9", "6-0", "deposit.approved", "approved", "pending", "tx1", false)
	if got := rcv.fails.count[catCallbacks]; got != 3 {
		t.Fatalf("failures = %d (%v), want 3: bad signature, wrong type, unknown site", got, rcv.fails.lines())
	}
	// A well-formed callback for a transaction nobody approved, and the
	// first callback of an awaited one at another site's URL.
	rcv.await([]string{"tx7"}, []int{1})
	post("/s/0", "7-0", "deposit.approved", "approved", "pending", "tx-stray", false)
	post("/s/0", "8-0", "deposit.approved", "approved", "pending", "tx7", false)
	if got := rcv.fails.count[catCallbacks]; got != 5 {
		t.Fatalf("failures = %d (%v), want 5: also a stray transaction and a wrong site", got, rcv.fails.lines())
	}
	if got, conns := rcv.total.Load(), rcv.conns.Load(); got != 9 || conns < 1 || conns > 9 {
		t.Fatalf("total = %d, want 9; connections = %d, want 1 to 9", got, conns)
	}
}

// TestLagFigures: lag from the answer and from the send, as nearest-rank
// percentiles over the transactions of the phase.
func TestLagFigures(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var txs []string
	var sent, answered []time.Time
	arrived := map[string]time.Time{}
	// tx i: sent at t0, answered after 10 ms, callback i+1 ms after the answer.
	for i := range 100 {
		tx := "tx" + strconv.Itoa(i)
		txs = append(txs, tx)
		sent = append(sent, t0)
		answered = append(answered, t0.Add(10*time.Millisecond))
		arrived[tx] = t0.Add(time.Duration(11+i) * time.Millisecond)
	}
	var r CallbackReport
	lagFigures(&r, txs, arrived, sent, answered)
	want := CallbackReport{LagP50Ms: 50, LagP90Ms: 90, LagP99Ms: 99, LagMaxMs: 100,
		SentP50Ms: 60, SentP90Ms: 100, SentP99Ms: 109, SentMaxMs: 110}
	if r != want {
		t.Fatalf("lag figures\n got %+v\nwant %+v", r, want)
	}
	// A callback before the approval's answer is a negative lag, not lost.
	arrived["tx0"] = t0.Add(5 * time.Millisecond)
	lagFigures(&r, txs[:1], arrived, sent, answered)
	if r.LagMaxMs != -5 || r.SentMaxMs != 5 {
		t.Fatalf("early callback: lag %v from send %v", r.LagMaxMs, r.SentMaxMs)
	}
}

func TestMedianCallbacks(t *testing.T) {
	m := medianCallbacks([]*CallbackReport{
		{Dispatcher: "gateway", N: 10, DeliveriesPerS: 3000, LagP99Ms: 40, Duplicates: 0},
		{Dispatcher: "gateway", N: 10, DeliveriesPerS: 1000, LagP99Ms: 90, Duplicates: 2},
		{Dispatcher: "gateway", N: 10, DeliveriesPerS: 2000, LagP99Ms: 50, Duplicates: 1},
	})
	if m.DeliveriesPerS != 2000 || m.LagP99Ms != 50 || m.Duplicates != 1 || m.N != 10 {
		t.Fatalf("medians %+v", m)
	}
	if medianCallbacks(nil) != nil {
		t.Fatal("no runs, no medians")
	}
}

// TestCallbacksModeAgainstTheGateway runs the mode end to end against the
// real gateway binary, in both dispatcher placements.
func TestCallbacksModeAgainstTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	bin := buildGateway(t)
	for _, disp := range []string{"gateway", "standalone"} {
		t.Run(disp, func(t *testing.T) {
			o := testOptions("callbacks")
			o.n, o.gateway, o.dispatcher = 200, bin, disp
			rr, err := runOnce(context.Background(), o, t.TempDir(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(rr.Failures) != 0 {
				t.Fatalf("failures: %v", rr.Failures)
			}
			r := rr.Callbacks
			if r == nil || r.N != 200 || r.DeliveriesPerS <= 0 || r.LagP99Ms < r.LagP50Ms || r.Dispatcher != disp || r.DrainConns < 1 || r.LagConns < 0 {
				t.Fatalf("report %s", fmt.Sprintf("%+v", r))
			}
		})
	}
}
