package records

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// HistoryItem is one event of a site's history in readable form.
type HistoryItem struct {
	// Seq is the stream sequence of the message holding the event.
	Seq uint64 `json:"seq"`
	// Index is the event's position within its message.
	Index int    `json:"index"`
	Name  string `json:"name"`
	Time  string `json:"time"`
	Actor string `json:"actor"`
	// Data is the payload with secrets and hosted page tokens redacted.
	Data map[string]any `json:"data"`
	// Prev is the chain hash of the previous event (hex).
	Prev string `json:"prev"`
	// Hash is this event's chain hash (hex).
	Hash string `json:"hash"`
}

// redacted payload keys: secrets sign merchant requests and callbacks, and
// a hosted page token opens a page without login.
var redacted = map[string]bool{"secret": true, "webhookSecret": true, "hostedToken": true}

// Readable turns a decoded event into its readable form.
func Readable(seq uint64, idx int, e events.Event) (HistoryItem, error) {
	h, err := events.Hash(e)
	if err != nil {
		return HistoryItem{}, err
	}
	raw, err := msgpack.Marshal(e.Payload)
	if err != nil {
		return HistoryItem{}, fmt.Errorf("encode %s: %w", e.Name, err)
	}
	var data map[string]any
	if err := msgpack.Unmarshal(raw, &data); err != nil {
		return HistoryItem{}, fmt.Errorf("decode %s: %w", e.Name, err)
	}
	for k := range data {
		if redacted[k] {
			data[k] = "[redacted]"
		}
	}
	return HistoryItem{Seq: seq, Index: idx, Name: e.Name, Time: FormatTime(e.Time), Actor: e.Actor, Data: data,
		Prev: hex.EncodeToString(e.Prev[:]), Hash: hex.EncodeToString(h[:])}, nil
}

// History returns up to limit messages' worth of a site's events starting
// at stream sequence cursor (a decimal sequence, "" for the beginning).
func (r *Reader) History(ctx context.Context, siteID ids.SiteID, cursor string, limit int) (Page[HistoryItem], error) {
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	from := uint64(1)
	if cursor != "" {
		n, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != cursor {
			return Page[HistoryItem]{}, ErrBadCursor
		}
		from = n
	}
	page := Page[HistoryItem]{Items: []HistoryItem{}}
	subj, err := events.SiteSubject(siteID)
	if err != nil {
		return page, fmt.Errorf("%w: %v", aggregates.ErrSiteNotFound, err)
	}
	for len(page.Items) < limit {
		m, err := r.store.Next(ctx, subj, from)
		if errors.Is(err, events.ErrNotFound) {
			return page, nil
		}
		if err != nil {
			return page, err
		}
		evs, err := events.Decode(m.Data)
		if err != nil {
			return page, fmt.Errorf("site %s message %d: %w", siteID, m.Seq, err)
		}
		for i, e := range evs {
			it, err := Readable(m.Seq, i, e)
			if err != nil {
				return page, err
			}
			page.Items = append(page.Items, it)
		}
		from = m.Seq + 1
	}
	if _, err := r.store.Next(ctx, subj, from); err == nil {
		c := strconv.FormatUint(from, 10)
		page.NextCursor = &c
	} else if !errors.Is(err, events.ErrNotFound) {
		return page, err
	}
	return page, nil
}

// TxHistoryBudget is how many of its site's messages TxHistory reads at
// most after a transaction's creation.
const TxHistoryBudget = 5000

// TxHistory returns the events of one transaction, oldest first: its
// creation and every change since, read from its site's messages starting
// at the creation's. It stops at the event of the transaction's last
// change (the state's updatedAt); complete is false when the budget ran
// out before (a site with thousands of messages between the creation and
// the last change).
func (r *Reader) TxHistory(ctx context.Context, txID ids.TxID) (items []HistoryItem, complete bool, err error) {
	siteID := txID.Site()
	var snap snapshot
	var ok bool
	err = r.state.Read(ctx, siteID, fresh, func(s *aggregates.Site) error {
		var i int32
		if i, ok = s.Lookup(txID); ok {
			snap = snapOf(s, i)
		}
		return nil
	})
	if errors.Is(err, aggregates.ErrSiteNotFound) || err == nil && !ok {
		return nil, false, aggregates.ErrNotFound
	}
	if err != nil {
		return nil, false, err
	}
	subj, err := events.SiteSubject(siteID)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", aggregates.ErrNotFound, err)
	}
	from := snap.tx.Seq
	for range TxHistoryBudget {
		m, err := r.store.Next(ctx, subj, from)
		if errors.Is(err, events.ErrNotFound) {
			return items, false, nil
		}
		if err != nil {
			return items, false, err
		}
		evs, err := events.Decode(m.Data)
		if err != nil {
			return items, false, fmt.Errorf("site %s message %d: %w", siteID, m.Seq, err)
		}
		last := false
		for i, e := range evs {
			if e.Tx() != string(txID) {
				continue
			}
			it, err := Readable(m.Seq, i, e)
			if err != nil {
				return items, false, err
			}
			items = append(items, it)
			last = e.Time >= snap.tx.UpdatedAt && statusAfter(e.Name) == snap.tx.Status.String()
		}
		if last {
			return items, true, nil
		}
		from = m.Seq + 1
	}
	return items, false, nil
}

// statusAfter is the status a transaction event leaves its transaction in
// (the middle of its name: deposit.approved.v1 → approved).
func statusAfter(name string) string {
	parts := strings.Split(name, ".")
	if len(parts) != 3 {
		return ""
	}
	if parts[1] == "requested" {
		return aggregates.StatusPending.String()
	}
	return parts[1]
}
