package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// percentile returns the nearest-rank p-quantile (0 < p <= 1) of an
// ascending slice: the smallest value such that at least p of all values are
// at or below it. Nearest rank never interpolates, so p999 of a run is a
// latency some request really had.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// ms converts a duration to milliseconds rounded to 2 decimals, the unit and
// precision of every latency in the report.
func ms(d time.Duration) float64 { return round2(float64(d) / float64(time.Millisecond)) }

// round2 rounds to 2 decimals so the JSON report carries the same figures as
// the human line.
func round2(x float64) float64 { return math.Round(x*100) / 100 }

// median returns the median of xs (mean of the two middle values for an even
// count); it is what -runs reports, because one noisy run must not move it.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// LoadReport holds the figures of one load phase against one server.
type LoadReport struct {
	Target       string         `json:"target"`
	Kind         string         `json:"kind"`
	Total        int            `json:"total"`
	OK           int            `json:"ok"`
	Codes        map[string]int `json:"codes"`
	ElapsedS     float64        `json:"elapsedSeconds"`
	Throughput   float64        `json:"throughput"`
	P50Ms        float64        `json:"p50Ms"`
	P90Ms        float64        `json:"p90Ms"`
	P99Ms        float64        `json:"p99Ms"`
	P999Ms       float64        `json:"p999Ms"`
	MaxMs        float64        `json:"maxMs"`
	StoppedEarly bool           `json:"stoppedEarly,omitempty"`
	RSSPeakMiB   *float64       `json:"rssPeakMiB,omitempty"`
	RSSMiB       *float64       `json:"rssMiB,omitempty"`
	// ServerCPUus is the CPU time (user and system) the spawned server
	// used during the phase, and ClientCPUus the load test's own, in µs a
	// request (see cpu.go).
	ServerCPUus *float64 `json:"serverCpuUsPerRequest,omitempty"`
	ClientCPUus *float64 `json:"clientCpuUsPerRequest,omitempty"`
	// URLs are the gateways the clients were spread over, with each one's share.
	URLs []URLStats `json:"urls,omitempty"`
	// The answers that were not 200, by what they tell a merchant: 503 means
	// nothing was recorded, 504 that it may have been, other is every other
	// status (4xx, 500, ...), transport is no HTTP answer at all.
	Status503       int `json:"status503"`
	Status504       int `json:"status504"`
	OtherErrors     int `json:"otherErrors"`
	TransportErrors int `json:"transportErrors"`
	// LongestGapMs is the longest stretch of the run without a 200 answer,
	// starting LongestGapFromMs after the load began; LongestGapEdge says
	// when it is not between two 200s (see gapEdge*). A measurement only:
	// nothing fails on it.
	LongestGapMs     float64 `json:"longestGapMs"`
	LongestGapFromMs float64 `json:"longestGapFromMs"`
	LongestGapEdge   string  `json:"longestGapEdge,omitempty"`
}

// URLStats is one gateway's share of the load.
type URLStats struct {
	URL      string `json:"url"`
	Requests int    `json:"requests"`
	OK       int    `json:"ok"`
}

// Values of LoadReport.LongestGapEdge.
const (
	gapEdgeStart = "start" // from the start of the load to the first 200
	gapEdgeEnd   = "end"   // from the last 200 to the end of the load
	gapEdgeWhole = "whole" // no 200 at all
)

// gap is a stretch of the run without a 200 answer, as offsets from its start.
type gap struct {
	from, length time.Duration
	edge         string // "" between two 200s, else one of gapEdge*
}

// longestGap finds the longest stretch without a 200 in a load that lasted
// elapsed, given the completion offsets of its 200 answers (any order; the
// slice is sorted in place). The stretches before the first and after the
// last 200 are candidates too, but win only when strictly longer than every
// stretch between two 200s: the first includes the first request's own
// latency (connection set-up, a cold gateway), and both are cut short by
// the arbitrary start and end of the load, so an inner gap that equals them
// is the better-founded figure.
func longestGap(okAt []time.Duration, elapsed time.Duration) gap {
	if len(okAt) == 0 {
		return gap{length: elapsed, edge: gapEdgeWhole}
	}
	slices.Sort(okAt)
	var g gap
	for k := 1; k < len(okAt); k++ {
		if d := okAt[k] - okAt[k-1]; d > g.length {
			g = gap{from: okAt[k-1], length: d}
		}
	}
	if okAt[0] > g.length {
		g = gap{length: okAt[0], edge: gapEdgeStart}
	}
	last := okAt[len(okAt)-1]
	if d := elapsed - last; d > g.length {
		g = gap{from: last, length: d, edge: gapEdgeEnd}
	}
	return g
}

// setGap records g in the report.
func (r *LoadReport) setGap(g gap) {
	r.LongestGapMs = ms(g.length)
	r.LongestGapFromMs = ms(g.from)
	r.LongestGapEdge = g.edge
}

// newLoadReport summarises a finished load. lats must be sorted ascending.
// Throughput counts only 200 answers, because errors are usually cheaper than
// real work and must not inflate the figure.
func newLoadReport(target, kind string, total int, codes map[int]int, lats []time.Duration, elapsed time.Duration, stopped bool) *LoadReport {
	r := &LoadReport{Target: target, Kind: kind, Total: total, OK: codes[200], Codes: map[string]int{}, StoppedEarly: stopped}
	for c, v := range codes {
		r.Codes[codeLabel(c)] = v
	}
	r.Status503, r.Status504, r.TransportErrors = codes[503], codes[504], codes[0]
	r.OtherErrors = total - r.OK - r.Status503 - r.Status504 - r.TransportErrors
	r.ElapsedS = round2(elapsed.Seconds())
	if elapsed > 0 {
		r.Throughput = round2(float64(r.OK) / elapsed.Seconds())
	}
	r.P50Ms = ms(percentile(lats, 0.50))
	r.P90Ms = ms(percentile(lats, 0.90))
	r.P99Ms = ms(percentile(lats, 0.99))
	r.P999Ms = ms(percentile(lats, 0.999))
	if len(lats) > 0 {
		r.MaxMs = ms(lats[len(lats)-1])
	}
	return r
}

// codeLabel names a status code for the report; 0 stands for requests that got
// no HTTP answer at all (connection error or client timeout).
func codeLabel(c int) string {
	if c == 0 {
		return "neterr"
	}
	return strconv.Itoa(c)
}

// Line renders the report as the one human line printed per phase.
func (r *LoadReport) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: total=%d ok=%d codes=%s elapsed=%.2fs throughput=%.2f/s p50=%.2fms p90=%.2fms p99=%.2fms p999=%.2fms max=%.2fms",
		r.Target, r.Kind, r.Total, r.OK, formatCodes(r.Codes), r.ElapsedS, r.Throughput, r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms, r.MaxMs)
	if r.RSSPeakMiB != nil {
		fmt.Fprintf(&b, " rss_peak=%.2fMiB", *r.RSSPeakMiB)
	}
	if r.RSSMiB != nil {
		fmt.Fprintf(&b, " rss=%.2fMiB", *r.RSSMiB)
	}
	if r.ServerCPUus != nil {
		fmt.Fprintf(&b, " cpu_per_req=%.1fus", *r.ServerCPUus)
	}
	if r.ClientCPUus != nil {
		fmt.Fprintf(&b, " loadtest_cpu_per_req=%.1fus", *r.ClientCPUus)
	}
	if r.StoppedEarly {
		b.WriteString(" (stopped by -max)")
	}
	return b.String()
}

// AvailabilityLine renders the unavailability figures as a second human line.
func (r *LoadReport) AvailabilityLine() string {
	var where string
	switch r.LongestGapEdge {
	case gapEdgeStart:
		where = " (from the start to the first 200)"
	case gapEdgeEnd:
		where = " (from the last 200 to the end)"
	case gapEdgeWhole:
		where = " (no 200 at all)"
	}
	return fmt.Sprintf("%s availability: longest_gap=%.2fms at=%.2fs%s 503=%d 504=%d other=%d transport=%d",
		r.Target, r.LongestGapMs, r.LongestGapFromMs/1000, where, r.Status503, r.Status504, r.OtherErrors, r.TransportErrors)
}

// URLLine lists the gateways that got the load and each one's share.
func (r *LoadReport) URLLine() string {
	parts := make([]string, len(r.URLs))
	for k, u := range r.URLs {
		parts[k] = fmt.Sprintf("%s requests=%d ok=%d", u.URL, u.Requests, u.OK)
	}
	return r.Target + " urls: " + strings.Join(parts, ", ")
}

// formatCodes prints status counts in a stable order so runs diff cleanly.
func formatCodes(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, m[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Ratios compares the gateway with the reference server of the same run.
// Throughput above 1 and p99 below 1 mean the gateway did better.
type Ratios struct {
	Throughput float64 `json:"throughput"`
	P99        float64 `json:"p99"`
}

// ratios computes gateway/refgw for throughput and p99; a zero denominator
// gives 0 rather than Inf so the JSON stays valid.
func ratios(gw, ref *LoadReport) *Ratios {
	if gw == nil || ref == nil {
		return nil
	}
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return math.Round(a/b*1000) / 1000
	}
	return &Ratios{Throughput: div(gw.Throughput, ref.Throughput), P99: div(gw.P99Ms, ref.P99Ms)}
}

// RunReport is everything one repetition of the comparison produced.
type RunReport struct {
	Run             int         `json:"run"`
	Ref             *LoadReport `json:"refgw,omitempty"`
	Gateway         *LoadReport `json:"gateway,omitempty"`
	Ratio           *Ratios     `json:"ratio,omitempty"`
	RestartToReadyS *float64    `json:"restartToReadySeconds,omitempty"`
	// GatewayLifePeaksMiB is, for each spawned gateway process in the
	// order they ended, the peak resident set of its whole life (load,
	// shutdown, start-up with its snapshot load and replay).
	GatewayLifePeaksMiB []float64 `json:"gatewayLifePeaksMiB,omitempty"`
	// Callbacks is the outcome of -kind callbacks.
	Callbacks *CallbackReport `json:"callbacks,omitempty"`
	Failures  []string        `json:"failures,omitempty"`
}

// Figures is the set of per-run numbers -runs takes the median of.
type Figures struct {
	Throughput      float64  `json:"throughput"`
	P50Ms           float64  `json:"p50Ms"`
	P90Ms           float64  `json:"p90Ms"`
	P99Ms           float64  `json:"p99Ms"`
	P999Ms          float64  `json:"p999Ms"`
	MaxMs           float64  `json:"maxMs"`
	LongestGapMs    float64  `json:"longestGapMs"`
	RSSPeakMiB      *float64 `json:"rssPeakMiB,omitempty"`
	RSSMiB          *float64 `json:"rssMiB,omitempty"`
	RestartToReadyS *float64 `json:"restartToReadySeconds,omitempty"`
	ServerCPUus     *float64 `json:"serverCpuUsPerRequest,omitempty"`
	ClientCPUus     *float64 `json:"clientCpuUsPerRequest,omitempty"`
}

// Medians holds the median of every figure over all runs.
type Medians struct {
	Runs    int      `json:"runs"`
	Ref     *Figures `json:"refgw,omitempty"`
	Gateway *Figures `json:"gateway,omitempty"`
	Ratio   *Ratios  `json:"ratio,omitempty"`
	// Callbacks is the median of -kind callbacks.
	Callbacks *CallbackReport `json:"callbacks,omitempty"`
}

// FinalReport is the document printed with -json.
type FinalReport struct {
	Runs   []RunReport `json:"runs"`
	Median *Medians    `json:"median,omitempty"`
	OK     bool        `json:"ok"`
}

// medianFigures folds the reports of one target over all runs into medians.
// Optional figures (RSS, restart) are only reported when every run had them.
func medianFigures(rs []*LoadReport, restart []float64) *Figures {
	if len(rs) == 0 {
		return nil
	}
	pick := func(f func(*LoadReport) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return round2(median(xs))
	}
	optional := func(f func(*LoadReport) *float64) *float64 {
		xs := make([]float64, 0, len(rs))
		for _, r := range rs {
			if v := f(r); v != nil {
				xs = append(xs, *v)
			}
		}
		if len(xs) != len(rs) {
			return nil
		}
		m := round2(median(xs))
		return &m
	}
	f := &Figures{
		Throughput:   pick(func(r *LoadReport) float64 { return r.Throughput }),
		P50Ms:        pick(func(r *LoadReport) float64 { return r.P50Ms }),
		P90Ms:        pick(func(r *LoadReport) float64 { return r.P90Ms }),
		P99Ms:        pick(func(r *LoadReport) float64 { return r.P99Ms }),
		P999Ms:       pick(func(r *LoadReport) float64 { return r.P999Ms }),
		MaxMs:        pick(func(r *LoadReport) float64 { return r.MaxMs }),
		LongestGapMs: pick(func(r *LoadReport) float64 { return r.LongestGapMs }),
		RSSPeakMiB:   optional(func(r *LoadReport) *float64 { return r.RSSPeakMiB }),
		RSSMiB:       optional(func(r *LoadReport) *float64 { return r.RSSMiB }),
		ServerCPUus:  optional(func(r *LoadReport) *float64 { return r.ServerCPUus }),
		ClientCPUus:  optional(func(r *LoadReport) *float64 { return r.ClientCPUus }),
	}
	if len(restart) == len(rs) {
		m := round2(median(restart))
		f.RestartToReadyS = &m
	}
	return f
}

// computeMedians builds the median section of the final report from all runs.
func computeMedians(runs []RunReport) *Medians {
	m := &Medians{Runs: len(runs)}
	var gws, refs []*LoadReport
	var cbs []*CallbackReport
	var restarts, rt, rp []float64
	for _, r := range runs {
		if r.Callbacks != nil {
			cbs = append(cbs, r.Callbacks)
		}
		if r.Gateway != nil {
			gws = append(gws, r.Gateway)
		}
		if r.Ref != nil {
			refs = append(refs, r.Ref)
		}
		if r.RestartToReadyS != nil {
			restarts = append(restarts, *r.RestartToReadyS)
		}
		if r.Ratio != nil {
			rt = append(rt, r.Ratio.Throughput)
			rp = append(rp, r.Ratio.P99)
		}
	}
	m.Gateway = medianFigures(gws, restarts)
	m.Ref = medianFigures(refs, nil)
	m.Callbacks = medianCallbacks(cbs)
	if len(rt) > 0 {
		m.Ratio = &Ratios{Throughput: math.Round(median(rt)*1000) / 1000, P99: math.Round(median(rp)*1000) / 1000}
	}
	return m
}

// Line renders a median figure set as one human line.
func (f *Figures) Line(label string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "median %s: throughput=%.2f/s p50=%.2fms p90=%.2fms p99=%.2fms p999=%.2fms max=%.2fms longest_gap=%.2fms",
		label, f.Throughput, f.P50Ms, f.P90Ms, f.P99Ms, f.P999Ms, f.MaxMs, f.LongestGapMs)
	if f.RSSPeakMiB != nil {
		fmt.Fprintf(&b, " rss_peak=%.2fMiB", *f.RSSPeakMiB)
	}
	if f.RSSMiB != nil {
		fmt.Fprintf(&b, " rss=%.2fMiB", *f.RSSMiB)
	}
	if f.RestartToReadyS != nil {
		fmt.Fprintf(&b, " restart_to_ready=%.2fs", *f.RestartToReadyS)
	}
	if f.ServerCPUus != nil {
		fmt.Fprintf(&b, " cpu_per_req=%.1fus", *f.ServerCPUus)
	}
	if f.ClientCPUus != nil {
		fmt.Fprintf(&b, " loadtest_cpu_per_req=%.1fus", *f.ClientCPUus)
	}
	return b.String()
}
