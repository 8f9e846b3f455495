package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadTarget says where and as whom the load is sent.
type loadTarget struct {
	name   string   // "gateway" or "refgw", for reports and the progress bar
	bases  []string // client k sends to bases[k % len(bases)]
	kind   string   // "deposit" or "withdraw"
	bank   string   // bankId sent in every request (the method code)
	sites  []site
	strict bool // keep and validate 200 answers; false for refgw, whose answers are not contract-shaped
	// bySite sends every request of site k to bases[k % len(bases)]
	// whichever client sends it, as a load balancer that hashes the
	// appKey header does: each site is then written through one gateway.
	bySite bool
	// hot is the share of requests sent to the first site (-hot).
	hot float64
}

// siteOf is the index of the site request i goes to: round-robin over the
// sites, or with hot > 0 that share of the requests to the first site,
// spread evenly through the run, and the rest round-robin over the others.
// It depends on i alone, so the checks find each request's site again.
func (t loadTarget) siteOf(i int) int {
	n := len(t.sites)
	if t.hot <= 0 || n < 2 {
		return i % n
	}
	// Request i is hot when the count of hot requests, ⌊k·hot⌋ for the
	// first k, steps up at it.
	hotBefore := int(float64(i) * t.hot)
	if int(float64(i+1)*t.hot) > hotBefore {
		return 0
	}
	return 1 + (i-hotBefore)%(n-1)
}

// baseOf is the index of the gateway request i goes to from a client of
// gateway own.
func (t loadTarget) baseOf(own, i int) int {
	if t.bySite {
		return t.siteOf(i) % len(t.bases)
	}
	return own
}

// loadConfig is the shape of the load, shared by the refgw and gateway phases
// so both see exactly the same requests.
type loadConfig struct {
	n, c    int
	max     time.Duration
	timeout time.Duration
	tag     string
}

// Bits of okRec.flags: problems found in a 200 answer while it was received,
// judged later by the checker so the checker alone decides pass or fail.
const (
	flagHashBad        uint8 = 1 << iota // data.hash is not base64 of 32 bytes
	flagAmountNotInt                     // data.amount is not a JSON integer
	flagAmountMismatch                   // data.amount differs from the amount sent
	flagProcessID                        // data.processId differs from the one sent
	flagAlreadyPending                   // a deposit came back alreadyPending although every request has its own user
	flagNoTxID                           // data.transactionId is empty
	flagKept                             // slot holds a 200 answer (used only while loading)
)

// okRec is what is kept of one 200 answer: 88 bytes plus the transactionId,
// so a million of them take ~120 MB. The hash is kept as raw bytes and bankId
// is interned, because both would otherwise double the size.
type okRec struct {
	txID   string
	bankID string
	amount int64
	idx    uint32 // i of processId "<tag>-<i>"; also gives the site (loadTarget.siteOf)
	site   uint32
	hash   [32]byte
	flags  uint8
}

// loadResult is the raw outcome of one load phase.
type loadResult struct {
	total      int
	codes      map[int]int
	lats       []time.Duration // ascending after runLoad returns
	elapsed    time.Duration
	stopped    bool     // -max or an interrupt ended the load before n requests
	oks        []okRec  // only for strict targets
	unknown    []uint32 // request indexes without a definite answer (network error or 5xx)
	refused    []uint32 // request indexes answered 503, which promises nothing was recorded
	okAt       []time.Duration
	perURL     []URLStats // in the order of loadTarget.bases
	errSamples map[int]string
}

// txData is the part of a transaction record the load test reads.
type txData struct {
	TransactionID  string          `json:"transactionId"`
	BankID         string          `json:"bankId"`
	Amount         json.RawMessage `json:"amount"`
	ProcessID      string          `json:"processId"`
	Hash           string          `json:"hash"`
	AlreadyPending bool            `json:"alreadyPending"`
}

// txEnvelope is a merchant answer carrying a transaction record.
type txEnvelope struct {
	Data    *txData `json:"data"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
}

// requestAmount is the amount of request i: 1,000 to 50,000 IQD in steps of
// 1,000, as in the bench's load command, so amounts vary but stay in range.
func requestAmount(i int) int64 { return 1000 + int64(i%50)*1000 }

// processID is the merchant id of request i; the tag makes it unique per run.
func processID(tag string, i int) string { return tag + "-" + strconv.Itoa(i) }

// buildBody returns the form body of request i. Every request has its own end
// user because the gateway returns an existing pending deposit instead of
// creating a second one for the same user (docs/merchant-api.md "Pending deposits (alreadyPending)").
func buildBody(kind, tag, bank string, i int) string {
	u := strconv.Itoa(i)
	f := url.Values{}
	f.Set("bankId", bank)
	f.Set("processId", processID(tag, i))
	f.Set("amount", strconv.FormatInt(requestAmount(i), 10))
	f.Set("userId", "u"+u)
	f.Set("userName", "user"+u)
	f.Set("name", "Ali Hassan "+u)
	if kind == "withdraw" {
		f.Set("accountName", "Ali Hassan")
		f.Set("iban", fmt.Sprintf("07%09d", i%1000000000))
	}
	return f.Encode()
}

// parseAmount reads data.amount. The contract wants a JSON integer; refgw
// sends a string, which is accepted but reported through isInt=false.
func parseAmount(raw json.RawMessage) (v int64, isInt bool, err error) {
	s := strings.TrimSpace(string(raw))
	if strings.HasPrefix(s, `"`) {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return 0, false, err
		}
		v, err := strconv.ParseInt(str, 10, 64)
		return v, false, err
	}
	v, err = strconv.ParseInt(s, 10, 64)
	return v, err == nil, err
}

// worker is the private state of one client goroutine; merging at the end
// avoids locks on the hot path.
type worker struct {
	url        int // index into loadTarget.bases
	perURL     []URLStats
	codes      map[int]int
	sent       int
	unknown    []uint32
	refused    []uint32
	errSamples map[int]string
	lastBank   string
}

// runLoad sends cfg.n signed requests with cfg.c keep-alive clients and
// records latency, status and the 200 answers. Request i goes to site
// loadTarget.siteOf(i); client k sends to gateway k % len(bases), so each gateway
// gets a fixed share of the clients rather than of the requests, and a slow
// gateway is measured as slow instead of being starved. The -max deadline is
// checked before each request rather than cancelling requests in flight, so
// no answer is cut off half way.
func runLoad(ctx context.Context, t loadTarget, cfg loadConfig, showProgress bool) *loadResult {
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.c, MaxConnsPerHost: cfg.c, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: cfg.timeout}
	endpoints := make([]string, len(t.bases))
	for k, b := range t.bases {
		endpoints[k] = strings.TrimRight(b, "/") + "/v1/transactions/" + t.kind
	}

	var next, done, errs atomic.Int64
	deadline := time.Now().Add(cfg.max)
	workers := make([]*worker, cfg.c)
	// One slot per request, written only by the worker that sent it: no
	// locks, no append growth, and no second copy when merging; compacted
	// in place afterwards.
	var oks []okRec
	if t.strict {
		oks = make([]okRec, cfg.n)
	}
	// Latencies likewise: slot i belongs to request i; unsent slots stay 0.
	lats := make([]time.Duration, cfg.n)
	// Completion time since t0 of each 200, for the unavailability window;
	// 0 marks a request that did not get one.
	okAt := make([]time.Duration, cfg.n)
	stopProgress := startProgress(t.name, cfg.n, &done, &errs, showProgress)
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wk := &worker{url: w % len(endpoints), codes: map[int]int{}, errSamples: map[int]string{}, perURL: make([]URLStats, len(endpoints))}
		workers[w] = wk
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(next.Add(1) - 1)
				if i >= cfg.n {
					return
				}
				u := t.baseOf(wk.url, i)
				code := wk.one(ctx, client, endpoints[u], t, cfg.tag, i, oks, lats)
				done.Add(1)
				wk.perURL[u].Requests++
				if code == http.StatusOK {
					wk.perURL[u].OK++
					okAt[i] = max(time.Since(t0), 1)
				} else {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	stopProgress()

	res := &loadResult{codes: map[int]int{}, errSamples: map[int]string{}, elapsed: elapsed, perURL: make([]URLStats, len(t.bases))}
	for k, b := range t.bases {
		res.perURL[k].URL = b
	}
	for _, wk := range workers {
		res.total += wk.sent
		for u, st := range wk.perURL {
			res.perURL[u].Requests += st.Requests
			res.perURL[u].OK += st.OK
		}
		res.unknown = append(res.unknown, wk.unknown...)
		res.refused = append(res.refused, wk.refused...)
		for c, v := range wk.codes {
			res.codes[c] += v
		}
		for c, s := range wk.errSamples {
			if _, ok := res.errSamples[c]; !ok {
				res.errSamples[c] = s
			}
		}
		*wk = worker{} // let the per-worker copies go before the checks run
	}
	res.lats = slices.DeleteFunc(lats, func(d time.Duration) bool { return d == 0 })
	slices.Sort(res.lats)
	res.okAt = slices.DeleteFunc(okAt, func(d time.Duration) bool { return d == 0 })
	res.stopped = res.total < cfg.n
	res.oks = compact(oks)
	return res
}

// compact moves the filled slots to the front in request order, clears the
// flagKept marker and drops the rest, without allocating a second slice.
func compact(oks []okRec) []okRec {
	k := 0
	for i := range oks {
		if oks[i].flags&flagKept != 0 {
			oks[k] = oks[i]
			oks[k].flags &^= flagKept
			k++
		}
	}
	clear(oks[k:]) // release the strings held by the now unused tail
	return oks[:k:k]
}

// one sends request i and records its outcome; it returns the HTTP status
// (0 when there was no HTTP answer). Latency runs from just before sending to
// the last body byte, so a slow body counts; JSON decoding is not included.
func (wk *worker) one(ctx context.Context, client *http.Client, endpoint string, t loadTarget, tag string, i int, oks []okRec, lats []time.Duration) int {
	s := t.sites[t.siteOf(i)]
	body := buildBody(t.kind, tag, t.bank, i)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("appKey", s.AppKey)
	req.Header.Set("sign", sign(s.Secret, body))
	ts := time.Now()
	resp, err := client.Do(req)
	var raw []byte
	code := 0
	if err == nil {
		raw, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		code = resp.StatusCode
		if err != nil {
			code = 0
		}
	}
	lats[i] = max(time.Since(ts), 1) // 0 marks an unsent slot
	wk.sent++
	wk.codes[code]++
	switch {
	case code == http.StatusOK:
		if t.strict {
			oks[i] = wk.keep(raw, t, tag, i)
		}
	default:
		if code == 0 || code >= 500 {
			// The request may or may not have been recorded; the balance
			// check looks these up by processId instead of guessing.
			wk.unknown = append(wk.unknown, uint32(i))
		}
		if code == http.StatusServiceUnavailable {
			wk.refused = append(wk.refused, uint32(i))
		}
		if _, ok := wk.errSamples[code]; !ok {
			if err != nil {
				wk.errSamples[code] = err.Error()
			} else {
				wk.errSamples[code] = truncate(string(raw), 300)
			}
		}
	}
	return code
}

// keep decodes a 200 answer into an okRec and flags what does not match the
// request; the checker later turns flags into failures.
func (wk *worker) keep(raw []byte, t loadTarget, tag string, i int) okRec {
	rec := okRec{idx: uint32(i), site: uint32(t.siteOf(i)), flags: flagKept}
	env, err := decodeAnswer(raw)
	if err != nil || env.Data == nil {
		rec.flags |= flagNoTxID | flagHashBad
		return rec
	}
	d := env.Data
	rec.txID = d.TransactionID
	if d.BankID == wk.lastBank {
		rec.bankID = wk.lastBank
	} else {
		rec.bankID, wk.lastBank = d.BankID, d.BankID
	}
	var ok bool
	if rec.hash, ok = decodeHash(d.Hash); !ok {
		rec.flags |= flagHashBad
	}
	amt, isInt, err := parseAmount(d.Amount)
	rec.amount = amt
	if err != nil || !isInt {
		rec.flags |= flagAmountNotInt
	}
	if amt != requestAmount(i) {
		rec.flags |= flagAmountMismatch
	}
	if d.ProcessID != processID(tag, i) {
		rec.flags |= flagProcessID
	}
	if d.AlreadyPending {
		rec.flags |= flagAlreadyPending
	}
	if d.TransactionID == "" {
		rec.flags |= flagNoTxID
	}
	return rec
}

// isTerminal reports whether f is a character device, which is how a
// terminal looks without pulling in x/term.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// startProgress shows progress on stderr until the returned stop function is
// called: redrawn in place ~5 times a second on a terminal, one plain line
// every 5 s otherwise (so CI logs stay readable).
func startProgress(name string, total int, done, errs *atomic.Int64, enabled bool) func() {
	if !enabled {
		return func() {}
	}
	tty := isTerminal(os.Stderr)
	every := 5 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	start := time.Now()
	line := func() string {
		d, el := done.Load(), time.Since(start)
		rps := 0.0
		if el > 0 {
			rps = float64(d) / el.Seconds()
		}
		return fmt.Sprintf("%s: %d/%d (%.0f%%) %.0f req/s elapsed %s errors=%d",
			name, d, total, 100*float64(d)/float64(max(total, 1)), rps, el.Truncate(100*time.Millisecond), errs.Load())
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-quit:
				if tty {
					fmt.Fprintf(os.Stderr, "\r%-90s\n", line())
				}
				return
			case <-tk.C:
				if tty {
					fmt.Fprintf(os.Stderr, "\r%-90s", line())
				} else {
					fmt.Fprintln(os.Stderr, line())
				}
			}
		}
	}()
	return func() { close(quit); <-finished }
}
