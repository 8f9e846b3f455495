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

	"gateway/aggregates"
	"gateway/events"
	"gateway/projections"
)

// Delivery states.
const (
	StatusPending   = "pending"
	StatusDelivered = "delivered"
	StatusFailed    = "failed"
)

// Delivery is the state of one callback as the operator API shows it and
// as the CALLBACKS bucket stores it, keyed by webhook id.
//
// A record is written only when there is something to tell: a failed
// attempt (pending with the next attempt's time), a parked delivery
// (failed), a delivery that succeeded after failing or after a resend
// (delivered), a resend. A callback delivered at its first attempt leaves
// no record: the consumer's acknowledgement is its record, and the event
// can still be resent by its id. Writing one for every callback would cost
// an fsync each and cap callbacks near the store's fsync rate.
type Delivery struct {
	// EventID is the webhook-id: "<stream sequence>-<index in message>".
	EventID       string `json:"eventId"`
	SiteID        string `json:"siteId"`
	TransactionID string `json:"transactionId"`
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
	mu     sync.RWMutex
	recs   map[string]Delivery
	synced chan struct{}
	once   sync.Once
}

func newIndex() *index { return &index{recs: map[string]Delivery{}, synced: make(chan struct{})} }

// watch follows the bucket until ctx ends, restarting after errors.
func (ix *index) watch(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger) {
	for ctx.Err() == nil {
		err := ix.watchOnce(ctx, kv)
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

func (ix *index) watchOnce(ctx context.Context, kv jetstream.KeyValue) error {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	fresh := map[string]Delivery{}
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
				// Initial values delivered: swap them in whole, so a
				// restarted watcher forgets records deleted meanwhile.
				ix.mu.Lock()
				ix.recs, fresh, initial = fresh, nil, false
				ix.mu.Unlock()
				ix.once.Do(func() { close(ix.synced) })
				continue
			}
			var d Delivery
			del := e.Operation() != jetstream.KeyValuePut
			if !del && json.Unmarshal(e.Value(), &d) != nil {
				continue
			}
			if initial {
				if del {
					delete(fresh, e.Key())
				} else {
					fresh[e.Key()] = d
				}
				continue
			}
			ix.mu.Lock()
			if del {
				delete(ix.recs, e.Key())
			} else {
				ix.recs[e.Key()] = d
			}
			ix.mu.Unlock()
		}
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

func (ix *index) get(id string) (Delivery, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	d, ok := ix.recs[id]
	return d, ok
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
	SiteID string
	// Cursor continues a previous page ("" for the first).
	Cursor string
	// Limit is the page size (default 100, at most 500).
	Limit int
}

// list pages through the records in stream order.
func (ix *index) list(f Filter) (projections.Page[Delivery], error) {
	page := projections.Page[Delivery]{Items: []Delivery{}}
	switch f.Status {
	case "", StatusPending, StatusDelivered, StatusFailed:
	default:
		return page, &aggregates.FieldError{Field: "status", Err: aggregates.ErrInvalidRequest,
			Msg: "status must be pending, delivered or failed"}
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	var after key
	if f.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(f.Cursor)
		k, ok := keyOf(string(b))
		if err != nil || !ok {
			return page, projections.ErrBadCursor
		}
		after = k
	}
	type item struct {
		k key
		d Delivery
	}
	var items []item
	ix.mu.RLock()
	for id, d := range ix.recs {
		if (f.Status != "" && d.Status != f.Status) || (f.SiteID != "" && d.SiteID != f.SiteID) {
			continue
		}
		k, ok := keyOf(id)
		if !ok || (f.Cursor != "" && k.cmp(after) <= 0) {
			continue
		}
		items = append(items, item{k, d})
	}
	ix.mu.RUnlock()
	slices.SortFunc(items, func(a, b item) int { return a.k.cmp(b.k) })
	for i, it := range items {
		if i == f.Limit {
			c := base64.RawURLEncoding.EncodeToString([]byte(items[i-1].d.EventID))
			page.NextCursor = &c
			break
		}
		page.Items = append(page.Items, it.d)
	}
	return page, nil
}
