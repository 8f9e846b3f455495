package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/metrics"
)

// proc is the command running in the test process (run), as a process
// would: its own flags, registry and logs.
type proc struct {
	t    *testing.T
	name string
	out  *testkit.Buffer
	stop func()
}

// inProcess runs the command with args until stop or the end of the test;
// it must then exit 0.
func inProcess(t *testing.T, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{t: t, name: strings.Join(args[:1], ""), out: &testkit.Buffer{}}
	code := make(chan int, 1)
	go func() { code <- run(ctx, args, io.Discard, p.out) }()
	stopped := false
	p.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case c := <-code:
			assert.Equal(t, 0, c, "%s exit status", p.name)
		case <-time.After(90 * time.Second):
			t.Errorf("%s did not stop", p.name)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", p.name, p.out.String())
		}
	}
	t.Cleanup(p.stop)
	return p
}

// status is the HTTP status of a GET of u (0 when it cannot be reached).
func status(u string, hdr map[string]string) (int, http.Header) {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		return 0, nil
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header
}

func waitStatus(t *testing.T, u string, want int) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, func() bool { s, _ := status(u, nil); return s == want }, "GET %s answers %d", u, want)
}

// scrape reads a /metrics page as Prometheus would.
func scrape(t *testing.T, u string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	require.NoError(t, err)
	return fams
}

// value is a series' value: a counter's or a gauge's, a histogram's sample
// count; 0 when the family has no series with labels (name, value pairs).
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	for _, mt := range fams[name].GetMetric() {
		if !hasLabels(mt, labels) {
			continue
		}
		switch {
		case mt.Counter != nil:
			return mt.Counter.GetValue()
		case mt.Gauge != nil:
			return mt.Gauge.GetValue()
		case mt.Histogram != nil:
			return float64(mt.Histogram.GetSampleCount())
		}
	}
	return 0
}

func hasLabels(mt *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range mt.GetLabel() {
			found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
		}
		if !found {
			return false
		}
	}
	return true
}

// jsonLines decodes every line of a JSON log, failing on one that is not.
func jsonLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(log), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "a log line that is not JSON: %s", line)
		out = append(out, m)
	}
	return out
}

// TestGateway_metricsAndJSONLogs drives deposits, approvals and callbacks
// through a gateway on an external NATS and scrapes its /metrics, which
// answers without a token: the request, ledger, store and callback series
// move, and hostile paths leave no series of their own. Its JSON log
// carries the requestId of the response a line is about.
func TestGateway_metricsAndJSONLogs(t *testing.T) {
	testkit.SetEnv(t, gatewayEnv, nil)
	srv := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1", SyncAlways: true})
	addr := testkit.FreeAddr(t)
	gw := inProcess(t, "--http", addr, "--nats", srv.URL(), "--admin-token", testToken, "--callback-allow-private", "--log-format", "json")
	base := "http://" + addr
	waitStatus(t, base+"/readyz", 200)

	rcv := newHookReceiver(t)
	siteWithHooks(t, base, rcv, 3)
	hostile := []string{"/v1/%2e%2e/x", "/%2e%2e/%2e%2e/etc/passwd", "/hostile-" + strings.Repeat("z", 200), "/ops/v1/..%2f..%2fhostile"}
	for _, p := range hostile {
		code, _ := status(base+p, nil)
		assert.Contains(t, []int{401, 404}, code, p)
	}
	code, hdr := status(base+"/ops/v1/sites", map[string]string{"Request-Id": "metrics-test-42"})
	require.Equal(t, 401, code)
	require.Equal(t, "metrics-test-42", hdr.Get("Request-Id"))

	var fams map[string]*dto.MetricFamily
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		fams = scrape(t, base+"/metrics")
		return value(fams, "gateway_callback_deliveries_total", "outcome", "delivered") >= 3 &&
			value(fams, "gateway_expiry_sweep_duration_seconds") >= 1
	}, "three callbacks delivered and a sweep made, as /metrics shows")
	assert.GreaterOrEqual(t, value(fams, "gateway_http_request_duration_seconds",
		"route", "/v1/transactions/deposit", "method", "POST", "status", "200"), 3.0)
	assert.GreaterOrEqual(t, value(fams, "gateway_http_request_duration_seconds",
		"route", "/ops/v1/deposits/{id}/approve", "method", "POST", "status", "200"), 3.0)
	assert.GreaterOrEqual(t, value(fams, "gateway_http_request_duration_seconds", "route", "/ops/v1/*", "status", "401"), 1.0)
	assert.GreaterOrEqual(t, value(fams, "gateway_http_request_duration_seconds", "route", "unmatched", "status", "404"), 1.0)
	assert.Equal(t, 1.0, value(fams, "gateway_http_requests_in_flight"), "the scrape itself")
	// A bank, a site and three deposits and approvals, at least.
	assert.GreaterOrEqual(t, value(fams, "gateway_ledger_appends_total", "outcome", "stored"), 8.0)
	assert.GreaterOrEqual(t, value(fams, "gateway_ledger_batch_commands"), 6.0)
	assert.GreaterOrEqual(t, value(fams, "gateway_store_request_duration_seconds", "op", "append"), 8.0)
	assert.GreaterOrEqual(t, value(fams, "gateway_store_request_duration_seconds", "op", "last_seq"), 1.0)
	assert.Contains(t, fams, "gateway_ledger_follower_lag_messages")
	assert.GreaterOrEqual(t, value(fams, "gateway_callback_delivery_delay_seconds"), 3.0)
	assert.Contains(t, fams, "gateway_callbacks_queued")
	assert.Contains(t, fams, "go_goroutines")
	assert.Contains(t, fams, "process_resident_memory_bytes")
	for name, f := range fams {
		for _, mt := range f.GetMetric() {
			for _, lp := range mt.GetLabel() {
				v := lp.GetValue()
				assert.False(t, strings.Contains(v, "%2") || strings.Contains(v, "..") || strings.Contains(v, "hostile") ||
					strings.Contains(v, "passwd"), "%s has a label taken from a request path: %s=%q", name, lp.GetName(), v)
			}
		}
	}

	gw.stop()
	found := false
	for _, line := range jsonLines(t, gw.out.String()) {
		if line["requestId"] == "metrics-test-42" {
			found = true
			assert.Equal(t, "request refused", line["msg"])
			assert.EqualValues(t, 401, line["status"])
		}
	}
	assert.True(t, found, "the refusal is logged with the response's requestId")
}

// TestDispatcher_probesAndMetrics runs 'gateway callbacks' next to a
// gateway with --callbacks=false: its listener is up before the ledger
// stream exists, ready once it has caught up and while the store answers,
// and its /metrics shows the deliveries it made.
func TestDispatcher_probesAndMetrics(t *testing.T) {
	testkit.SetEnv(t, gatewayEnv, nil)
	srv := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1"})
	daddr := testkit.FreeAddr(t)
	disp := inProcess(t, "callbacks", "--nats", srv.URL(), "--http", daddr, "--callback-allow-private", "--log-format", "json")
	dbase := "http://" + daddr
	waitStatus(t, dbase+"/healthz", 200)
	code, _ := status(dbase+"/readyz", nil)
	assert.Equal(t, 503, code, "no ledger stream yet")

	addr := testkit.FreeAddr(t)
	gw := inProcess(t, "--http", addr, "--nats", srv.URL(), "--admin-token", testToken, "--callbacks=false")
	base := "http://" + addr
	waitStatus(t, base+"/readyz", 200)
	waitStatus(t, dbase+"/readyz", 200)

	rcv := newHookReceiver(t)
	siteWithHooks(t, base, rcv, 2)
	var fams map[string]*dto.MetricFamily
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		fams = scrape(t, dbase+"/metrics")
		return value(fams, "gateway_callback_deliveries_total", "outcome", "delivered") >= 2
	}, "two deliveries on the dispatcher's /metrics")
	assert.Len(t, rcv.hooks(), 2)
	assert.Equal(t, 1.0, value(fams, "gateway_callbacks_active"))
	assert.Contains(t, fams, "gateway_callbacks_queued")
	assert.Contains(t, fams, "gateway_callbacks_stream_pending_messages")
	assert.Contains(t, fams, "gateway_ledger_follower_lag_messages")
	assert.Positive(t, value(fams, "gateway_store_request_duration_seconds", "op", "read"), "the dispatcher's start-up read")
	assert.Zero(t, value(fams, "gateway_ledger_appends_total", "outcome", "stored"), "a dispatcher appends nothing")
	assert.Contains(t, fams, "go_goroutines")
	assert.NotContains(t, fams, "gateway_http_request_duration_seconds", "the dispatcher serves no API")

	// The store gone: still up, no longer ready.
	gw.stop()
	srv.Stop()
	waitStatus(t, dbase+"/readyz", 503)
	code, _ = status(dbase+"/healthz", nil)
	assert.Equal(t, 200, code)
	disp.stop()
	jsonLines(t, disp.out.String())
}

// TestDispatcher_listenerInUse: a dispatcher that cannot listen stops at
// once (exit 1) and says where.
func TestDispatcher_listenerInUse(t *testing.T) {
	testkit.SetEnv(t, gatewayEnv, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"callbacks", "--nats", "nats://127.0.0.1:1", "--http", l.Addr().String()}, io.Discard, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "listen "+l.Addr().String())
}

// TestRun_badLogFormat: an unknown --log-format is a usage error (exit 2)
// naming the choices, for the gateway and for 'gateway callbacks', by flag
// or by environment.
func TestRun_badLogFormat(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"gateway", []string{"--log-format", "xml"}, nil},
		{"gateway by env", nil, map[string]string{"GATEWAY_LOG_FORMAT": "xml"}},
		{"dispatcher", []string{"callbacks", "--nats", "nats://127.0.0.1:1", "--log-format", "xml"}, nil},
		{"dispatcher by env", []string{"callbacks", "--nats", "nats://127.0.0.1:1"}, map[string]string{"GATEWAY_LOG_FORMAT": "xml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testkit.SetEnv(t, gatewayEnv, c.env)
			var stderr bytes.Buffer
			// Refused before anything is opened or created.
			code := run(context.Background(), c.args, io.Discard, &stderr)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr.String(), `--log-format must be text or json, not "xml"`)
		})
	}
}

// TestObservedStore: every round trip is measured by operation and every
// append by the store's answer; not found, a conflict and a read the
// caller stops are answers, not failures of the store, and a store that
// is gone is.
func TestObservedStore(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	m := metrics.New()
	nc := srv.Conn("observed")
	st := &observedStore{Store: testkit.OpenStore(t, nc, jsstore.Options{}), m: m}
	ctx := context.Background()
	subj := events.SitePrefix + "s1"

	_, err := st.Append(ctx, subj, 0, []byte("first"))
	require.NoError(t, err)
	_, err = st.Append(ctx, subj, 0, []byte("late"))
	require.ErrorIs(t, err, events.ErrConflict)
	_, err = st.Next(ctx, subj, 99)
	require.ErrorIs(t, err, events.ErrNotFound)
	errStop := errors.New("enough")
	require.ErrorIs(t, st.Read(ctx, subj, 1, func(events.Msg) error { return errStop }), errStop)
	require.NoError(t, st.Ping(ctx))
	_, err = st.LastFor(ctx, subj)
	require.NoError(t, err)
	_, _, err = st.LoadSnapshot(ctx, "none")
	require.ErrorIs(t, err, events.ErrNotFound)
	require.NoError(t, st.SaveSnapshot(ctx, "snap", 1, []byte("x")))
	_, err = st.ListSnapshots(ctx)
	require.NoError(t, err)

	srv.Stop()
	// An append sent before the client sees the server go is an unknown
	// outcome, not the refusal counted below.
	testkit.Eventually(t, 5*time.Second, func() bool { return !nc.IsConnected() }, "the client saw the server go")
	gone, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = st.Append(gone, subj, 1, []byte("lost"))
	require.Error(t, err)
	_, err = st.Get(gone, 1)
	require.Error(t, err)

	fams, err := m.Registry().Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	for _, c := range []struct {
		outcome string
		want    float64
	}{{metrics.AppendStored, 1}, {metrics.AppendConflict, 1}, {metrics.AppendUnavailable, 1}} {
		assert.Equal(t, c.want, value(byName, "gateway_ledger_appends_total", "outcome", c.outcome), c.outcome)
	}
	for op, want := range map[string]float64{opAppend: 3, opNext: 1, opRead: 1, opLastSeq: 1, opLastFor: 1, opGet: 1,
		opLoadSnapshot: 1, opSaveSnapshot: 1, opListSnapshots: 1} {
		assert.Equal(t, want, value(byName, "gateway_store_request_duration_seconds", "op", op), "round trips of %s", op)
	}
	for op, want := range map[string]float64{opAppend: 1, opGet: 1, opNext: 0, opRead: 0, opLoadSnapshot: 0} {
		assert.Equal(t, want, value(byName, "gateway_store_errors_total", "op", op), "failures of %s", op)
	}
}

// TestProbes_readyz: /readyz is 503 until the ledger is open, while it
// catches up and while the store does not answer, and 200 otherwise;
// /healthz is 200 throughout.
func TestProbes_readyz(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	m := metrics.New()
	var pr probes
	h := pr.handler(m)
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var body map[string]any
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		}
		return rec.Code, body
	}
	code, body := get("/readyz")
	assert.Equal(t, 503, code)
	assert.Contains(t, body["reason"], "not open yet")

	store := &observedStore{Store: srv.Store("probes"), m: m}
	led := ledger.New(store, ledger.Config{Logger: testkit.NewLog(t, slog.LevelWarn).Logger})
	pr.ls.Store(&ledgerState{store: store, led: led})
	code, body = get("/readyz")
	assert.Equal(t, 503, code, "not started: not caught up")
	assert.Contains(t, body["reason"], "catching up")

	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitFor)
	defer cancel()
	require.NoError(t, led.Start(ctx))
	require.NoError(t, led.WaitReady(ctx))
	t.Cleanup(func() { _ = led.Close(context.Background()) })
	code, body = get("/readyz")
	assert.Equal(t, 200, code)
	assert.Equal(t, "ready", body["status"])

	srv.Stop()
	code, body = get("/readyz")
	assert.Equal(t, 503, code)
	assert.Contains(t, body["reason"], "cannot be reached")
	code, _ = get("/healthz")
	assert.Equal(t, 200, code)
	code, _ = get("/metrics")
	assert.Equal(t, 200, code)
	code, _ = get("/nothing")
	assert.Equal(t, 404, code)
}
