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
