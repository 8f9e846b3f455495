// Command loadtest drives signed merchant deposits or withdrawals at the
// gateway over its HTTP contract (docs/merchant-api.md, docs/operator-api.md), measures
// throughput and latency, checks the gateway's invariants afterwards, and can
// compare it with the reference server refgw from shared/bench.
//
// It either spawns a built gateway binary (-gateway) on a free loopback port
// with a fresh data directory and a random admin token, or targets one that
// is already running (-url with -admin-token):
//
//	go build -o /tmp/gw ./cmd/gateway
//	go run ./cmd/loadtest -gateway /tmp/gw -n 20000 -c 64
//	go run ./cmd/loadtest -gateway /tmp/gw -kind withdraw -sites 100 -restart
//	go run ./cmd/loadtest -url http://127.0.0.1:8080 -admin-token T -n 5000
//	go run ./cmd/loadtest -url http://127.0.0.1:18081,http://127.0.0.1:18082 -admin-token T -kind deposit -sites 100 -n 20000 -c 64 -allow-errors
//
// -url may list several gateways of one cluster (same admin token), comma
// separated: client k sends to URL k mod len, set-up and the balance checks
// go through the first, and the lookups (sampled 200s, 503s) go through
// every one, so a write acknowledged by one gateway must be found through
// all of them.
//
// Setup goes through the operator API: one PHONE method with a random code
// ("lt" and 8 hex digits), scoped so that only the sites that list it offer
// it, -sites sites (created 16 at a time, named "lt-<tag>-<k>") each
// offering exactly that method, and, for withdrawals, a treasury adjustment
// of -seed-balance per site. Against a live gateway (-url) nothing of this
// is visible to its other merchants; disabling the method retires it
// (printed by usage, and in the README's "Load test"). Request i goes to site i % sites (with
// -hot h, a share h of the requests to the first site instead) with
// processId "<tag>-<i>", its own end user and an amount of 1,000 to 50,000
// IQD, signed with the site's secret over the exact body.
//
// After the load it checks: every answer is 200 (unless -allow-errors); no
// request answered 503 is stored (503 promises nothing was recorded; a 504
// outcome_unknown may be either); every response hash (docs/merchant-api.md
// "Response hash"); bankId is the method's _id; amount and processId echo
// the request; transactionIds are unique and processIds unique per site;
// each site's GET /v1/balance (withdrawals: pending equals the accepted
// amounts, balance equals the seed; deposits: both zero); and a -verify
// sample of GET /v1/transactions?processId= lookups. Any violation exits with
// status 1. -restart then stops the gateway (-stop kill: SIGKILL, a crash;
// -stop term: SIGTERM, a graceful shutdown with its final snapshot), starts
// it again on the same data, prints restart_to_ready (process start to
// /readyz 200) and repeats the balance, lookup and 503 checks. Every gateway
// process the load test spawned reports, once it has ended,
// gateway_life_peak: the peak resident set of its whole life, shutdown and
// start-up included (its VmHWM: read from /proc while it runs, and logged by
// the gateway as it stops; see proc.lifePeakMiB).
//
// With -ref (a refgw binary, built with
// `cd /work/shared/bench && go build -o /tmp/benchbin/ ./cmd/...`) the same
// deposit load (same -n, -c) first runs against refgw, with -sync when the
// gateway runs -sync always, and the report adds the ratios gateway/refgw for
// throughput and p99; -ref-only runs refgw alone. -runs R repeats everything
// R times with fresh data and adds the median of every figure.
//
// -kind callbacks measures the callback dispatcher instead (see
// callbacks.go): the gateway runs with --callbacks=false while -n deposits
// over -sites sites, each with a callbackUrl on a receiver inside the load
// test, are created and approved; then a dispatcher starts (-dispatcher
// gateway: the gateway restarted with callbacks on; standalone: `gateway
// callbacks --nats …` beside it) and the time to the n-th callback gives
// deliveries per second. Then -n more deposits are approved by -c clients
// and each callback's lag from its approval is measured; with -restart the
// gateway is then stopped and started again, and no callback may be lost or
// invented by it. Every callback's signature and content is checked:
//
//	go run ./cmd/loadtest -gateway /tmp/gw -kind callbacks -n 20000 -sites 20 -c 32 -runs 3
//	go run ./cmd/loadtest -gateway /tmp/gw -kind callbacks -dispatcher standalone -n 20000 -sites 20 -c 32 -runs 3
//	go run ./cmd/loadtest -gateway /tmp/gw -kind callbacks -n 500000 -sites 1000 -restart -stop term -max 60m
//
// Besides throughput and p50/p90/p99/p999 latency, each load reports the
// longest stretch of wall time in which no request got a 200 (from the
// completion times of all clients; the stretch before the first or after
// the last 200 counts only when longer than every other, and is labelled),
// and how many answers were 503, 504, another status or no HTTP answer.
// It is a measurement, never a reason to fail.
//
// Output: one human line per phase on stdout; with -json the whole report
// follows as an indented JSON document starting on a line of its own ("{").
// Diagnostics and the progress display go to stderr. Server data and logs
// live in a temp directory (under $TMPDIR: put it on the disk under test,
// since -sync always measures fsync) that is removed after a successful run
// unless -keep, and kept, with its path printed, after a failure.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// logf prints a diagnostic line on stderr, keeping stdout for the report.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadtest: "+format+"\n", args...)
}

// main parses flags and exits with run's status.
func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
		}
		os.Exit(2)
	}
	os.Exit(run(o))
}

// run performs all runs and prints the report; it returns the exit status.
// It returns rather than exiting so deferred cleanup (stopping spawned
// servers) always happens, also after Ctrl-C.
func run(o options) int {
	if err := checkBinaries(o); err != nil {
		logf("%v", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	work, err := os.MkdirTemp("", "loadtest-")
	if err != nil {
		logf("%v", err)
		return 1
	}
	final := FinalReport{OK: true}
	for r := 1; r <= o.runs; r++ {
		rr, err := runOnce(ctx, o, work, r)
		if err != nil {
			rr.Failures = append(rr.Failures, "error: "+err.Error())
		}
		final.Runs = append(final.Runs, rr)
		if len(rr.Failures) == 0 && !o.keep {
			// Free the disk between runs; a passing run's data is not evidence.
			os.RemoveAll(filepath.Join(work, "run"+strconv.Itoa(r)))
		}
		if len(rr.Failures) > 0 {
			final.OK = false
			for _, l := range rr.Failures {
				fmt.Printf("run %d FAIL %s\n", r, l)
			}
			break // a broken run makes further runs and medians meaningless
		}
	}
	if final.OK && o.runs > 1 {
		final.Median = computeMedians(final.Runs)
		printMedians(final.Median)
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(final)
	}
	// Keep the evidence when something failed; otherwise clean up unless asked not to.
	if !final.OK || o.keep {
		logf("work directory kept: %s", work)
	} else {
		os.RemoveAll(work)
	}
	if !final.OK {
		return 1
	}
	return 0
}

// printMedians prints the median lines of a multi-run comparison.
func printMedians(m *Medians) {
	if m.Ref != nil {
		fmt.Println(m.Ref.Line("refgw"))
	}
	if m.Gateway != nil {
		fmt.Println(m.Gateway.Line("gateway"))
	}
	if m.Callbacks != nil {
		fmt.Println(m.Callbacks.Line("median"))
	}
	if m.Ratio != nil {
		fmt.Printf("median ratio gateway/refgw: throughput=%.3f p99=%.3f\n", m.Ratio.Throughput, m.Ratio.P99)
	}
}

// checkBinaries refuses, before anything starts, a -gateway or -ref that
// is not an executable file, saying where each comes from.
func checkBinaries(o options) error {
	for _, b := range []struct{ flag, path, build string }{
		{"-gateway", o.gateway, "go build -o bin/ ./cmd/gateway"},
		{"-ref", o.ref, "go build -C ../shared/bench -o \"$PWD/bin/\" ./cmd/refgw  (the reference hot path lives in ../shared/bench next to this repository; see BENCHMARKS.md)"},
	} {
		if b.path == "" {
			continue
		}
		fi, err := os.Stat(b.path)
		switch {
		case err != nil:
			return fmt.Errorf("%s %s: no such file; build it with: %s", b.flag, b.path, b.build)
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			return fmt.Errorf("%s %s: not an executable file; build it with: %s", b.flag, b.path, b.build)
		}
	}
	return nil
}

// runOnce is one repetition: refgw first (when asked), then the gateway with
// its checks. Human lines are printed as soon as each phase is done so a long
// run shows results early.
func runOnce(ctx context.Context, o options, work string, r int) (RunReport, error) {
	rr := RunReport{Run: r}
	dir := filepath.Join(work, "run"+strconv.Itoa(r))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return rr, err
	}
	if o.kind == "callbacks" {
		return rr, runCallbacks(ctx, o, dir, r, &rr)
	}
	cfg := loadConfig{n: o.n, c: o.c, max: o.max, timeout: o.timeout, tag: "lt" + randomHex(4)}
	if o.ref != "" {
		rep, err := runRef(ctx, o, dir, cfg)
		if err != nil {
			return rr, fmt.Errorf("refgw: %w", err)
		}
		rr.Ref = rep
		fmt.Printf("run %d %s\n", r, rep.Line())
		fmt.Printf("run %d %s\n", r, rep.AvailabilityLine())
	}
	if o.refOnly {
		return rr, nil
	}
	if err := runGateway(ctx, o, dir, r, cfg, &rr); err != nil {
		return rr, err
	}
	rr.Ratio = ratios(rr.Gateway, rr.Ref)
	if rr.Ratio != nil {
		fmt.Printf("run %d ratio gateway/refgw: throughput=%.3f p99=%.3f\n", r, rr.Ratio.Throughput, rr.Ratio.P99)
	}
	return rr, nil
}

// runRef spawns refgw on a free port with a fresh store, sends it the deposit
// load as its fixed site ("ref"/"refsecret", bank "zain") and stops it. Its
// answers are not contract-shaped (string amount, no bankId), so nothing of
// them is checked.
func runRef(ctx context.Context, o options, dir string, cfg loadConfig) (*LoadReport, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "refgw-data")
	args := []string{"-http", addr, "-secret", "refsecret", "-data", data}
	if o.sync == "always" {
		args = append(args, "-sync") // same durability as the gateway, or the ratio is unfair
	}
	p, err := startProc("refgw", o.ref, args, filepath.Join(dir, "refgw.log"))
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(data)
	defer p.stop(30 * time.Second)
	base := "http://" + addr
	// refgw has no /readyz; it serves /healthz only once its stream exists.
	if _, err := waitReady(ctx, p, base+"/healthz", o.readyTimeout); err != nil {
		return nil, err
	}
	t := loadTarget{name: "refgw", bases: []string{base}, kind: "deposit", bank: "zain", sites: []site{{ID: "ref", AppKey: "ref", Secret: "refsecret"}}}
	cpu := startCPU(p)
	res := runLoad(ctx, t, cfg, !o.quiet)
	rep := newLoadReport("refgw", "deposit", res.total, res.codes, res.lats, res.elapsed, res.stopped)
	cpu.attach(rep, res.total)
	rep.setGap(longestGap(res.okAt, res.elapsed))
	attachRSS(rep, p)
	if ctx.Err() != nil {
		fmt.Printf("(interrupted) %s\n", rep.Line())
		return nil, errors.New("interrupted")
	}
	if res.codes[200] == 0 {
		return rep, fmt.Errorf("no request succeeded: %v (log: %s)", res.errSamples, p.logPath)
	}
	return rep, nil
}

// gatewayProc remembers how the gateway was spawned so -restart can start it
// again with the very same arguments.
type gatewayProc struct {
	bin  string
	args []string
	log  string
	p    *proc
}

// restart ends the gateway as -stop says, records the peak of its whole
// life, starts it again on the same data and times it to /readyz.
func (g *gatewayProc) restart(ctx context.Context, o options, r int, rr *RunReport, base string) (time.Duration, error) {
	if err := g.end(o.stop, r, rr); err != nil {
		return 0, err
	}
	var err error
	if g.p, err = startProc("gateway", g.bin, g.args, g.log); err != nil {
		return 0, err
	}
	d, err := waitReady(ctx, g.p, base+"/readyz", o.readyTimeout)
	if err != nil {
		return 0, err
	}
	fmt.Printf("run %d restart_to_ready=%.2fs (after SIG%s)\n", r, d.Seconds(), strings.ToUpper(o.stop))
	return d, nil
}

// end stops the gateway process (term or kill) and records and prints the
// peak resident set of its whole life, the kernel's, not a sample.
func (g *gatewayProc) end(how string, r int, rr *RunReport) error {
	err := g.p.end(how)
	peak := g.p.lifePeakMiB()
	rr.GatewayLifePeaksMiB = append(rr.GatewayLifePeaksMiB, peak)
	fmt.Printf("run %d gateway_life_peak=%.1fMiB (process %d, stopped by SIG%s)\n", r, peak, len(rr.GatewayLifePeaksMiB), strings.ToUpper(how))
	return err
}

// spawnGateway starts the gateway binary on a free port with a fresh data
// directory and a random admin token, and waits until /readyz is 200.
func spawnGateway(ctx context.Context, o options, dir string, r int, extra ...string) (*gatewayProc, string, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", "", err
	}
	data := filepath.Join(dir, "gateway-data")
	if o.data != "" {
		data = o.data
		if o.runs > 1 {
			data = filepath.Join(o.data, "run"+strconv.Itoa(r))
		}
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, "", "", err
	}
	token := randomHex(24) // 48 characters: the gateway wants at least 32
	g := &gatewayProc{
		bin:  o.gateway,
		args: append(append([]string{"--http", addr, "--data", data, "--admin-token", token, "--sync", o.sync, "--callback-allow-private"}, o.runtimeArgs()...), extra...),
		log:  filepath.Join(dir, "gateway.log"),
	}
	if g.p, err = startProc("gateway", g.bin, g.args, g.log); err != nil {
		return nil, "", "", err
	}
	base := "http://" + addr
	d, err := waitReady(ctx, g.p, base+"/readyz", o.readyTimeout)
	if err != nil {
		g.p.stop(30 * time.Second)
		return nil, "", "", err
	}
	logf("gateway ready on %s after %s (log: %s)", addr, d.Round(time.Millisecond), g.log)
	return g, base, token, nil
}

// runtimeArgs are the flags every spawned gateway process takes.
func (o options) runtimeArgs() []string {
	if o.memoryLimit == "" {
		return nil
	}
	return []string{"--memory-limit", o.memoryLimit}
}

// runGateway sets up, loads and checks the gateway (spawned or at -url),
// filling rr. Invariant violations go to rr.Failures; an error means the run
// could not be carried out at all. With several -url gateways, set-up and
// the checks of shared state (balances, unanswered requests) go through the
// first, since all serve one cluster; the lookups of individual
// transactions go through every one of them.
func runGateway(ctx context.Context, o options, dir string, r int, cfg loadConfig, rr *RunReport) error {
	var bases []string
	token := o.adminToken
	var g *gatewayProc
	if o.gateway == "" {
		var err error
		if bases, err = splitURLs(o.url); err != nil {
			return err
		}
	} else {
		var err error
		var base string
		if g, base, token, err = spawnGateway(ctx, o, dir, r); err != nil {
			return err
		}
		bases = []string{base}
		// The closure reads g.p at exit, so after -restart it stops the new process.
		defer func() {
			if err := g.end("term", r, rr); err != nil {
				logf("%v", err)
			}
		}()
	}
	withLog := func(err error) error {
		if err != nil && g != nil {
			return fmt.Errorf("%w (gateway log: %s)", err, g.log)
		}
		return err
	}

	apis := make([]*api, len(bases))
	for k, b := range bases {
		apis[k] = newAPI(b, token)
	}
	a := apis[0]
	t0 := time.Now()
	m, err := a.createMethod(ctx)
	if err != nil {
		return withLog(fmt.Errorf("setup: %w", err))
	}
	seed := int64(0)
	if o.kind == "withdraw" {
		seed = o.seed
		if seed == 0 {
			seed = defaultSeed(o.n, o.sites)
			if o.hot > 0 {
				seed = defaultSeed(o.n, 1) // the hot site takes up to all of them
			}
		}
	}
	sites, err := a.createSites(ctx, "lt-"+cfg.tag, o.sites, m, seed)
	if err != nil {
		return withLog(fmt.Errorf("setup: %w", err))
	}
	logf("setup: method %s (_id %s), %d site(s), seed %d, in %s", m.Code, m.ID, len(sites), seed, time.Since(t0).Round(time.Millisecond))

	t := loadTarget{name: "gateway", bases: bases, kind: o.kind, bank: m.Code, sites: sites, strict: true, bySite: o.bySite, hot: o.hot}
	var server *proc // nil with -url: only the load test's own CPU is read
	if g != nil {
		server = g.p
	}
	cpu := startCPU(server)
	res := runLoad(ctx, t, cfg, !o.quiet)
	rep := newLoadReport("gateway", o.kind, res.total, res.codes, res.lats, res.elapsed, res.stopped)
	cpu.attach(rep, res.total)
	rep.URLs = res.perURL
	rep.setGap(longestGap(res.okAt, res.elapsed))
	if g != nil {
		attachRSS(rep, g.p)
	}
	rr.Gateway = rep
	fmt.Printf("run %d %s\n", r, rep.Line())
	fmt.Printf("run %d %s\n", r, rep.URLLine())
	fmt.Printf("run %d %s\n", r, rep.AvailabilityLine())
	if ctx.Err() != nil {
		// Interrupted: the partial figures above are still worth having, but
		// the checks would judge an incomplete run.
		return errors.New("interrupted; checks skipped")
	}
	res.lats, res.okAt = nil, nil // the figures are taken; free the memory before the checks

	// Invariants 1 and 2 (and the echo flags) on the kept answers.
	f := newFailures()
	checkCodes(f, res, o.allowErrors)
	checkRecords(f, res.oks, sites, m.ID)
	if res.codes[200] == 0 {
		f.add(catStatusCodes, "no request succeeded")
	}
	want := expectedPending(o.kind, res.oks, len(sites))
	found, err := resolveUnknown(ctx, a, t, cfg.tag, res.unknown, want)
	if err != nil {
		return withLog(fmt.Errorf("resolving unanswered requests: %w", err))
	}
	if len(res.unknown) > 0 && o.kind == "withdraw" {
		logf("%d request(s) got no definite answer; %d of them exist and count as pending", len(res.unknown), found)
	}
	if err := checkState(ctx, f, apis, o, sites, cfg.tag, res.oks, seed, want); err != nil {
		return withLog(err)
	}
	// Also with -allow-errors: a 503 during a fault is acceptable, a 503
	// for something that was stored is not.
	k, err := checkRefused(ctx, f, apis, t, cfg.tag, res.refused)
	if err != nil {
		return withLog(err)
	}
	if len(res.refused) > 0 {
		logf("looked up %d request(s) answered 503 (%d lookup(s)): each must be absent", len(res.refused), k)
	}
	rr.Failures = append(rr.Failures, prefixed("after load: ", f.lines())...)

	if o.restart {
		d, err := g.restart(ctx, o, r, rr, bases[0])
		if err != nil {
			return withLog(fmt.Errorf("after restart: %w", err))
		}
		secs := round2(d.Seconds())
		rr.RestartToReadyS = &secs
		f2 := newFailures()
		after := []*api{newAPI(bases[0], token)}
		if err := checkState(ctx, f2, after, o, sites, cfg.tag, res.oks, seed, want); err != nil {
			return withLog(fmt.Errorf("after restart: %w", err))
		}
		// Replaying the stream must not bring back a write that was refused.
		if _, err := checkRefused(ctx, f2, after, t, cfg.tag, res.refused); err != nil {
			return withLog(fmt.Errorf("after restart: %w", err))
		}
		rr.Failures = append(rr.Failures, prefixed("after restart: ", f2.lines())...)
	}
	if len(rr.Failures) == 0 {
		logf("run %d: all invariants hold", r)
	} else if g != nil {
		rr.Failures = append(rr.Failures, "gateway log: "+g.log)
	}
	return nil
}

// checkState runs invariants 3 (balances, through the first gateway) and 4
// (sampled lookups, through every gateway), the ones that read the
// gateway's current state and so are repeated after a restart.
func checkState(ctx context.Context, f *failures, as []*api, o options, sites []site, tag string, oks []okRec, seed int64, want []int64) error {
	bal, err := fetchBalances(ctx, f, as[0], sites)
	if err != nil {
		return err
	}
	checkBalances(f, o.kind, seed, want, bal)
	k, err := checkSample(ctx, f, as, sites, tag, oks, o.verify)
	if err != nil {
		return err
	}
	logf("checked %d balance(s) and %d lookup(s)", len(bal), k)
	return nil
}

// prefixed puts p in front of every line.
func prefixed(p string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = p + l
	}
	return out
}
