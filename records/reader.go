package records

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Store is what the records are read from in the event store.
type Store interface {
	Get(ctx context.Context, seq uint64) (events.Msg, error)
	Next(ctx context.Context, subject string, seq uint64) (events.Msg, error)
	// LastSeq returns the stream's last sequence (0 when empty).
	LastSeq(ctx context.Context) (uint64, error)
}

// State is what the records are built from: the write side's state of
// every site, kept equal to the stream (*ledger.Ledger implements it).
type State interface {
	// Read runs fn on a site's state as this process holds it (fresh
	// false) or once it holds everything the site's subject held when
	// called (fresh true). It never waits for an append.
	Read(ctx context.Context, siteID ids.SiteID, fresh bool, fn func(*aggregates.Site) error) error
	// SiteConfig returns a site's settings without waiting.
	SiteConfig(siteID ids.SiteID) (*aggregates.Config, bool)
	// SiteIDs lists the created sites, sorted.
	SiteIDs() []ids.SiteID
	// CatchUp waits until this process holds everything the stream held
	// when it was called.
	CatchUp(ctx context.Context) error
	// CatchUpMiss waits, throttled, for what other processes created.
	CatchUpMiss(ctx context.Context) error
}

// How current a read must be (see State.Read).
const (
	local = false
	fresh = true
)

// Reader answers lookups from the ledger's state and the stored events.
type Reader struct {
	state     State
	store     Store
	publicURL string

	// created caches decoded creation events by transaction id. They
	// never change once stored, so the cache needs no invalidation.
	// scanBudget is ScanBudget unless a test set another.
	scanBudget int

	mu      sync.Mutex
	created map[ids.TxID]events.Event
	order   []ids.TxID
	next    int
}

const createdCacheSize = 4096

// NewReader returns a Reader. publicURL is the base of hosted page links.
func NewReader(st State, store Store, publicURL string) *Reader {
	return &Reader{state: st, store: store, publicURL: strings.TrimRight(publicURL, "/"), scanBudget: ScanBudget,
		created: make(map[ids.TxID]events.Event, createdCacheSize), order: make([]ids.TxID, createdCacheSize)}
}

// WithScanBudget sets how many creation events one page of a listing reads
// at most (ScanBudget by default) and returns r.
func (r *Reader) WithScanBudget(n int) *Reader {
	r.scanBudget = max(n, 1)
	return r
}

// PublicURL returns the base of hosted page links.
func (r *Reader) PublicURL() string { return r.publicURL }

// snapshot is a consistent copy of one transaction's compact state.
type snapshot struct {
	tx     aggregates.Tx
	reason string
	id     ids.TxID
	// cfg is the site's settings when read (a Config is never changed).
	cfg *aggregates.Config
}

// snapOf is transaction i of s as a snapshot.
func snapOf(s *aggregates.Site, i int32) snapshot {
	return snapshot{tx: s.Txs[i], reason: s.Reason(i), id: ids.NewTx(s.ID, i), cfg: s.Cfg}
}

// ByID returns the current record of a site's transaction.
func (r *Reader) ByID(ctx context.Context, siteID ids.SiteID, txID ids.TxID) (Record, error) {
	return r.lookup(ctx, siteID, fresh, func(s *aggregates.Site) (int32, bool) { return s.Lookup(txID) })
}

// ByIDLocal is ByID from the state this process holds, without catching the
// site up with the stream first: for a caller that knows the state already
// covers what it needs (the ledger has followed the stream past it), and
// that must not queue behind the site's appends.
func (r *Reader) ByIDLocal(ctx context.Context, siteID ids.SiteID, txID ids.TxID) (Record, error) {
	return r.lookup(ctx, siteID, local, func(s *aggregates.Site) (int32, bool) { return s.Lookup(txID) })
}

// ByProcessID returns the current record of the transaction with processId.
// A processId that was answered with the end user's pending deposit (an
// alias) finds that deposit, with alreadyPending true, as it was answered.
func (r *Reader) ByProcessID(ctx context.Context, siteID ids.SiteID, pid string) (Record, error) {
	alias := false
	rec, err := r.lookup(ctx, siteID, fresh, func(s *aggregates.Site) (int32, bool) {
		if i, ok := s.ByProcessID(pid); ok {
			return i, true
		}
		i, ok := s.ByAlias(pid)
		alias = ok
		return i, ok
	})
	if err == nil && alias && rec.Deposit != nil {
		rec.Deposit.AlreadyPending = true
	}
	return rec, err
}

// lookup finds a transaction with find. A status lookup reads fresh: a
// transaction created or moved through another gateway process is then
// seen at once.
func (r *Reader) lookup(ctx context.Context, siteID ids.SiteID, consistency bool, find func(*aggregates.Site) (int32, bool)) (Record, error) {
	var snap snapshot
	var ok bool
	err := r.state.Read(ctx, siteID, consistency, func(s *aggregates.Site) error {
		var i int32
		if i, ok = find(s); ok {
			snap = snapOf(s, i)
		}
		return nil
	})
	if err != nil {
		return Record{}, err
	}
	if !ok {
		return Record{}, aggregates.ErrNotFound
	}
	return r.record(ctx, snap, nil)
}

// Hosted returns the record of a deposit for its hosted payment page, when
// token is its hosted page token; aggregates.ErrNotFound otherwise. The page
// needs no login, so whoever guesses is checked against the state in memory
// first (aggregates.HostedKey), before anything is read from the store; only
// a transaction this process does not know yet costs a catch-up, and those
// are throttled (State.CatchUpMiss).
func (r *Reader) Hosted(ctx context.Context, id ids.TxID, token string) (Record, error) {
	key := aggregates.HostedKey(token)
	if key == 0 {
		return Record{}, aggregates.ErrNotFound
	}
	snap, known, err := r.hosted(ctx, id, key)
	if (err == nil && !known || errors.Is(err, aggregates.ErrSiteNotFound)) && r.state.CatchUpMiss(ctx) == nil {
		// Created a moment ago through another gateway process (the
		// site too, perhaps).
		snap, _, err = r.hosted(ctx, id, key)
	}
	if err != nil {
		if errors.Is(err, aggregates.ErrSiteNotFound) {
			err = aggregates.ErrNotFound
		}
		return Record{}, err
	}
	if snap == nil {
		return Record{}, aggregates.ErrNotFound
	}
	rec, err := r.record(ctx, *snap, nil)
	if err != nil {
		return Record{}, err
	}
	if rec.Deposit == nil || subtle.ConstantTimeCompare([]byte(rec.HostedToken), []byte(token)) != 1 {
		return Record{}, aggregates.ErrNotFound
	}
	return rec, nil
}

// hosted looks the deposit up in memory: snap is set when its hosted key is
// key; known is false when this process does not have the transaction.
func (r *Reader) hosted(ctx context.Context, id ids.TxID, key uint64) (snap *snapshot, known bool, err error) {
	err = r.state.Read(ctx, id.Site(), local, func(s *aggregates.Site) error {
		i, ok := s.Lookup(id)
		if !ok {
			return nil
		}
		known = true
		if tx := &s.Txs[i]; tx.Kind == aggregates.KindDeposit && tx.HostedKey == key {
			sn := snapOf(s, i)
			snap = &sn
		}
		return nil
	})
	if errors.Is(err, aggregates.ErrSiteNotFound) {
		return nil, false, nil
	}
	return snap, known, err
}

// Committed is a command's outcome as the write side committed it (the
// fields of ledger.Result, which converts to it).
type Committed struct {
	// Decision is what the aggregate decided.
	Decision aggregates.Decision
	// Events are the events appended for the command (none for a repeat).
	Events []events.Event
	// Seq is the stream sequence of the message holding Events.
	Seq uint64
	// Tx is the transaction concerned, as committed.
	Tx aggregates.Tx
	// Reason is the transaction's status reason.
	Reason string
}

// FromResult builds the record a command answered with. When the command
// appended the transaction's creation event, that event is used directly;
// repeats read it back from the stream.
func (r *Reader) FromResult(ctx context.Context, siteID ids.SiteID, res Committed) (Record, error) {
	i := res.Decision.Tx
	if i < 0 {
		return Record{}, fmt.Errorf("result names no transaction: %w", aggregates.ErrNotFound)
	}
	cfg, ok := r.state.SiteConfig(siteID)
	if !ok {
		return Record{}, aggregates.ErrSiteNotFound
	}
	snap := snapshot{tx: res.Tx, reason: res.Reason, id: ids.NewTx(siteID, i), cfg: cfg}
	var own []events.Event
	if res.Seq != 0 && res.Seq == res.Tx.Seq {
		own = res.Events
	}
	rec, err := r.record(ctx, snap, own)
	if errors.Is(err, events.ErrUnavailable) {
		rec, err = r.recordAgain(ctx, snap, own, err)
	}
	if err != nil {
		return Record{}, err
	}
	if rec.Deposit != nil {
		rec.Deposit.AlreadyPending = res.Decision.AlreadyPending
	}
	return rec, nil
}

// AnswerTime is how long, past the request's deadline, the record of a
// command that is stored is read again when the store does not answer
// (a stream changing leader takes seconds).
const AnswerTime = 20 * time.Second

// recordAgain reads the record of a stored command again until the store
// answers. The command's outcome is settled: answering "unavailable" (503,
// nothing recorded) would be untrue, so the read goes on past the
// request's deadline, and only when the store still does not answer is the
// outcome reported unknown to the caller (events.ErrOutcomeUnknown: a
// repeat with the same processId or Idempotency-Key gets the answer).
func (r *Reader) recordAgain(ctx context.Context, snap snapshot, own []events.Event, err error) (Record, error) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AnswerTime)
	defer cancel()
	pause := 50 * time.Millisecond
	for {
		select {
		case <-actx.Done():
			return Record{}, fmt.Errorf("transaction %s is stored, its record cannot be read: %w: %v", snap.id, events.ErrOutcomeUnknown, err)
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
		var rec Record
		if rec, err = r.record(actx, snap, own); !errors.Is(err, events.ErrUnavailable) {
			return rec, err
		}
	}
}

// record joins snap with its creation event. own, when set, holds events of
// the creation message that the caller already has.
func (r *Reader) record(ctx context.Context, snap snapshot, own []events.Event) (Record, error) {
	created, err := r.creation(ctx, snap, own)
	if err != nil {
		return Record{}, err
	}
	rec, ok := build(snap.tx, snap.reason, created, snap.id, snap.cfg.Secret, r.publicURL)
	rec.Sandbox = snap.cfg.Sandbox
	if !ok {
		return Record{}, fmt.Errorf("transaction %s: creation event at %d/%d does not match: %w",
			snap.id, snap.tx.Seq, snap.tx.EvIdx, events.ErrCorrupt)
	}
	return rec, nil
}

func (r *Reader) creation(ctx context.Context, snap snapshot, own []events.Event) (events.Event, error) {
	for _, e := range own {
		if creates(e, snap.id) {
			return e, nil
		}
	}
	r.mu.Lock()
	e, ok := r.created[snap.id]
	r.mu.Unlock()
	if ok {
		return e, nil
	}
	m, err := r.store.Get(ctx, snap.tx.Seq)
	if errors.Is(err, events.ErrNotFound) {
		// The state learned this sequence from the stream, which never
		// deletes a message: the server dropped it (a damaged block).
		return events.Event{}, fmt.Errorf("transaction %s: %w: its creation, message %d, is gone from the stream", snap.id, events.ErrHistoryLost, snap.tx.Seq)
	}
	if err != nil {
		return events.Event{}, err
	}
	evs, err := events.Decode(m.Data)
	if err != nil {
		return events.Event{}, fmt.Errorf("message %d: %w", snap.tx.Seq, err)
	}
	idx := int(snap.tx.EvIdx)
	if idx >= len(evs) {
		return events.Event{}, fmt.Errorf("transaction %s: message %d has %d events: %w", snap.id, snap.tx.Seq, len(evs), events.ErrCorrupt)
	}
	e = evs[idx]
	r.mu.Lock()
	if _, ok := r.created[snap.id]; !ok {
		// Replace in insertion order; only the one event is kept, not its
		// message, which may hold a whole group commit.
		if old := r.order[r.next]; old != "" {
			delete(r.created, old)
		}
		r.order[r.next] = snap.id
		r.next = (r.next + 1) % len(r.order)
		r.created[snap.id] = e
	}
	r.mu.Unlock()
	return e, nil
}

// creates reports whether e is the creation event of transaction txID.
func creates(e events.Event, txID ids.TxID) bool {
	switch p := e.Payload.(type) {
	case *events.DepositRequested:
		return ids.TxID(p.TxID) == txID
	case *events.WithdrawalRequested:
		return ids.TxID(p.TxID) == txID
	}
	return false
}

// Currency is the currency of every amount (whole IQD).
const Currency = "IQD"

// Balance is the data of GET /v1/balance.
type Balance struct {
	Balance            int64  `json:"balance"`
	PendingWithdrawals int64  `json:"pendingWithdrawals"`
	NegativeLimit      int64  `json:"negativeLimit"`
	Available          int64  `json:"available"`
	Currency           string `json:"currency"`
}

// BalanceOf returns a site's treasury, caught up with the stream.
func (r *Reader) BalanceOf(ctx context.Context, siteID ids.SiteID) (Balance, error) {
	return r.balance(ctx, siteID, fresh)
}

// Balances returns the treasuries of sites, in their order, caught up with
// the stream once for all of them: one read of the stream's last sequence,
// where BalanceOf reads each site's subject (a page of every treasury,
// refreshed every few seconds, would read every subject each time).
func (r *Reader) Balances(ctx context.Context, sites []ids.SiteID) ([]Balance, error) {
	if err := r.state.CatchUp(ctx); err != nil {
		return nil, err
	}
	out := make([]Balance, 0, len(sites))
	for _, id := range sites {
		b, err := r.balance(ctx, id, local)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (r *Reader) balance(ctx context.Context, siteID ids.SiteID, consistency bool) (Balance, error) {
	var b Balance
	err := r.state.Read(ctx, siteID, consistency, func(s *aggregates.Site) error {
		b = Balance{Balance: s.Balance, PendingWithdrawals: s.PendingWithdrawals, NegativeLimit: s.Cfg.NegativeLimit,
			Available: s.Available(), Currency: Currency}
		return nil
	})
	return b, err
}

// Page is one page of a listing; NextCursor is nil on the last page.
type Page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"nextCursor"`
}
