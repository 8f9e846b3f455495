package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/metrics"
)

// gather returns the registry's families by name.
func gather(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry().Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// TestNew_registersEverySeries: the series of docs/metrics.md exist from
// the start (the labelled counters at zero), next to the Go runtime's and
// the process's, and the handler serves them.
func TestNew_registersEverySeries(t *testing.T) {
	m := metrics.New()
	fams := gather(t, m)
	for _, name := range []string{"gateway_http_requests_in_flight", "gateway_ledger_appends_total", "gateway_ledger_redecisions_total",
		"gateway_ledger_batch_commands", "gateway_expiry_sweep_duration_seconds", "gateway_expiry_sweeps_incomplete_total",
		"gateway_expiry_deposits_expired_total", "gateway_callback_deliveries_total", "gateway_callback_delivery_delay_seconds",
		"go_goroutines", "process_open_fds"} {
		assert.Contains(t, fams, name)
	}
	assert.Len(t, fams["gateway_ledger_appends_total"].GetMetric(), 4, "stored, conflict, unavailable and unknown")
	assert.Len(t, fams["gateway_callback_deliveries_total"].GetMetric(), 3, "delivered, failed and given_up")

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	assert.Equal(t, 200, rec.Code)
	body, _ := io.ReadAll(rec.Body)
	assert.Contains(t, string(body), `gateway_ledger_appends_total{outcome="stored"} 0`)
}

// TestHooks: each hook moves its series.
func TestHooks(t *testing.T) {
	m := metrics.New()
	m.RequestStarted()
	m.RequestStarted()
	m.RequestDone("/v1/balance", "GET", 200, 3*time.Millisecond)
	m.Appended(metrics.AppendStored)
	m.Appended(metrics.AppendConflict)
	m.StoreCall("append", time.Millisecond, false)
	m.StoreCall("append", time.Millisecond, true)
	m.Redecided()
	m.Committed(5)
	m.Swept(time.Millisecond, 2, nil)
	m.Swept(time.Millisecond, 1, errors.New("store gone"))
	m.CallbackAttempted(false, time.Second, time.Minute)
	m.CallbackAttempted(true, time.Second, -time.Second) // clocks apart: counted as no delay
	m.CallbackGivenUp()

	fams := gather(t, m)
	value := func(name string, labels ...string) float64 {
		t.Helper()
		for _, mt := range fams[name].GetMetric() {
			if matches(mt, labels) {
				switch {
				case mt.Counter != nil:
					return mt.Counter.GetValue()
				case mt.Gauge != nil:
					return mt.Gauge.GetValue()
				case mt.Histogram != nil:
					return float64(mt.Histogram.GetSampleCount())
				}
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	assert.Equal(t, 1.0, value("gateway_http_requests_in_flight"))
	assert.Equal(t, 1.0, value("gateway_http_request_duration_seconds", "route", "/v1/balance", "method", "GET", "status", "200"))
	assert.Equal(t, 1.0, value("gateway_ledger_appends_total", "outcome", "stored"))
	assert.Equal(t, 1.0, value("gateway_ledger_appends_total", "outcome", "conflict"))
	assert.Equal(t, 0.0, value("gateway_ledger_appends_total", "outcome", "unavailable"))
	assert.Equal(t, 2.0, value("gateway_store_request_duration_seconds", "op", "append"))
	assert.Equal(t, 1.0, value("gateway_store_errors_total", "op", "append"))
	assert.Equal(t, 1.0, value("gateway_ledger_redecisions_total"))
	assert.Equal(t, 1.0, value("gateway_ledger_batch_commands"))
	assert.Equal(t, 2.0, value("gateway_expiry_sweep_duration_seconds"))
	assert.Equal(t, 1.0, value("gateway_expiry_sweeps_incomplete_total"))
	assert.Equal(t, 3.0, value("gateway_expiry_deposits_expired_total"))
	assert.Equal(t, 1.0, value("gateway_callback_deliveries_total", "outcome", "delivered"))
	assert.Equal(t, 1.0, value("gateway_callback_deliveries_total", "outcome", "failed"))
	assert.Equal(t, 1.0, value("gateway_callback_deliveries_total", "outcome", "given_up"))
	assert.Equal(t, 1.0, value("gateway_callback_attempt_duration_seconds", "outcome", "failed"))
	assert.Equal(t, 1.0, value("gateway_callback_delivery_delay_seconds"))
	h := fams["gateway_callback_delivery_delay_seconds"].GetMetric()[0].GetHistogram()
	assert.Zero(t, h.GetSampleSum())
}

func matches(mt *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range mt.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestFollowerLag: the lag is computed at the scrape, and left out of it
// when the store does not answer, rather than reported as a number.
func TestFollowerLag(t *testing.T) {
	m := metrics.New()
	var last uint64 = 10
	var fail error
	var applied uint64 = 7
	calls := 0
	m.FollowerLag(func(ctx context.Context) (uint64, error) {
		calls++
		_, ok := ctx.Deadline()
		assert.True(t, ok, "the store call is bounded")
		return last, fail
	}, func() uint64 { return applied })
	assert.Zero(t, calls, "registering calls nothing")

	fams := gather(t, m)
	require.Contains(t, fams, "gateway_ledger_follower_lag_messages")
	assert.Equal(t, 3.0, fams["gateway_ledger_follower_lag_messages"].GetMetric()[0].GetGauge().GetValue())

	applied = 12 // applied past a last sequence read a moment before
	fams = gather(t, m)
	assert.Zero(t, fams["gateway_ledger_follower_lag_messages"].GetMetric()[0].GetGauge().GetValue())

	fail = errors.New("no answer")
	fams = gather(t, m)
	assert.NotContains(t, fams, "gateway_ledger_follower_lag_messages")
	assert.Equal(t, 3, calls, "one store call per scrape")
}

// TestCallbackBacklog: the dispatcher's gauges at the scrape; an unknown
// stream pending count is left out.
func TestCallbackBacklog(t *testing.T) {
	m := metrics.New()
	b := metrics.Backlog{StreamPending: -1}
	m.CallbackBacklog(func(context.Context) metrics.Backlog { return b })
	fams := gather(t, m)
	assert.Zero(t, fams["gateway_callbacks_active"].GetMetric()[0].GetGauge().GetValue())
	assert.Zero(t, fams["gateway_callbacks_queued"].GetMetric()[0].GetGauge().GetValue())
	assert.Zero(t, fams["gateway_callbacks_oldest_queued_age_seconds"].GetMetric()[0].GetGauge().GetValue())
	assert.NotContains(t, fams, "gateway_callbacks_stream_pending_messages")

	b = metrics.Backlog{Active: true, Queued: 4, Oldest: time.Now().Add(-time.Minute), StreamPending: 9}
	fams = gather(t, m)
	assert.Equal(t, 1.0, fams["gateway_callbacks_active"].GetMetric()[0].GetGauge().GetValue())
	assert.Equal(t, 4.0, fams["gateway_callbacks_queued"].GetMetric()[0].GetGauge().GetValue())
	assert.InDelta(t, 60, fams["gateway_callbacks_oldest_queued_age_seconds"].GetMetric()[0].GetGauge().GetValue(), 5)
	assert.Equal(t, 9.0, fams["gateway_callbacks_stream_pending_messages"].GetMetric()[0].GetGauge().GetValue())
}

// TestNew_registriesApart: two processes in one binary (tests) count apart.
func TestNew_registriesApart(t *testing.T) {
	a, b := metrics.New(), metrics.New()
	a.Redecided()
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	assert.True(t, strings.Contains(rec.Body.String(), "gateway_ledger_redecisions_total 0"), rec.Body.String())
}
