// Command ledgerctl is the operator's tool for the ledger stream: it audits
// the history, lists a site's events, says which NATS node leads each
// stream and generates synthetic histories.
//
//	ledgerctl audit    [--site ID] [--json] [--quiet] [--gateway URL --token T] (--data DIR | --nats URL)
//	ledgerctl events   --site ID [--from SEQ] [--limit N] [--json] (--data DIR | --nats URL)
//	ledgerctl cluster  --nats URL [--json]
//	ledgerctl generate --data DIR [--events N] [--sites K] [--batch B] [--seed S] [--snapshot-at F]
//	ledgerctl projections status|rebuild [--model NAME] [--projections-dir DIR] (--data DIR | --nats URL)
//
// cluster prints, for every stream of the account (the ledger stream first,
// then the snapshot and callback buckets), the server leading it and how
// each follower stands: current, behind, or offline.
//
// audit replays every site (subjects ledger.site.<id>) from sequence 1
// through the gateway's own aggregate code and prints, per site, the balance,
// pending withdrawals, counts and sums by status, and every invariant it
// checked with pass or fail: the hash chains of every ledger subject, the
// treasury computed independently from the events, the transactions' state
// machine, the live read model (the site's snapshot plus the messages after
// it, which is what a gateway starts from) against the full replay, and with
// --gateway the running gateway's operator API. See package audit.
//
// Offline (--data DIR) it starts an embedded nats-server on the gateway's
// data directory and only reads. The gateway must be stopped first: two
// servers on one store directory corrupt it. To audit without stopping the
// gateway, run the gateway with --nats-listen (or on a NATS cluster) and use
// --nats URL with the gateway's NATS credentials (--nats-user and
// --nats-password-file or --nats-password, or --nats-nkey-seed-file, or
// their GATEWAY_NATS_* variables), or audit a copy of the data directory.
//
// Exit status: 0 when every check passed, 1 when anything disagrees (for
// cluster: a stream without a leader, or with a replica offline, behind or
// not placed), 2 on a usage error, 3 when the store could not be read.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/cmd/internal/natsauth"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/projections"
)

// Exit statuses.
const (
	exitOK       = 0
	exitMismatch = 1
	exitUsage    = 2
	exitError    = 3
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  ledgerctl audit    [--site ID] [--json] [--quiet] [--workers N] [--gateway URL --token T] (--data DIR | --nats URL)
  ledgerctl events   --site ID [--from SEQ] [--limit N] [--json] (--data DIR | --nats URL)
  ledgerctl cluster  --nats URL [--json]
  ledgerctl generate --data DIR [--events N] [--sites K] [--batch B] [--seed S] [--snapshot-at F] [--quiet]
  ledgerctl projections status  [--json] [--projections-dir DIR] (--data DIR | --nats URL)
  ledgerctl projections rebuild [--model NAME] [--projections-dir DIR] (--data DIR | --nats URL)

--data DIR audits the gateway's data directory offline (stop the gateway first);
--nats URL reads a running NATS server or cluster, presenting --nats-user with
--nats-password-file (or --nats-password), or --nats-nkey-seed-file (also read from
GATEWAY_NATS_USER, GATEWAY_NATS_PASSWORD, GATEWAY_NATS_PASSWORD_FILE, GATEWAY_NATS_NKEY_SEED_FILE).
Run "ledgerctl <command> --help" for the flags of a command.
`

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "audit":
		return runAudit(ctx, args[1:], stdout, stderr, projections.Models())
	case "events":
		return runEvents(ctx, args[1:], stdout, stderr)
	case "cluster":
		return runCluster(ctx, args[1:], stdout, stderr)
	case "generate":
		return runGenerate(ctx, args[1:], stdout, stderr)
	case "projections":
		return runProjections(ctx, args[1:], stdout, stderr, projections.Models())
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "ledgerctl: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// source are the flags that say where the ledger is and, for --nats, the
// credential to present.
type source struct {
	data, nats string
	natsCreds  natsauth.Flags
	natsAuth   jsstore.Auth
}

func (s *source) register(fs *flag.FlagSet) {
	fs.StringVar(&s.data, "data", "", "the gateway's data directory, read offline with an embedded server (stop the gateway first)")
	fs.StringVar(&s.nats, "nats", "", "URL(s) of a running NATS server or cluster holding the ledger stream")
	s.natsCreds.Register(fs, "--nats (the gateway's own credentials when it runs with --nats-listen)")
}

// validate checks the flags and, with --nats, reads the credential; with
// --data the credential flags (and variables) are not used.
func (s *source) validate() error {
	if (s.data == "") == (s.nats == "") {
		return errors.New("give exactly one of --data DIR or --nats URL")
	}
	if s.nats == "" {
		return nil
	}
	var err error
	s.natsAuth, err = s.natsCreds.Auth()
	return err
}

// open binds to the existing ledger stream, read-only.
func (s *source) open(ctx context.Context) (*jsstore.Store, func(), error) {
	if s.data != "" {
		if err := hasLedger(s.data); err != nil {
			return nil, nil, err
		}
		// A running gateway's directory is refused, not read under it.
		unlock, err := jsstore.LockDir(s.data)
		if err != nil {
			return nil, nil, err
		}
		srv, err := jsstore.RunServer(jsstore.ServerConfig{Dir: s.data})
		if err != nil {
			unlock()
			return nil, nil, err
		}
		nc, err := jsstore.ConnectInProcess(srv, "ledgerctl")
		if err != nil {
			srv.Shutdown()
			unlock()
			return nil, nil, err
		}
		closeAll := func() {
			nc.Close()
			srv.Shutdown()
			srv.WaitForShutdown()
			unlock()
		}
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		st, err := jsstore.OpenExisting(octx, nc, jsstore.Options{})
		if err == nil {
			// A history shorter than what the gateway once had on disk
			// reads as a whole one: the mark tells them apart.
			var last uint64
			if last, err = st.LastSeq(octx); err == nil {
				err = jsstore.CheckDurableMark(s.data, events.StreamName, last)
			}
		}
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("open ledger in %s: %w", s.data, err)
		}
		return st, closeAll, nil
	}
	authOpts, err := s.natsAuth.Options()
	if err != nil {
		return nil, nil, err
	}
	nc, err := jsstore.Dial(s.nats, "ledgerctl", authOpts...)
	if err != nil {
		return nil, nil, err
	}
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := jsstore.OpenExisting(octx, nc, jsstore.Options{})
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("open ledger at %s: %w", s.nats, err)
	}
	return st, nc.Close, nil
}

// filesFirst reads the whole stream of an offline data directory from its
// message block files, several times faster than having the embedded server
// deliver a million messages, and through the server from wherever the files
// are not in the plain shape ReadFiles reads (jsstore.ReadFiles).
type filesFirst struct {
	*jsstore.Store
	dir  string
	warn io.Writer
}

func (f *filesFirst) Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	if filter != events.SubjectPrefix+">" {
		return f.Store.Read(ctx, filter, from, fn)
	}
	next, err := f.Store.ReadFiles(ctx, f.dir, from, fn)
	if !errors.Is(err, jsstore.ErrFilesUnusable) {
		return err
	}
	fmt.Fprintf(f.warn, "ledgerctl: reading through the server from seq %d on (%v)\n", next, err)
	return f.Store.Read(ctx, filter, next, fn)
}

// hasLedger refuses a directory that holds no ledger stream, so a mistyped
// --data does not get an empty JetStream store created in it.
func hasLedger(dir string) error {
	p := filepath.Join(dir, "jetstream", "$G", "streams", events.StreamName)
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		return fmt.Errorf("no ledger stream in %s (expected %s)", dir, p)
	}
	return nil
}

// newFlags returns a flag set whose errors and help go to stderr.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ledgerctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args; it returns an exit status when the command must stop.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, true
		}
		return exitUsage, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, true
	}
	return 0, false
}

func usageErr(stderr io.Writer, fs *flag.FlagSet, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
	fs.Usage()
	return exitUsage
}

// checkSite refuses a --site that is no site id (it names a stream
// subject) before a store is opened or a data directory locked for it.
func checkSite(site string, required bool) error {
	if site == "" {
		if required {
			return errors.New("--site is required")
		}
		return nil
	}
	if _, err := ids.ParseSite(site); err != nil {
		return fmt.Errorf("--site: %w", err)
	}
	return nil
}

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer, models []projections.Model) int {
	fs := newFlags("audit", stderr)
	var src source
	src.register(fs)
	site := fs.String("site", "", "audit only this site id (default: every site, the catalog and every other ledger subject)")
	asJSON := fs.Bool("json", false, "print the report as one JSON document")
	quiet := fs.Bool("quiet", false, "no progress display on stderr")
	workers := fs.Int("workers", 0, "goroutines replaying sites in parallel, at most 1024 (default: GOMAXPROCS)")
	gwURL := fs.String("gateway", "", "also compare each site's treasury with this running gateway's operator API (needs --token)")
	token := fs.String("token", "", "operator bearer token for --gateway")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the audit to this file (go tool pprof)")
	modelsDir := fs.String("projections-dir", "", "also compare every read model in this store with its replay of the stream (default: <--data>/projections; none with --nats)")
	if code, stop := parse(fs, args); stop {
		return code
	}
	if err := src.validate(); err != nil {
		return usageErr(stderr, fs, err)
	}
	if *modelsDir == "" && src.data != "" {
		*modelsDir = filepath.Join(src.data, "projections")
	}
	if (*gwURL == "") != (*token == "") {
		return usageErr(stderr, fs, errors.New("--gateway and --token go together"))
	}
	if *workers < 0 || *workers > maxWorkers {
		return usageErr(stderr, fs, fmt.Errorf("--workers must be 0 (GOMAXPROCS) to %d", maxWorkers))
	}
	if err := checkSite(*site, false); err != nil {
		return usageErr(stderr, fs, err)
	}
	st, closeStore, err := src.open(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl audit: %v\n", err)
		return exitError
	}
	defer closeStore()
	o := audit.Options{Site: *site, Workers: *workers}
	if !*quiet {
		o.Progress = stderr
	}
	if *gwURL != "" {
		o.Gateway = &audit.Gateway{URL: *gwURL, Token: *token}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "ledgerctl audit: %v\n", err)
			return exitError
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "ledgerctl audit: %v\n", err)
			return exitError
		}
		defer pprof.StopCPUProfile()
	}
	var from audit.Source = st
	if src.data != "" {
		from = &filesFirst{Store: st, dir: src.data, warn: stderr}
	}
	rep, err := audit.Run(ctx, from, o)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl audit: %v\n", err)
		return exitError
	}
	if *modelsDir != "" && *site == "" {
		c, err := readModelsCheck(ctx, *modelsDir, st, models)
		if err != nil {
			fmt.Fprintf(stderr, "ledgerctl audit: %v\n", err)
			return exitError
		}
		rep.AddCheck(c)
	}
	return printReport(stdout, stderr, "audit", *asJSON, rep, rep.WriteText, rep.OK)
}

// printReport writes a command's report, as indented JSON or as text, and
// returns its exit code: exitMismatch when the report is not ok.
func printReport(stdout, stderr io.Writer, cmd string, asJSON bool, rep any, text func(io.Writer) error, ok bool) int {
	var err error
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = text(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl %s: %v\n", cmd, err)
		return exitError
	}
	if !ok {
		return exitMismatch
	}
	return exitOK
}

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("events", stderr)
	var src source
	src.register(fs)
	site := fs.String("site", "", "the site id (required)")
	from := fs.Uint64("from", 1, "start at the site's first message at or after this stream sequence")
	limit := fs.Int("limit", 0, "print at most this many events (0: all)")
	asJSON := fs.Bool("json", false, "print one JSON object per event")
	if code, stop := parse(fs, args); stop {
		return code
	}
	if err := checkSite(*site, true); err != nil {
		return usageErr(stderr, fs, err)
	}
	if err := src.validate(); err != nil {
		return usageErr(stderr, fs, err)
	}
	if *limit < 0 {
		return usageErr(stderr, fs, errors.New("--limit must not be negative"))
	}
	st, closeStore, err := src.open(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl events: %v\n", err)
		return exitError
	}
	defer closeStore()
	enc := json.NewEncoder(stdout)
	n, breaks := 0, 0
	prevHash := ""
	err = audit.History(ctx, st, *site, max(*from, 1), *limit, func(e audit.Entry) error {
		// Each event names its predecessor's hash: one that does not
		// follow the event listed before it stands after a message that
		// is missing or altered, which the listing would otherwise step
		// over without a word. (The first listed has no predecessor here.)
		if n > 0 && e.Prev != prevHash {
			breaks++
			fmt.Fprintf(stderr, "ledgerctl events: the hash chain breaks before #%d.%d: an event of the site before it is missing or altered (ledgerctl audit names it)\n", e.Seq, e.Index)
		}
		prevHash = e.Hash
		n++
		if *asJSON {
			return enc.Encode(e.HistoryItem)
		}
		_, err := fmt.Fprintln(stdout, e.Line())
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl events: %v\n", err)
		return exitError
	}
	if n == 0 {
		// A typo in --site must not read as an empty history: a site with
		// no event at all does not exist, and says so in the exit status.
		known, err := hasEvents(ctx, st, *site)
		if err != nil {
			fmt.Fprintf(stderr, "ledgerctl events: %v\n", err)
			return exitError
		}
		if !known {
			fmt.Fprintf(stderr, "ledgerctl events: site %s has no events: no such site in this ledger\n", *site)
			return exitMismatch
		}
		fmt.Fprintf(stderr, "ledgerctl events: site %s has no events from seq %d\n", *site, *from)
	}
	if breaks > 0 {
		return exitMismatch
	}
	return exitOK
}

// hasEvents reports whether site has any event in the ledger.
func hasEvents(ctx context.Context, st audit.Reader, site string) (bool, error) {
	found := false
	err := audit.History(ctx, st, site, 1, 1, func(audit.Entry) error {
		found = true
		return nil
	})
	return found, err
}

// Bounds of the flags that size memory: a value past them is a typo, and
// would otherwise end in the runtime's out-of-memory crash.
const (
	maxWorkers   = 1024
	maxGenEvents = 100_000_000
	maxGenBatch  = 10_000
)

func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("generate", stderr)
	data := fs.String("data", "", "a new data directory to write the history into (required; must hold no ledger yet)")
	n := fs.Int("events", 1_000_000, "events to write")
	sites := fs.Int("sites", 100, "sites sharing them")
	batch := fs.Int("batch", 100, "events per message (group commit)")
	seed := fs.Uint64("seed", 1, "random seed")
	snapAt := fs.Float64("snapshot-at", 0.5, "snapshot every site once this fraction of the events is written (0: none)")
	quiet := fs.Bool("quiet", false, "no progress display on stderr")
	if code, stop := parse(fs, args); stop {
		return code
	}
	switch {
	case *data == "":
		return usageErr(stderr, fs, errors.New("--data is required"))
	case *n <= 0 || *sites <= 0 || *batch <= 0:
		return usageErr(stderr, fs, errors.New("--events, --sites and --batch must be positive"))
	case *n > maxGenEvents:
		return usageErr(stderr, fs, fmt.Errorf("--events must be at most %d", maxGenEvents))
	case *sites > *n:
		// Every site's history starts with its creation: more sites
		// than events would hold memory for sites never written.
		return usageErr(stderr, fs, errors.New("--sites must not exceed --events"))
	case *batch > maxGenBatch:
		return usageErr(stderr, fs, fmt.Errorf("--batch must be at most %d (a message holds at most 8 MiB)", maxGenBatch))
	case !(*snapAt >= 0 && *snapAt <= 1): // NaN too
		return usageErr(stderr, fs, errors.New("--snapshot-at must be between 0 and 1"))
	}
	if hasLedger(*data) == nil {
		fmt.Fprintf(stderr, "ledgerctl generate: %s already holds a ledger; give a new directory\n", *data)
		return exitUsage
	}
	unlock, err := jsstore.LockDir(*data)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl generate: %v\n", err)
		return exitError
	}
	defer unlock()
	srv, err := jsstore.RunServer(jsstore.ServerConfig{Dir: *data})
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl generate: %v\n", err)
		return exitError
	}
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	nc, err := jsstore.ConnectInProcess(srv, "ledgerctl-generate")
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl generate: %v\n", err)
		return exitError
	}
	defer nc.Close()
	st, err := jsstore.Open(ctx, nc, jsstore.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl generate: %v\n", err)
		return exitError
	}
	start := time.Now()
	o := audit.GenOptions{Events: *n, Sites: *sites, Batch: *batch, Seed: *seed, SnapshotAt: *snapAt}
	if !*quiet {
		var lastPrint time.Time
		o.Progress = func(done int) {
			if now := time.Now(); now.Sub(lastPrint) >= 250*time.Millisecond || done >= *n {
				lastPrint = now
				fmt.Fprintf(stderr, "\rgenerate: %5.1f%%  %d/%d events  ", float64(done)*100/float64(*n), done, *n)
			}
		}
	}
	res, err := audit.Generate(ctx, st, o)
	if !*quiet {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl generate: %v\n", err)
		return exitError
	}
	el := time.Since(start)
	var b strings.Builder
	fmt.Fprintf(&b, "generated %d events in %d messages over %d sites (stream seq 1..%d) in %s (%.0f events/s)\n",
		res.Events, res.Messages, len(res.Sites), res.LastSeq, el.Round(time.Millisecond), float64(res.Events)/el.Seconds())
	if *snapAt > 0 {
		fmt.Fprintf(&b, "snapshots of every site taken after %.0f%% of the events\n", *snapAt*100)
	}
	fmt.Fprintf(&b, "audit it with: ledgerctl audit --data %s\n", *data)
	// The history is written either way; a report that could not be
	// written is still a failure to say so (as audit and events do).
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		fmt.Fprintf(stderr, "ledgerctl generate: the history is written, but its report could not be: %v\n", err)
		return exitError
	}
	return exitOK
}
