package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// observed is one request as the server reported it to its Metrics.
type observed struct {
	route, method string
	status        int
}

// requestRecorder is an httpapi.Metrics that keeps what it is told.
type requestRecorder struct {
	mu       sync.Mutex
	inFlight int
	done     []observed
}

func (r *requestRecorder) RequestStarted() { r.mu.Lock(); r.inFlight++; r.mu.Unlock() }

func (r *requestRecorder) RequestDone(route, method string, status int, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	r.done = append(r.done, observed{route, method, status})
}

// last returns the last request observed and how many are in flight. A
// request is observed after its answer is written, so the client may see
// the answer a moment before: last waits for n requests.
func (r *requestRecorder) last(t *testing.T, n int) (observed, int) {
	t.Helper()
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.done) >= n
	}, "%d requests observed", n)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done[n-1], r.inFlight
}

// TestServer_metrics_labelsAreRoutePatterns: requests are measured by the
// route they matched, as a pattern, and by a method of HTTP; a path or a
// method the caller made up never becomes a label.
func TestServer_metrics_labelsAreRoutePatterns(t *testing.T) {
	e := newEnv(t)
	m := &requestRecorder{}
	s := e.newStack(stackOptions{metrics: m})
	s.seedBanks()
	st := s.newSite(nil, 0)
	tx := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "m-1", "u-1", 25_000))).TransactionID

	cases := []struct {
		name string
		do   func() resp
		want observed
	}{
		{"a deposit", func() resp { return s.post(st, pathDeposit, depositForm("ZAINCASH", "m-2", "u-2", 25_000)) },
			observed{"/v1/transactions/deposit", "POST", 200}},
		{"a lookup by id", func() resp { return s.get(st, "/v1/transactions/"+tx, "") },
			observed{"/v1/transactions/{id}", "GET", 200}},
		{"an id that names nothing", func() resp { return s.get(st, "/v1/transactions/zz-9", "") },
			observed{"/v1/transactions/{id}", "GET", 404}},
		// Refused by the API's authentication, before its routes are
		// looked at: labelled by the API's mount.
		{"an operator call without a token", func() resp { return s.send(t, "GET", "/ops/v1/sites", "", nil) },
			observed{"/ops/v1/*", "GET", 401}},
		// An unknown merchant path is told before credentials are asked.
		{"a percent-encoded dot-dot path", func() resp { return s.rawDo(t, "GET", "/v1/%2e%2e/x", nil, "") },
			observed{"unmatched", "GET", 404}},
		{"a dot-dot path", func() resp { return s.rawDo(t, "GET", "/ops/v1/../../etc/passwd", nil, "") },
			observed{"/ops/v1/*", "GET", 401}},
		{"an authenticated dot-dot path", func() resp {
			return s.rawDo(t, "GET", "/ops/v1/%2e%2e/x", map[string]string{"Authorization": "Bearer " + adminToken}, "")
		}, observed{"unmatched", "GET", 404}},
		{"a path of a thousand names", func() resp { return s.rawDo(t, "GET", "/"+strings.Repeat("x/", 500), nil, "") },
			observed{"unmatched", "GET", 404}},
		{"a made-up method", func() resp { return s.rawDo(t, "BREW", "/healthz", nil, "") },
			observed{"unmatched", "other", 405}},
		{"a method the route does not take", func() resp {
			return s.rawDo(t, "DELETE", "/ops/v1/sites", map[string]string{"Authorization": "Bearer " + adminToken}, "")
		}, observed{"unmatched", "DELETE", 405}},
		{"health", func() resp { return s.send(t, "GET", "/healthz", "", nil) }, observed{"/healthz", "GET", 200}},
		{"no /metrics without a handler", func() resp { return s.send(t, "GET", "/metrics", "", nil) },
			observed{"unmatched", "GET", 404}},
	}
	m.mu.Lock()
	n := len(m.done)
	m.mu.Unlock()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.do()
			require.Equal(t, c.want.status, r.HTTP, "%s", r.Raw)
			n++
			got, inFlight := m.last(t, n)
			assert.Equal(t, c.want, got)
			assert.Zero(t, inFlight)
		})
	}
}

// TestServer_metricsHandler: /metrics is served without operator
// authentication when the process gives a handler.
func TestServer_metricsHandler(t *testing.T) {
	e := newEnv(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("gateway_up 1\n")) })
	s := e.newStack(stackOptions{metricsHandler: h})
	r := s.send(t, "GET", "/metrics", "", nil)
	require.Equal(t, 200, r.HTTP)
	assert.Equal(t, "gateway_up 1\n", string(r.Raw))
	r = s.send(t, "POST", "/metrics", "", nil)
	assert.Equal(t, 405, r.HTTP)
}

// TestServer_logsCarryTheRequestId: a line logged about a request carries
// the requestId its answer quotes, in text and in JSON, once.
func TestServer_logsCarryTheRequestId(t *testing.T) {
	e := newEnv(t)
	var text, js testkit.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&text, nil), slog.NewJSONHandler(&js, nil)} {
		srv := httptest.NewServer(httpapi.New(httpapi.Config{Ledger: ledgerOf(t, e), AdminToken: adminToken, Logger: slog.New(h)}))
		t.Cleanup(srv.Close)
		req, err := http.NewRequest("GET", srv.URL+"/ops/v1/sites", nil)
		require.NoError(t, err)
		r := do(t, req)
		require.Equal(t, 401, r.HTTP)
		require.NotEmpty(t, r.RequestID)
		if _, ok := h.(*slog.TextHandler); ok {
			assert.Contains(t, text.String(), "requestId="+r.RequestID)
			assert.Equal(t, 1, strings.Count(text.String(), "requestId="), "%s", text.String())
			continue
		}
		line := bytes.TrimSpace([]byte(js.String()))
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "%s", line)
		assert.Equal(t, r.RequestID, m["requestId"])
		assert.Equal(t, "request refused", m["msg"])
		assert.EqualValues(t, 401, m["status"])
	}
}

// ledgerOf is a started ledger on the env's server, for a server of the
// test's own making.
func ledgerOf(t *testing.T, e *env) *ledger.Ledger {
	t.Helper()
	led := ledger.New(e.srv.Store("logs"), ledger.Config{Logger: e.log.Logger})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitFor)
	defer cancel()
	require.NoError(t, led.Start(ctx))
	require.NoError(t, led.WaitReady(ctx))
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = led.Close(cctx)
	})
	return led
}

// TestServer_readinessWhileStartingIsRoutine: a readiness probe's 503
// while the ledger catches up is the probe's expected answer, logged at
// Debug: a probe every few hundred milliseconds during a start would
// otherwise fill the log with errors.
func TestServer_readinessWhileStartingIsRoutine(t *testing.T) {
	e := newEnv(t)
	var buf testkit.Buffer
	led := ledger.New(e.srv.Store("unstarted"), ledger.Config{Logger: e.log.Logger}) // never started: never ready
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Ledger: led, AdminToken: adminToken,
		Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest("GET", srv.URL+"/readyz", nil)
	require.NoError(t, err)
	r := do(t, req)
	require.Equal(t, 503, r.HTTP)
	require.Equal(t, "unavailable", r.Code)
	var m map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace([]byte(buf.String())), &m), "%s", buf.String())
	assert.Equal(t, "request refused", m["msg"])
	assert.Equal(t, "DEBUG", m["level"])
	assert.Equal(t, "/readyz", m["path"])
}
