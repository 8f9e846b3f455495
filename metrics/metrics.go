// Package metrics owns a process's Prometheus registry. It implements the
// measurement hooks that the HTTP API, the ledger and the callback
// dispatcher declare for themselves (httpapi.Metrics, ledger.Metrics,
// callbacks.Metrics), so that none of them imports Prometheus, and it serves
// the registry at /metrics. docs/metrics.md lists every series.
//
// There is no global registry: each process makes one Metrics and hands it
// down, so that two gateways in one test binary count apart.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every series of our own (docs/metrics.md "Names").
const namespace = "gateway"

// Buckets, in seconds (docs/metrics.md "Histograms"). A request or a store
// round trip is a millisecond or two on one node and tens of milliseconds
// with fsync under load; the tail up to the 10 s request deadline matters.
var (
	fastBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// A callback attempt is bounded by its 15 s timeout.
	attemptBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15}
	// From the event to its 2xx: immediate normally, hours when a
	// merchant's endpoint was down (the retry schedule reaches 10 h).
	delayBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600}
	// Commands per appended message: the ledger's MaxBatch is 256.
	batchBuckets = prometheus.ExponentialBuckets(1, 2, 9)
)

// Metrics is one process's registry and the series the hooks feed. Its
// methods are safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	httpDuration *prometheus.HistogramVec
	httpInFlight prometheus.Gauge

	appends     *prometheus.CounterVec
	redecisions prometheus.Counter
	handOvers   *prometheus.CounterVec
	batch       prometheus.Histogram
	storeTime   *prometheus.HistogramVec
	storeErrors *prometheus.CounterVec

	sweepTime       prometheus.Histogram
	sweepIncomplete prometheus.Counter
	expired         prometheus.Counter

	deliveries  *prometheus.CounterVec
	attemptTime *prometheus.HistogramVec
	delay       prometheus.Histogram
}

// New makes a registry with the Go runtime's and the process's collectors
// and every series of docs/metrics.md.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{reg}
	m := &Metrics{
		reg: reg,
		httpDuration: f.histogramVec("http_request_duration_seconds",
			"Time from a request's arrival to its answer, by route pattern (never the raw path), method and status.",
			fastBuckets, "route", "method", "status"),
		httpInFlight: f.gauge("http_requests_in_flight", "Requests being served."),

		appends: f.counterVec("ledger_appends_total",
			"Appends to the ledger stream by outcome: stored, conflict (another writer was first) or unavailable.", "outcome"),
		redecisions: f.counter("ledger_redecisions_total",
			"Batches decided again after a conflict (the state caught up from the stream first)."),
		handOvers: f.counterVec("ledger_handovers_total",
			"Hand-overs of a busy site between gateway processes: asked (this process conflicted twice in a row and asked the others to hold) or held (this process held an append for another).",
			"direction"),
		batch: f.histogram("ledger_batch_commands", "Commands in one appended message (group commit).", batchBuckets),
		storeTime: f.histogramVec("store_request_duration_seconds",
			"Round trips to the event store by operation.", fastBuckets, "op"),
		storeErrors: f.counterVec("store_errors_total",
			"Event store calls that failed, by operation (not found and conflicts are answers, not failures).", "op"),

		sweepTime: f.histogram("expiry_sweep_duration_seconds", "Deposit expiry sweeps and how long each took.",
			prometheus.DefBuckets),
		sweepIncomplete: f.counter("expiry_sweeps_incomplete_total", "Expiry sweeps that could not expire every due deposit."),
		expired:         f.counter("expiry_deposits_expired_total", "Deposits this process expired."),

		deliveries: f.counterVec("callback_deliveries_total",
			"Callback outcomes: delivered (an attempt answered 2xx), failed (an attempt that did not) or given_up (parked as failed).",
			"outcome"),
		attemptTime: f.histogramVec("callback_attempt_duration_seconds",
			"Callback POSTs by outcome (delivered or failed) and how long each took.", attemptBuckets, "outcome"),
		delay: f.histogram("callback_delivery_delay_seconds",
			"Time from a final-state event to its callback's 2xx, retries included.", delayBuckets),
	}
	for _, d := range []string{"asked", "held"} {
		m.handOvers.WithLabelValues(d)
	}
	for _, o := range []string{AppendStored, AppendConflict, AppendUnavailable, AppendUnknown} {
		m.appends.WithLabelValues(o)
	}
	for _, o := range []string{"delivered", "failed", "given_up"} {
		m.deliveries.WithLabelValues(o)
	}
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorHandling: promhttp.ContinueOnError,
		MaxRequestsInFlight: 4, Timeout: 10 * time.Second})
	return m
}

// Handler serves the registry in the Prometheus text format. It belongs on
// an internal address only (docs/metrics.md "Keeping /metrics internal").
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is the registry, for tests and for collectors of the caller's.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// RequestStarted counts a request in flight until RequestDone.
func (m *Metrics) RequestStarted() { m.httpInFlight.Inc() }

// RequestDone observes a finished request. route must be a route pattern
// or a fixed word, never a path taken from the request: every distinct
// value is a series of its own.
func (m *Metrics) RequestDone(route, method string, status int, took time.Duration) {
	m.httpInFlight.Dec()
	m.httpDuration.WithLabelValues(route, method, strconv.Itoa(status)).Observe(took.Seconds())
}

// Append outcomes (label values of gateway_ledger_appends_total).
const (
	AppendStored      = "stored"
	AppendConflict    = "conflict"
	AppendUnavailable = "unavailable"
	AppendUnknown     = "unknown"
)

// Appended counts one append by its outcome (AppendStored, ...).
func (m *Metrics) Appended(outcome string) { m.appends.WithLabelValues(outcome).Inc() }

// StoreCall observes one store round trip; failed when it went wrong.
func (m *Metrics) StoreCall(op string, took time.Duration, failed bool) {
	m.storeTime.WithLabelValues(op).Observe(took.Seconds())
	if failed {
		m.storeErrors.WithLabelValues(op).Inc()
	}
}

// Redecided counts a batch decided again after a conflict.
func (m *Metrics) Redecided() { m.redecisions.Inc() }

// HandOver counts a hand-over of a busy site: asked of the other
// processes, or held for one of them.
func (m *Metrics) HandOver(asked bool) {
	d := "held"
	if asked {
		d = "asked"
	}
	m.handOvers.WithLabelValues(d).Inc()
}

// Committed observes one stored message of commands commands.
func (m *Metrics) Committed(commands int) { m.batch.Observe(float64(commands)) }

// Swept observes one expiry sweep.
func (m *Metrics) Swept(took time.Duration, expired int, err error) {
	m.sweepTime.Observe(took.Seconds())
	m.expired.Add(float64(expired))
	if err != nil {
		m.sweepIncomplete.Inc()
	}
}

// CallbackAttempted observes one callback POST: delivered (2xx) or not,
// how long it took, and how long after its event it ended.
func (m *Metrics) CallbackAttempted(delivered bool, took, sinceEvent time.Duration) {
	o := "failed"
	if delivered {
		o = "delivered"
		m.delay.Observe(max(sinceEvent, 0).Seconds())
	}
	m.deliveries.WithLabelValues(o).Inc()
	m.attemptTime.WithLabelValues(o).Observe(took.Seconds())
}

// CallbackGivenUp counts a callback parked as failed.
func (m *Metrics) CallbackGivenUp() { m.deliveries.WithLabelValues("given_up").Inc() }

// scrapeTimeout bounds a collector's own store call at scrape time, so a
// store that does not answer leaves a series out rather than hanging the
// scrape.
const scrapeTimeout = 2 * time.Second

// FollowerLag reports gateway_ledger_follower_lag_messages at every
// scrape: the stream's last sequence (last, one store call per scrape,
// never per request) minus the sequence the ledger has applied. The series
// is left out of a scrape when the store does not answer.
func (m *Metrics) FollowerLag(last func(context.Context) (uint64, error), applied func() uint64) {
	desc := prometheus.NewDesc(namespace+"_ledger_follower_lag_messages",
		"Ledger stream messages this process has not applied yet.", nil, nil)
	m.reg.MustRegister(&collector{desc: []*prometheus.Desc{desc}, collect: func(ch chan<- prometheus.Metric) {
		// Applied first: it only grows, so the difference is never
		// below the truth.
		a := applied()
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		l, err := last(ctx)
		if err != nil {
			return
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(l-min(a, l)))
	}})
}

// Batches is what a store's group commit across sites did so far.
type Batches struct {
	// Stored, Refused and Unknown count atomic batches by outcome;
	// Appends counts the appends the stored ones held.
	Stored, Refused, Unknown, Appends uint64
}

// StoreBatches reports gateway_store_batches_total by outcome and
// gateway_store_batched_appends_total at every scrape, read from counters
// the store keeps (no store call).
func (m *Metrics) StoreBatches(read func() Batches) {
	batches := prometheus.NewDesc(namespace+"_store_batches_total",
		"Atomic batches of appends of different sites sent to the stream, by outcome: stored, refused (its appends then sent one by one) or unknown (each append settled on its own).",
		[]string{"outcome"}, nil)
	appends := prometheus.NewDesc(namespace+"_store_batched_appends_total", "Appends stored in atomic batches.", nil, nil)
	m.reg.MustRegister(&collector{desc: []*prometheus.Desc{batches, appends}, collect: func(ch chan<- prometheus.Metric) {
		b := read()
		ch <- prometheus.MustNewConstMetric(batches, prometheus.CounterValue, float64(b.Stored), "stored")
		ch <- prometheus.MustNewConstMetric(batches, prometheus.CounterValue, float64(b.Refused), "refused")
		ch <- prometheus.MustNewConstMetric(batches, prometheus.CounterValue, float64(b.Unknown), "unknown")
		ch <- prometheus.MustNewConstMetric(appends, prometheus.CounterValue, float64(b.Appends))
	}})
}

// Fsyncs is what the store's own fsyncs of the ledger's files did so far.
type Fsyncs struct {
	// Done and Failed count fsync rounds; Waits counts the appends and
	// reads that waited for one.
	Done, Failed, Waits uint64
}

// StoreFsyncs reports gateway_store_fsyncs_total by outcome and
// gateway_store_fsync_waits_total at every scrape, read from counters the
// store keeps.
func (m *Metrics) StoreFsyncs(read func() Fsyncs) {
	rounds := prometheus.NewDesc(namespace+"_store_fsyncs_total",
		"Fsyncs of the ledger's block files made by the gateway, each for every append acknowledged before it started, by outcome: done or failed (the store then stops).",
		[]string{"outcome"}, nil)
	waits := prometheus.NewDesc(namespace+"_store_fsync_waits_total", "Appends and reads that waited for one of those fsyncs.", nil, nil)
	m.reg.MustRegister(&collector{desc: []*prometheus.Desc{rounds, waits}, collect: func(ch chan<- prometheus.Metric) {
		f := read()
		ch <- prometheus.MustNewConstMetric(rounds, prometheus.CounterValue, float64(f.Done), "done")
		ch <- prometheus.MustNewConstMetric(rounds, prometheus.CounterValue, float64(f.Failed), "failed")
		ch <- prometheus.MustNewConstMetric(waits, prometheus.CounterValue, float64(f.Waits))
	}})
}

// Backlog is the callback dispatcher's state at a scrape.
type Backlog struct {
	// Active: this process holds the lease and delivers.
	Active bool
	// Queued is the callbacks taken from the stream and not yet settled.
	Queued int
	// Oldest is when the oldest ledger message with an unsettled callback
	// was stored; zero when there is none.
	Oldest time.Time
	// StreamPending is the ledger messages the dispatcher's consumer has
	// not handed over yet; negative when unknown (a standby, a store that
	// does not answer).
	StreamPending int64
}

// CallbackBacklog reports the dispatcher's gauges at every scrape from
// backlog, which must answer within the context it is given.
func (m *Metrics) CallbackBacklog(backlog func(context.Context) Backlog) {
	active := prometheus.NewDesc(namespace+"_callbacks_active", "1 while this process is the delivering dispatcher.", nil, nil)
	queued := prometheus.NewDesc(namespace+"_callbacks_queued", "Callbacks taken from the stream and not yet delivered or parked.", nil, nil)
	oldest := prometheus.NewDesc(namespace+"_callbacks_oldest_queued_age_seconds",
		"Age of the oldest ledger message whose callbacks are not all delivered or parked; 0 when none.", nil, nil)
	pending := prometheus.NewDesc(namespace+"_callbacks_stream_pending_messages",
		"Ledger messages the callbacks consumer has not handed to the dispatcher yet (active dispatcher only).", nil, nil)
	m.reg.MustRegister(&collector{desc: []*prometheus.Desc{active, queued, oldest, pending}, collect: func(ch chan<- prometheus.Metric) {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		b := backlog(ctx)
		on, age := 0.0, 0.0
		if b.Active {
			on = 1
		}
		if !b.Oldest.IsZero() {
			age = max(time.Since(b.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(active, prometheus.GaugeValue, on)
		ch <- prometheus.MustNewConstMetric(queued, prometheus.GaugeValue, float64(b.Queued))
		ch <- prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, age)
		if b.StreamPending >= 0 {
			ch <- prometheus.MustNewConstMetric(pending, prometheus.GaugeValue, float64(b.StreamPending))
		}
	}})
}

// collector computes its series at scrape time. Its descriptions are
// fixed, so registering it does not run collect (prometheus.CollectorFunc
// would, and call the store).
type collector struct {
	desc    []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.desc {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// factory registers series under the namespace.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}
