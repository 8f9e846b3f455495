package main

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeGateway is a minimal in-memory implementation of the parts of the
// contract the load test uses. It lets the tests drive setup, load and every
// check end to end before the real gateway exists, and inject faults.
type fakeGateway struct {
	mu      sync.Mutex
	token   string
	dataDir string // when set, state is saved after every change so a restart keeps it
	badHash bool   // fault: answer creations with a wrong hash
	dupTx   bool   // fault: every creation gets the same transactionId
	// every503 > 0 answers every every503-th valid creation 503, as a
	// gateway does during a fault; with store503 it records it anyway,
	// which breaks the promise of a 503.
	every503 int
	store503 bool
	creates  int
	State    fakeState
}

// fakeState is the persisted part of the fake.
type fakeState struct {
	Seq   int
	Banks map[string]string // code -> _id
	Sites map[string]*fakeSite
	Txs   map[string]*fakeTx // siteID/processId -> record
}

// fakeSite is a site with its treasury.
type fakeSite struct {
	ID, AppKey, Secret string
	Balance, Pending   int64
	Methods            []string // _ids the site offers (PUT .../methods)
}

// fakeTx is a stored transaction.
type fakeTx struct {
	TransactionID, BankID, ProcessID, Type string
	Amount                                 int64
}

// newFake returns an empty fake with the given admin token.
func newFake(token, dataDir string) *fakeGateway {
	g := &fakeGateway{token: token, dataDir: dataDir, State: fakeState{Banks: map[string]string{}, Sites: map[string]*fakeSite{}, Txs: map[string]*fakeTx{}}}
	if dataDir != "" {
		if b, err := os.ReadFile(filepath.Join(dataDir, "state.json")); err == nil {
			_ = json.Unmarshal(b, &g.State)
		}
	}
	return g
}

// save persists the state (caller holds mu).
func (g *fakeGateway) save() {
	if g.dataDir == "" {
		return
	}
	b, _ := json.Marshal(g.State)
	tmp := filepath.Join(g.dataDir, "state.json.tmp")
	_ = os.WriteFile(tmp, b, 0o644)
	_ = os.Rename(tmp, filepath.Join(g.dataDir, "state.json"))
}

// reply writes an envelope.
func reply(w http.ResponseWriter, status int, data any, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	env := map[string]any{"data": data, "status": status, "responseTime": "0ms", "app_version": "fake"}
	if code != "" {
		env["code"], env["message"] = code, msg
	}
	_ = json.NewEncoder(w).Encode(env)
}

// record renders a transaction as the contract's record, with its hash.
func (g *fakeGateway) record(s *fakeSite, tx *fakeTx) map[string]any {
	id := tx.TransactionID
	if g.dupTx {
		id = "same"
	}
	h := sign(s.Secret, id+tx.BankID+strconv.FormatInt(tx.Amount, 10))
	if g.badHash {
		h = sign("wrong", id+tx.BankID+strconv.FormatInt(tx.Amount, 10))
	}
	return map[string]any{"transactionId": id, "bankId": tx.BankID, "amount": tx.Amount, "processId": tx.ProcessID, "type": tx.Type, "status": "pending", "hash": h}
}

// handler wires the routes.
func (g *fakeGateway) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	ops := func(h func(w http.ResponseWriter, r *http.Request, body map[string]any)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+g.token {
				reply(w, 401, nil, "unauthorized", "bad token")
				return
			}
			var body map[string]any
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Header.Get("Content-Type") != "application/json" {
				reply(w, 400, nil, "invalid_request", "json")
				return
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			h(w, r, body)
			g.save()
		}
	}
	mux.HandleFunc("POST /ops/v1/banks", ops(func(w http.ResponseWriter, r *http.Request, b map[string]any) {
		// The load test's method must be scoped, so that sites it did not
		// create never see it; every method of this fake is then offered
		// only by the sites that list it.
		if b["scoped"] != true {
			reply(w, 400, nil, "invalid_request", "the load test's method must be scoped")
			return
		}
		g.State.Seq++
		id := fmt.Sprintf("bank%06d", g.State.Seq)
		g.State.Banks[b["code"].(string)] = id
		reply(w, 201, map[string]any{"_id": id, "code": b["code"]}, "", "")
	}))
	mux.HandleFunc("POST /ops/v1/sites", ops(func(w http.ResponseWriter, r *http.Request, b map[string]any) {
		g.State.Seq++
		s := &fakeSite{ID: fmt.Sprintf("site%d", g.State.Seq), AppKey: randomHex(8), Secret: randomHex(16)}
		g.State.Sites[s.AppKey] = s
		reply(w, 201, map[string]any{"id": s.ID, "appKey": s.AppKey, "secret": s.Secret, "webhookSecret": "whsec_x"}, "", "")
	}))
	mux.HandleFunc("PUT /ops/v1/sites/{id}/methods", ops(func(w http.ResponseWriter, r *http.Request, b map[string]any) {
		list, _ := b["methods"].([]any)
		var ids []string
		for _, m := range list {
			ref, _ := m.(map[string]any)["bank"].(string)
			for code, id := range g.State.Banks {
				if ref == id || ref == code {
					ids = append(ids, id)
				}
			}
		}
		if len(ids) != len(list) || len(ids) == 0 {
			reply(w, 400, nil, "unknown_bank", "methods")
			return
		}
		for _, s := range g.State.Sites {
			if s.ID == r.PathValue("id") {
				s.Methods = ids
				reply(w, 200, map[string]any{"id": s.ID}, "", "")
				return
			}
		}
		reply(w, 404, nil, "not_found", "site")
	}))
	mux.HandleFunc("POST /ops/v1/sites/{id}/adjustments", ops(func(w http.ResponseWriter, r *http.Request, b map[string]any) {
		for _, s := range g.State.Sites {
			if s.ID == r.PathValue("id") {
				s.Balance += int64(b["amount"].(float64))
				reply(w, 200, map[string]any{"balance": s.Balance}, "", "")
				return
			}
		}
		reply(w, 404, nil, "not_found", "site")
	}))
	merchant := func(h func(w http.ResponseWriter, r *http.Request, s *fakeSite, payload string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			payload := string(body)
			if r.Method == http.MethodGet {
				payload = r.URL.RawQuery
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			s := g.State.Sites[r.Header.Get("appKey")]
			if s == nil {
				reply(w, 401, nil, "unknown_app_key", "appKey")
				return
			}
			if !hmac.Equal([]byte(r.Header.Get("sign")), []byte(sign(s.Secret, payload))) {
				reply(w, 401, nil, "invalid_signature", "sign")
				return
			}
			h(w, r, s, payload)
		}
	}
	create := merchant(func(w http.ResponseWriter, r *http.Request, s *fakeSite, payload string) {
		v, _ := url.ParseQuery(payload)
		kind := r.PathValue("kind")
		amt, err := strconv.ParseInt(v.Get("amount"), 10, 64)
		bank, ok := g.State.Banks[v.Get("bankId")]
		if ok && !slices.Contains(s.Methods, bank) {
			reply(w, 400, nil, "unknown_bank", "not a method of this site")
			return
		}
		if err != nil || !ok || v.Get("processId") == "" || (kind == "withdraw" && len(v.Get("iban")) != 11) {
			reply(w, 400, nil, "invalid_request", "fields")
			return
		}
		key := s.ID + "/" + v.Get("processId")
		if tx := g.State.Txs[key]; tx != nil {
			reply(w, 200, g.record(s, tx), "", "")
			return
		}
		g.creates++
		refuse := g.every503 > 0 && g.creates%g.every503 == 0
		if refuse && !g.store503 {
			reply(w, 503, nil, "unavailable", "the event store cannot be reached")
			return
		}
		if kind == "withdraw" {
			if s.Balance-s.Pending-amt < 0 {
				reply(w, 402, nil, "insufficient_site_balance", "treasury")
				return
			}
			s.Pending += amt
		}
		g.State.Seq++
		typ := map[string]string{"deposit": "deposit", "withdraw": "withdrawal"}[kind]
		tx := &fakeTx{TransactionID: fmt.Sprintf("T%08d", g.State.Seq), BankID: bank, ProcessID: v.Get("processId"), Type: typ, Amount: amt}
		g.State.Txs[key] = tx
		g.save()
		if refuse {
			reply(w, 503, nil, "unavailable", "the event store cannot be reached")
			return
		}
		reply(w, 200, g.record(s, tx), "", "")
	})
	mux.HandleFunc("POST /v1/transactions/{kind}", create)
	mux.HandleFunc("GET /v1/balance", merchant(func(w http.ResponseWriter, r *http.Request, s *fakeSite, _ string) {
		reply(w, 200, map[string]any{"balance": s.Balance, "pendingWithdrawals": s.Pending, "negativeLimit": 0, "available": s.Balance - s.Pending, "currency": "IQD"}, "", "")
	}))
	mux.HandleFunc("GET /v1/transactions", merchant(func(w http.ResponseWriter, r *http.Request, s *fakeSite, _ string) {
		tx := g.State.Txs[s.ID+"/"+r.URL.Query().Get("processId")]
		if tx == nil {
			reply(w, 404, nil, "not_found", "no such transaction")
			return
		}
		reply(w, 200, g.record(s, tx), "", "")
	}))
	return mux
}

// fakeCluster is several gateways in front of one fakeGateway state, as two
// gateway processes share one JetStream cluster.
type fakeCluster struct {
	fronts  []*frontend
	left    atomic.Int32
	ready   chan struct{} // closed once every frontend has seen a creation, or on giving up
	release sync.Once
}

// frontend is one gateway of a fakeCluster, with its own URL.
type frontend struct {
	srv     *httptest.Server
	creates atomic.Int64
	first   sync.Once
	// blind: the gateway cannot find any transaction by processId, as one
	// whose reads miss the writes taken by its peers.
	blind bool
}

// newFakeCluster starts n frontends over g. Every creation is held until
// each frontend has received one, so "every gateway got traffic" follows
// from the load's round-robin alone and never from scheduling luck: the
// clients of a frontend that got a request first wait, holding one request
// index each, while the others' clients are free to take the rest. If a
// frontend never gets a request (the load test sends everything to one
// gateway) the hold is given up once, after a while, so that bug fails the
// test quickly instead of holding every request until the client timeout;
// with a correct load test the hold ends by traffic and this wait decides
// nothing.
func newFakeCluster(t *testing.T, g *fakeGateway, n int) *fakeCluster {
	c := &fakeCluster{ready: make(chan struct{})}
	c.left.Store(int32(n))
	h := g.handler()
	for range n {
		fe := &frontend{}
		fe.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/transactions/"):
				fe.creates.Add(1)
				fe.first.Do(func() {
					if c.left.Add(-1) == 0 {
						c.release.Do(func() { close(c.ready) })
					}
				})
				select {
				case <-c.ready:
				case <-time.After(3 * time.Second):
					c.release.Do(func() { close(c.ready) })
				case <-r.Context().Done():
					return
				}
			case fe.blind && r.Method == http.MethodGet && r.URL.Path == "/v1/transactions":
				reply(w, 404, nil, "not_found", "no such transaction")
				return
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(fe.srv.Close)
		c.fronts = append(c.fronts, fe)
	}
	return c
}

// urls is the -url value naming every frontend.
func (c *fakeCluster) urls() string {
	u := make([]string, len(c.fronts))
	for k, fe := range c.fronts {
		u[k] = fe.srv.URL
	}
	return strings.Join(u, ",")
}

// TestMain turns the test binary into a fake gateway process when
// LOADTEST_FAKE_GATEWAY is set, so the spawn/restart path can be tested with
// the same flags the real gateway gets.
func TestMain(m *testing.M) {
	if os.Getenv("LOADTEST_FAKE_GATEWAY") == "1" {
		fs := flag.NewFlagSet("fake", flag.ExitOnError)
		addr := fs.String("http", "", "")
		data := fs.String("data", "", "")
		token := fs.String("admin-token", "", "")
		fs.String("sync", "", "")
		fs.Bool("callback-allow-private", false, "")
		fs.Parse(os.Args[1:])
		g := newFake(*token, *data)
		if os.Getenv("LOADTEST_FAKE_FORGET") == "1" {
			g.State = newFake(*token, "").State // fault: a restart loses everything
		}
		srv := &http.Server{Addr: *addr, Handler: g.handler()}
		go func() {
			ch := make(chan os.Signal, 1)
			signal.Notify(ch, syscall.SIGTERM)
			<-ch
			srv.Shutdown(context.Background())
		}()
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testOptions are small-run options for the end-to-end tests.
func testOptions(kind string) options {
	return options{kind: kind, n: 600, c: 8, sites: 5, runs: 1, max: time.Minute, timeout: 10 * time.Second, readyTimeout: 20 * time.Second, verify: 0.5, sync: "always", dispatcher: "gateway", quiet: true}
}

// TestRunAgainstFake drives the -url path at a correct fake: setup, load and
// all checks must pass for deposits and withdrawals over several sites.
func TestRunAgainstFake(t *testing.T) {
	for _, kind := range []string{"deposit", "withdraw"} {
		t.Run(kind, func(t *testing.T) {
			srv := httptest.NewServer(newFake("tok", "").handler())
			defer srv.Close()
			o := testOptions(kind)
			o.url, o.adminToken = srv.URL, "tok"
			rr, err := runOnce(context.Background(), o, t.TempDir(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(rr.Failures) != 0 || rr.Gateway == nil || rr.Gateway.OK != 600 {
				t.Fatalf("failures %v report %+v", rr.Failures, rr.Gateway)
			}
		})
	}
}

// TestRunDetectsFaults: a fake with wrong hashes, duplicate ids or too little
// treasury must make the run fail.
func TestRunDetectsFaults(t *testing.T) {
	cases := []struct {
		name  string
		setup func(g *fakeGateway, o *options)
		want  string
	}{
		{"bad hash", func(g *fakeGateway, o *options) { g.badHash = true }, "after load: " + catHash},
		{"duplicate transactionId", func(g *fakeGateway, o *options) { g.dupTx = true }, "after load: " + catDupTx},
		{"insufficient seed", func(g *fakeGateway, o *options) { o.kind = "withdraw"; o.seed = 100000 }, "after load: " + catStatusCodes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newFake("tok", "")
			o := testOptions("deposit")
			c.setup(g, &o)
			srv := httptest.NewServer(g.handler())
			defer srv.Close()
			o.url, o.adminToken = srv.URL, "tok"
			rr, err := runOnce(context.Background(), o, t.TempDir(), 1)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rr.Failures {
				found = found || strings.HasPrefix(f, c.want)
			}
			if !found {
				t.Fatalf("want a %q failure, got %v", c.want, rr.Failures)
			}
		})
	}
}

// TestSpawnAndRestart drives the -gateway path with the test binary as the
// gateway: spawn, readiness, RSS, SIGKILL restart on the same data, and the
// checks after the restart.
func TestSpawnAndRestart(t *testing.T) {
	t.Setenv("LOADTEST_FAKE_GATEWAY", "1")
	o := testOptions("withdraw")
	o.gateway, o.restart = os.Args[0], true
	rr, err := runOnce(context.Background(), o, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Failures) != 0 {
		t.Fatalf("failures: %v", rr.Failures)
	}
	if rr.Gateway.RSSPeakMiB == nil || *rr.Gateway.RSSPeakMiB <= 0 || rr.RestartToReadyS == nil {
		t.Fatalf("missing RSS or restart figure: %+v restart=%v", rr.Gateway, rr.RestartToReadyS)
	}
}

// TestRestartDetectsLostState: a gateway that comes back empty after SIGKILL
// must fail the after-restart balance and lookup checks.
func TestRestartDetectsLostState(t *testing.T) {
	t.Setenv("LOADTEST_FAKE_GATEWAY", "1")
	t.Setenv("LOADTEST_FAKE_FORGET", "1")
	o := testOptions("withdraw")
	o.gateway, o.restart = os.Args[0], true
	rr, err := runOnce(context.Background(), o, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var bal, look bool
	for _, f := range rr.Failures {
		bal = bal || strings.HasPrefix(f, "after restart: "+catBalance)
		look = look || strings.HasPrefix(f, "after restart: "+catLookup)
		if strings.HasPrefix(f, "after load") {
			t.Errorf("unexpected failure before the restart: %s", f)
		}
	}
	if !bal || !look {
		t.Fatalf("lost state not detected: %v", rr.Failures)
	}
}

// failureWith reports whether one of the failure lines starts with prefix.
func failureWith(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestRunTwoGateways drives -url with two gateways of one fake cluster: the
// clients are split over both, the report lists both with their shares, and
// a gateway that cannot find what the other one acknowledged is reported by
// its URL, while the first gateway's lookups stay clean.
func TestRunTwoGateways(t *testing.T) {
	for _, blind := range []bool{false, true} {
		t.Run(fmt.Sprintf("second blind=%v", blind), func(t *testing.T) {
			c := newFakeCluster(t, newFake("tok", ""), 2)
			c.fronts[1].blind = blind
			o := testOptions("withdraw")
			o.url, o.adminToken = c.urls(), "tok"
			if err := o.validate(); err != nil {
				t.Fatal(err)
			}
			rr, err := runOnce(context.Background(), o, t.TempDir(), 1)
			if err != nil {
				t.Fatal(err)
			}
			urls := rr.Gateway.URLs
			if len(urls) != 2 || rr.Gateway.OK != 600 {
				t.Fatalf("report %+v", rr.Gateway)
			}
			for k, fe := range c.fronts {
				if urls[k].URL != fe.srv.URL || urls[k].Requests == 0 || int64(urls[k].Requests) != fe.creates.Load() || urls[k].OK != urls[k].Requests {
					t.Errorf("gateway %d: report %+v, fake saw %d creations", k, urls[k], fe.creates.Load())
				}
			}
			if urls[0].Requests+urls[1].Requests != 600 {
				t.Errorf("shares %+v do not add up to 600", urls)
			}
			second := "after load: " + catLookup + " via " + c.fronts[1].srv.URL
			if got := failureWith(rr.Failures, second); got != blind {
				t.Errorf("miss through the second gateway reported=%v, want %v: %v", got, blind, rr.Failures)
			}
			if failureWith(rr.Failures, "after load: "+catLookup+":") {
				t.Errorf("first gateway's lookups failed: %v", rr.Failures)
			}
			if !blind && len(rr.Failures) != 0 {
				t.Errorf("failures: %v", rr.Failures)
			}
		})
	}
}

// TestRunRefused: with -allow-errors, 503 answers during a fault do not fail
// the run and are counted, but a 503 whose processId was stored anyway is a
// failure; without -allow-errors the 503s themselves fail it.
func TestRunRefused(t *testing.T) {
	cases := []struct {
		name             string
		store, allow     bool
		want503, wantNot string // failure prefixes expected and not expected ("" for none)
	}{
		{"refused and not stored", false, true, "", "after load: "},
		{"refused but stored", true, true, "after load: " + catStored503 + ":", "after load: " + catStatusCodes},
		{"refused without -allow-errors", false, false, "after load: " + catStatusCodes, "after load: " + catStored503},
	}
	for _, kind := range []string{"deposit", "withdraw"} {
		for _, c := range cases {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				g := newFake("tok", "")
				g.every503, g.store503 = 50, c.store
				srv := httptest.NewServer(g.handler())
				defer srv.Close()
				o := testOptions(kind)
				o.url, o.adminToken, o.allowErrors = srv.URL, "tok", c.allow
				if err := o.validate(); err != nil {
					t.Fatal(err)
				}
				rr, err := runOnce(context.Background(), o, t.TempDir(), 1)
				if err != nil {
					t.Fatal(err)
				}
				if rr.Gateway.Status503 != 12 || rr.Gateway.OK != 588 || rr.Gateway.OtherErrors != 0 || rr.Gateway.TransportErrors != 0 {
					t.Errorf("counts: %+v", rr.Gateway)
				}
				if c.want503 != "" && !failureWith(rr.Failures, c.want503) {
					t.Errorf("want a %q failure, got %v", c.want503, rr.Failures)
				}
				if failureWith(rr.Failures, c.wantNot) {
					t.Errorf("unexpected %q failure: %v", c.wantNot, rr.Failures)
				}
			})
		}
	}
}
