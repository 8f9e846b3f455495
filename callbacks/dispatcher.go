package callbacks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// Store is what the dispatcher reads from the ledger stream: a site
// message by its sequence, the last sequence, and a site's messages in
// order.
type Store interface {
	Get(ctx context.Context, seq uint64) (events.Msg, error)
	LastSeq(ctx context.Context) (uint64, error)
	Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error
}

// Ledger is what the dispatcher needs of the ledger's state: a site's
// settings, how far the state has followed the stream, and a site's state
// brought up to date.
type Ledger interface {
	SiteConfig(siteID ids.SiteID) (*aggregates.Config, bool)
	Followed() uint64
	// Read runs fn on a site's state as this process holds it (fresh
	// false) or once it holds what the site's subject holds now (fresh
	// true); a nil fn only waits.
	Read(ctx context.Context, siteID ids.SiteID, fresh bool, fn func(*aggregates.Site) error) error
}

// How current a Read must be.
const (
	local = false
	fresh = true
)

// Records builds a transaction's record as the status lookup returns it,
// the body of a callback.
type Records interface {
	// ByIDLocal answers from the state this process holds, which the
	// dispatcher first lets the ledger bring past the event.
	ByIDLocal(ctx context.Context, siteID ids.SiteID, txID ids.TxID) (records.Record, error)
}

// Config configures a Dispatcher. Conn, Store, Ledger and Records are
// required; the process wires them (cmd/gateway, for the gateway and for a
// standalone dispatcher alike).
type Config struct {
	// Conn is the NATS connection (the gateway's own, or one to the same
	// cluster).
	Conn *nats.Conn
	// Store reads the ledger stream, Ledger is the state following it and
	// Records builds the transaction records callbacks carry.
	Store   Store
	Ledger  Ledger
	Records Records
	// Replicas is the replication of the CALLBACKS buckets (1 embedded,
	// 3 in a 3-node cluster).
	Replicas int
	// Stream is the ledger stream (default events.StreamName).
	Stream string
	// Durable is the consumer's durable name (default "callbacks").
	Durable string
	// Bucket is the delivery state bucket (default "CALLBACKS"); the
	// lease lives in Bucket + "_LEASE".
	Bucket string
	// Schedule is the retry schedule (default DefaultSchedule).
	Schedule Schedule
	// AllowPrivate allows callbacks to addresses that are not public
	// unicast: loopback, private, link-local, reserved and the like (see
	// privateKind; --callback-allow-private).
	AllowPrivate bool
	// Timeout bounds one attempt (default 15 s: a 2xx later is a failure).
	Timeout time.Duration
	// AckWait is the consumer's redelivery timeout; held messages are
	// extended with InProgress every AckWait/3 (default 30 s).
	AckWait time.Duration
	// MaxAckPending bounds the messages held unacknowledged, that is, the
	// messages with a callback not yet delivered or parked (default 10,000).
	MaxAckPending int
	// SiteConcurrency bounds one site's attempts in flight (default 16),
	// so a merchant whose endpoint hangs holds at most that many.
	SiteConcurrency int
	// Concurrency bounds all attempts in flight (default 256).
	Concurrency int
	// SiteBacklog bounds one site's callbacks awaiting delivery (default
	// 2,000). Beyond it a site's new callbacks are parked as failed at
	// once, for an operator to resend, instead of filling MaxAckPending and
	// stalling every other merchant.
	SiteBacklog int
	// LeaseTTL is how long the active dispatcher's lease lasts without
	// renewal (default 10 s): a crashed dispatcher is replaced after it.
	LeaseTTL time.Duration
	// Logger receives operational logs.
	Logger *slog.Logger
	// Metrics receives measurements (nil: none are taken).
	Metrics Metrics

	// afterAttempt, when set (tests), runs after every attempt and before
	// its outcome is settled.
	afterAttempt func(id string, o outcome)
	// afterLog, when set (tests), runs after a delivery log batch is
	// stored and before its messages are acknowledged.
	afterLog func(ids []string)
}

func (c *Config) defaults() {
	if c.Stream == "" {
		c.Stream = events.StreamName
	}
	if c.Durable == "" {
		c.Durable = "callbacks"
	}
	if c.Bucket == "" {
		c.Bucket = "CALLBACKS"
	}
	if len(c.Schedule) == 0 {
		c.Schedule = DefaultSchedule
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Timeout <= 0 {
		c.Timeout = 15 * time.Second
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 10000
	}
	if c.SiteConcurrency <= 0 {
		c.SiteConcurrency = 16
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 256
	}
	if c.SiteBacklog <= 0 {
		c.SiteBacklog = 2000
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = nopMetrics{}
	}
}

// Dispatcher delivers the callbacks of final-state events (docs/callbacks.md) and
// answers the operator's callback calls.
//
// Every gateway process (and any standalone dispatcher) makes one; the one
// holding the lease (see lease) consumes the ledger stream through a durable
// pull consumer and delivers. Every one of them can list deliveries (from
// its copy of the CALLBACKS bucket) and resend (forwarded to the active
// one over NATS).
//
// Delivery state is derived from the stream: the consumer's acknowledgement
// of a message says its callbacks are settled (delivered or parked), and the
// CALLBACKS bucket holds the details of the callbacks that needed more than
// one attempt, keyed by webhook id. A message is acknowledged only after
// the bucket holds what must survive it (a parked delivery's record).
type Dispatcher struct {
	cfg      Config
	log      *slog.Logger
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	leaseKV  jetstream.KeyValue
	ix       *index
	pages    *pageLog
	client   *http.Client
	global   chan struct{}
	instance []byte

	rngMu sync.Mutex
	rng   *mrand.Rand

	// active is the current term while this process is the dispatcher.
	active atomic.Pointer[term]

	stopWatch context.CancelFunc
	watchDone chan struct{}
	closeOnce sync.Once
}

// New prepares a dispatcher: it creates the CALLBACKS buckets if missing
// and starts following the delivery state for the operator API. It does
// not deliver until Run.
func New(ctx context.Context, cfg Config) (*Dispatcher, error) {
	cfg.defaults()
	if cfg.Conn == nil {
		return nil, errors.New("callbacks: a NATS connection is required")
	}
	if cfg.Store == nil || cfg.Ledger == nil || cfg.Records == nil {
		return nil, errors.New("callbacks: the store, the ledger and the records are required")
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("callbacks: jetstream: %w", err)
	}
	d := &Dispatcher{cfg: cfg, log: cfg.Logger, js: js, ix: newIndex(),
		client: newClient(cfg.AllowPrivate, cfg.Concurrency), global: make(chan struct{}, cfg.Concurrency),
		rng: mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))}
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	d.instance = []byte(host + "/" + hex.EncodeToString(b[:]))

	d.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "callback delivery state: records by webhook id, first-attempt deliveries in page.* keys",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("callbacks: bucket %s: %w", cfg.Bucket, err)
	}
	d.pages = newPageLog(d.kv)
	d.leaseKV, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket + "_LEASE",
		Description: "which process is the active callback dispatcher",
		History:     1,
		TTL:         cfg.LeaseTTL,
		Storage:     jetstream.MemoryStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("callbacks: bucket %s_LEASE: %w", cfg.Bucket, err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	d.stopWatch, d.watchDone = cancel, make(chan struct{})
	go func() {
		defer close(d.watchDone)
		d.ix.watch(wctx, d.kv, d.log)
	}()
	return d, nil
}

// Close stops following the delivery state. Call it after Run has
// returned; the store and the ledger are the caller's to close.
func (d *Dispatcher) Close() {
	d.closeOnce.Do(func() {
		if d.stopWatch != nil {
			d.stopWatch()
			<-d.watchDone
		}
	})
}

// Run delivers callbacks while this process holds the dispatcher lease,
// and waits for the lease while another process holds it, until ctx ends.
// It returns nil when ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	for {
		l := &lease{kv: d.leaseKV, ttl: d.cfg.LeaseTTL, id: d.instance}
		validUntil, err := l.acquire(ctx)
		if err != nil {
			return nil
		}
		d.log.Info("callback dispatcher active", "instance", string(d.instance))
		err = d.lead(ctx, l, validUntil)
		l.release()
		if ctx.Err() != nil {
			return nil
		}
		d.log.Warn("callback dispatcher stopped; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// Active reports whether this process is the delivering dispatcher now.
func (d *Dispatcher) Active() bool { return d.active.Load() != nil }

func (d *Dispatcher) resendSubject() string { return "gateway.callbacks." + d.cfg.Durable + ".resend" }

// more reports whether the schedule has a retry after n failed attempts
// (as delay does).
func (d *Dispatcher) more(n int) bool { return n >= 1 && n <= len(d.cfg.Schedule) }

// delay is the wait before retry n, with jitter; ok is false when the
// schedule is exhausted.
func (d *Dispatcher) delay(n int) (time.Duration, bool) {
	d.rngMu.Lock()
	defer d.rngMu.Unlock()
	return d.cfg.Schedule.Delay(n, d.rng)
}

// lead is one term: it consumes and delivers until ctx ends, the lease is
// lost or the consumer fails.
func (d *Dispatcher) lead(ctx context.Context, l *lease, validUntil time.Time) error {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cons, err := d.js.CreateOrUpdateConsumer(tctx, d.cfg.Stream, jetstream.ConsumerConfig{
		Durable:       d.cfg.Durable,
		Description:   "callback dispatcher: final-state events to merchants' callbackUrl",
		FilterSubject: events.SitePrefix + ">",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       d.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: d.cfg.MaxAckPending,
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", d.cfg.Durable, err)
	}
	info, err := cons.Info(tctx)
	if err != nil {
		return fmt.Errorf("consumer %s info: %w", d.cfg.Durable, err)
	}
	actx, stopAttempts := context.WithCancel(context.WithoutCancel(tctx))
	defer stopAttempts()
	t := &term{d: d, ctx: tctx, cancel: cancel, attemptCtx: actx, stopAttempts: stopAttempts, lease: l, cons: cons, startDelivered: info.Delivered.Stream, maxSeq: info.Delivered.Stream,
		track: newTracker(), order: newOrder(d.cfg.SiteBacklog), sems: map[ids.SiteID]chan struct{}{},
		logc: make(chan *job, maxBatch), logDrain: make(chan struct{}), logDone: make(chan struct{})}
	if info.NumAckPending > 0 {
		// The previous term's unacknowledged messages come back within
		// AckWait of its last InProgress, which was before it lost the
		// lease, which was before this term began.
		t.windowEnd = time.Now().Add(d.cfg.AckWait + 2*time.Second)
	}
	sub, err := d.cfg.Conn.Subscribe(d.resendSubject(), t.serveResend)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", d.resendSubject(), err)
	}
	lctx, stopLog := context.WithCancel(context.Background())
	t.stopLog = stopLog
	go func() {
		defer close(t.logDone)
		t.writeLog(lctx)
	}()
	d.active.Store(t)
	graceful := false
	defer func() {
		d.active.Store(nil)
		_ = sub.Unsubscribe()
		t.stop(graceful)
	}()

	errc := make(chan error, 2)
	t.goRun(func() { errc <- l.hold(tctx, validUntil) })
	t.goRun(func() { errc <- t.consume(tctx, cons) })
	t.goRun(t.progress)
	t.goRun(t.resumeOrphans)
	select {
	case err = <-errc:
	case <-ctx.Done():
		graceful = true
	}
	return err
}

// siteConfig returns the site's settings once the ledger has applied the
// stream up to at least seq (so a callbackUrl set just before the event is
// seen, and the site's state covers the event).
func (d *Dispatcher) siteConfig(ctx context.Context, site ids.SiteID, seq uint64) (*aggregates.Config, error) {
	if err := d.caughtUp(ctx, site, seq); err != nil {
		return nil, err
	}
	cfg, _ := d.cfg.Ledger.SiteConfig(site)
	return cfg, nil
}

// caughtUp waits until the ledger has followed the stream to seq. The
// follower is normally there already or within milliseconds, and waiting
// for it costs nothing; only if it is slow is the one site caught up from
// the stream, which reads the store and queues behind the site's appends.
func (d *Dispatcher) caughtUp(ctx context.Context, site ids.SiteID, seq uint64) error {
	for wait := time.Millisecond; d.cfg.Ledger.Followed() < seq; wait *= 2 {
		if wait > 256*time.Millisecond {
			return retry(ctx, func() error {
				err := d.cfg.Ledger.Read(ctx, site, fresh, nil)
				if errors.Is(err, aggregates.ErrSiteNotFound) {
					return nil
				}
				return err
			})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return nil
}
