package records

import (
	"container/heap"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/aggregates/names"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Order is the order of a listing: by creation, across sites.
type Order int8

// Orders of a listing.
const (
	// Oldest lists the earliest created first (an operator's queue).
	Oldest Order = iota
	// Newest lists the latest created first.
	Newest
)

// Filter selects transactions for List. Every field set must match.
type Filter struct {
	// SiteID limits the listing to one site ("" for all).
	SiteID ids.SiteID
	// Kind is 0 for both kinds.
	Kind aggregates.Kind
	// Status is 0 for every status.
	Status aggregates.Status
	// TxID selects one transaction.
	TxID ids.TxID
	// ProcessID selects the transaction with this processId (in each site).
	ProcessID string
	// UserID selects the end user's transactions.
	UserID string
	// MinAmount and MaxAmount bound the current amount (0: no bound).
	MinAmount, MaxAmount int64
	// Name matches when the convertedName, or the converted senderName, of
	// the transaction contains names.Convert(Name).
	Name string
	// Method matches the method's code (a record's "bank") or its bankId.
	Method string
	// From and To bound the creation time: From ≤ createdAt < To (zero:
	// no bound).
	From, To time.Time
	// Order is the listing's order.
	Order Order
	// Cursor continues a previous page ("" for the first).
	Cursor string
	// Limit is the page size.
	Limit int
}

// ErrBadCursor is returned for a cursor this server did not issue.
var ErrBadCursor = errors.New("invalid cursor")

// ErrCursorFilters is returned for a cursor issued for other filters or
// the other order.
var ErrCursorFilters = errors.New("cursor of other filters")

// ScanBudget is how many creation events one page reads at most to check
// the filters that only the creation event can answer (name, method, a
// withdrawal's userId, the creation time). The in-memory state holds what
// decisions need and nothing more (aggregates.Tx), so those filters read
// the stream; a page that spends its budget ends early, with fewer items
// than asked for and a cursor to go on from, rather than making one
// request read a whole history.
const ScanBudget = 5000

// clockSlack widens the stream range a time filter is looked up in:
// gateway processes stamp events with their own clocks, so times along
// the stream are nearly, not strictly, in order. Each candidate is then
// checked against its own creation time exactly.
const clockSlack = 5 * time.Second

// pos is a transaction's place in the stream: its creation message and
// the creation event's index in it. Creation order across sites is the
// order of pos.
type pos struct {
	seq uint64
	ev  uint16
}

func (p pos) less(q pos) bool { return p.seq < q.seq || p.seq == q.seq && p.ev < q.ev }

func txPos(tx *aggregates.Tx) pos { return pos{tx.Seq, tx.EvIdx} }

// List pages through transactions in creation order across sites (see
// Filter and Order). It first catches up with the stream (one read of its
// last sequence), so that a listing shows every write acknowledged
// anywhere before it was asked for.
func (r *Reader) List(ctx context.Context, f Filter) (Page[OpsRecord], error) {
	if err := r.state.CatchUp(ctx); err != nil {
		return Page[OpsRecord]{}, err
	}
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	after, started, err := decodeCursor(f.Cursor, f)
	if err != nil {
		return Page[OpsRecord]{}, err
	}
	sites := r.state.SiteIDs()
	if f.SiteID != "" {
		if _, ok := r.state.SiteConfig(f.SiteID); !ok {
			return Page[OpsRecord]{}, aggregates.ErrSiteNotFound
		}
		sites = []ids.SiteID{f.SiteID}
	}
	if f.TxID != "" {
		if f.SiteID != "" && f.SiteID != f.TxID.Site() {
			sites = nil
		} else {
			sites = []ids.SiteID{f.TxID.Site()}
		}
	}
	sc := scan{r: r, f: f, name: names.Convert(f.Name), sites: sites, after: after, started: started,
		lo: 1, hi: ^uint64(0), budget: r.scanBudget}
	if f.Name != "" && sc.name == "" {
		// Nothing to match on: no name contains it.
		return Page[OpsRecord]{Items: []OpsRecord{}}, nil
	}
	if !f.From.IsZero() || !f.To.IsZero() {
		if sc.lo, sc.hi, err = r.seqRange(ctx, f.From, f.To); err != nil {
			return Page[OpsRecord]{}, err
		}
	}
	return sc.page(ctx)
}

// scan is one page of a listing being gathered.
type scan struct {
	r     *Reader
	f     Filter
	name  string
	sites []ids.SiteID
	// after is where the page starts (exclusive), when started.
	after   pos
	started bool
	// lo and hi bound the creation message's sequence: lo ≤ seq < hi.
	lo, hi uint64
	budget int
}

// candidate is a transaction that matches the in-memory filters.
type candidate struct {
	pos  pos
	snap snapshot
}

func (sc *scan) page(ctx context.Context) (Page[OpsRecord], error) {
	page := Page[OpsRecord]{Items: []OpsRecord{}}
	batch := sc.f.Limit + 1
	if sc.eventFilters() {
		batch = max(batch, 256)
	}
	var last pos // the last transaction examined
	for {
		cands, exhausted, err := sc.next(ctx, batch)
		if err != nil {
			return page, err
		}
		for _, c := range cands {
			if sc.needsEvent(&c.snap.tx) {
				if sc.budget == 0 {
					// Go on from here on the next page.
					return sc.finish(page, last)
				}
				sc.budget--
				ok, err := sc.eventMatch(ctx, c.snap)
				if err != nil {
					return page, err
				}
				if !ok {
					last = c.pos
					continue
				}
			}
			if len(page.Items) == sc.f.Limit {
				return sc.finish(page, last)
			}
			rec, err := sc.r.record(ctx, c.snap, nil)
			if err != nil {
				return page, err
			}
			page.Items = append(page.Items, OpsRecord{SiteID: c.snap.id.Site(), Record: rec})
			last = c.pos
		}
		if exhausted {
			return page, nil
		}
		sc.after, sc.started = last, true
	}
}

// finish ends a page that has more after last.
func (sc *scan) finish(page Page[OpsRecord], last pos) (Page[OpsRecord], error) {
	c := encodeCursor(sc.f, last)
	page.NextCursor = &c
	return page, nil
}

// eventFilters reports whether some filter needs the creation event.
func (sc *scan) eventFilters() bool {
	return sc.f.Name != "" || sc.f.Method != "" || !sc.f.From.IsZero() || !sc.f.To.IsZero() ||
		sc.f.UserID != "" && sc.f.Kind != aggregates.KindDeposit
}

// needsEvent reports whether tx, which matches in memory, must still be
// checked against its creation event.
func (sc *scan) needsEvent(tx *aggregates.Tx) bool {
	return sc.f.Name != "" || sc.f.Method != "" || !sc.f.From.IsZero() || !sc.f.To.IsZero() ||
		sc.f.UserID != "" && tx.Kind == aggregates.KindWithdrawal
}

// eventMatch checks the filters the creation event answers.
func (sc *scan) eventMatch(ctx context.Context, snap snapshot) (bool, error) {
	e, err := sc.r.creation(ctx, snap, nil)
	if err != nil {
		return false, err
	}
	var bankID, bank, user, converted, sender string
	switch p := e.Payload.(type) {
	case *events.DepositRequested:
		bankID, bank, user, converted, sender = p.BankID, p.BankCode, p.UserID, p.ConvertedName, p.SenderName
	case *events.WithdrawalRequested:
		bankID, bank, user, converted = p.BankID, p.BankCode, p.UserID, p.ConvertedName
	default:
		return false, fmt.Errorf("transaction %s: creation event is %s: %w", snap.id, e.Name, events.ErrCorrupt)
	}
	at := time.UnixMilli(e.Time)
	switch {
	case sc.f.Method != "" && sc.f.Method != bank && sc.f.Method != bankID,
		sc.f.UserID != "" && sc.f.UserID != user,
		!sc.f.From.IsZero() && at.Before(sc.f.From),
		!sc.f.To.IsZero() && !at.Before(sc.f.To):
		return false, nil
	case sc.name == "":
		return true, nil
	}
	return strings.Contains(converted, sc.name) || sender != "" && strings.Contains(names.Convert(sender), sc.name), nil
}

// memMatch checks the filters the in-memory state answers.
func (sc *scan) memMatch(s *aggregates.Site, i int32) bool {
	tx := &s.Txs[i]
	f := &sc.f
	switch {
	case tx.Seq < sc.lo || tx.Seq >= sc.hi,
		f.Kind != 0 && tx.Kind != f.Kind,
		f.Status != 0 && tx.Status != f.Status,
		f.MinAmount != 0 && tx.Amount < f.MinAmount,
		f.MaxAmount != 0 && tx.Amount > f.MaxAmount,
		f.UserID != "" && tx.Kind == aggregates.KindDeposit && s.UserID(i) != f.UserID:
		return false
	}
	return true
}

// next returns, in order, the first n transactions after sc.after that
// match in memory, across the sites; exhausted reports that there are no
// more.
func (sc *scan) next(ctx context.Context, n int) (cands []candidate, exhausted bool, err error) {
	h := &worstFirst{order: sc.f.Order}
	for _, id := range sc.sites {
		err := sc.r.state.Read(ctx, id, local, func(s *aggregates.Site) error {
			sc.site(s, h, n)
			return nil
		})
		if err != nil && !errors.Is(err, aggregates.ErrSiteNotFound) {
			return nil, false, err
		}
	}
	cands = h.c
	sort.Slice(cands, func(i, j int) bool { return h.better(cands[i].pos, cands[j].pos) })
	return cands, len(cands) < n, nil
}

// site adds the site's matches to h, which keeps the best n.
func (sc *scan) site(s *aggregates.Site, h *worstFirst, n int) {
	add := func(i int32) bool {
		p := txPos(&s.Txs[i])
		if len(h.c) == n && !h.better(p, h.c[0].pos) {
			return false // this site's later ones are worse still
		}
		if !sc.memMatch(s, i) {
			return true
		}
		c := candidate{pos: p, snap: snapOf(s, i)}
		if len(h.c) == n {
			heap.Pop(h)
		}
		heap.Push(h, c)
		return true
	}
	inPage := func(i int32) bool {
		p := txPos(&s.Txs[i])
		return (!sc.started || h.better(sc.after, p)) && p.seq >= sc.lo && p.seq < sc.hi
	}
	if one, ok := sc.only(s); ok {
		if one >= 0 && inPage(one) {
			add(one)
		}
		return
	}
	txs := s.Txs
	if sc.f.Order == Oldest {
		// The first after sc.after, and from lo.
		i := sort.Search(len(txs), func(i int) bool {
			p := txPos(&txs[i])
			return (!sc.started || sc.after.less(p)) && p.seq >= sc.lo
		})
		for ; i < len(txs) && txs[i].Seq < sc.hi; i++ {
			if !add(int32(i)) {
				return
			}
		}
		return
	}
	// The last before sc.after, and before hi.
	i := sort.Search(len(txs), func(i int) bool {
		p := txPos(&txs[i])
		return sc.started && !p.less(sc.after) || p.seq >= sc.hi
	}) - 1
	for ; i >= 0 && txs[i].Seq >= sc.lo; i-- {
		if !add(int32(i)) {
			return
		}
	}
}

// only returns the one transaction of s the filter can match when it
// names one (by id or processId): -1 when none, ok false when the filter
// names none.
func (sc *scan) only(s *aggregates.Site) (i int32, ok bool) {
	i = -1
	if sc.f.TxID == "" && sc.f.ProcessID == "" {
		return i, false
	}
	if sc.f.TxID != "" {
		j, found := s.Lookup(sc.f.TxID)
		if !found {
			return -1, true
		}
		i = j
	}
	if sc.f.ProcessID != "" {
		j, found := s.ByProcessID(sc.f.ProcessID)
		if !found {
			j, found = s.ByAlias(sc.f.ProcessID)
		}
		if !found || i >= 0 && i != j {
			return -1, true
		}
		i = j
	}
	return i, true
}

// worstFirst is a heap of candidates with the one furthest in the
// listing's order on top, so that keeping the best n is a pop and a push.
type worstFirst struct {
	order Order
	c     []candidate
}

// better reports whether p comes before q in the listing.
func (h *worstFirst) better(p, q pos) bool {
	if h.order == Newest {
		return q.less(p)
	}
	return p.less(q)
}

func (h *worstFirst) Len() int           { return len(h.c) }
func (h *worstFirst) Less(i, j int) bool { return h.better(h.c[j].pos, h.c[i].pos) }
func (h *worstFirst) Swap(i, j int)      { h.c[i], h.c[j] = h.c[j], h.c[i] }
func (h *worstFirst) Push(x any)         { h.c = append(h.c, x.(candidate)) }
func (h *worstFirst) Pop() any {
	x := h.c[len(h.c)-1]
	h.c = h.c[:len(h.c)-1]
	return x
}

// seqRange finds the stream range whose messages were stamped from from
// to to, widened by clockSlack: lo ≤ seq < hi. Stream times grow with the
// sequence (nearly: see clockSlack), so each bound is a binary search that
// reads a few dozen messages.
func (r *Reader) seqRange(ctx context.Context, from, to time.Time) (lo, hi uint64, err error) {
	last, err := r.store.LastSeq(ctx)
	if err != nil {
		return 0, 0, err
	}
	lo, hi = 1, last+1
	if !from.IsZero() {
		if lo, err = r.firstAtOrAfter(ctx, from.Add(-clockSlack), last); err != nil {
			return 0, 0, err
		}
	}
	if !to.IsZero() {
		if hi, err = r.firstAtOrAfter(ctx, to.Add(clockSlack), last); err != nil {
			return 0, 0, err
		}
	}
	return lo, hi, nil
}

// firstAtOrAfter returns the first sequence in 1..last whose message was
// stamped at t or later (last+1 when none).
func (r *Reader) firstAtOrAfter(ctx context.Context, t time.Time, last uint64) (uint64, error) {
	ms := t.UnixMilli()
	lo, hi := uint64(1), last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := r.store.Get(ctx, mid)
		if err != nil {
			return 0, fmt.Errorf("time of message %d: %w", mid, err)
		}
		evs, err := events.Decode(m.Data)
		if err != nil || len(evs) == 0 {
			return 0, fmt.Errorf("time of message %d: %w", mid, events.ErrCorrupt)
		}
		if evs[0].Time < ms {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// A cursor is the listing's order, a fingerprint of its filters, and the
// place of the last transaction the page examined. The fingerprint holds a
// cursor to the filters it was issued for: with others it would page
// through another listing from the middle, which looks like a result.
const cursorVersion = "c3"

// cursorV2 is the previous version, without the fingerprint: a cursor a
// gateway of the version before issued is still taken (a listing paged
// across an upgrade), with its order checked.
const cursorV2 = "c2"

func encodeCursor(f Filter, p pos) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d:%08x:%d:%d", cursorVersion, f.Order, f.fingerprint(), p.seq, p.ev))
}

// fingerprint hashes the filters (not the order, which the cursor names,
// nor the cursor and the page size).
func (f Filter) fingerprint() uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%q|%d|%d|%q|%q|%q|%d|%d|%q|%q|%d|%d", f.SiteID, f.Kind, f.Status, f.TxID, f.ProcessID, f.UserID,
		f.MinAmount, f.MaxAmount, f.Name, f.Method, unixNanoOrZero(f.From), unixNanoOrZero(f.To))
	return h.Sum32()
}

func unixNanoOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// EncodeCursor is the cursor of a listing with filters f that goes on
// after the transaction created by event ev of the message at seq: the
// read models page with the same cursors, so a listing goes on across
// either.
func EncodeCursor(f Filter, seq uint64, ev uint16) string { return encodeCursor(f, pos{seq, ev}) }

// DecodeCursor parses f.Cursor as EncodeCursor wrote it; ok is false for
// none, and the errors are ErrBadCursor and ErrCursorFilters.
func DecodeCursor(f Filter) (seq uint64, ev uint16, ok bool, err error) {
	p, ok, err := decodeCursor(f.Cursor, f)
	return p.seq, p.ev, ok, err
}

// decodeCursor parses a cursor, which comes back from outside like any
// other input. A cursor of the other order or of other filters is refused
// (ErrCursorFilters): it would skip or repeat transactions, or page through
// another listing.
func decodeCursor(c string, f Filter) (pos, bool, error) {
	if c == "" {
		return pos{}, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return pos{}, false, ErrBadCursor
	}
	parts := strings.Split(string(b), ":")
	var order, fp, seqS, evS string
	switch {
	case len(parts) == 5 && parts[0] == cursorVersion:
		order, fp, seqS, evS = parts[1], parts[2], parts[3], parts[4]
	case len(parts) == 4 && parts[0] == cursorV2:
		order, seqS, evS = parts[1], parts[2], parts[3]
	default:
		return pos{}, false, ErrBadCursor
	}
	seq, err1 := strconv.ParseUint(seqS, 10, 64)
	ev, err2 := strconv.ParseUint(evS, 10, 16)
	if err1 != nil || err2 != nil || seq == 0 {
		return pos{}, false, ErrBadCursor
	}
	p := pos{seq, uint16(ev)}
	// The one spelling this server writes: another (a leading zero,
	// other base64 padding bits) was not issued by it.
	spelled := fmt.Sprintf("%s:%s:%d:%d", parts[0], order, p.seq, p.ev)
	if fp != "" {
		spelled = fmt.Sprintf("%s:%s:%s:%d:%d", parts[0], order, fp, p.seq, p.ev)
	}
	if base64.RawURLEncoding.EncodeToString([]byte(spelled)) != c {
		return pos{}, false, ErrBadCursor
	}
	if order != strconv.Itoa(int(f.Order)) || parts[0] == cursorVersion && fp != fmt.Sprintf("%08x", f.fingerprint()) {
		return pos{}, false, ErrCursorFilters
	}
	return p, true, nil
}
