// Package ledger is the write side of the gateway: it holds every site's
// aggregate state in memory, runs commands through load → decide → append
// (with the sequence the state was read at) → bounded retry, and keeps the
// states current by following the stream, so several gateway processes on
// one NATS cluster agree.
//
// Throughput on a hot site comes from group commit: commands queued for a
// site while an append is in flight are decided together against the
// in-memory state and appended as one message with one expected sequence,
// so one fsync acknowledges many commands.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gateway/aggregates"
	"gateway/events"
)

// Store is the event store the ledger needs (events/jsstore implements it).
type Store interface {
	Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error)
	Get(ctx context.Context, seq uint64) (events.Msg, error)
	Next(ctx context.Context, subject string, seq uint64) (events.Msg, error)
	LastSeq(ctx context.Context) (uint64, error)
	LastFor(ctx context.Context, subject string) (uint64, error)
	Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error
	Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error
	SaveSnapshot(ctx context.Context, name string, seq uint64, data []byte) error
	LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error)
	ListSnapshots(ctx context.Context) ([]string, error)
}

// Config tunes the ledger.
type Config struct {
	// MaxBatch caps the commands decided into one message.
	MaxBatch int
	// MaxRetries bounds how often a conflicting batch is re-decided.
	MaxRetries int
	// SnapshotEvery is how often changed sites are snapshotted (0: never
	// in the background; Close still snapshots).
	SnapshotEvery time.Duration
	// Now is the clock (tests move it).
	Now func() time.Time
	// Logger receives operational logs.
	Logger *slog.Logger
}

// Ledger is the in-memory state of all sites, the catalog and the operators,
// kept equal to the stream.
type Ledger struct {
	store Store
	cfg   Config
	log   *slog.Logger

	mu       sync.RWMutex
	sites    map[string]*entry
	byAppKey map[string]*entry

	// catalog and operators are the shared aggregates (see shared.go).
	catalog   *shared[aggregates.Catalog, *aggregates.Catalog]
	operators *shared[aggregates.Operators, *aggregates.Operators]

	// followed is the stream sequence the follower has applied up to.
	followed atomic.Uint64
	// target is the stream's last sequence at start-up; ready once passed.
	target atomic.Uint64
	ready  atomic.Bool
	readyC chan struct{}

	snapMu   sync.Mutex
	wg       sync.WaitGroup
	cancel   context.CancelFunc
	followMu sync.Mutex
	closed   atomic.Bool
}

// entry guards one site's state. The committer goroutine holds mu from
// decide to commit, so readers only ever see committed state.
type entry struct {
	id    string
	mu    ctxMutex
	state *aggregates.Site
	// applied mirrors state.Seq for lock-free skips in the follower.
	applied atomic.Uint64
	// cfg mirrors state.Cfg for lock-free authentication.
	cfg atomic.Pointer[aggregates.Config]
	// behind is set when the state may lag the stream (a foreign message
	// was skipped, or an append ended with an unknown outcome).
	behind bool
	// snapSeq is the sequence of the last snapshot written.
	snapSeq uint64

	qmu     sync.Mutex
	queue   []*op
	running bool
}

type op struct {
	cmd   aggregates.Command
	actor string
	ctx   context.Context
	res   Result
	err   error
	done  chan struct{}
	// state settles the race between a caller giving up and the
	// committer taking the command: exactly one of them wins.
	state atomic.Int32
}

const (
	opQueued int32 = iota
	opClaimed
	opAbandoned
)

// claim reports whether the committer may decide the command: it was not
// abandoned by its caller, whose context is still live.
func (o *op) claim() bool {
	if o.state.Load() == opClaimed {
		return true
	}
	if o.ctx.Err() != nil {
		o.state.CompareAndSwap(opQueued, opAbandoned)
	}
	return o.state.CompareAndSwap(opQueued, opClaimed)
}

// Result is the outcome of one command.
type Result struct {
	// Decision is what the aggregate decided.
	Decision aggregates.Decision
	// Events are the events appended for this command (none for a repeat).
	Events []events.Event
	// Seq is the stream sequence of the message holding Events.
	Seq uint64
	// Tx is the transaction concerned, as committed (zero when none).
	Tx aggregates.Tx
	// Reason is the transaction's status reason.
	Reason string
}

// New returns a ledger over store. Call Start before use.
func New(store Store, cfg Config) *Ledger {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 16
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Ledger{store: store, cfg: cfg, log: cfg.Logger, sites: map[string]*entry{}, byAppKey: map[string]*entry{},
		readyC: make(chan struct{}), catalog: newCatalog(), operators: newOperators()}
	return l
}

// Now returns the ledger's clock.
func (l *Ledger) Now() time.Time { return l.cfg.Now() }

// ErrClosed is returned for commands after Close.
var ErrClosed = errors.New("ledger closed")

// Start loads snapshots, replays the stream after the checkpoint and follows
// it in the background. It returns once loading has begun; Ready reports
// when the state has caught up.
func (l *Ledger) Start(ctx context.Context) error {
	from, err := l.loadSnapshots(ctx)
	if err != nil {
		return err
	}
	if err := l.loadShared(ctx); err != nil {
		return err
	}
	last, err := l.store.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("start ledger: %w", err)
	}
	l.target.Store(last)
	if from > 0 {
		l.followed.Store(from - 1)
	}
	l.checkReady()
	fctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.follow(fctx, from)
	}()
	if l.cfg.SnapshotEvery > 0 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			t := time.NewTicker(l.cfg.SnapshotEvery)
			defer t.Stop()
			for {
				select {
				case <-fctx.Done():
					return
				case <-t.C:
					if err := l.Snapshot(fctx); err != nil && fctx.Err() == nil {
						l.log.Warn("snapshot round failed", "err", err)
					}
				}
			}
		}()
	}
	return nil
}

// WaitReady blocks until the ledger has caught up with the stream as it was
// at start-up, or ctx ends.
func (l *Ledger) WaitReady(ctx context.Context) error {
	select {
	case <-l.readyC:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ready reports whether start-up replay has caught up.
func (l *Ledger) Ready() bool { return l.ready.Load() }

// Followed returns the stream sequence the follower has applied up to.
func (l *Ledger) Followed() uint64 { return l.followed.Load() }

// CatchUp waits until the follower has applied everything the stream held
// when it was called: a site or method created through another gateway
// process is then known here.
func (l *Ledger) CatchUp(ctx context.Context) error {
	last, err := l.store.LastSeq(ctx)
	if err != nil {
		return err
	}
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for l.followed.Load() < last {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", events.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

func (l *Ledger) checkReady() {
	if !l.ready.Load() && l.followed.Load() >= l.target.Load() {
		if l.ready.CompareAndSwap(false, true) {
			close(l.readyC)
		}
	}
}

// follow applies every stream message, restarting after store errors.
func (l *Ledger) follow(ctx context.Context, from uint64) {
	for ctx.Err() == nil {
		if from == 0 {
			from = 1
		}
		err := l.store.Follow(ctx, events.SubjectPrefix+">", from, func(m events.Msg) {
			l.applyFollowed(m)
		})
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("ledger follower stopped; restarting", "err", err)
		from = l.followed.Load() + 1
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (l *Ledger) applyFollowed(m events.Msg) {
	defer func() {
		l.followed.Store(m.Seq)
		l.checkReady()
	}()
	if l.followShared(m) {
		return
	}
	id, ok := strings.CutPrefix(m.Subject, events.SitePrefix)
	if !ok {
		return
	}
	e := l.entry(id, true)
	if m.Seq <= e.applied.Load() {
		return // written by this process, already applied
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if m.Seq <= e.state.Seq {
		return
	}
	if err := l.applySiteLocked(e, m); err != nil {
		l.log.Error("site message not applied", "site", id, "seq", m.Seq, "err", err)
		e.behind = true
	}
}

// entry returns the site's entry, creating an empty one when asked.
func (l *Ledger) entry(id string, create bool) *entry {
	l.mu.RLock()
	e := l.sites[id]
	l.mu.RUnlock()
	if e != nil || !create {
		return e
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e = l.sites[id]; e == nil {
		e = &entry{id: id, mu: newCtxMutex(), state: aggregates.NewSite(id)}
		l.sites[id] = e
	}
	return e
}

// applySiteLocked folds one stored message into e (e.mu held).
func (l *Ledger) applySiteLocked(e *entry, m events.Msg) error {
	evs, err := events.Decode(m.Data)
	if err != nil {
		return err
	}
	if len(evs) > 0 && evs[0].Prev != e.state.Hash {
		l.log.Error("hash chain broken", "site", e.id, "seq", m.Seq)
	}
	if err := e.state.ApplyMessage(m.Seq, evs); err != nil {
		return err
	}
	l.published(e)
	return nil
}

// published refreshes the lock-free mirrors after the state changed.
func (l *Ledger) published(e *entry) {
	e.applied.Store(e.state.Seq)
	cfg := e.state.Cfg
	if old := e.cfg.Swap(cfg); old != cfg && cfg != nil {
		l.mu.Lock()
		if old != nil && old.AppKey != cfg.AppKey {
			delete(l.byAppKey, old.AppKey)
		}
		l.byAppKey[cfg.AppKey] = e
		l.mu.Unlock()
	}
}

// catchUpLocked reads the site's messages after its state (e.mu held).
func (l *Ledger) catchUpLocked(ctx context.Context, e *entry) error {
	subj := events.SiteSubject(e.id)
	for {
		m, err := l.store.Next(ctx, subj, e.state.Seq+1)
		if errors.Is(err, events.ErrNotFound) {
			e.behind = false
			return nil
		}
		if err != nil {
			return err
		}
		if err := l.applySiteLocked(e, m); err != nil {
			return fmt.Errorf("catch up site %s at %d: %w", e.id, m.Seq, err)
		}
	}
}

// Sync brings one site up to the stream's current end, for read-your-writes
// across gateway processes.
func (l *Ledger) Sync(ctx context.Context, siteID string) error {
	return l.ViewFresh(ctx, siteID, nil)
}

// ViewFresh brings one site up to the stream's current end and runs fn on
// it under the same lock (fn may be nil). fn must not keep the pointer or do
// I/O.
func (l *Ledger) ViewFresh(ctx context.Context, siteID string, fn func(*aggregates.Site) error) error {
	e := l.entry(siteID, false)
	if e == nil {
		// Only make an entry for a site the stream knows, so lookups of
		// made-up ids cannot grow the map.
		if _, err := l.store.Next(ctx, events.SiteSubject(siteID), 1); err != nil {
			if errors.Is(err, events.ErrNotFound) {
				return aggregates.ErrSiteNotFound
			}
			return err
		}
		e = l.entry(siteID, true)
	}
	if err := e.mu.LockCtx(ctx); err != nil {
		return fmt.Errorf("site %s busy: %w: %v", siteID, events.ErrUnavailable, err)
	}
	defer e.mu.Unlock()
	if err := l.catchUpLocked(ctx, e); err != nil || fn == nil {
		return err
	}
	if !e.state.Created() {
		return aggregates.ErrSiteNotFound
	}
	return fn(e.state)
}

// Execute runs a command on a site and waits for its outcome. Commands for
// one site queue up while an append is in flight and are committed together.
func (l *Ledger) Execute(ctx context.Context, siteID string, cmd aggregates.Command, actor string) (Result, error) {
	if l.closed.Load() {
		return Result{}, ErrClosed
	}
	_, isCreate := cmd.(aggregates.CreateSite)
	e := l.entry(siteID, isCreate)
	if e == nil {
		if err := l.Sync(ctx, siteID); err != nil {
			return Result{Decision: aggregates.Decision{Tx: -1}}, err
		}
		e = l.entry(siteID, false)
	}
	o := &op{cmd: cmd, actor: actor, ctx: ctx, done: make(chan struct{})}
	e.qmu.Lock()
	e.queue = append(e.queue, o)
	start := !e.running
	e.running = true
	e.qmu.Unlock()
	if start {
		go l.commitLoop(e)
	}
	select {
	case <-o.done:
		return o.res, o.err
	case <-ctx.Done():
	}
	if o.state.CompareAndSwap(opQueued, opAbandoned) {
		// Not yet taken by the committer, and now it never will be.
		return Result{Decision: aggregates.Decision{Tx: -1}}, fmt.Errorf("%w: %v", events.ErrUnavailable, ctx.Err())
	}
	// Taken: its batch ends by the latest deadline of its callers (plus
	// the time to resolve a failed append), and the answer must be what
	// actually happened to it.
	<-o.done
	return o.res, o.err
}

// commitLoop drains a site's queue batch by batch until it is empty.
func (l *Ledger) commitLoop(e *entry) {
	for {
		e.qmu.Lock()
		n := len(e.queue)
		if n == 0 {
			e.running = false
			e.qmu.Unlock()
			return
		}
		if n > l.cfg.MaxBatch {
			n = l.cfg.MaxBatch
		}
		batch := e.queue[:n:n]
		e.queue = append([]*op(nil), e.queue[n:]...)
		e.qmu.Unlock()
		l.commit(e, batch)
		for _, o := range batch {
			close(o.done)
		}
	}
}
