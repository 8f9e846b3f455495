package callbacks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gateway/ids"
	"gateway/records"
)

// The delivery log records the callbacks delivered at their first attempt,
// which are most of them. One bucket entry per callback would cost an fsync
// each and cap deliveries near the store's fsync rate, so they are written
// in batches: one entry under a "log." key holds every first-attempt
// delivery settled while the previous batch was being written (group
// commit). A message is acknowledged only after the batch naming its
// callbacks is stored, so a callback the consumer has settled always has a
// record.
const logPrefix = "log."

// logEntry is one first-attempt delivery, kept compact in memory (32 bytes)
// because every gateway process keeps the whole log to answer the listing:
// a million deliveries cost about 32 MB.
type logEntry struct {
	k    key
	at   int64 // attempt time, Unix ms
	site uint32
	code uint16
}

// wireEntry is a log entry as stored: [webhook id, site, status, at ms].
type wireEntry [4]json.RawMessage

func encodeBatch(es []loggedEntry) ([]byte, error) {
	out := make([][4]any, len(es))
	for i, e := range es {
		out[i] = [4]any{e.id, e.site, e.code, e.at}
	}
	return json.Marshal(out)
}

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

// batchKey names a new batch: unique without coordination, and sorted by
// its first callback for a reader of the bucket.
func batchKey(first key) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return logPrefix + WebhookID(first.seq, first.idx) + "." + hex.EncodeToString(b[:])
}

func isBatchKey(k string) bool { return strings.HasPrefix(k, logPrefix) }

// dlog is the in-memory delivery log, sorted by key on demand.
type dlog struct {
	sites   []ids.SiteID
	siteIdx map[ids.SiteID]uint32
	entries []logEntry
	sorted  bool
	// batches are the batch keys applied, so the watcher does not apply
	// this process's own batches a second time.
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

// delivery renders an entry as the listing shows it; the transaction and
// callback type are filled in from the stream by the caller.
func (l *dlog) delivery(e logEntry) Delivery {
	at := records.FormatTime(e.at)
	code := int(e.code)
	return Delivery{EventID: WebhookID(e.k.seq, e.k.idx), SiteID: l.sites[e.site], Status: StatusDelivered,
		Attempts: 1, LastStatusCode: &code, LastAttemptAt: &at, UpdatedAt: at}
}

// maxBatch bounds one delivery log batch (about 40 bytes an entry).
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
	var es []loggedEntry
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
		first := jobs[0].k
		for _, j := range jobs {
			es = append(es, loggedEntry{id: j.id, site: j.site, code: uint16(j.code), at: j.at})
			if j.k.cmp(first) < 0 {
				first = j.k
			}
		}
		if err := retry(ctx, func() error { return d.writeBatch(ctx, batchKey(first), es) }); err != nil {
			// Not stored: the messages are not acknowledged, and the
			// next term delivers their callbacks again.
			return
		}
		if d.cfg.afterLog != nil {
			ids := make([]string, len(es))
			for i, e := range es {
				ids[i] = e.id
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

// writeBatch stores one delivery log batch.
func (d *Dispatcher) writeBatch(ctx context.Context, batch string, es []loggedEntry) error {
	b, err := encodeBatch(es)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.kv.Put(wctx, batch, b); err != nil {
		return fmt.Errorf("record delivery log batch: %w", err)
	}
	d.ix.putBatch(batch, es)
	return nil
}
