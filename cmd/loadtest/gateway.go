package main

// Spawning the gateway, running the load against it, restarting it and checking its state.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

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
	bal, err := fetchBalances(ctx, f, as, sites)
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
