package httpapi_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
	"sync"
	"sync/atomic"
)

const adminToken = "test-admin-token"

// stack is one complete gateway (store connection, ledger, read models,
// HTTP server) over a shared embedded JetStream server.
type stack struct {
	t      testing.TB
	URL    string
	Ledger *ledger.Ledger
	// Store is the stack's event store, for tests that look at the
	// stream and the snapshots directly.
	Store *jsstore.Store
	srv   *httptest.Server
	// closeConn closes the stack's NATS connection (the event store
	// becomes unreachable for this stack only).
	closeConn func()
	// Callbacks is the stack's callback dispatcher (nil unless
	// stackOptions.dispatcher is set).
	Callbacks *callbacks.Dispatcher
	// API is the stack's server.
	API *httpapi.Server
}

// env is an embedded JetStream server in a temp dir, and the log every
// stack on it writes into: a test fails on an ERROR line it did not declare
// (e.log.ExpectErrors).
type env struct {
	t   testing.TB
	srv *testkit.Server
	log *testkit.Log
}

func newEnv(t testing.TB) *env {
	t.Helper()
	// The log first: its check then runs last, after every stack stopped.
	log := testkit.NewLog(t, slog.LevelInfo)
	return &env{t: t, srv: testkit.StartServer(t, jsstore.ServerConfig{}), log: log}
}

// stackOptions tweak a stack.
type stackOptions struct {
	trusted []netip.Prefix
	now     func() time.Time
	// dispatcher, when set, gives the stack a callback dispatcher that
	// serves /ops/v1/callbacks (see callbacks_test.go).
	dispatcher *dispatcherOptions
	// reads, when set, counts the reads the ledger and the read models
	// make of the store (the follower's stream excepted).
	reads *atomic.Int64
	// getFails, when set, fails that many of the next reads by sequence
	// (Get) with events.ErrUnavailable, as a stream changing leader does.
	getFails *atomic.Int64
	// gone, when set, is a sequence whose reads by sequence find nothing,
	// as of a message the server dropped from a damaged block.
	gone *atomic.Uint64
	// hostedRate is httpapi.Config.HostedRateLimit.
	hostedRate int64
	// limiterNow is httpapi.Config.Now, the rate limiters' clock.
	limiterNow func() time.Time
	// scanBudget, when set, is the listing's records.Reader.WithScanBudget.
	scanBudget int
	// metrics and metricsHandler are httpapi.Config's.
	metrics        httpapi.Metrics
	metricsHandler http.Handler
	// streams and streamsPerSite are httpapi.Config's Streams and
	// StreamsPerSite.
	streams, streamsPerSite int
	// followGate, when set, holds the stack's follower before each
	// message while the test holds it locked: a process whose state lags
	// behind the stream.
	followGate *sync.RWMutex
	// docsURL is httpapi.Config.DocsURL.
	docsURL string
	// maxHeaderBytes is the HTTP server's MaxHeaderBytes (0: net/http's
	// default), set before it starts.
	maxHeaderBytes int
	// readModels is httpapi.Config.ReadModels.
	readModels func() error
}

// stackStore is what a stack's ledger and read models read.
type stackStore interface {
	ledger.Store
	records.Store
}

// gatedStore holds the follower at gate (stackOptions.followGate).
type gatedStore struct {
	stackStore
	gate *sync.RWMutex
}

func (g gatedStore) Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error {
	return g.stackStore.Follow(ctx, filter, from, func(m events.Msg) {
		// A barrier: the follower waits here while the test holds the gate.
		g.gate.RLock()
		//lint:ignore SA2001 the critical section is the wait itself
		g.gate.RUnlock()
		fn(m)
	})
}

// countingStore is the real store, counting its reads (n) and failing
// reads by sequence while fails is above 0.
type countingStore struct {
	*jsstore.Store
	n, fails *atomic.Int64
	gone     *atomic.Uint64
}

func (c countingStore) Get(ctx context.Context, seq uint64) (events.Msg, error) {
	c.n.Add(1)
	if c.fails.Add(-1) >= 0 {
		return events.Msg{}, fmt.Errorf("injected: %w", events.ErrUnavailable)
	}
	if seq == c.gone.Load() {
		return events.Msg{}, fmt.Errorf("get %d: %w", seq, events.ErrNotFound)
	}
	return c.Store.Get(ctx, seq)
}

func (c countingStore) Next(ctx context.Context, subject string, seq uint64) (events.Msg, error) {
	c.n.Add(1)
	return c.Store.Next(ctx, subject, seq)
}

func (c countingStore) LastSeq(ctx context.Context) (uint64, error) {
	c.n.Add(1)
	return c.Store.LastSeq(ctx)
}

func (c countingStore) LastFor(ctx context.Context, subject string) (uint64, error) {
	c.n.Add(1)
	return c.Store.LastFor(ctx, subject)
}

func (c countingStore) Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	c.n.Add(1)
	return c.Store.Read(ctx, filter, from, fn)
}

// newStack starts a gateway stack on the env's server.
func (e *env) newStack(o stackOptions) *stack {
	t := e.t
	t.Helper()
	nc := e.srv.Conn("test")
	ctx := context.Background()
	store := testkit.OpenStore(t, nc, jsstore.Options{})
	log := e.log.Logger
	var ls stackStore = store
	if o.reads != nil || o.getFails != nil || o.gone != nil {
		ls = countingStore{Store: store, n: cmp.Or(o.reads, new(atomic.Int64)), fails: cmp.Or(o.getFails, new(atomic.Int64)),
			gone: cmp.Or(o.gone, new(atomic.Uint64))}
	}
	if o.followGate != nil {
		ls = gatedStore{stackStore: ls, gate: o.followGate}
	}
	led := ledger.New(ls, ledger.Config{Logger: log, Now: o.now})
	require.NoError(t, led.Start(ctx))
	rctx, cancel := context.WithTimeout(ctx, testkit.WaitFor)
	defer cancel()
	require.NoError(t, led.WaitReady(rctx))
	st := &stack{t: t, Ledger: led, Store: store, closeConn: nc.Close}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.MaxHeaderBytes = o.maxHeaderBytes
	st.srv = srv
	srv.Start()
	st.URL = srv.URL
	reader := records.NewReader(led, ls, srv.URL)
	if o.scanBudget != 0 {
		reader.WithScanBudget(o.scanBudget)
	}
	stopDispatcher := func() {}
	if o.dispatcher != nil {
		st.Callbacks, stopDispatcher = e.startDispatcher(*o.dispatcher, store, led, reader, log)
	}
	cfg := httpapi.Config{Ledger: led, Reader: reader, AdminToken: adminToken, TrustedProxies: o.trusted,
		AppVersion: "test", StoreReady: store.Ping, Logger: log, HostedRateLimit: o.hostedRate, Now: o.limiterNow,
		Metrics: o.metrics, MetricsHandler: o.metricsHandler, Events: store, Streams: o.streams, StreamsPerSite: o.streamsPerSite,
		DocsURL: o.docsURL, ReadModels: o.readModels}
	if st.Callbacks != nil {
		// Not a nil *Dispatcher in the interface: no dispatcher, no routes.
		cfg.Callbacks = st.Callbacks
	}
	api := httpapi.New(cfg)
	srv.Config.Handler = api
	st.API = api
	t.Cleanup(func() {
		srv.Close()
		// The dispatcher stops before the ledger it reads closes.
		stopDispatcher()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = led.Close(cctx)
		nc.Close()
	})
	return st
}

// resp is a decoded envelope.
type resp struct {
	HTTP   int
	Header http.Header
	// Close: the server closes the connection after this response.
	Close        bool
	Data         json.RawMessage `json:"data"`
	Status       int             `json:"status"`
	Code         string          `json:"code"`
	Message      string          `json:"message"`
	Field        string          `json:"field"`
	DocURL       string          `json:"docUrl"`
	DocLink      string          `json:"docLink"`
	ResponseTime string          `json:"responseTime"`
	AppVersion   string          `json:"app_version"`
	RequestID    string          `json:"requestId"`
	Raw          []byte
}

func (r resp) decode(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Data, v), "data: %s", r.Raw)
}

func do(t testing.TB, req *http.Request) resp {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	out := resp{HTTP: res.StatusCode, Header: res.Header, Close: res.Close, Raw: b}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(b, &out), "body: %s", b)
	}
	return out
}

// ops calls the operator API with the admin token.
func (s *stack) ops(method, path string, body any) resp {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(s.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return do(s.t, req)
}

// site is a merchant site's credentials.
type site struct {
	ID            string `json:"id"`
	AppKey        string `json:"appKey"`
	Secret        string `json:"secret"`
	WebhookSecret string `json:"webhookSecret"`
}

func sign(secret string, data []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(data)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// post sends a signed form to the merchant API.
func (s *stack) post(st site, path string, form url.Values) resp {
	s.t.Helper()
	return s.postRaw(st, path, form.Encode(), nil)
}

// postRaw sends body signed with the site's secret; hdr overrides headers.
func (s *stack) postRaw(st site, path, body string, hdr map[string]string) resp {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("appKey", st.AppKey)
	req.Header.Set("sign", sign(st.Secret, []byte(body)))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return do(s.t, req)
}

// get sends a signed GET; query is the raw query string.
func (s *stack) get(st site, path, query string) resp {
	s.t.Helper()
	u := s.URL + path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(s.t, err)
	req.Header.Set("appKey", st.AppKey)
	req.Header.Set("sign", sign(st.Secret, []byte(query)))
	return do(s.t, req)
}

// bank is a method as the operator API returns it.
type bank struct {
	ID   string `json:"_id"`
	Code string `json:"code"`
}

// seedBanks creates a method of every identifier kind.
func (s *stack) seedBanks() map[string]bank {
	s.t.Helper()
	out := map[string]bank{}
	for _, b := range []struct{ code, kind, acct string }{
		{"ZAINCASH", "PHONE", "07801234567"},
		{"QICARD", "CARD_NO", "6375000012345678"},
		{"RAFIDAIN", "ACCOUNT_NO", "0012345678"},
		{"NBI", "IBAN", "IQ56NBIQ123456789012345"},
		{"GAMEWALLET", "USERNAME", "store.wallet"},
	} {
		r := s.ops("POST", "/ops/v1/banks", map[string]any{
			"code": b.code, "name": map[string]string{"en": b.code + " en", "ar": b.code + " ar", "ku": b.code + " ku"},
			"identifierKind": b.kind, "minAmount": 1000, "maxAmount": 1_000_000, "deposit": true, "withdraw": true,
			"accounts": []map[string]string{{"accountName": "Store A", "accountNumber": b.acct}, {"accountName": "Store B", "accountNumber": b.acct}},
		})
		require.Equal(s.t, 200, r.HTTP, "%s", r.Raw)
		var bk bank
		r.decode(s.t, &bk)
		out[b.code] = bk
	}
	return out
}

// newSite creates a site with settings and funds it.
func (s *stack) newSite(settings map[string]any, fund int64) site {
	s.t.Helper()
	if settings == nil {
		settings = map[string]any{}
	}
	if _, ok := settings["name"]; !ok {
		settings["name"] = "Test Site"
	}
	r := s.ops("POST", "/ops/v1/sites", settings)
	require.Equal(s.t, 200, r.HTTP, "%s", r.Raw)
	var st site
	r.decode(s.t, &st)
	if fund != 0 {
		r = s.ops("POST", "/ops/v1/sites/"+st.ID+"/adjustments", map[string]any{"amount": fund, "reason": "opening"})
		require.Equal(s.t, 200, r.HTTP, "%s", r.Raw)
	}
	return st
}
