// Command gateway serves the merchant and operator APIs over an
// event-sourced ledger on NATS JetStream: an embedded server in --data by
// default, or an external cluster with --nats.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/cmd/internal/natsauth"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/metrics"
	"github.com/iqdgateway/gateway/projections"
)

// version is set with -ldflags "-X main.version=…"; otherwise the build
// info decides.
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if os.Getenv("GOGC") == "" {
		go tuneGCPercent(ctx) // gcpercent.go
	}
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the flags (README.md "Running").
type options struct {
	http, nats, data, sync, natsListen string
	// projectionsDir is the read models' store (--projections-dir).
	projectionsDir string
	// natsListenInsecure lets --nats-listen run without credentials.
	natsListenInsecure bool
	// natsStartTimeout bounds the embedded server's start.
	natsStartTimeout time.Duration
	natsCreds        natsauth.Flags
	// natsAuth is what natsCreds read: the credential the embedded server
	// accepts, or the one presented to the --nats server.
	natsAuth                   jsstore.Auth
	demo                       bool
	adminToken, adminTokenFile string
	// adminTokenEnv: the token came from GATEWAY_ADMIN_TOKEN.
	adminTokenEnv  bool
	publicURL      string
	docsURL        string
	trustedProxies string
	cb             callbackOptions
	callbacks      bool
	replicas       int
	batchMin       int
	logLevel       string
	logFormat      string
	debugListen    string
	memoryLimit    string
}

// minAdminTokenLen is the shortest --admin-token accepted. The token is
// the admin of every site: at 32 characters even one of lower-case letters
// only (about 150 bits) cannot be guessed over HTTP.
const minAdminTokenLen = 32

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gateway [flags]            the payment gateway (merchant API /v1, operator API /ops/v1, console /console)\n"+
			"       gateway callbacks [flags]  a process that only delivers callbacks (gateway callbacks -h)\n\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.http, "http", env("GATEWAY_HTTP", "127.0.0.1:8080"), "listen address [GATEWAY_HTTP]")
	fs.StringVar(&o.nats, "nats", env("GATEWAY_NATS", ""), "URL(s) of an external NATS cluster, comma-separated; empty runs an embedded server [GATEWAY_NATS]")
	fs.StringVar(&o.data, "data", env("GATEWAY_DATA", "./data"), "embedded server's JetStream directory [GATEWAY_DATA]")
	fs.StringVar(&o.projectionsDir, "projections-dir", env("GATEWAY_PROJECTIONS_DIR", ""), "the read models' store, rebuilt from the stream when missing (default: <--data>/projections, also with --nats) [GATEWAY_PROJECTIONS_DIR]")
	fs.StringVar(&o.sync, "sync", env("GATEWAY_SYNC", "always"), "embedded server durability: 'always' puts every write on disk before it is answered (the gateway fsyncs\nthe ledger's files once for each group of writes; with --nats-listen the server fsyncs every message);\n'interval' syncs every 2 minutes: a machine crash loses recent acknowledged writes [GATEWAY_SYNC]")
	fs.StringVar(&o.natsListen, "nats-listen", env("GATEWAY_NATS_LISTEN", ""), "expose the embedded server's client port, e.g. 127.0.0.1:4222; needs credentials (--nats-user or --nats-nkey-seed-file) [GATEWAY_NATS_LISTEN]")
	fs.BoolVar(&o.natsListenInsecure, "nats-listen-insecure", envBool("GATEWAY_NATS_LISTEN_INSECURE", false), "let --nats-listen accept clients without credentials, who can then read every site's secrets (development only) [GATEWAY_NATS_LISTEN_INSECURE]")
	o.natsCreds.Register(fs, "the embedded server's --nats-listen port (and this process) or the --nats server")
	startEnvErr := natsStartTimeoutFlag(fs, &o.natsStartTimeout)
	fs.BoolVar(&o.demo, "demo", false, "create a demo site and methods if missing and print their keys (implies --callback-allow-private)")
	// GATEWAY_ADMIN_TOKEN is read by check, not given as the default: -help prints defaults.
	fs.StringVar(&o.adminToken, "admin-token", "", "operator bearer token, at least 32 characters; generated and printed once when empty [GATEWAY_ADMIN_TOKEN]")
	fs.StringVar(&o.adminTokenFile, "admin-token-file", env("GATEWAY_ADMIN_TOKEN_FILE", ""), "file holding the operator bearer token, instead of --admin-token [GATEWAY_ADMIN_TOKEN_FILE]")
	fs.StringVar(&o.publicURL, "public-url", env("GATEWAY_PUBLIC_URL", ""), "base of hosted page URLs (default http:// + listen address) [GATEWAY_PUBLIC_URL]")
	fs.StringVar(&o.docsURL, "docs-url", env("GATEWAY_DOCS_URL", ""), "base of the documentation links in error answers (docLink), e.g. https://docs.example/gateway;\ndefault: this gateway's own /docs under --public-url [GATEWAY_DOCS_URL]")
	fs.StringVar(&o.trustedProxies, "trusted-proxies", env("GATEWAY_TRUSTED_PROXIES", ""), "comma-separated CIDRs whose X-Forwarded-For is believed [GATEWAY_TRUSTED_PROXIES]")
	fs.BoolVar(&o.callbacks, "callbacks", envBool("GATEWAY_CALLBACKS", true), "deliver callbacks from this process; false when a separate 'gateway callbacks' process delivers them [GATEWAY_CALLBACKS]")
	o.cb.register(fs)
	replicaFlag(fs, &o.replicas)
	batchMin, batchEnvErr := strconv.Atoi(env("GATEWAY_BATCH_MIN", "-1"))
	fs.IntVar(&o.batchMin, "batch-min", batchMin, "appends of different sites waiting at one moment are stored as one atomic batch when at least\nthis many; 0 never; -1 picks for the store: 16 with --sync always and --nats-listen or an external single server,\n0 otherwise [GATEWAY_BATCH_MIN]")
	logLevelFlag(fs, &o.logLevel)
	logFormatFlag(fs, &o.logFormat)
	debugFlag(fs, &o.debugListen)
	memoryLimitFlag(fs, &o.memoryLimit)
	err := fs.Parse(args)
	if err != nil {
		return o, err
	}
	if err := checkMemoryLimit(o.memoryLimit); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.projectionsDir == "" {
		o.projectionsDir = filepath.Join(o.data, "projections")
	}
	if o.sync != "always" && o.sync != "interval" {
		return o, fmt.Errorf("--sync must be always or interval, not %q", o.sync)
	}
	if o.docsURL != "" {
		if u, err := url.Parse(o.docsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return o, fmt.Errorf("--docs-url must be an absolute http or https URL without a query or fragment, not %q", o.docsURL)
		}
	}
	if startEnvErr != nil {
		return o, startEnvErr
	}
	if o.natsStartTimeout <= 0 {
		return o, fmt.Errorf("--nats-start-timeout must be positive, not %s", o.natsStartTimeout)
	}
	if batchEnvErr != nil {
		return o, fmt.Errorf("GATEWAY_BATCH_MIN must be a whole number, not %q", os.Getenv("GATEWAY_BATCH_MIN"))
	}
	if o.batchMin < -1 {
		return o, fmt.Errorf("--batch-min must be -1 (picked for the store), 0 (never) or a count, not %d", o.batchMin)
	}
	if o.batchMin == -1 {
		o.batchMin = defaultBatchMin(o)
	}
	if o.demo {
		o.cb.allowPrivate = true
	}
	if err := o.check(); err != nil {
		return o, err
	}
	return o, o.cb.check()
}

// check reads the credential and token files and refuses combinations
// that would expose the ledger or the operator API.
func (o *options) check() error {
	var err error
	if o.natsAuth, err = o.natsCreds.Auth(); err != nil {
		return err
	}
	if o.natsListen != "" && o.nats == "" && o.natsAuth.IsZero() && !o.natsListenInsecure {
		return errors.New("--nats-listen exposes the ledger stream, which holds every site's secrets, so it needs credentials: " +
			"--nats-user with --nats-password-file (or --nats-password), or --nats-nkey-seed-file; " +
			"--nats-listen-insecure exposes it to anyone who reaches the port")
	}
	if o.adminToken == "" {
		o.adminToken = os.Getenv("GATEWAY_ADMIN_TOKEN")
		o.adminTokenEnv = o.adminToken != ""
	}
	o.adminToken, err = adminToken(o.adminToken, o.adminTokenFile)
	return err
}

// adminToken is the --admin-token or the content of --admin-token-file
// (without surrounding whitespace), checked for length; empty when neither
// was given.
func adminToken(token, file string) (string, error) {
	from := "--admin-token"
	if file != "" {
		if token != "" {
			return "", errors.New("give --admin-token or --admin-token-file, not both")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--admin-token-file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return "", fmt.Errorf("--admin-token-file: %s is empty", file)
		}
		from = "the token in --admin-token-file"
	}
	if n := utf8.RuneCountInString(token); token != "" && n < minAdminTokenLen {
		return "", fmt.Errorf("%s must be at least %d characters, not %d: generate one with 'openssl rand -base64 33'",
			from, minAdminTokenLen, n)
	}
	return token, nil
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envBool(name string, def bool) bool {
	b, err := strconv.ParseBool(env(name, strconv.FormatBool(def)))
	if err != nil {
		return def
	}
	return b
}

func replicaFlag(fs *flag.FlagSet, v *int) {
	replicas, _ := strconv.Atoi(env("GATEWAY_REPLICAS", "1"))
	fs.IntVar(v, "replicas", replicas, "stream replicas when using --nats (3 for a 3-node cluster) [GATEWAY_REPLICAS]")
}

func logLevelFlag(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "log-level", env("GATEWAY_LOG_LEVEL", "info"), "debug, info, warn or error [GATEWAY_LOG_LEVEL]")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "callbacks" {
		return runDispatcher(ctx, args[1:], stderr)
	}
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 2
	}
	log, err := newLogger(o.logLevel, o.logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 2
	}
	if err := serve(ctx, o, stdout, log); err != nil {
		log.Error("gateway stopped", "err", err)
		return 1
	}
	return 0
}

func parseProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pr, err := aggregates.ParseAllowEntry(p)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxies: %q: %w", p, err)
		}
		out = append(out, pr)
	}
	return out, nil
}

func serve(ctx context.Context, o options, stdout io.Writer, log *slog.Logger) error {
	proxies, err := parseProxies(o.trustedProxies)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.http)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen %s: %w: another program (or another gateway) listens there; give this one another address with --http (GATEWAY_HTTP), e.g. --http 127.0.0.1:9090", o.http, err)
	}
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.http, err)
	}
	defer ln.Close()
	publicURL := o.publicURL
	if publicURL == "" {
		publicURL = "http://" + ln.Addr().String()
	}

	// Listen at once: until the ledger is open the gateway answers 503
	// (and /healthz 200), so a gateway waiting for a cluster that is
	// forming is seen waiting, not restarting.
	var waiting atomic.Pointer[string]
	setWaiting := func(s string) { waiting.Store(&s) }
	setWaiting("connecting to the event store")
	handler := &handlerSwitch{}
	handler.set(httpapi.Starting(appVersion(), log, func() string { return *waiting.Load() }))
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: httpapi.ServerMaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	defer srv.Close()
	log.Info("gateway listening", "http", ln.Addr().String(), "publicURL", publicURL, "version", appVersion())

	authOpts, err := o.natsAuth.Options()
	if err != nil {
		return err
	}
	var nc *nats.Conn
	if o.nats == "" {
		setWaiting("starting the embedded NATS server")
		var stopEmbedded func()
		if nc, stopEmbedded, err = runEmbedded(o, log); err != nil {
			return err
		}
		defer stopEmbedded()
	} else if nc, err = jsstore.Connect(o.nats, "gateway", authOpts...); err != nil {
		return err
	}
	defer nc.Close()

	setWaiting("waiting for the ledger stream")
	m := metrics.New()
	ls, err := openLedger(ctx, nc, ledgerOptions{create: true, replicas: o.replicas, batchMin: o.batchMin, files: embeddedDir(o), syncFiles: storeSyncs(o),
		tailMayBeLost: o.nats == "" && o.sync == "interval", snapshotEvery: time.Minute,
		publicURL: publicURL, metrics: m}, log)
	if err != nil {
		return err
	}
	store, led, reader := ls.store, ls.led, ls.reader
	closeLedger := ls.close
	// The read models catch up before the API is served (/readyz 503
	// until then), and follow the stream while it is.
	setWaiting("catching up the read models")
	rm, err := openReadModels(ctx, o.projectionsDir, projections.Models(), store, log)
	if err != nil {
		closeLedger()
		return err
	}
	defer rm.close()

	token := o.adminToken
	if token == "" {
		token = generateToken()
		fmt.Fprintf(stdout, "Operator token (generated; pass --admin-token, GATEWAY_ADMIN_TOKEN or --admin-token-file to keep one): %s\n", token)
	}
	// Every process lists deliveries and forwards resends; only one
	// delivers at a time (see callbacks.Dispatcher).
	setWaiting("waiting for the callback streams")
	disp, err := openDispatcher(ctx, o.cb.config(nc, ls, o.replicas, log), m, log)
	if err != nil {
		closeLedger()
		return err
	}
	defer disp.Close()
	api := httpapi.New(httpapi.Config{Ledger: led, Reader: reader, AdminToken: token, TrustedProxies: proxies,
		AppVersion: appVersion(), StoreReady: store.Ping, ReadModels: rm.check, Callbacks: disp, Events: store, Logger: log, Metrics: m, MetricsHandler: m.Handler(),
		DocsURL: o.docsURL})
	if o.demo {
		handler.set(withDemoReceiver(api, &demoReceiver{site: led.SiteConfig, log: log, now: time.Now}))
	} else {
		handler.set(api)
	}
	// Callback streams last as long as their clients: the stop ends them,
	// once the listener is closed, so that Shutdown has only requests to
	// wait for and each follower reconnects to another process.
	srv.RegisterOnShutdown(api.StopStreams)
	defer serveDebug(o.debugListen, log)()
	setMemoryLimit(o.memoryLimit)
	// Deposits expire at their expiresAt; the first sweep, once the state
	// has caught up, expires those that fell due while no gateway ran.
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		if led.WaitReady(ctx) == nil {
			led.RunExpiry(ctx, time.Second)
		}
	}()
	// Callbacks start once the state has caught up; they stop with the
	// process (an unacknowledged delivery is delivered again next time).
	dctx, stopDispatch := context.WithCancel(ctx)
	defer stopDispatch()
	dispatchDone := make(chan struct{})
	go func() {
		defer close(dispatchDone)
		if !o.callbacks {
			log.Info("callbacks are delivered by a separate process (--callbacks=false)")
			return
		}
		if led.WaitReady(dctx) == nil {
			_ = disp.Run(dctx)
		}
	}()
	if o.demo {
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := led.WaitReady(rctx)
		if err == nil {
			err = setupDemo(rctx, led, reader, stdout, "http://"+ln.Addr().String(), tokenShell(o, token), demoCallbackURL(ln.Addr()))
		}
		cancel()
		if err != nil {
			_ = srv.Close()
			closeLedger()
			return fmt.Errorf("demo: %w", err)
		}
	}

	select {
	case err := <-errc:
		closeLedger()
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests, ending callback streams", "callbackStreams", api.OpenStreams())
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("drain incomplete", "err", err)
	}
	<-sweepDone
	stopDispatch()
	<-dispatchDone
	closeLedger()
	log.Info("stopped", "peakRSSMiB", peakRSSMiB())
	return nil
}

func debugFlag(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "debug-listen", env("GATEWAY_DEBUG_LISTEN", ""), "serve Go runtime profiles (/debug/pprof) on this address, e.g. 127.0.0.1:6060 [GATEWAY_DEBUG_LISTEN]")
}

// serveDebug serves the profiles on addr (none when empty) until the
// returned function is called.
func serveDebug(addr string, log *slog.Logger) func() {
	if addr == "" {
		return func() {}
	}
	dbg := &http.Server{Addr: addr, Handler: pprofMux(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := dbg.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug listener", "err", err)
		}
	}()
	return func() { _ = dbg.Close() }
}

// pprofMux serves the runtime profiles on the debug listener only, never on
// the public API.
func pprofMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return m
}

func generateToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "op_" + base64.RawURLEncoding.EncodeToString(b)
}

// appVersion is the build label: -ldflags version, the module version, or
// the VCS revision, in that order.
func appVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	switch {
	case rev == "":
		return "dev"
	case dirty:
		return rev + "-dirty"
	}
	return rev
}
