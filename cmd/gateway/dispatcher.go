package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/cmd/internal/natsauth"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/metrics"
)

// callbackOptions are the callback flags, shared by the gateway and the
// 'gateway callbacks' subcommand.
type callbackOptions struct {
	retryText    string
	retry        callbacks.Schedule
	allowPrivate bool
	ackWait      time.Duration
	leaseTTL     time.Duration
}

func (c *callbackOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&c.retryText, "callback-retry", env("GATEWAY_CALLBACK_RETRY", ""),
		"comma-separated callback retry delays, e.g. 1s,2s,4s (default 5s,5m,30m,2h,5h,10h,10h) [GATEWAY_CALLBACK_RETRY]")
	fs.BoolVar(&c.allowPrivate, "callback-allow-private", envBool("GATEWAY_CALLBACK_ALLOW_PRIVATE", false),
		"allow callbacks to loopback and private addresses [GATEWAY_CALLBACK_ALLOW_PRIVATE]")
	fs.DurationVar(&c.ackWait, "callback-ack-wait", envDuration("GATEWAY_CALLBACK_ACK_WAIT", 30*time.Second),
		"how long a dispatcher that stopped without a word holds its unfinished callbacks before another takes them [GATEWAY_CALLBACK_ACK_WAIT]")
	fs.DurationVar(&c.leaseTTL, "callback-lease-ttl", envDuration("GATEWAY_CALLBACK_LEASE_TTL", 10*time.Second),
		"how long the active dispatcher's lease lasts unrenewed: a crashed dispatcher is replaced after it [GATEWAY_CALLBACK_LEASE_TTL]")
}

// check parses what register read.
func (c *callbackOptions) check() error {
	var err error
	if c.retry, err = callbacks.ParseSchedule(c.retryText); err != nil {
		return fmt.Errorf("--callback-retry: %w", err)
	}
	if c.ackWait < 3*time.Second {
		return fmt.Errorf("--callback-ack-wait must be at least 3s, not %s", c.ackWait)
	}
	if c.leaseTTL < time.Second {
		return fmt.Errorf("--callback-lease-ttl must be at least 1s, not %s", c.leaseTTL)
	}
	return nil
}

// config is the dispatcher's configuration over the process's ledger.
func (c *callbackOptions) config(nc *nats.Conn, ls *ledgerState, replicas int, log *slog.Logger) callbacks.Config {
	return callbacks.Config{Conn: nc, Store: ls.store, Ledger: ls.led, Records: ls.reader, Replicas: replicas,
		Schedule: c.retry, AllowPrivate: c.allowPrivate, AckWait: c.ackWait, LeaseTTL: c.leaseTTL, Logger: log,
		Metrics: ls.metrics}
}

func envDuration(name string, def time.Duration) time.Duration {
	d, err := time.ParseDuration(env(name, def.String()))
	if err != nil {
		return def
	}
	return d
}

// dispatcherOptions are the flags of 'gateway callbacks'.
type dispatcherOptions struct {
	nats, publicURL, logLevel string
	// http is the listener of /healthz, /readyz and /metrics.
	http        string
	logFormat   string
	natsCreds   natsauth.Flags
	natsAuth    jsstore.Auth
	debugListen string
	memoryLimit string
	replicas    int
	cb          callbackOptions
}

func parseDispatcherFlags(args []string, stderr io.Writer) (dispatcherOptions, error) {
	var o dispatcherOptions
	fs := flag.NewFlagSet("gateway callbacks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gateway callbacks --nats URL [flags]\n\n"+
			"Delivers the callbacks of the gateways on the same NATS, instead of the gateways themselves\n"+
			"(run those with --callbacks=false). Several may run: one delivers, the others stand by.")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.nats, "nats", env("GATEWAY_NATS", ""), "URL(s) of the gateways' NATS, comma-separated (required) [GATEWAY_NATS]")
	o.natsCreds.Register(fs, "the --nats server (the gateway's own, with its --nats-listen)")
	fs.StringVar(&o.publicURL, "public-url", env("GATEWAY_PUBLIC_URL", ""), "the gateways' --public-url, for hosted page links in callbacks [GATEWAY_PUBLIC_URL]")
	fs.StringVar(&o.http, "http", env("GATEWAY_HTTP", "127.0.0.1:8081"), "listen address of /healthz, /readyz and /metrics; keep it internal [GATEWAY_HTTP]")
	replicaFlag(fs, &o.replicas)
	logLevelFlag(fs, &o.logLevel)
	logFormatFlag(fs, &o.logFormat)
	debugFlag(fs, &o.debugListen)
	memoryLimitFlag(fs, &o.memoryLimit)
	o.cb.register(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := checkMemoryLimit(o.memoryLimit); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.nats == "" {
		return o, errors.New("--nats is required: a separate dispatcher needs the gateways' NATS (the embedded one is exposed with the gateway's --nats-listen)")
	}
	if o.http == "" {
		// net.Listen would take it as a random port on every interface.
		return o, errors.New("--http is required: the address of /healthz, /readyz and /metrics, e.g. 127.0.0.1:8081")
	}
	var err error
	if o.natsAuth, err = o.natsCreds.Auth(); err != nil {
		return o, err
	}
	return o, o.cb.check()
}

// runDispatcher is 'gateway callbacks': a process that only delivers
// callbacks, until SIGTERM.
func runDispatcher(ctx context.Context, args []string, stderr io.Writer) int {
	o, err := parseDispatcherFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway callbacks:", err)
		return 2
	}
	log, err := newLogger(o.logLevel, o.logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "gateway callbacks:", err)
		return 2
	}
	// Up (and scraped) from the start: /readyz says when it is ready.
	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		log.Error("callback dispatcher stopped", "err", fmt.Errorf("listen %s: %w", o.http, err))
		return 1
	}
	m := metrics.New()
	var pr probes
	defer serveProbes(ln, pr.handler(m), log)()
	authOpts, err := o.natsAuth.Options()
	if err != nil {
		log.Error("callback dispatcher stopped", "err", err)
		return 1
	}
	nc, err := jsstore.Connect(o.nats, "gateway-callbacks", authOpts...)
	if err != nil {
		log.Error("callback dispatcher stopped", "err", err)
		return 1
	}
	defer nc.Close()
	defer serveDebug(o.debugListen, log)()
	setMemoryLimit(o.memoryLimit)
	log.Info("callback dispatcher starting", "nats", o.nats, "natsAuth", o.natsAuth, "http", ln.Addr().String())
	if err := dispatch(ctx, nc, o, m, &pr, log); err != nil && ctx.Err() == nil {
		log.Error("callback dispatcher stopped", "err", err)
		return 1
	}
	log.Info("stopped", "peakRSSMiB", peakRSSMiB())
	return 0
}

// dispatch follows the ledger the gateways write, as they do (openLedger),
// and delivers callbacks from it until ctx ends. pr answers /readyz from
// the ledger once it is open.
func dispatch(ctx context.Context, nc *nats.Conn, o dispatcherOptions, m *metrics.Metrics, pr *probes, log *slog.Logger) error {
	ls, err := openLedger(ctx, nc, ledgerOptions{publicURL: o.publicURL, metrics: m}, log)
	if err != nil {
		return err
	}
	defer ls.close()
	pr.ls.Store(ls)
	// A callback's record and its previous status come from the state: it
	// must have caught up with the stream before the first delivery.
	if err := ls.led.WaitReady(ctx); err != nil {
		return err
	}
	d, err := openDispatcher(ctx, o.cb.config(nc, ls, o.replicas, log), m, log)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Run(ctx)
}
