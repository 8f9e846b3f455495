package callbacks

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Delivery states.
const (
	StatusPending   = "pending"
	StatusDelivered = "delivered"
	StatusFailed    = "failed"
)

// Delivery is the state of one callback as the operator API shows it.
//
// A callback that needed more than one attempt, was parked or resent has
// a record of its own in the CALLBACKS bucket, keyed by webhook id and
// rewritten at each attempt. One delivered at its first attempt is written
// to the delivery log instead (see dlog.go and pages.go).
type Delivery struct {
	// EventID is the webhook-id: "<stream sequence>-<index in message>".
	EventID       string     `json:"eventId"`
	SiteID        ids.SiteID `json:"siteId"`
	TransactionID ids.TxID   `json:"transactionId"`
	// Type is the callback type ("deposit.approved").
	Type string `json:"type"`
	// Status is pending, delivered or failed (parked).
	Status string `json:"status"`
	// Attempts counts the attempts since the delivery (or its last resend)
	// began.
	Attempts int `json:"attempts"`
	// LastStatusCode is the last attempt's HTTP status (null: no answer).
	LastStatusCode *int `json:"lastStatusCode"`
	// LastError describes the last failed attempt.
	LastError *string `json:"lastError"`
	// LastAttemptAt is when the last attempt was made.
	LastAttemptAt *string `json:"lastAttemptAt"`
	// NextAttemptAt is when a pending delivery is tried again.
	NextAttemptAt *string `json:"nextAttemptAt"`
	// Resends counts operator resends; LastResendBy names the last one's
	// operator.
	Resends      int    `json:"resends"`
	LastResendBy string `json:"lastResendBy,omitempty"`
	UpdatedAt    string `json:"updatedAt"`
}

// key orders deliveries by their place in the stream.
type key struct {
	seq uint64
	idx int
}

func keyOf(id string) (key, bool) {
	seq, idx, ok := ParseWebhookID(id)
	return key{seq, idx}, ok
}

func (a key) cmp(b key) int {
	if c := cmp.Compare(a.seq, b.seq); c != 0 {
		return c
	}
	return cmp.Compare(a.idx, b.idx)
}

// index is every process's in-memory copy of the CALLBACKS bucket's
// records (and of legacy delivery log batches), kept by a watcher, so the
// operator listing needs no scan of them. The pages of the delivery log are
// not watched: they are read when asked for. The index is derived:
// dropping it and watching again rebuilds it.
type index struct {
	mu sync.RWMutex
	// recs are the records of callbacks that needed more than one attempt
	// or were resent, by webhook id; log holds legacy batches.
	recs   map[string]Delivery
	log    *dlog
	synced chan struct{}
	once   sync.Once
}

func newIndex() *index {
	return &index{recs: map[string]Delivery{}, log: newDlog(), synced: make(chan struct{})}
}

// watch follows the bucket until ctx ends, restarting after errors.
func (ix *index) watch(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger) {
	for ctx.Err() == nil {
		err := ix.watchOnce(ctx, kv, log)
		if ctx.Err() != nil {
			return
		}
		log.Warn("callback state watcher stopped; restarting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (ix *index) watchOnce(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger) error {
	// Records are keyed by webhook id, one token; pages have two.
	w, err := kv.WatchFiltered(ctx, []string{"*", logPrefix + ">"})
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	// The initial values go into a fresh copy swapped in whole, so a
	// restarted watcher forgets records deleted meanwhile.
	recs, dl := map[string]Delivery{}, newDlog()
	initial := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watcher closed")
			}
			if e == nil {
				ix.mu.Lock()
				ix.recs, ix.log, initial = recs, dl, false
				ix.mu.Unlock()
				ix.once.Do(func() { close(ix.synced) })
				continue
			}
			if !initial {
				ix.mu.Lock()
				recs, dl = ix.recs, ix.log
			}
			apply(recs, dl, e, log)
			if !initial {
				ix.mu.Unlock()
			}
		}
	}
}

// apply folds one bucket entry into recs and dl.
func apply(recs map[string]Delivery, dl *dlog, e jetstream.KeyValueEntry, log *slog.Logger) {
	if e.Operation() != jetstream.KeyValuePut {
		delete(recs, e.Key())
		return
	}
	if isBatchKey(e.Key()) {
		es, err := decodeBatch(e.Value())
		if err != nil {
			log.Error("callback delivery log entry unreadable", "key", e.Key(), "err", err)
			return
		}
		dl.add(e.Key(), es)
		return
	}
	var d Delivery
	if json.Unmarshal(e.Value(), &d) == nil {
		recs[e.Key()] = d
	}
}

// waitSynced waits until the watcher has read the bucket once.
func (ix *index) waitSynced(ctx context.Context) error {
	select {
	case <-ix.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("callback state not loaded: %w: %v", events.ErrUnavailable, ctx.Err())
	}
}

// record returns the record of id, if it has one of its own.
func (ix *index) record(id string) (Delivery, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	d, ok := ix.recs[id]
	return d, ok
}

// legacy returns the legacy delivery log entry of k.
func (ix *index) legacy(k key) (Delivery, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.log.sort()
	i := ix.log.search(k)
	if i < len(ix.log.entries) && ix.log.entries[i].k == k {
		return ix.log.delivery(ix.log.entries[i]), true
	}
	return Delivery{}, false
}

// put records what this process just wrote, so its own listing shows it
// at once; the watcher delivers the same value again later.
func (ix *index) put(d Delivery) {
	ix.mu.Lock()
	ix.recs[d.EventID] = d
	ix.mu.Unlock()
}

// pending returns the pending records.
func (ix *index) pending() []Delivery {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []Delivery
	for _, d := range ix.recs {
		if d.Status == StatusPending {
			out = append(out, d)
		}
	}
	return out
}

// Filter selects deliveries for the operator listing.
type Filter struct {
	// Status is pending, delivered, failed or "" for all.
	Status string
	// SiteID limits the listing to one site ("" for all).
	SiteID ids.SiteID
	// Cursor continues a previous page ("" for the first).
	Cursor string
	// Limit is the page size (default 100, at most 1000).
	Limit int
}

// listed is a listing item; logged items still lack their transaction and
// type, which the dispatcher reads from the stream.
type listed struct {
	k      key
	d      Delivery
	logged bool
}

// A cursor is a fingerprint of the filters it was issued for and the
// webhook id the listing continues after. With other filters it would
// page through another listing from its middle, skipping or repeating
// deliveries, which looks like a result. The listing has one order, so
// the cursor names none.
const cursorVersion = "k2"

// after returns the key the listing continues after. A cursor of the
// format before cursorVersion, the bare webhook id, is still taken, for a
// listing paged across an upgrade: it names no filters to check, and
// cannot be mistaken for the current format, whose text has colons where
// a webhook id has none.
func (f Filter) after() (key, error) {
	if f.Cursor == "" {
		return key{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(f.Cursor)
	if err != nil {
		return key{}, ErrBadCursor
	}
	id, fp, bound := string(b), uint64(0), false
	if version, rest, ok := strings.Cut(id, ":"); ok {
		fpHex, tail, ok := strings.Cut(rest, ":")
		if version != cursorVersion || !ok {
			return key{}, ErrBadCursor
		}
		if fp, err = strconv.ParseUint(fpHex, 16, 32); err != nil {
			return key{}, ErrBadCursor
		}
		id, bound = tail, true
	}
	k, ok := keyOf(id)
	spelled := WebhookID(k.seq, k.idx)
	if bound {
		spelled = spellCursor(uint32(fp), k)
	}
	if !ok || base64.RawURLEncoding.EncodeToString([]byte(spelled)) != f.Cursor {
		// The last test refuses another spelling of one (a leading zero,
		// upper-case hex, other base64 padding bits), which List did not
		// issue either.
		return key{}, ErrBadCursor
	}
	if bound && uint32(fp) != f.fingerprint() {
		return key{}, ErrCursorFilters
	}
	return k, nil
}

// cursorAt is the cursor that continues f's listing after k.
func (f Filter) cursorAt(k key) *string {
	c := base64.RawURLEncoding.EncodeToString([]byte(spellCursor(f.fingerprint(), k)))
	return &c
}

func spellCursor(fp uint32, k key) string {
	return fmt.Sprintf("%s:%08x:%s", cursorVersion, fp, WebhookID(k.seq, k.idx))
}

// fingerprint hashes the filters, not the cursor nor the page size, which
// may change from page to page.
func (f Filter) fingerprint() uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%q|%q", f.Status, f.SiteID)
	return h.Sum32()
}

// list returns, in stream order, the first n records and legacy delivery
// log entries after the cursor that f selects.
func (ix *index) list(f Filter, after key, n int) []listed {
	var recs []listed
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for id, d := range ix.recs {
		if (f.Status != "" && d.Status != f.Status) || (f.SiteID != "" && d.SiteID != f.SiteID) {
			continue
		}
		k, ok := keyOf(id)
		if !ok || k.cmp(after) <= 0 {
			continue
		}
		recs = append(recs, listed{k: k, d: d})
	}
	slices.SortFunc(recs, func(a, b listed) int { return a.k.cmp(b.k) })
	if len(recs) > n {
		recs = recs[:n]
	}
	// The legacy log's first n matches after the cursor, skipping
	// callbacks with a record of their own (resent after their first
	// delivery).
	var logs []listed
	if f.Status == "" || f.Status == StatusDelivered {
		l := ix.log
		l.sort()
		site, siteOK := uint32(0), true
		if f.SiteID != "" {
			site, siteOK = l.siteIdx[f.SiteID]
		}
		for i := l.search(key{after.seq, after.idx + 1}); siteOK && i < len(l.entries) && len(logs) < n; i++ {
			e := l.entries[i]
			if f.SiteID != "" && e.site != site {
				continue
			}
			if _, own := ix.recs[WebhookID(e.k.seq, e.k.idx)]; own {
				continue
			}
			logs = append(logs, listed{k: e.k, d: l.delivery(e), logged: true})
		}
	}
	return mergeSorted(recs, logs, n)
}

// mergeSorted merges two listings in stream order, up to n items; a
// callback in both (a legacy batch and a page) is listed once, from a.
func mergeSorted(a, b []listed, n int) []listed {
	out := make([]listed, 0, min(n, len(a)+len(b)))
	for len(out) < n && (len(a) > 0 || len(b) > 0) {
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0].k.cmp(b[0].k) < 0):
			out, a = append(out, a[0]), a[1:]
		case len(a) > 0 && a[0].k == b[0].k:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		default:
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}
