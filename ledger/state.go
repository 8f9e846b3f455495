package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gateway/aggregates"
	"gateway/events"
)

// Snapshot names. A checkpoint P promises that every site with messages up
// to P has a snapshot. Snapshots live in one bucket that every gateway
// process writes, so a process whose follower lags can overwrite a site's
// snapshot with a state older than another process's checkpoint: start-up
// replays from the oldest of the checkpoint and the site snapshots.
const (
	snapSitePrefix = "site-"
	snapCheckpoint = "checkpoint"
)

// loadSnapshots restores site states and returns where replay starts.
func (l *Ledger) loadSnapshots(ctx context.Context) (uint64, error) {
	cp, _, err := l.store.LoadSnapshot(ctx, snapCheckpoint)
	if errors.Is(err, events.ErrNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	names, err := l.store.ListSnapshots(ctx)
	if err != nil {
		return 0, err
	}
	from := cp + 1
	for _, n := range names {
		id, ok := strings.CutPrefix(n, snapSitePrefix)
		if !ok {
			continue
		}
		_, data, err := l.store.LoadSnapshot(ctx, n)
		if err != nil {
			return 0, err
		}
		s, err := aggregates.UnmarshalSiteSnapshot(data)
		if err != nil || s.ID != id {
			// A snapshot this build cannot read is only an optimisation
			// lost: replay everything instead.
			l.log.Warn("ignoring unreadable snapshot; replaying the ledger from the start", "name", n, "err", err)
			l.mu.Lock()
			l.sites, l.byAppKey = map[string]*entry{}, map[string]*entry{}
			l.mu.Unlock()
			return 1, nil
		}
		e := l.entry(id, true)
		e.mu.Lock()
		e.state, e.snapSeq = s, s.Seq
		l.published(e)
		e.mu.Unlock()
		// Messages of other sites up to the checkpoint are skipped by
		// the follower (their states are past them); this site's newer
		// ones must be replayed.
		from = min(from, s.Seq+1)
	}
	return from, nil
}

// Snapshot writes every site that changed since its last snapshot, then a
// checkpoint at the follower's position when the round started.
func (l *Ledger) Snapshot(ctx context.Context) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	if !l.ready.Load() {
		return nil
	}
	cp := l.followed.Load()
	l.mu.RLock()
	list := make([]*entry, 0, len(l.sites))
	for _, e := range l.sites {
		list = append(list, e)
	}
	l.mu.RUnlock()
	for _, e := range list {
		e.mu.Lock()
		if e.behind {
			e.mu.Unlock()
			return fmt.Errorf("snapshot: site %s lags the stream", e.id)
		}
		if !e.state.Created() || e.state.Seq == e.snapSeq {
			e.mu.Unlock()
			continue
		}
		data, err := e.state.MarshalSnapshot()
		seq := e.state.Seq
		e.mu.Unlock()
		if err != nil {
			return err
		}
		if err := l.store.SaveSnapshot(ctx, snapSitePrefix+e.id, seq, data); err != nil {
			return err
		}
		e.mu.Lock()
		e.snapSeq = seq
		e.mu.Unlock()
	}
	return l.store.SaveSnapshot(ctx, snapCheckpoint, cp, nil)
}

func newCatalog() *shared[aggregates.Catalog, *aggregates.Catalog] {
	return newShared("catalog", events.CatalogSubject, aggregates.NewCatalog(),
		func(c *aggregates.Catalog) (*uint64, *[32]byte) { return &c.Seq, &c.Hash })
}

// Catalog returns the current methods. The value is never modified.
func (l *Ledger) Catalog() *aggregates.Catalog { return l.catalog.get() }

// CatalogCommand decides against the catalog; it returns the events.
type CatalogCommand func(c *aggregates.Catalog) ([]events.Event, error)

// ExecuteCatalog runs a catalog command with the same load → decide →
// append(expected sequence) → retry loop as site commands.
func (l *Ledger) ExecuteCatalog(ctx context.Context, decide CatalogCommand) error {
	return l.catalog.execute(ctx, l, decide)
}

// SiteByAppKey finds a site by its application key without locking it.
func (l *Ledger) SiteByAppKey(appKey string) (string, *aggregates.Config, bool) {
	l.mu.RLock()
	e := l.byAppKey[appKey]
	l.mu.RUnlock()
	if e == nil {
		return "", nil, false
	}
	cfg := e.cfg.Load()
	if cfg == nil || cfg.AppKey != appKey {
		return "", nil, false
	}
	return e.id, cfg, true
}

// SiteConfig returns a site's current settings without locking it.
func (l *Ledger) SiteConfig(siteID string) (*aggregates.Config, bool) {
	e := l.entry(siteID, false)
	if e == nil {
		return nil, false
	}
	cfg := e.cfg.Load()
	return cfg, cfg != nil
}

// View runs fn on a site's committed state under its lock. fn must not keep
// the pointer or do I/O.
func (l *Ledger) View(siteID string, fn func(*aggregates.Site) error) error {
	return l.ViewCtx(context.Background(), siteID, fn)
}

// ViewCtx is View giving up when ctx ends while the site is locked by an
// append in flight.
func (l *Ledger) ViewCtx(ctx context.Context, siteID string, fn func(*aggregates.Site) error) error {
	e := l.entry(siteID, false)
	if e == nil {
		return aggregates.ErrSiteNotFound
	}
	if err := e.mu.LockCtx(ctx); err != nil {
		return fmt.Errorf("site %s busy: %w: %v", siteID, events.ErrUnavailable, err)
	}
	defer e.mu.Unlock()
	if !e.state.Created() {
		return aggregates.ErrSiteNotFound
	}
	return fn(e.state)
}

// SiteIDs returns the ids of all created sites, sorted.
func (l *Ledger) SiteIDs() []string {
	l.mu.RLock()
	out := make([]string, 0, len(l.sites))
	for id, e := range l.sites {
		if e.cfg.Load() != nil {
			out = append(out, id)
		}
	}
	l.mu.RUnlock()
	sort.Strings(out)
	return out
}

// Close stops taking commands, waits for queued ones, stops the follower and
// writes a final snapshot round so the next start is fast.
func (l *Ledger) Close(ctx context.Context) error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	l.mu.RLock()
	list := make([]*entry, 0, len(l.sites))
	for _, e := range l.sites {
		list = append(list, e)
	}
	l.mu.RUnlock()
	for _, e := range list {
		for {
			e.qmu.Lock()
			idle := !e.running
			e.qmu.Unlock()
			if idle || ctx.Err() != nil {
				break
			}
			e.mu.Lock() // wait for the in-flight batch
			e.mu.Unlock()
		}
	}
	err := l.Snapshot(ctx)
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
	return err
}
