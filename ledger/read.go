package ledger

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Reads. None of them takes a site's append lock: a read holds the site's
// state lock for reading, which writers hold only while they change the
// state in memory, so a lookup never queues behind an append, and a store
// that stops answering cannot hold a reader past its deadline. A site is
// read through Read; SiteByAppKey and SiteConfig answer authentication
// without any lock; CatchUp and CatchUpMiss are not reads but waits for the
// follower, for things (sites, methods, operators) created through another
// process.

// SiteByAppKey finds a site by its application key without locking it.
func (l *Ledger) SiteByAppKey(appKey string) (ids.SiteID, *aggregates.Config, bool) {
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
func (l *Ledger) SiteConfig(siteID ids.SiteID) (*aggregates.Config, bool) {
	e := l.lookup(siteID)
	if e == nil {
		return nil, false
	}
	cfg := e.cfg.Load()
	return cfg, cfg != nil
}

// SiteApplied returns the stream sequence of the last message of a site
// that this process's state has applied, without locking it (0 for a site
// it does not know).
func (l *Ledger) SiteApplied(siteID ids.SiteID) uint64 {
	e := l.lookup(siteID)
	if e == nil {
		return 0
	}
	return e.applied.Load()
}

// SiteIDs returns the ids of all created sites, sorted.
func (l *Ledger) SiteIDs() []ids.SiteID {
	l.mu.RLock()
	out := make([]ids.SiteID, 0, len(l.sites))
	for id, e := range l.sites {
		if e.cfg.Load() != nil {
			out = append(out, id)
		}
	}
	l.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Consistency values for Read: how current the state a read sees must be.
const (
	// Local reads the state this process holds now.
	Local = false
	// Fresh reads it once this process has applied every message the
	// site's subject held when Read was called: read-your-writes across
	// gateway processes, at the cost of one read of one subject.
	Fresh = true
)

// Read is the one way to read a site: it runs fn on the site's committed
// state, Local or Fresh. fn must not keep the pointer, change the state or
// do I/O; a nil fn only waits (Fresh) and checks that the site is served.
// A site that is not served answers ErrUnavailable, one the stream does
// not know ErrSiteNotFound (and no entry is made for it).
func (l *Ledger) Read(ctx context.Context, siteID ids.SiteID, fresh bool, fn func(*aggregates.Site) error) error {
	var e *entry
	if fresh {
		var err error
		if e, err = l.awaitSite(ctx, siteID); err != nil {
			return err
		}
	} else if e = l.lookup(siteID); e == nil {
		return aggregates.ErrSiteNotFound
	}
	if err := e.unavailable(); err != nil {
		return err
	}
	if fn == nil {
		// The settings mirror says whether the site is created,
		// without a lock.
		if e.cfg.Load() == nil {
			return aggregates.ErrSiteNotFound
		}
		return nil
	}
	e.rw.RLock()
	defer e.rw.RUnlock()
	if !e.state.Created() {
		return aggregates.ErrSiteNotFound
	}
	return fn(e.state)
}

// awaitSite returns the site's entry once it has applied the subject's last
// message as of now. A site the stream does not know is ErrSiteNotFound,
// and no entry is made for it, so lookups of made-up ids cannot grow the
// map.
func (l *Ledger) awaitSite(ctx context.Context, siteID ids.SiteID) (*entry, error) {
	subj, err := events.SiteSubject(siteID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", aggregates.ErrSiteNotFound, err)
	}
	last, err := l.store.LastFor(ctx, subj)
	if err != nil {
		return nil, fmt.Errorf("site %s: %w", siteID, err)
	}
	if last == 0 {
		return nil, aggregates.ErrSiteNotFound
	}
	var e *entry
	err = poll(ctx, func() (bool, error) {
		if e = l.lookup(siteID); e == nil {
			return false, nil
		}
		return e.applied.Load() >= last, e.unavailable()
	})
	if err != nil {
		return nil, fmt.Errorf("site %s: waiting for message %d: %w", siteID, last, err)
	}
	return e, nil
}

// poll waits until done reports true or an error, checking it at once and
// then every millisecond; ctx ending is ErrUnavailable. It waits for this
// process's follower, which normally is milliseconds behind the stream.
func poll(ctx context.Context, done func() (bool, error)) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		if ok, err := done(); ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", events.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
}

// CatchUp waits until the follower has applied everything the stream held
// when it was called: a site or method created through another gateway
// process is then known here.
func (l *Ledger) CatchUp(ctx context.Context) error {
	last, err := l.store.LastSeq(ctx)
	if err != nil {
		return err
	}
	return poll(ctx, func() (bool, error) { return l.followed.Load() >= last, nil })
}

// MissInterval is the shortest time between two catch-ups caused by
// lookups that missed (see CatchUpMiss).
const MissInterval = 100 * time.Millisecond

// CatchUpMiss is CatchUp for a lookup that missed: an appKey, an operator
// token or a method nobody here knows. Such lookups are what a flood of bad
// credentials is made of, so at most one catch-up runs per MissInterval and
// every caller in the meantime shares it: a miss costs at most one store
// read per interval whatever the number of callers, and a site created a
// moment ago through another process is still found within an interval.
func (l *Ledger) CatchUpMiss(ctx context.Context) error {
	return l.misses.do(ctx, l.CatchUp)
}

// throttle runs a function at most once per interval for any number of
// callers; callers that arrive while one run is due or under way wait for
// it and share its result.
type throttle struct {
	every time.Duration
	mu    sync.Mutex
	// next is the run that callers arriving now will share (nil: none
	// is scheduled).
	next *run
	last time.Time
}

type run struct {
	done chan struct{}
	err  error
}

func (th *throttle) do(ctx context.Context, fn func(context.Context) error) error {
	th.mu.Lock()
	r := th.next
	if r == nil {
		r = &run{done: make(chan struct{})}
		th.next = r
		wait := time.Until(th.last.Add(th.every))
		go th.start(r, wait, fn)
	}
	th.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", events.ErrUnavailable, ctx.Err())
	}
}

// start runs fn after wait, for every caller sharing r. Its context is its
// own: the caller that scheduled it may give up before it runs.
func (th *throttle) start(r *run, wait time.Duration, fn func(context.Context) error) {
	if wait > 0 {
		time.Sleep(wait)
	}
	th.mu.Lock()
	th.next, th.last = nil, time.Now()
	th.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	r.err = fn(ctx)
	cancel()
	close(r.done)
}
