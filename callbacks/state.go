package callbacks

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gateway/events"
	"gateway/ids"
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
// to the delivery log instead (see dlog.go), in batches.
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

// index is every process's in-memory copy of the CALLBACKS bucket, kept by
// a watcher, so the operator listing needs no scan of the bucket. It is
// derived: dropping it and watching again rebuilds it.
type index struct {
	mu sync.RWMutex
	// recs are the records of callbacks that needed more than one attempt
	// or were resent, by webhook id; log holds the first-attempt ones.
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
	w, err := kv.WatchAll(ctx)
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

// get returns the record of id: its own, or its delivery log entry.
func (ix *index) get(id string) (Delivery, bool) {
	ix.mu.RLock()
	d, ok := ix.recs[id]
	ix.mu.RUnlock()
	if ok {
		return d, true
	}
	k, ok := keyOf(id)
	if !ok {
		return Delivery{}, false
	}
	return ix.logged(k)
}

// logged returns the delivery log entry of k.
func (ix *index) logged(k key) (Delivery, bool) {
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

// putBatch records a delivery log batch this process just wrote.
func (ix *index) putBatch(batch string, es []loggedEntry) {
	ix.mu.Lock()
	ix.log.add(batch, es)
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

// list pages through the records and the delivery log in stream order.
func (ix *index) list(f Filter) ([]listed, *string, error) {
	switch f.Status {
	case "", StatusPending, StatusDelivered, StatusFailed:
	default:
		return nil, nil, &Error{Field: "status", Err: ErrInvalidFilter,
			Msg: "status must be pending, delivered or failed"}
	}
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	var after key
	if f.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(f.Cursor)
		k, ok := keyOf(string(b))
		if err != nil || !ok {
			return nil, nil, ErrBadCursor
		}
		after = k
	}
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
	if len(recs) > f.Limit+1 {
		recs = recs[:f.Limit+1]
	}
	// The log's first Limit+1 matches after the cursor, skipping callbacks
	// with a record of their own (resent after their first delivery).
	var logs []listed
	if f.Status == "" || f.Status == StatusDelivered {
		l := ix.log
		l.sort()
		site, siteOK := uint32(0), true
		if f.SiteID != "" {
			site, siteOK = l.siteIdx[f.SiteID]
		}
		for i := l.search(key{after.seq, after.idx + 1}); siteOK && i < len(l.entries) && len(logs) <= f.Limit; i++ {
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
	items := mergeSorted(recs, logs, f.Limit+1)
	var next *string
	if len(items) > f.Limit {
		items = items[:f.Limit]
		c := base64.RawURLEncoding.EncodeToString([]byte(items[len(items)-1].d.EventID))
		next = &c
	}
	return items, next, nil
}

func mergeSorted(a, b []listed, n int) []listed {
	out := make([]listed, 0, min(n, len(a)+len(b)))
	for len(out) < n && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || (len(a) > 0 && a[0].k.cmp(b[0].k) < 0) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}
