package main

// The command line: the flags, their checks, and what they default to.

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// options are the parsed command-line flags.
type options struct {
	gateway, url, adminToken, data, sync, kind, ref  string
	bySite                                           bool
	hot                                              float64
	dispatcher                                       string
	n, c, sites, runs                                int
	max, timeout, readyTimeout                       time.Duration
	seed                                             int64
	verify                                           float64
	json, keep, restart, refOnly, allowErrors, quiet bool
	// stop is how -restart ends the gateway: kill or term.
	stop string
	// memoryLimit is passed to every spawned gateway as --memory-limit.
	memoryLimit string
}

// usageText heads -h: what the load test does and what it leaves behind
// on a gateway it did not start.
const usageText = `Usage: loadtest (-gateway BIN | -url URL -admin-token T | -ref REFGW -ref-only) [flags]

Drives signed merchant deposits, withdrawals or callbacks at the gateway,
measures throughput and latency, and checks the gateway's invariants.

What it creates: one payment method (code "lt" + 8 hex digits, "scoped": true,
so only the sites that list it offer it) and -sites sites named
"lt-<tag>-<k>" that offer exactly that method (withdrawal runs also credit
their treasuries). With -gateway all of it lives in a temp directory that
is removed. With -url it stays on that gateway, invisible to every other
site; to retire it, disable the method (its code is printed at setup):

  curl -X PATCH -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    "$G/ops/v1/banks/<code>" -d '{"enabled":false}'

Flags:
`

// parseFlags reads and validates the flags; usage errors exit with status 2
// like the flag package's own errors.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.StringVar(&o.gateway, "gateway", "", "path to a built gateway binary to spawn")
	fs.BoolVar(&o.bySite, "by-site", false, "with several -url gateways: send each site's requests to one of them (site k to gateway k mod n), as a load balancer hashing the appKey header does")
	fs.StringVar(&o.url, "url", "", "base URL of an already running gateway (instead of -gateway); a comma-separated list spreads the clients over several gateways of one cluster")
	fs.StringVar(&o.adminToken, "admin-token", "", "operator bearer token of the -url gateway(s)")
	fs.StringVar(&o.data, "data", "", "data directory of the spawned gateway (default: fresh temp dir; with -runs > 1 a run<k> subdirectory per run)")
	fs.StringVar(&o.sync, "sync", "always", "--sync of the spawned gateway: always or interval (refgw gets -sync with always)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp directory (data and logs)")
	fs.StringVar(&o.kind, "kind", "deposit", "deposit, withdraw or callbacks")
	fs.StringVar(&o.dispatcher, "dispatcher", "gateway", "callbacks mode: the dispatcher measured, gateway (in the gateway) or standalone ('gateway callbacks')")
	fs.IntVar(&o.n, "n", 20000, "total requests")
	fs.IntVar(&o.c, "c", 64, "concurrent keep-alive clients")
	fs.IntVar(&o.sites, "sites", 1, "merchant sites; requests are spread round-robin")
	fs.Float64Var(&o.hot, "hot", 0, "a skewed load: this share of the requests (0 to 1) goes to the first site, the rest round-robin over the others (needs -sites ≥ 2)")
	fs.DurationVar(&o.max, "max", 10*time.Minute, "stop sending after this long")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request client timeout")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for /readyz after (re)start")
	fs.Int64Var(&o.seed, "seed-balance", 0, "treasury credited to each site before withdrawals (0: enough for all of the site's withdrawals)")
	fs.Float64Var(&o.verify, "verify", 0.01, "fraction of accepted requests looked up by processId (at least 100, or all)")
	fs.BoolVar(&o.json, "json", false, "also print the final report as JSON on stdout")
	fs.BoolVar(&o.restart, "restart", false, "after the checks, stop (see -stop) and restart the gateway, time it to ready and check again (needs -gateway)")
	fs.StringVar(&o.memoryLimit, "memory-limit", "", "run every spawned gateway (and dispatcher) with --memory-limit this (e.g. 450MiB)")
	fs.StringVar(&o.stop, "stop", "kill", "how -restart stops the gateway: kill (SIGKILL, a crash) or term (SIGTERM, a graceful shutdown with its final snapshot)")
	fs.StringVar(&o.ref, "ref", "", "path to a built refgw binary to run the same deposit load against first")
	fs.BoolVar(&o.refOnly, "ref-only", false, "run only the refgw load (needs -ref)")
	fs.IntVar(&o.runs, "runs", 1, "repeat the whole comparison this many times and report medians")
	fs.BoolVar(&o.allowErrors, "allow-errors", false, "do not fail the run when some requests are answered with non-200 (the stored-exactly-once and 503-not-stored checks still run)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress display")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, o.validate()
}

// validate rejects flag combinations that cannot work, before anything is
// spawned or created.
func (o *options) validate() error {
	if o.stop == "" {
		o.stop = "kill"
	}
	switch {
	case o.refOnly && o.ref == "":
		return errors.New("-ref-only needs -ref")
	case o.refOnly && (o.gateway != "" || o.url != ""):
		return errors.New("-ref-only excludes -gateway and -url")
	case !o.refOnly && (o.gateway == "") == (o.url == ""):
		return errors.New("give exactly one of -gateway or -url (or -ref with -ref-only)")
	case o.url != "" && o.adminToken == "":
		return errors.New("-url needs -admin-token")
	case o.restart && o.gateway == "":
		return errors.New("-restart needs -gateway")
	case o.memoryLimit != "" && o.gateway == "":
		return errors.New("-memory-limit needs -gateway (it is a flag of the spawned gateway)")
	case o.kind != "deposit" && o.kind != "withdraw" && o.kind != "callbacks":
		return errors.New("-kind must be deposit, withdraw or callbacks")
	case o.kind == "callbacks" && (o.gateway == "" || o.ref != ""):
		return errors.New("-kind callbacks needs -gateway and excludes -ref")
	case o.stop != "kill" && o.stop != "term":
		return errors.New("-stop must be kill or term")
	case o.dispatcher != "gateway" && o.dispatcher != "standalone":
		return errors.New("-dispatcher must be gateway or standalone")
	case o.sync != "always" && o.sync != "interval":
		return errors.New("-sync must be always or interval")
	case o.n < 1 || o.c < 1 || o.sites < 1 || o.runs < 1:
		return errors.New("-n, -c, -sites and -runs must be at least 1")
	case o.n > 1<<31-1:
		return errors.New("-n too large")
	case o.verify < 0 || o.verify > 1:
		return errors.New("-verify must be between 0 and 1")
	case o.hot < 0 || o.hot >= 1:
		return errors.New("-hot must be at least 0 and below 1")
	case o.hot > 0 && o.sites < 2:
		return errors.New("-hot needs -sites 2 or more")
	case o.seed < 0:
		return errors.New("-seed-balance must not be negative")
	}
	if o.url == "" {
		return nil
	}
	urls, err := splitURLs(o.url)
	if err != nil {
		return err
	}
	if o.c < len(urls) {
		// Otherwise some gateway would get no clients and its share of the
		// report would be silently empty.
		return fmt.Errorf("-c %d is less than the %d -url entries", o.c, len(urls))
	}
	return nil
}

// splitURLs parses the comma-separated -url list, without trailing "/"
// so paths can be appended. A duplicate is rejected
// because it would make the cross-gateway lookups check one gateway twice
// while looking like a check of two.
func splitURLs(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		raw := strings.TrimRight(strings.TrimSpace(part), "/")
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("-url: %q is not an http(s) base URL", part)
		}
		if slices.Contains(out, raw) {
			return nil, fmt.Errorf("-url: %s is listed twice", raw)
		}
		out = append(out, raw)
	}
	return out, nil
}

// defaultSeed is a treasury large enough for every withdrawal a site will be
// sent: ceil(n/sites) requests of at most 50,000 IQD each, plus a margin so
// the last withdrawal does not depend on whether "stay above the negative
// limit" (docs/merchant-api.md "Treasury rule") is strict.
func defaultSeed(n, sites int) int64 {
	per := int64((n + sites - 1) / sites)
	return per*requestAmount(49) + 1_000_000
}
