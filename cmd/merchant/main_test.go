package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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
	"github.com/iqdgateway/gateway/internal/testkit"
)

// cli runs the command with env and returns its exit code and output.
func cli(t *testing.T, env map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestMerchantCLI(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(nil, 100_000)
	env := map[string]string{"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": site.Secret}

	code, out, stderr := cli(t, env, "", "deposit", "-bank", "ZAINCASH", "-process-id", "m-1", "-amount", "25000",
		"-user-id", "u1", "-user-name", "ali_k", "-name", "Ali Kareem")
	require.Equal(t, 0, code, stderr)
	var d client.Transaction
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, "deposit", d.Type)
	assert.Equal(t, int64(25000), d.Amount)

	code, out, stderr = cli(t, env, "", "status", d.TransactionID)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"processId": "m-1"`)
	code, out, _ = cli(t, env, "", "status", "-process-id", "m-1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, d.TransactionID)

	code, out, stderr = cli(t, env, "", "withdraw", "-bank", "ZAINCASH", "-process-id", "mw-1", "-amount", "10000",
		"-user-id", "u2", "-user-name", "sara", "-name", "Sara", "-account-name", "Sara", "-iban", "07712345678")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"type": "withdrawal"`)

	code, out, _ = cli(t, env, "", "balance")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"available": 90000`)
	code, out, _ = cli(t, env, "", "banks", "-type", "deposit", "-lang", "ar")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"name": "ZAINCASH ar"`)

	// A live site cannot use the sandbox's actions.
	code, _, stderr = cli(t, env, "", "sandbox", "approve", d.TransactionID)
	require.Equal(t, 1, code)
	assert.Contains(t, stderr, "error: 403 forbidden")

	// The flags win over the environment.
	code, _, stderr = cli(t, env, "", "-secret", "wrong", "balance")
	require.Equal(t, 1, code)
	assert.Contains(t, stderr, "error: 401 invalid_signature")
	assert.Contains(t, stderr, "field:     sign")
	assert.Contains(t, stderr, "requestId: ")
	assert.Regexp(t, `see: +http://127\.0\.0\.1:[0-9]+/docs/errors#invalid_signature\n`, stderr, "an absolute link to open")

	code, _, stderr = cli(t, env, "", "deposit", "-bank", "NOPE", "-process-id", "m-2", "-amount", "25000",
		"-user-id", "u3", "-user-name", "x", "-name", "X")
	require.Equal(t, 1, code)
	assert.Contains(t, stderr, "unknown_bank")
	assert.Contains(t, stderr, "the enabled deposit methods are ZAINCASH")

	// sign prints what the gateway checks, byte for byte.
	code, out, _ = cli(t, map[string]string{"GATEWAY_SECRET": "demo-secret"}, "", "sign", "processId=order-1001")
	require.Equal(t, 0, code)
	assert.Equal(t, "KN/O3ldlAet0madn3cJXBj2KAW2W5CIelENAAvIYpJM=\n", out)
	code, out, _ = cli(t, map[string]string{"GATEWAY_SECRET": "demo-secret"}, "processId=order-1001", "sign", "-")
	require.Equal(t, 0, code)
	assert.Equal(t, "KN/O3ldlAet0madn3cJXBj2KAW2W5CIelENAAvIYpJM=\n", out)

	usage := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no command", env, nil, "usage: merchant"},
		{"unknown command", env, []string{"refund"}, `unknown command "refund"`},
		{"no configuration", nil, []string{"balance"}, "-url (GATEWAY_URL), -app-key (GATEWAY_APP_KEY), -secret (GATEWAY_SECRET) missing"},
		{"missing flags", env, []string{"deposit", "-bank", "ZAINCASH"}, "-process-id, -amount, -user-id, -user-name, -name missing"},
		{"status of nothing", env, []string{"status"}, "give a transactionId, or -process-id"},
		{"status of both", env, []string{"status", "-process-id", "x", "y"}, "give a transactionId, or -process-id"},
		{"bad amount", env, []string{"deposit", "-amount", "lots"}, "invalid value"},
		{"sign without secret", nil, []string{"sign", "x"}, "GATEWAY_SECRET) missing"},
		{"sign of nothing", env, []string{"sign"}, "give the body of a POST"},
		{"listen nowhere", env, []string{"listen"}, "-forward-to missing"},
		{"sandbox without action", env, []string{"sandbox"}, "give an action"},
		{"sandbox, unknown action", env, []string{"sandbox", "refund", "x"}, `unknown action "refund"`},
		{"sandbox without id", env, []string{"sandbox", "approve"}, "give the transactionId"},
		{"listen to a file", env, []string{"listen", "-forward-to", "file:///tmp/x"}, "must be an http or https URL"},
	}
	for _, u := range usage {
		t.Run(u.name, func(t *testing.T) {
			code, out, stderr := cli(t, u.env, "", u.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Contains(t, stderr, u.want)
		})
	}
}

// syncBuffer is a buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMerchantCLI_listen: callbacks of a sandbox site without a public URL,
// whose merchant approves and rejects its own deposits, reach a local
// receiver through `merchant listen`, signed as the gateway signs them
// (the Standard Webhooks library verifies them), in order, once each.
// TestMerchantCLI_sandbox: a sandbox site's merchant moves its own
// transactions from the terminal.
func TestMerchantCLI_sandbox(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	sb := g.NewSite(map[string]any{"sandbox": true}, 0)
	env := map[string]string{"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": sb.AppKey, "GATEWAY_SECRET": sb.Secret}
	code, out, stderr := cli(t, env, "", "deposit", "-bank", "ZAINCASH", "-process-id", "s-1", "-amount", "25000",
		"-user-id", "u1", "-user-name", "ali_k", "-name", "Ali Kareem")
	require.Equal(t, 0, code, stderr)
	var d client.Transaction
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	code, out, stderr = cli(t, env, "", "sandbox", "approve", "-amount", "24000", d.TransactionID)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"status": "approved"`)
	assert.Contains(t, out, `"amount": 24000`)
	code, _, stderr = cli(t, env, "", "sandbox", "expire", d.TransactionID)
	require.Equal(t, 1, code)
	assert.Contains(t, stderr, "invalid_transition")
	code, out, stderr = cli(t, env, "", "sandbox", "callback", "-type", "deposit.rejected", d.TransactionID)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"status": "approved"`, "a test changes nothing")
	code, _, stderr = cli(t, env, "", "sandbox", "callback", "-type", "withdrawal.paid", d.TransactionID)
	require.Equal(t, 1, code)
	assert.Contains(t, stderr, "field:     type")
}

func TestMerchantCLI_listen(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(map[string]any{"sandbox": true}, 100_000) // no callbackUrl
	type got struct{ id, typ, tx string }
	var mu sync.Mutex
	var received []got
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh, err := standardwebhooks.NewWebhook(site.WebhookSecret)
		require.NoError(t, err)
		if err := wh.Verify(body, r.Header); err != nil {
			w.WriteHeader(400)
			return
		}
		cb, err := client.ParseCallback(site.WebhookSecret, site.Secret, r.Header, body, time.Now())
		if err != nil {
			w.WriteHeader(422)
			return
		}
		mu.Lock()
		received = append(received, got{cb.ID, cb.Type, cb.Data.TransactionID})
		mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(rcv.Close)

	// Start after the site's creation, so that nothing is missed however
	// long the stream takes to open.
	var history struct {
		Items []struct{ Seq uint64 } `json:"items"`
	}
	g.Ops("GET", "/ops/v1/sites/"+site.ID+"/events", nil, &history)
	after := fmt.Sprintf("%d-0", history.Items[0].Seq)
	env := map[string]string{"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": site.Secret}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"listen", "-forward-to", rcv.URL + "/callbacks", "-after", after}, strings.NewReader(""), &out, &errb,
			func(k string) string { return env[k] })
	}()

	c := client.New(g.URL, site.AppKey, site.Secret)
	d1, err := c.CreateDeposit(ctx, deposit("l-1", "u1", 25000))
	require.NoError(t, err)
	d2, err := c.CreateDeposit(ctx, deposit("l-2", "u2", 30000))
	require.NoError(t, err)
	// The merchant settles its sandbox deposits itself, from the terminal.
	for _, args := range [][]string{{"sandbox", "approve", "-amount", "24000", d1.TransactionID}, {"sandbox", "reject", d2.TransactionID}} {
		code, _, stderr := cli(t, env, "", args...)
		require.Equal(t, 0, code, stderr)
	}
	want := []got{{"", "deposit.approved", d1.TransactionID}, {"", "deposit.rejected", d2.TransactionID}}
	testkit.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received) >= len(want)
	}, "the callbacks through listen")
	time.Sleep(700 * time.Millisecond) // a duplicate would come within the stream's poll
	cancel()
	require.Equal(t, 0, <-done, errb.String())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, received, 2, "once each")
	for i, w := range want {
		assert.Equal(t, w.typ, received[i].typ)
		assert.Equal(t, w.tx, received[i].tx)
		assert.NotEmpty(t, received[i].id)
	}
	assert.Contains(t, out.String(), "Ready: forwarding the site's callbacks to "+rcv.URL+"/callbacks")
	assert.Contains(t, out.String(), "deposit.approved")
	assert.Contains(t, out.String(), "-> 204")
}

// TestMerchantCLI_listenReadyOnceConnected: listen says it is ready only
// once the gateway's stream has told its position, and from then on a
// callback is forwarded though listen started "from now on".
func TestMerchantCLI_listenReadyOnceConnected(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(map[string]any{"sandbox": true}, 0)
	target, err := url.Parse(g.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	arrived, pass := make(chan struct{}), make(chan struct{})
	var once sync.Once
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		select {
		case <-pass:
		case <-r.Context().Done():
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	forwarded := make(chan string, 4)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cb, err := client.ParseCallback(site.WebhookSecret, site.Secret, r.Header, body, time.Now())
		if err != nil {
			w.WriteHeader(422)
			return
		}
		forwarded <- cb.Data.TransactionID
		w.WriteHeader(204)
	}))
	t.Cleanup(rcv.Close)

	env := map[string]string{"GATEWAY_URL": front.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": site.Secret}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"listen", "-forward-to", rcv.URL + "/callbacks"}, strings.NewReader(""), &out, &errb,
			func(k string) string { return env[k] })
	}()
	select {
	case <-arrived:
	case <-time.After(testkit.WaitFor):
		t.Fatal("listen did not connect")
	}
	assert.NotContains(t, out.String(), "Ready", "ready while its stream is not open")
	close(pass)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return strings.Contains(out.String(), "Ready:") }, "listen is ready")

	c := client.New(g.URL, site.AppKey, site.Secret)
	d, err := c.CreateDeposit(ctx, deposit("r-1", "u1", 25000))
	require.NoError(t, err)
	_, err = c.Sandbox(ctx, client.SandboxApprove, d.TransactionID, nil)
	require.NoError(t, err)
	select {
	case tx := <-forwarded:
		assert.Equal(t, d.TransactionID, tx)
	case <-time.After(testkit.WaitFor):
		t.Fatalf("the approval was not forwarded; listen wrote: %s %s", out.String(), errb.String())
	}
	cancel()
	require.Equal(t, 0, <-done, errb.String())
}

func deposit(pid, user string, amount int64) client.DepositRequest {
	return client.DepositRequest{BankID: "ZAINCASH", ProcessID: pid, Amount: amount, UserID: user, UserName: user, Name: "Ali Kareem"}
}

// A creation whose outcome is unknown (no answer, or a proxy's page
// instead of the gateway's) exits with 3 and says to run it again, apart
// from a refusal (1).
func TestMerchantCLI_unknownOutcome(t *testing.T) {
	for _, c := range []struct {
		name        string
		status      int
		contentType string
		body        string
		want        int
	}{
		{"a proxy's page", http.StatusBadGateway, "text/html", "<html><body>502 Bad Gateway</body></html>", 3},
		{"the gateway's outcome_unknown", http.StatusGatewayTimeout, "application/json",
			`{"data":null,"status":504,"code":"outcome_unknown","message":"maybe recorded","requestId":"r1"}`, 3},
		{"a refusal", http.StatusConflict, "application/json",
			`{"data":null,"status":409,"code":"process_id_conflict","message":"used","requestId":"r2"}`, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.contentType)
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			t.Cleanup(gw.Close)
			env := map[string]string{"GATEWAY_URL": gw.URL, "GATEWAY_APP_KEY": "ak_x", "GATEWAY_SECRET": "s3cret"}
			code, _, stderr := cli(t, env, "", "deposit", "-bank", "ZAINCASH", "-process-id", "u-1", "-amount", "25000",
				"-user-id", "u1", "-user-name", "ali_k", "-name", "Ali Kareem")
			assert.Equal(t, c.want, code, stderr)
			if c.want == 3 {
				assert.Contains(t, stderr, "the outcome is unknown")
				assert.Contains(t, stderr, "-process-id")
			} else {
				assert.NotContains(t, stderr, "the outcome is unknown")
			}
		})
	}
}

// TestMerchantCLI_listenRetries: a callback the local URL cannot take at
// once (a local server restarting answers 503) is forwarded again, and
// taken once; one it refuses (4xx) is not asked again.
func TestMerchantCLI_listenRetries(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(map[string]any{"sandbox": true}, 100_000)
	var calls atomic.Int32
	var mu sync.Mutex
	answers := map[string][]int{} // per webhook-id, what the local URL answered
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("webhook-id")
		mu.Lock()
		defer mu.Unlock()
		code := 204
		switch {
		case strings.Contains(r.URL.RawQuery, "refuse"):
			code = 422
		case calls.Add(1) == 1:
			code = 503
		}
		answers[id] = append(answers[id], code)
		w.WriteHeader(code)
	}))
	t.Cleanup(rcv.Close)
	env := map[string]string{"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": site.Secret}
	c := client.New(g.URL, site.AppKey, site.Secret)
	for _, tc := range []struct {
		name, query string
		want        []int
	}{
		{"503, then taken", "", []int{503, 204}},
		{"refused: not asked again", "?refuse", []int{422}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			answers = map[string][]int{}
			mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errb syncBuffer
			done := make(chan int)
			go func() {
				done <- run(ctx, []string{"listen", "-forward-to", rcv.URL + "/callbacks" + tc.query}, strings.NewReader(""), &out, &errb,
					func(k string) string { return env[k] })
			}()
			testkit.Eventually(t, testkit.WaitFor, func() bool { return strings.Contains(out.String(), "Ready:") }, "listen is ready")
			d, err := c.CreateDeposit(ctx, deposit("lr-"+tc.name[:3], "u1", 25000))
			require.NoError(t, err)
			code, _, stderr := cli(t, env, "", "sandbox", "approve", d.TransactionID)
			require.Equal(t, 0, code, stderr)
			got := func() [][]int {
				mu.Lock()
				defer mu.Unlock()
				var out [][]int
				for _, a := range answers {
					out = append(out, a)
				}
				return out
			}
			testkit.Eventually(t, testkit.WaitFor, func() bool {
				g := got()
				return len(g) == 1 && len(g[0]) >= len(tc.want)
			}, "the callback forwarded as %v", tc.want)
			time.Sleep(1500 * time.Millisecond) // a further attempt would come within the first pause
			cancel()
			require.Equal(t, 0, <-done, errb.String())
			assert.Equal(t, [][]int{tc.want}, got())
		})
	}
}

// TestMerchantCLI_secretRotation: through a rotation's overlap the CLI
// with the old secret creates and looks up as before; with the new secret
// and -previous-secret too. An answer whose hash matches neither prints
// the record and exits 4, never as a refusal (1).
func TestMerchantCLI_secretRotation(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(nil, 100_000)
	var rotated struct {
		Secret string `json:"secret"`
	}
	g.Ops("POST", "/ops/v1/sites/"+site.ID+"/secret", map[string]any{"overlapSeconds": 3600}, &rotated)
	for name, env := range map[string]map[string]string{
		"old":          {"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": site.Secret},
		"new":          {"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": rotated.Secret},
		"new and old":  {"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": rotated.Secret, "GATEWAY_PREVIOUS_SECRET": site.Secret},
		"flag and old": {"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": site.Secret, "GATEWAY_PREVIOUS_SECRET": "unused"},
	} {
		pid := "rot-" + strings.ReplaceAll(name, " ", "-")
		code, out, stderr := cli(t, env, "", "deposit", "-bank", "ZAINCASH", "-process-id", pid, "-amount", "25000",
			"-user-id", pid, "-user-name", "ali_k", "-name", "Ali Kareem")
		require.Equal(t, 0, code, "%s: %s", name, stderr)
		var d client.Transaction
		require.NoError(t, json.Unmarshal([]byte(out), &d))
		code, _, stderr = cli(t, env, "", "status", d.TransactionID)
		require.Equal(t, 0, code, "%s: %s", name, stderr)
	}

	// A gateway whose answer's hash is made with another secret.
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":{"transactionId":"s-1","bankId":"b","amount":25000,"type":"deposit","status":"pending","hash":"`+
			client.Sign("another", []byte("s-1b25000"))+`"},"status":200,"requestId":"r1"}`)
	}))
	t.Cleanup(fake.Close)
	env := map[string]string{"GATEWAY_URL": fake.URL, "GATEWAY_APP_KEY": "ak_x", "GATEWAY_SECRET": "s3cret"}
	code, out, stderr := cli(t, env, "", "deposit", "-bank", "ZAINCASH", "-process-id", "h-1", "-amount", "25000",
		"-user-id", "u1", "-user-name", "ali_k", "-name", "Ali Kareem")
	assert.Equal(t, 4, code)
	assert.Contains(t, out, `"transactionId": "s-1"`, "the record is printed")
	assert.Contains(t, stderr, "warning: ")
	assert.Contains(t, stderr, "-previous-secret")
	assert.NotContains(t, stderr, "error:")
	code, _, _ = cli(t, map[string]string{"GATEWAY_URL": fake.URL, "GATEWAY_APP_KEY": "ak_x", "GATEWAY_SECRET": "s3cret",
		"GATEWAY_PREVIOUS_SECRET": "another"}, "", "status", "s-1")
	assert.Equal(t, 0, code, "the previous secret's hash is taken")
}

// TestMerchantCLI_noAnswer: a gateway that does not answer gets advice
// that fits the command: a creation is run again with the same
// -process-id; a read changes nothing.
func TestMerchantCLI_noAnswer(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens there any more
	env := map[string]string{"GATEWAY_URL": gone.URL, "GATEWAY_APP_KEY": "ak_x", "GATEWAY_SECRET": "s3cret"}
	for _, c := range []struct {
		name       string
		args       []string
		want, miss string
	}{
		{"balance", []string{"balance"}, "changes nothing", "-process-id"},
		{"status", []string{"status", "s-1"}, "changes nothing", "-process-id"},
		{"banks", []string{"banks"}, "changes nothing", "-process-id"},
		{"deposit", []string{"deposit", "-bank", "ZAINCASH", "-process-id", "n-1", "-amount", "25000", "-user-id", "u1",
			"-user-name", "ali_k", "-name", "Ali Kareem"}, "the same -process-id", "changes nothing"},
		{"sandbox", []string{"sandbox", "approve", "s-1"}, "merchant status", "-process-id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := cli(t, env, "", c.args...)
			assert.Equal(t, 3, code, stderr)
			assert.Contains(t, stderr, c.want)
			assert.NotContains(t, stderr, c.miss)
		})
	}
}

// TestMerchantCLI_recordJSON: a record is printed with every field the
// API answers, nulls and false included.
func TestMerchantCLI_recordJSON(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(nil, 0)
	env := map[string]string{"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": site.Secret}
	code, out, stderr := cli(t, env, "", "deposit", "-bank", "ZAINCASH", "-process-id", "j-1", "-amount", "25000",
		"-user-id", "u1", "-user-name", "ali_k", "-name", "Ali Kareem")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{`"senderName": null`, `"alreadyPending": false`, `"url": null`, `"statusReason": null`} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, `"iban"`)
}
