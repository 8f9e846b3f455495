package ledger

import (
	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// QueueState reports how many commands wait in a site's queue and whether
// its committer goroutine runs. Tests use it to know, without sleeping, that
// commands have queued up behind an in-flight batch.
func QueueState(l *Ledger, siteID ids.SiteID) (queued int, running bool) {
	e := l.lookup(siteID)
	if e == nil {
		return 0, false
	}
	e.qmu.Lock()
	defer e.qmu.Unlock()
	return len(e.queue), e.running
}

// AdoptConfig makes an entry for id holding cfg and publishes it, as a
// message of site id changing its settings to cfg would.
func AdoptConfig(l *Ledger, id ids.SiteID, cfg *aggregates.Config) {
	e, err := l.entry(id, true)
	if err != nil {
		panic(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.mutate(func() error { e.state.Cfg = cfg; return nil })
	l.published(e)
}

// PositionOf is where a site's state stands in the stream (zero when the
// ledger has no entry for it).
func PositionOf(l *Ledger, id ids.SiteID) events.Position {
	e := l.lookup(id)
	if e == nil {
		return events.Position{}
	}
	e.rw.RLock()
	defer e.rw.RUnlock()
	return e.pos
}

// CatalogPosition and OperatorsPosition are where the shared aggregates
// stand in the stream.
func CatalogPosition(l *Ledger) events.Position {
	l.catalog.mu.Lock()
	defer l.catalog.mu.Unlock()
	return l.catalog.pos
}

// OperatorsPosition: see CatalogPosition.
func OperatorsPosition(l *Ledger) events.Position {
	l.operators.mu.Lock()
	defer l.operators.mu.Unlock()
	return l.operators.pos
}

// CommittersStarted is how many committer goroutines l has started.
func CommittersStarted(l *Ledger) int64 { return l.committers.Load() }
