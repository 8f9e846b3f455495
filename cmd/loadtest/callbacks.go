package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The callbacks mode (-kind callbacks) measures the callback dispatcher
// (docs/callbacks.md) against a receiver inside this process that answers 200 at
// once:
//
//  1. drain: the gateway runs with --callbacks=false while -n deposits are
//     created and approved (untimed), so -n callbacks wait in the stream.
//     Then a dispatcher starts (-dispatcher gateway: the gateway restarted
//     with callbacks on; standalone: `gateway callbacks --nats …` next to
//     it) and the time to the n-th callback gives deliveries per second,
//     from the dispatcher's start and between the first and last callback.
//  2. lag: with that dispatcher running, -n more deposits are created
//     (untimed) and approved by -c clients; each callback's lag is its
//     arrival minus the moment its approval was sent.
//
// Every callback is checked: Standard Webhooks signature with the site's
// webhookSecret, type deposit.approved, status approved after pending, a
// transaction this run approved, at the callbackUrl of that transaction's
// site, and one callback per approval (repeats
// of a webhook-id are counted, not failed: delivery is at least once).

// CallbackReport is the outcome of one run of the callbacks mode.
type CallbackReport struct {
	Dispatcher string `json:"dispatcher"`
	N          int    `json:"n"`
	// DrainS is from the dispatcher's start to the n-th callback.
	DrainS float64 `json:"drainSeconds"`
	// DeliveriesPerS is n / DrainS; SteadyPerS is (n-1) over the time
	// from the first to the n-th callback (the dispatcher's start-up left
	// out).
	DeliveriesPerS float64 `json:"deliveriesPerSecond"`
	SteadyPerS     float64 `json:"steadyDeliveriesPerSecond"`
	// Lag phase: approvals per second and approval-to-callback lag, from
	// the approval's answer (the approval is recorded) to the callback's
	// arrival; negative when the callback beat the answer. SentP50Ms and
	// SentP99Ms measure from the moment the approval request was sent, so
	// they include the approval's own latency, as do SentP90Ms and
	// SentMaxMs.
	ApprovalsPerS float64 `json:"approvalsPerSecond"`
	LagP50Ms      float64 `json:"lagP50Ms"`
	LagP90Ms      float64 `json:"lagP90Ms"`
	LagP99Ms      float64 `json:"lagP99Ms"`
	LagMaxMs      float64 `json:"lagMaxMs"`
	SentP50Ms     float64 `json:"lagFromSendP50Ms"`
	SentP90Ms     float64 `json:"lagFromSendP90Ms"`
	SentP99Ms     float64 `json:"lagFromSendP99Ms"`
	SentMaxMs     float64 `json:"lagFromSendMaxMs"`
	Duplicates    int     `json:"duplicates"`
	// DrainConns and LagConns are the connections the dispatcher opened to
	// the receiver in each phase: few means keep-alive reuse.
	DrainConns int `json:"drainConnections"`
	LagConns   int `json:"lagConnections"`
}

// Line renders the report as one human line.
func (r *CallbackReport) Line(label string) string {
	return fmt.Sprintf("%s callbacks (%s dispatcher, n=%d): drain=%.2fs deliveries=%.0f/s steady=%.0f/s | lag phase approvals=%.0f/s lag p50=%.2fms p90=%.2fms p99=%.2fms max=%.2fms (from send p50=%.2fms p90=%.2fms p99=%.2fms max=%.2fms) | duplicates=%d connections=%d+%d",
		label, r.Dispatcher, r.N, r.DrainS, r.DeliveriesPerS, r.SteadyPerS, r.ApprovalsPerS, r.LagP50Ms, r.LagP90Ms, r.LagP99Ms, r.LagMaxMs,
		r.SentP50Ms, r.SentP90Ms, r.SentP99Ms, r.SentMaxMs, r.Duplicates, r.DrainConns, r.LagConns)
}

// medianCallbacks folds the runs' callback reports into medians.
func medianCallbacks(rs []*CallbackReport) *CallbackReport {
	if len(rs) == 0 {
		return nil
	}
	pick := func(f func(*CallbackReport) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return round2(median(xs))
	}
	return &CallbackReport{
		Dispatcher:     rs[0].Dispatcher,
		N:              rs[0].N,
		DrainS:         pick(func(r *CallbackReport) float64 { return r.DrainS }),
		DeliveriesPerS: pick(func(r *CallbackReport) float64 { return r.DeliveriesPerS }),
		SteadyPerS:     pick(func(r *CallbackReport) float64 { return r.SteadyPerS }),
		ApprovalsPerS:  pick(func(r *CallbackReport) float64 { return r.ApprovalsPerS }),
		LagP50Ms:       pick(func(r *CallbackReport) float64 { return r.LagP50Ms }),
		LagP90Ms:       pick(func(r *CallbackReport) float64 { return r.LagP90Ms }),
		LagP99Ms:       pick(func(r *CallbackReport) float64 { return r.LagP99Ms }),
		LagMaxMs:       pick(func(r *CallbackReport) float64 { return r.LagMaxMs }),
		SentP50Ms:      pick(func(r *CallbackReport) float64 { return r.SentP50Ms }),
		SentP90Ms:      pick(func(r *CallbackReport) float64 { return r.SentP90Ms }),
		SentP99Ms:      pick(func(r *CallbackReport) float64 { return r.SentP99Ms }),
		SentMaxMs:      pick(func(r *CallbackReport) float64 { return r.SentMaxMs }),
		Duplicates:     int(pick(func(r *CallbackReport) float64 { return float64(r.Duplicates) })),
		DrainConns:     int(pick(func(r *CallbackReport) float64 { return float64(r.DrainConns) })),
		LagConns:       int(pick(func(r *CallbackReport) float64 { return float64(r.LagConns) })),
	}
}

// hookSite is a site of the callbacks mode: its callbackUrl is the
// receiver's /s/<index>.
type hookSite struct {
	site
	WebhookSecret string `json:"webhookSecret"`
}

// receiver is the merchant endpoint of the callbacks mode.
type receiver struct {
	srv  *http.Server
	base string
	keys [][]byte // by site index: the webhook secret's key

	mu      sync.Mutex
	arrived map[string]time.Time // transactionId → first callback's arrival
	ids     map[string]int       // webhook-id → callbacks received
	first   time.Time
	last    time.Time
	// expect, when set, is the transactions whose callbacks are awaited,
	// each with its site's index; done is closed when all have arrived.
	expect  map[string]int
	pending int
	done    chan struct{}
	fails   *failures
	total   atomic.Int64
	conns   atomic.Int64 // connections accepted
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{base: "http://" + ln.Addr().String(), arrived: map[string]time.Time{}, ids: map[string]int{},
		fails: newFailures()}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) close() { _ = r.srv.Close() }

// hookMsg is the part of a callback body the receiver checks.
type hookMsg struct {
	Type string `json:"type"`
	Data struct {
		TransactionID  string `json:"transactionId"`
		Status         string `json:"status"`
		PreviousStatus string `json:"previousStatus"`
	} `json:"data"`
}

// ServeHTTP answers 200 at once and checks the callback.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	w.WriteHeader(http.StatusOK)
	r.total.Add(1)
	if err != nil {
		r.fail("read body: %v", err)
		return
	}
	k, err := strconv.Atoi(strings.TrimPrefix(req.URL.Path, "/s/"))
	r.mu.Lock()
	keys := r.keys
	r.mu.Unlock()
	if err != nil || k < 0 || k >= len(keys) {
		r.fail("callback to unknown path %q", req.URL.Path)
		return
	}
	id := req.Header.Get("webhook-id")
	if !verifyWebhook(keys[k], id, req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature"), body) {
		r.fail("callback %s: signature does not verify with the site's webhookSecret", id)
	}
	var m hookMsg
	if err := json.Unmarshal(body, &m); err != nil {
		r.fail("callback %s: body is not JSON: %v", id, err)
		return
	}
	if m.Type != "deposit.approved" || m.Data.Status != "approved" || m.Data.PreviousStatus != "pending" {
		r.fail("callback %s: type=%q status=%q previousStatus=%q, want deposit.approved approved pending",
			id, m.Type, m.Data.Status, m.Data.PreviousStatus)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[id]++
	if _, seen := r.arrived[m.Data.TransactionID]; seen {
		return
	}
	r.arrived[m.Data.TransactionID] = now
	// Every transaction of a phase is awaited before its approvals are
	// sent, and the previous phase's have all arrived, so a first callback
	// for anything else is for a transaction this run did not approve.
	site, ok := r.expect[m.Data.TransactionID]
	switch {
	case !ok:
		r.fail("callback %s: data.transactionId %q is not a transaction approved in this phase", id, m.Data.TransactionID)
	case site != k:
		r.fail("callback %s: transaction %s of site %d delivered to site %d's callbackUrl", id, m.Data.TransactionID, site, k)
	}
	if ok {
		if r.first.IsZero() {
			r.first = now
		}
		r.last = now
		if r.pending--; r.pending == 0 {
			close(r.done)
		}
	}
}

func (r *receiver) fail(format string, args ...any) { r.fails.add(catCallbacks, format, args...) }

// await sets the transactions of the next phase and their sites' indexes
// (sites[i] for txs[i]); the channel is closed once a callback of each has
// arrived.
func (r *receiver) await(txs []string, sites []int) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expect = make(map[string]int, len(txs))
	for i, tx := range txs {
		r.expect[tx] = sites[i]
	}
	r.pending, r.first, r.last = len(txs), time.Time{}, time.Time{}
	for tx := range r.arrived {
		if _, ok := r.expect[tx]; ok {
			r.pending--
		}
	}
	r.done = make(chan struct{})
	if r.pending == 0 {
		close(r.done)
	}
	return r.done
}

// missing lists the awaited transactions without a callback (at most 5).
func (r *receiver) missing() (n int, sample []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tx := range r.expect {
		if _, ok := r.arrived[tx]; !ok {
			n++
			if len(sample) < 5 {
				sample = append(sample, tx)
			}
		}
	}
	return n, sample
}

func (r *receiver) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.ids {
		n += c - 1
	}
	return n
}

// verifyWebhook checks a Standard Webhooks signature header (one or more
// space-separated "v1,<base64>") over id.timestamp.body.
func verifyWebhook(key []byte, id, ts, sigs string, body []byte) bool {
	if id == "" || ts == "" {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, ok := strings.CutPrefix(s, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(v)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// webhookKey decodes a "whsec_" webhook secret into its HMAC key.
func webhookKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, fmt.Errorf("webhookSecret %q lacks the whsec_ prefix", truncate(secret, 12))
	}
	return base64.StdEncoding.DecodeString(b64)
}

const catCallbacks = "callbacks"

// createHookSites creates n sites offering method m whose callbackUrl is
// the receiver.
func (a *api) createHookSites(ctx context.Context, prefix string, n int, m method, rcv *receiver) ([]site, error) {
	hs := make([]hookSite, n)
	keys := make([][]byte, n)
	err := parallel(ctx, n, func(k int) error {
		in := map[string]any{"name": fmt.Sprintf("%s-%d", prefix, k), "callbackUrl": fmt.Sprintf("%s/s/%d", rcv.base, k)}
		if err := a.ops(ctx, http.MethodPost, "/ops/v1/sites", in, &hs[k]); err != nil {
			return err
		}
		if err := a.useMethod(ctx, hs[k].ID, m); err != nil {
			return err
		}
		var err error
		keys[k], err = webhookKey(hs[k].WebhookSecret)
		return err
	})
	if err != nil {
		return nil, err
	}
	rcv.mu.Lock()
	rcv.keys = keys
	rcv.mu.Unlock()
	sites := make([]site, n)
	for k := range hs {
		sites[k] = hs[k].site
	}
	return sites, nil
}

// approveAll approves every transaction with c clients, calling at(i,
// false) just before approval i leaves and at(i, true) when its answer is
// in; it returns how long it took.
func (a *api) approveAll(ctx context.Context, txs []string, c int, at func(i int, answered bool)) (time.Duration, error) {
	var next atomic.Int64
	errs := make([]error, c)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(txs) {
					return
				}
				if at != nil {
					at(i, false)
				}
				if err := a.ops(ctx, http.MethodPost, "/ops/v1/deposits/"+txs[i]+"/approve", nil, nil); err != nil {
					errs[w] = err
					return
				}
				if at != nil {
					at(i, true)
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return time.Since(start), errors.Join(errs...)
}

// pendingDeposits creates n deposits spread over sites (untimed) and
// returns their transaction ids and each one's site index.
func pendingDeposits(ctx context.Context, base, bank string, sites []site, cfg loadConfig) ([]string, []int, error) {
	t := loadTarget{name: "gateway", bases: []string{base}, kind: "deposit", bank: bank, sites: sites, strict: true}
	res := runLoad(ctx, t, cfg, false)
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if res.codes[200] != cfg.n {
		return nil, nil, fmt.Errorf("creating %d deposits: answers %v (%v)", cfg.n, res.codes, res.errSamples)
	}
	txs := make([]string, 0, len(res.oks))
	idx := make([]int, 0, len(res.oks))
	for _, ok := range res.oks {
		txs = append(txs, ok.txID)
		idx = append(idx, int(ok.site))
	}
	return txs, idx, nil
}

// natsCredentials writes a random NATS password into dir and returns the
// flags that give it to the gateway and the dispatcher: the gateway exposes
// its embedded server (--nats-listen) only with credentials, and a file
// keeps the password out of the process list and the logged command lines.
func natsCredentials(dir string) ([]string, error) {
	file := filepath.Join(dir, "nats-password")
	if err := os.WriteFile(file, []byte(randomHex(24)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("nats password: %w", err)
	}
	return []string{"--nats-user", "loadtest", "--nats-password-file", file}, nil
}

// runCallbacks is one run of the callbacks mode.
func runCallbacks(ctx context.Context, o options, dir string, r int, rr *RunReport) error {
	rcv, err := startReceiver()
	if err != nil {
		return err
	}
	defer rcv.close()
	// Only a standalone dispatcher needs the embedded server's port; a
	// gateway without it runs as by default (it fsyncs the ledger's files
	// itself, docs/ARCHITECTURE.md "One fsync for many sites").
	args := []string{"--callbacks=false"}
	var natsAddr string
	var natsCreds []string
	if o.dispatcher == "standalone" {
		if natsAddr, err = freeAddr(); err != nil {
			return err
		}
		if natsCreds, err = natsCredentials(dir); err != nil {
			return err
		}
		args = append(append(args, "--nats-listen", natsAddr), natsCreds...)
	}
	g, base, token, err := spawnGateway(ctx, o, dir, r, args...)
	if err != nil {
		return err
	}
	// The closure reads g.p at exit: after a restart it stops the new process.
	defer func() {
		if err := g.end("term", r, rr); err != nil {
			logf("%v", err)
		}
	}()
	a := newAPI(base, token)
	m, err := a.createMethod(ctx)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	tag := "cb" + randomHex(4)
	sites, err := a.createHookSites(ctx, tag, o.sites, m, rcv)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	cfg := loadConfig{n: o.n, c: o.c, max: o.max, timeout: o.timeout, tag: tag + "a"}

	// 1. drain: n approvals waiting, then a dispatcher starts.
	txs, txSites, err := pendingDeposits(ctx, base, m.Code, sites, cfg)
	if err != nil {
		return err
	}
	if _, err := a.approveAll(ctx, txs, o.c, nil); err != nil {
		return fmt.Errorf("approving: %w", err)
	}
	time.Sleep(500 * time.Millisecond)
	if got := rcv.total.Load(); got != 0 {
		return fmt.Errorf("%d callbacks arrived from a gateway started with --callbacks=false", got)
	}
	done := rcv.await(txs, txSites)
	var start time.Time
	var stopDispatcher func()
	switch o.dispatcher {
	case "standalone":
		// Its probes and metrics on a port of its own: the default may be
		// taken on a shared machine.
		probeAddr, err := freeAddr()
		if err != nil {
			return err
		}
		start = time.Now()
		args := append([]string{"callbacks", "--nats", "nats://" + natsAddr, "--http", probeAddr, "--callback-allow-private"}, o.runtimeArgs()...)
		p, err := startProc("dispatcher", o.gateway, append(args, natsCreds...), filepath.Join(dir, "dispatcher.log"))
		if err != nil {
			return err
		}
		stopDispatcher = func() { _ = p.stop(30 * time.Second) }
	default:
		if err := g.end("term", r, rr); err != nil {
			return err
		}
		g.args = slices.DeleteFunc(slices.Clone(g.args), func(s string) bool { return s == "--callbacks=false" })
		start = time.Now()
		if g.p, err = startProc("gateway", g.bin, g.args, g.log); err != nil {
			return err
		}
		if _, err := waitReady(ctx, g.p, base+"/readyz", o.readyTimeout); err != nil {
			return err
		}
		stopDispatcher = func() {}
	}
	defer func() { stopDispatcher() }()
	if err := awaitCallbacks(ctx, rcv, done, o.max); err != nil {
		return err
	}
	rep := &CallbackReport{Dispatcher: o.dispatcher, N: len(txs), DrainConns: int(rcv.conns.Load())}
	rcv.mu.Lock()
	first, last := rcv.first, rcv.last
	rcv.mu.Unlock()
	drain := last.Sub(start)
	rep.DrainS = round2(drain.Seconds())
	rep.DeliveriesPerS = round2(float64(len(txs)) / drain.Seconds())
	if span := last.Sub(first); span > 0 {
		rep.SteadyPerS = round2(float64(len(txs)-1) / span.Seconds())
	}

	// 2. lag: approvals while the dispatcher runs.
	cfg.tag = tag + "b"
	txs, txSites, err = pendingDeposits(ctx, base, m.Code, sites, cfg)
	if err != nil {
		return err
	}
	sent, answered := make([]time.Time, len(txs)), make([]time.Time, len(txs))
	done = rcv.await(txs, txSites)
	took, err := a.approveAll(ctx, txs, o.c, func(i int, ans bool) {
		if ans {
			answered[i] = time.Now()
		} else {
			sent[i] = time.Now()
		}
	})
	if err != nil {
		return fmt.Errorf("approving: %w", err)
	}
	rep.ApprovalsPerS = round2(float64(len(txs)) / took.Seconds())
	if err := awaitCallbacks(ctx, rcv, done, o.max); err != nil {
		return err
	}
	rep.LagConns = int(rcv.conns.Load()) - rep.DrainConns
	rcv.mu.Lock()
	lagFigures(rep, txs, rcv.arrived, sent, answered)
	rcv.mu.Unlock()
	if o.restart {
		// Every callback delivered must stay delivered: a restart (its
		// snapshot load and replay) may repeat one (at least once, so
		// counted below) but must not lose or invent any.
		d, err := g.restart(ctx, o, r, rr, base)
		if err != nil {
			return fmt.Errorf("after restart: %w", err)
		}
		secs := round2(d.Seconds())
		rr.RestartToReadyS = &secs
		time.Sleep(2 * time.Second)
	}
	rep.Duplicates = rcv.duplicates()
	rr.Callbacks = rep
	fmt.Printf("run %d %s\n", r, rep.Line("gateway"))
	rr.Failures = append(rr.Failures, rcv.fails.lines()...)
	if got := rcv.total.Load(); int(got) != 2*o.n+rep.Duplicates {
		rr.Failures = append(rr.Failures, fmt.Sprintf("callbacks: %d received, want %d approvals plus %d repeats", got, 2*o.n, rep.Duplicates))
	}
	if len(rr.Failures) == 0 {
		logf("run %d: every callback arrived once per approval, signed and as approved", r)
	} else {
		rr.Failures = append(rr.Failures, "gateway log: "+g.log)
	}
	return nil
}

// lagFigures fills the lag percentiles of rep: for txs[i], its callback's
// arrival minus answered[i] (the approval's answer) and minus sent[i] (the
// moment the approval request left).
func lagFigures(rep *CallbackReport, txs []string, arrived map[string]time.Time, sent, answered []time.Time) {
	if len(txs) == 0 {
		return
	}
	lags, fromSend := make([]time.Duration, len(txs)), make([]time.Duration, len(txs))
	for i, tx := range txs {
		lags[i], fromSend[i] = arrived[tx].Sub(answered[i]), arrived[tx].Sub(sent[i])
	}
	slices.Sort(lags)
	slices.Sort(fromSend)
	rep.LagP50Ms, rep.LagP90Ms = ms(percentile(lags, 0.5)), ms(percentile(lags, 0.9))
	rep.LagP99Ms, rep.LagMaxMs = ms(percentile(lags, 0.99)), ms(lags[len(lags)-1])
	rep.SentP50Ms, rep.SentP90Ms = ms(percentile(fromSend, 0.5)), ms(percentile(fromSend, 0.9))
	rep.SentP99Ms, rep.SentMaxMs = ms(percentile(fromSend, 0.99)), ms(fromSend[len(fromSend)-1])
}

// awaitCallbacks waits for done, failing with what is missing after max.
func awaitCallbacks(ctx context.Context, rcv *receiver, done <-chan struct{}, limit time.Duration) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(limit):
		n, sample := rcv.missing()
		return fmt.Errorf("callbacks: %d approved transactions got no callback within %s, e.g. %v", n, limit, sample)
	}
}
