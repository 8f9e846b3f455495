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
	"sync"
	"sync/atomic"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Store is the event store the ledger reads and writes (events.Store,
// which events/jsstore implements).
type Store = events.Store

// Config tunes the ledger.
type Config struct {
	// MaxBatch caps the commands decided into one message.
	MaxBatch int
	// MaxRetries bounds how often a conflicting batch is re-decided
	// (its callers' deadline bounds it too).
	MaxRetries int
	// SnapshotEvery is how often changed sites are snapshotted (0: never
	// in the background; Close still snapshots).
	SnapshotEvery time.Duration
	// SnapshotPace bounds the state a background snapshot round writes,
	// in bytes a second (0: as fast as the store takes it). A round
	// rewrites every changed site, and the embedded server holds each
	// block it writes in memory for a while: spread out, the round costs
	// a few blocks of memory instead of the whole state again. Close is
	// never paced.
	SnapshotPace int64
	// SnapshotLoadLimit bounds the load of one snapshot at start-up
	// (default 15 s). A snapshot the store holds only in part (a damaged
	// chunk) is never answered, only waited for: past the bound, while
	// the store answers otherwise, it is taken for unreadable and the
	// ledger replays instead, as for one that cannot be decoded.
	SnapshotLoadLimit time.Duration
	// TailMayBeLost says the store does not put every acknowledged
	// message on disk before answering (the embedded server's --sync
	// interval): a stream that ends before its snapshots lost its last
	// moments to a machine crash, that mode's documented loss. The
	// snapshots beyond its end are then dropped and the state replayed
	// from the stream, where otherwise the start is refused.
	TailMayBeLost bool
	// Now is the clock (tests move it).
	Now func() time.Time
	// Logger receives operational logs.
	Logger *slog.Logger
	// Metrics receives measurements (nil: none are taken).
	Metrics Metrics
	// HandOver carries requests to hold a busy site's appends between the
	// processes writing the stream (see handover.go); nil: none are asked
	// or heard, as for a store no other process writes.
	HandOver HandOver
}

// Ledger is the in-memory state of all sites, the catalog and the operators,
// kept equal to the stream.
type Ledger struct {
	store Store
	cfg   Config
	log   *slog.Logger

	mu       sync.RWMutex
	sites    map[ids.SiteID]*entry
	byAppKey map[string]*entry

	// loops hands a site's commit loop to an idle committer (startLoop);
	// committers counts those started.
	loops      chan *entry
	committers atomic.Int64

	// misses throttles the catch-ups that lookups of unknown appKeys and
	// operator tokens trigger (see CatchUpMiss).
	misses throttle

	// catalog and operators are the shared aggregates (see shared.go).
	catalog   *sharedCatalog
	operators *sharedOperators

	// followed is the stream sequence the follower has applied up to.
	followed atomic.Uint64
	// target is the stream's last sequence at start-up; ready once passed.
	target atomic.Uint64
	ready  atomic.Bool
	readyC chan struct{}

	snapMu sync.Mutex
	wg     sync.WaitGroup
	cancel context.CancelFunc
	closed atomic.Bool
	// closing is closed when Close begins: a paced snapshot round then
	// writes the rest at once.
	closing chan struct{}
}

// entry guards one site's state with two locks. mu is the append lock: it
// is held by whoever changes the state (the committer for a whole batch,
// its append included; the follower; a catch-up or a rebuild), so changes
// are serialized. rw guards the state's memory: a writer holds it only
// while it changes the state in memory, never across I/O, so a reader
// (RLock) never waits for an append, and only ever sees committed state.
type entry struct {
	id ids.SiteID
	// subj is the site's subject, built once through events.SiteSubject.
	subj  string
	mu    ctxMutex
	rw    sync.RWMutex
	state *aggregates.Site
	// pos is where state stands in the stream; it changes with state.
	pos events.Position
	// applied mirrors pos.Seq for lock-free waits and skips.
	applied atomic.Uint64
	// cfg mirrors state.Cfg for lock-free authentication.
	cfg atomic.Pointer[aggregates.Config]
	// behind is set when the state may lag the stream (an append ended
	// with an unknown outcome, or a conflict); mu held.
	behind bool
	// fault is set while the site must not be served (see fault).
	fault atomic.Pointer[fault]
	// snapSeq is the sequence of the last snapshot written (snapMu held).
	snapSeq uint64
	// hold, when set, holds the site's appends for another process;
	// turn, when not 0, is until when this process asked the others to
	// hold them, in unix nanoseconds (see handover.go).
	hold atomic.Pointer[hold]
	turn atomic.Int64

	qmu     sync.Mutex
	queue   []*op
	running bool
}

// fault is why a site is not served: its commands and reads answer
// ErrUnavailable. A fault that can be repaired (a panic left the state in
// doubt) is repaired by rebuilding the state from the snapshot and the
// stream; the others (a broken hash chain, a message that is not the
// site's) stay until an operator has looked at the history.
type fault struct {
	err     error
	rebuild bool
}

// mutate runs fn, which changes the state in memory, under the state lock.
func (e *entry) mutate(fn func() error) error {
	e.rw.Lock()
	defer e.rw.Unlock()
	return fn()
}

// unavailable returns the site's fault as an error, nil when it is served.
func (e *entry) unavailable() error {
	if f := e.fault.Load(); f != nil {
		return fmt.Errorf("site %s: %w: %v", e.id, events.ErrUnavailable, f.err)
	}
	return nil
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
		// The request deadline is the bound that matters (see
		// Writer.Write); this one only stops a runaway.
		cfg.MaxRetries = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SnapshotLoadLimit <= 0 {
		cfg.SnapshotLoadLimit = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	l := &Ledger{store: store, cfg: cfg, log: cfg.Logger, sites: map[ids.SiteID]*entry{}, byAppKey: map[string]*entry{}, loops: make(chan *entry),
		readyC: make(chan struct{}), closing: make(chan struct{}),
		catalog:   newShared[aggregates.Catalog, aggregates.CatalogCommand]("catalog", events.CatalogSubject, aggregates.NewCatalog()),
		operators: newShared[aggregates.Operators, aggregates.OperatorsCommand]("operators", events.OperatorsSubject, aggregates.NewOperators())}
	l.misses.every = MissInterval
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
	from, newest, err := l.loadSnapshots(ctx)
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
	if newest > last {
		// The stream only grows: snapshots saved from messages it no
		// longer has mean those messages were lost, and serving the
		// snapshots would show money no message supports.
		if !l.cfg.TailMayBeLost {
			return fmt.Errorf("start ledger: %w: snapshots were saved at sequence %d, but the stream ends at %d (messages %d to %d are gone); restore the data directory from a backup",
				events.ErrHistoryLost, newest, last, last+1, newest)
		}
		l.log.Warn("the stream ends before its snapshots: its last moments were lost to a machine crash (--sync interval); replaying it from the start",
			"snapshotsAt", newest, "streamEnd", last)
		l.dropStates()
		from = 1
	}
	l.target.Store(last)
	if from > 0 {
		l.followed.Store(from - 1)
	}
	l.checkReady()
	fctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if ho := l.cfg.HandOver; ho != nil {
		if err := ho.OnHandOver(fctx, l.handOverAsked); err != nil {
			cancel()
			return fmt.Errorf("start ledger: %w", err)
		}
	}
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
					if err := l.snapshot(fctx, l.cfg.SnapshotPace); err != nil && fctx.Err() == nil {
						l.log.Warn("snapshot round failed", "err", err)
					}
				}
			}
		}()
	}
	return nil
}

// entry returns the site's entry; with create, it makes an empty one for a
// site whose id makes a valid subject. It is nil only when there is no
// entry and none was made.
func (l *Ledger) entry(id ids.SiteID, create bool) (*entry, error) {
	l.mu.RLock()
	e := l.sites[id]
	l.mu.RUnlock()
	if e != nil || !create {
		return e, nil
	}
	subj, err := events.SiteSubject(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", aggregates.ErrSiteNotFound, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e = l.sites[id]; e == nil {
		e = &entry{id: id, subj: subj, mu: newCtxMutex(), state: aggregates.NewSite(id)}
		l.sites[id] = e
	}
	return e, nil
}

// lookup returns the entry of an existing site, nil when there is none.
func (l *Ledger) lookup(id ids.SiteID) *entry {
	e, _ := l.entry(id, false)
	return e
}

// applySiteLocked folds one stored message into e (e.mu held). A message
// that does not extend the site's hash chain, or is not the site's, is not
// applied and the site stops being served: applying it would serve money
// from a history nobody decided.
func (l *Ledger) applySiteLocked(e *entry, m events.Msg) error {
	err := e.mutate(func() error {
		next, err := applyMessage(e.state, e.pos, m)
		if err == nil {
			e.pos = next
		}
		return err
	})
	if err != nil {
		l.log.Error("site message not applied; the site is not served until its history is repaired",
			"site", e.id, "subject", m.Subject, "seq", m.Seq, "err", err)
		e.fault.Store(&fault{err: fmt.Errorf("message %d: %w", m.Seq, err)})
		return err
	}
	l.published(e)
	return nil
}

// applyMessage decodes m and folds it into s, which stands at pos,
// refusing a message that does not extend pos's hash chain
// (events.ErrChainBroken). It returns the position after m; s is unchanged
// when it fails.
func applyMessage(s *aggregates.Site, pos events.Position, m events.Msg) (events.Position, error) {
	evs, err := events.Decode(m.Data)
	if err != nil {
		return pos, err
	}
	next, err := pos.Next(m.Seq, evs)
	if err != nil {
		return pos, fmt.Errorf("%s: %w", m.Subject, err)
	}
	if err := s.ApplyMessage(m.Seq, evs); err != nil {
		return pos, err
	}
	return next, nil
}

// published refreshes the lock-free mirrors after the state changed. An
// appKey is the site's that created it: another site's event never takes
// it over, nor removes it.
func (l *Ledger) published(e *entry) {
	e.applied.Store(e.pos.Seq)
	cfg := e.state.Cfg
	old := e.cfg.Swap(cfg)
	if old == cfg || cfg == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old != nil && old.AppKey != cfg.AppKey && l.byAppKey[old.AppKey] == e {
		delete(l.byAppKey, old.AppKey)
	}
	if owner := l.byAppKey[cfg.AppKey]; owner != nil && owner != e {
		l.log.Error("appKey already belongs to another site; not re-pointed", "site", e.id, "owner", owner.id)
		return
	}
	l.byAppKey[cfg.AppKey] = e
}

// catchUpLocked reads the site's messages after its state (e.mu held), up
// to the subject's last message as it finds it, and no further: while
// another process keeps appending to the site, a catch-up that chased the
// subject's end could not reach it, and its callers' deadline passed (a
// gateway starved by another writing the same site). What is stored
// meanwhile makes the next append conflict and catch up again. The reads
// are direct gets, one a message: a read through a consumer costs the
// cluster a consumer made and removed, and catch-ups come in bursts when
// two processes write one site.
//
// step, when set, runs before each read (a write that asked for the site
// renews its request: see handover.go).
func (l *Ledger) catchUpLocked(ctx context.Context, e *entry, step func()) error {
	var last uint64 // the subject's last message, read once one is found
	for last == 0 || e.pos.Seq < last {
		if step != nil {
			step()
		}
		m, err := l.store.Next(ctx, e.subj, e.pos.Seq+1)
		if errors.Is(err, events.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		if err := l.applySiteLocked(e, m); err != nil {
			return fmt.Errorf("catch up site %s at %d: %w: %v", e.id, m.Seq, events.ErrUnavailable, err)
		}
		if last == 0 {
			if last, err = l.store.LastFor(ctx, e.subj); err != nil {
				return err
			}
		}
	}
	e.behind = false
	return nil
}
