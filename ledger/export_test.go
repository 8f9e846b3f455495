package ledger

import "gateway/ids"

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
