package callbacks

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// A callback names the transaction's previousStatus, which the events do
// not carry. For most final events the state machine fixes it (an expiry or
// a rejection of a deposit is from pending, a payment from processing); a
// deposit approval may be from pending or expired, and a withdrawal
// rejection from pending or processing.
//
// The active dispatcher sees every site message after the point where its
// term began, in stream order, so it learns the answer by watching: the
// tracker remembers the deposits that expired and the withdrawals being
// processed. For a transaction created before the term began (or evicted
// from the tracker), the answer is read from the stream instead: a scan of
// the site's subject from the transaction's creation up to the event.

// maxTracked bounds the tracker. Processing withdrawals leave it when they
// are paid or rejected; expired deposits only leave it when approved, so
// the oldest are evicted, and their transactions fall back to the scan.
const maxTracked = 1 << 18

type tracker struct {
	// status holds StatusExpired deposits and StatusProcessing withdrawals.
	status map[ids.TxID]aggregates.Status
	// fifo is the order expired deposits were added, for eviction; it may
	// hold ids that left the map since.
	fifo []ids.TxID
	head int
	// covered is, per site, the index of the first transaction created in
	// this term: the tracker knows every event of it and of every later one.
	covered map[ids.SiteID]int32
}

func newTracker() *tracker {
	return &tracker{status: map[ids.TxID]aggregates.Status{}, covered: map[ids.SiteID]int32{}}
}

// covers reports whether the tracker has seen a creation of site in this
// term: it reads no later one (observe).
func (t *tracker) covers(site ids.SiteID) bool {
	_, ok := t.covered[site]
	return ok
}

// isCreation reports whether name is an event the tracker reads only as a
// site's first creation of the term, and no callback comes of.
func isCreation(name string) bool {
	return name == events.DepositRequestedName || name == events.WithdrawalRequestedName
}

// isCovered reports whether the tracker has seen every event of txID.
func (t *tracker) isCovered(txID ids.TxID) bool {
	idx, ok := txID.Index()
	if !ok {
		return false
	}
	first, ok := t.covered[txID.Site()]
	return ok && idx >= first
}

// observe folds one event of a message seen for the first time, in stream
// order, and returns the previous status of the transaction when e is a
// final event ("" when the tracker cannot tell and the stream must).
func (t *tracker) observe(site ids.SiteID, e events.Event) string {
	tx := txOf(e)
	switch e.Payload.(type) {
	case *events.DepositRequested, *events.WithdrawalRequested:
		if idx, ok := tx.Index(); ok {
			if _, seen := t.covered[site]; !seen {
				t.covered[site] = idx
			}
		}
		return ""
	case *events.WithdrawalProcessing:
		t.status[tx] = aggregates.StatusProcessing
		return ""
	case *events.DepositExpired:
		t.status[tx] = aggregates.StatusExpired
		t.fifo = append(t.fifo, tx)
		t.evict()
		return aggregates.StatusPending.String()
	case *events.DepositRejected:
		return aggregates.StatusPending.String()
	case *events.WithdrawalPaid:
		delete(t.status, tx)
		return aggregates.StatusProcessing.String()
	case *events.DepositApproved, *events.WithdrawalRejected:
		st, known := t.status[tx]
		delete(t.status, tx)
		if known {
			return st.String()
		}
		if t.isCovered(tx) {
			return aggregates.StatusPending.String()
		}
		return ""
	}
	return ""
}

// evict drops the oldest expired deposits beyond maxTracked; the sites
// they belong to are then covered only from the next transaction on.
func (t *tracker) evict() {
	for len(t.status) > maxTracked && t.head < len(t.fifo) {
		tx := t.fifo[t.head]
		t.fifo[t.head] = ""
		t.head++
		if t.status[tx] != aggregates.StatusExpired {
			continue
		}
		delete(t.status, tx)
		// Only a covered site's coverage shrinks: an uncovered one
		// gains nothing from an eviction.
		if idx, ok := tx.Index(); ok {
			if first, cov := t.covered[tx.Site()]; cov && first <= idx {
				t.covered[tx.Site()] = idx + 1
			}
		}
	}
	if t.head > len(t.fifo)/2 && t.head > 1024 {
		t.fifo = append([]ids.TxID(nil), t.fifo[t.head:]...)
		t.head = 0
	}
}

// history is what a scan of the stream found before one event.
type history struct {
	// prev is the transaction's status just before the event.
	prev string
	// pred is the place of an earlier final event of the same transaction
	// (a deposit's expiry before its late approval), zero when none.
	pred key
}

var errStopScan = errors.New("stop scan")

// scanHistory reads the site's subject from the transaction's creation
// message to the event at k and replays the transaction's events. Messages
// that do not mention the transaction id are skipped without decoding.
func scanHistory(ctx context.Context, st Store, site ids.SiteID, txID ids.TxID, from uint64, k key) (history, error) {
	h := history{prev: aggregates.StatusPending.String()}
	needle := []byte(txID)
	subj, err := events.SiteSubject(site)
	if err != nil {
		return h, err
	}
	err = st.Read(ctx, subj, from, func(m events.Msg) error {
		if m.Seq > k.seq {
			return errStopScan
		}
		if !bytes.Contains(m.Data, needle) {
			if m.Seq == k.seq {
				return errStopScan
			}
			return nil
		}
		evs, err := events.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("message %d: %w", m.Seq, err)
		}
		for i, e := range evs {
			if m.Seq == k.seq && i >= k.idx {
				return errStopScan
			}
			if txOf(e) != txID {
				continue
			}
			switch e.Payload.(type) {
			case *events.DepositRequested, *events.WithdrawalRequested:
				h.prev = aggregates.StatusPending.String()
			case *events.WithdrawalProcessing:
				h.prev = aggregates.StatusProcessing.String()
			case *events.DepositExpired:
				h.prev = aggregates.StatusExpired.String()
				h.pred = key{m.Seq, i}
			case *events.DepositApproved:
				h.prev = aggregates.StatusApproved.String()
			case *events.DepositRejected, *events.WithdrawalRejected:
				h.prev = aggregates.StatusRejected.String()
			case *events.WithdrawalPaid:
				h.prev = aggregates.StatusPaid.String()
			}
		}
		if m.Seq == k.seq {
			return errStopScan
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return h, fmt.Errorf("history of %s: %w", txID, err)
	}
	return h, nil
}
