package callbacks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// The delivery log records the callbacks delivered at their first attempt,
// which are most of them. One bucket entry per callback would cost an fsync
// each and cap deliveries near the store's fsync rate, so they are written
// in groups: every first-attempt delivery settled while the previous group
// was being written goes into the log's pages (pages.go) at once (group
// commit). A message is acknowledged only after the pages naming its
// callbacks are stored, so a callback the consumer has settled always has a
// record.
//
// Earlier builds wrote each group as a batch under a "log." key and kept
// the whole log in memory. Such batches are still read (they are few: no
// new ones are written) and listed with the pages.
const logPrefix = "log."

// logEntry is one first-attempt delivery of a legacy batch, kept compact
// in memory (32 bytes).
type logEntry struct {
	k    key
	at   int64 // attempt time, Unix ms
	site uint32
	code uint16
}

// wireEntry is a log entry as stored: [webhook id, site, status, at ms].
type wireEntry [4]json.RawMessage

// loggedEntry is a decoded stored entry.
type loggedEntry struct {
	id   string
	site ids.SiteID
	code uint16
	at   int64
}

func decodeBatch(b []byte) ([]loggedEntry, error) {
	var raw []wireEntry
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("delivery log batch: %w", err)
	}
	out := make([]loggedEntry, 0, len(raw))
	for _, w := range raw {
		var e loggedEntry
		if json.Unmarshal(w[0], &e.id) != nil || json.Unmarshal(w[1], &e.site) != nil ||
			json.Unmarshal(w[2], &e.code) != nil || json.Unmarshal(w[3], &e.at) != nil {
			return nil, fmt.Errorf("delivery log batch: malformed entry %s", w)
		}
		out = append(out, e)
	}
	return out, nil
}

func isBatchKey(k string) bool { return strings.HasPrefix(k, logPrefix) }

// dlog holds the legacy batches in memory, sorted by key on demand.
type dlog struct {
	sites   []ids.SiteID
	siteIdx map[ids.SiteID]uint32
	entries []logEntry
	sorted  bool
	// batches are the batch keys applied, so a batch the watcher sees
	// again is not applied twice.
	batches map[string]struct{}
}

func newDlog() *dlog {
	return &dlog{siteIdx: map[ids.SiteID]uint32{}, sorted: true, batches: map[string]struct{}{}}
}

func (l *dlog) siteOf(site ids.SiteID) uint32 {
	i, ok := l.siteIdx[site]
	if !ok {
		i = uint32(len(l.sites))
		l.sites = append(l.sites, site)
		l.siteIdx[site] = i
	}
	return i
}

// add applies a batch once.
func (l *dlog) add(batch string, es []loggedEntry) {
	if _, ok := l.batches[batch]; ok {
		return
	}
	l.batches[batch] = struct{}{}
	for _, e := range es {
		k, ok := keyOf(e.id)
		if !ok {
			continue
		}
		le := logEntry{k: k, at: e.at, site: l.siteOf(e.site), code: e.code}
		if n := len(l.entries); n > 0 && l.entries[n-1].k.cmp(k) >= 0 {
			l.sorted = false
		}
		l.entries = append(l.entries, le)
	}
}

func (l *dlog) sort() {
	if l.sorted {
		return
	}
	slices.SortFunc(l.entries, func(a, b logEntry) int { return a.k.cmp(b.k) })
	// A callback logged twice (delivered again after a stop before its
	// acknowledgement) keeps its first entry.
	l.entries = slices.CompactFunc(l.entries, func(a, b logEntry) bool { return a.k == b.k })
	l.sorted = true
}

// search returns the position of the first entry at or after k (sorted).
func (l *dlog) search(k key) int {
	i, _ := slices.BinarySearchFunc(l.entries, k, func(e logEntry, k key) int { return e.k.cmp(k) })
	return i
}

// delivery renders an entry as the listing shows it.
func (l *dlog) delivery(e logEntry) Delivery {
	return firstAttempt(e.k, l.sites[e.site], e.code, e.at)
}

// firstAttempt is the record of a callback delivered at its first
// attempt; the transaction and callback type are filled in from the
// stream by the caller.
func firstAttempt(k key, site ids.SiteID, code uint16, at int64) Delivery {
	ts := records.FormatTime(at)
	c := int(code)
	return Delivery{EventID: WebhookID(k.seq, k.idx), SiteID: site, Status: StatusDelivered,
		Attempts: 1, LastStatusCode: &c, LastAttemptAt: &ts, UpdatedAt: ts}
}

// maxBatch bounds the deliveries written to the log at once.
const maxBatch = 2048

// writeLog stores the first-attempt deliveries handed over on t.logc, a
// batch per write, and settles them once stored. While one batch is being
// written the next gathers, so the batches grow with the delivery rate and
// the writes stay near one per fsync. Once t.logDrain is closed (the
// term's stop) it writes what is waiting and returns; it also returns when
// ctx ends. t.logc is never closed: a delivery handed over after the drain
// stays unlogged and its message unacknowledged, to be delivered again.
func (t *term) writeLog(ctx context.Context) {
	d := t.d
	var jobs []*job
	var es []pageEntry
	for {
		var j *job
		select {
		case j = <-t.logc:
		case <-t.logDrain:
			select {
			case j = <-t.logc:
			default:
				return
			}
		}
		jobs = append(jobs[:0], j)
	gather:
		for len(jobs) < maxBatch {
			select {
			case j := <-t.logc:
				jobs = append(jobs, j)
			default:
				break gather
			}
		}
		es = es[:0]
		for _, j := range jobs {
			es = append(es, pageEntry{k: j.k, site: j.site, code: uint16(j.code), at: j.at})
		}
		if err := retry(ctx, func() error { return d.pages.add(ctx, es) }); err != nil {
			// Not stored: the messages are not acknowledged, and the
			// next term delivers their callbacks again.
			return
		}
		if d.cfg.afterLog != nil {
			ids := make([]string, len(jobs))
			for i, j := range jobs {
				ids[i] = j.id
			}
			d.cfg.afterLog(ids)
		}
		for _, j := range jobs {
			t.settle(j)
		}
	}
}

// logDelivered hands a first-attempt delivery to writeLog. It is handed
// over even when the term is ending: stop drains the log before it gives
// the messages back, so a delivered callback is not delivered again.
func (t *term) logDelivered(j *job) {
	select {
	case t.logc <- j:
		return
	default:
	}
	select {
	case t.logc <- j:
	case <-t.ctx.Done():
		// The log is full and the term ending: the message is given back
		// and the callback delivered again by the next term.
	}
}
