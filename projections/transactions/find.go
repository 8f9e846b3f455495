package transactions

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/aggregates/names"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/projections"
	"github.com/iqdgateway/gateway/records"
)

// Result is one page of Find: the transactions, and the cursor to the next
// page (nil on the last).
type Result struct {
	Txs  []Tx
	Next *string
	// Examined is how many transactions the page read.
	Examined int
}

// clockSlack widens the positions a time window is looked up in, as
// records does: gateway processes stamp events with their own clocks, so
// creation times along the stream are nearly, not strictly, in order. Each
// candidate is then checked against its own creation time.
const clockSlack = 5 * time.Second

// Find pages through the transactions records.Filter selects, in creation
// order across sites, as records.Reader.List does. It reads one stream,
// the one holding the fewest entries among those the filters name (a
// site, a kind, a status, a user, a method, an amount range, the rarest
// trigram of a name, or a creation time window), and checks every other
// filter on each transaction it reads. Like List, a page reads at most
// records.ScanBudget transactions; one that spends it ends early, with
// a cursor to go on from.
func Find(v projections.View, f records.Filter) (Result, error) {
	return find(v, f, records.ScanBudget)
}

func find(v projections.View, f records.Filter, budget int) (Result, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	after, started, err := decodeCursor(f.Cursor, f)
	if err != nil {
		return Result{}, err
	}
	if f.SiteID != "" {
		ok, err := SiteExists(v, f.SiteID)
		if err != nil {
			return Result{}, err
		}
		if !ok {
			return Result{}, aggregates.ErrSiteNotFound
		}
	}
	q := query{v: v, f: f, name: names.Convert(f.Name), budget: budget}
	if started {
		q.after = &after
	}
	if f.Name != "" && q.name == "" {
		// Nothing to match on: no name contains it.
		return Result{}, nil
	}
	if f.TxID != "" || f.ProcessID != "" {
		return q.named()
	}
	src, err := q.plan()
	if err != nil || src == nil {
		return Result{}, err
	}
	return q.page(src)
}

// query is one page being gathered.
type query struct {
	v      projections.View
	f      records.Filter
	name   string
	after  *pos
	budget int
	// lo and hi bound the positions of a time window, when set.
	lo, hi *pos
}

func (q *query) reverse() bool { return q.f.Order == records.Newest }

// page reads src until the page is full and one more transaction matches,
// or src ends, or the budget is spent.
func (q *query) page(src *merged) (Result, error) {
	var res Result
	var last pos // the last transaction examined
	for {
		e, ok, err := src.next()
		if err != nil || !ok {
			return res, err
		}
		if res.Examined == q.budget {
			return q.finish(res, last), nil
		}
		res.Examined++
		t, known, err := getKey(q.v, append([]byte{keyTx}, e.ref...))
		if err != nil {
			return res, err
		}
		if !known || !q.match(&t) {
			last = e.p
			continue
		}
		if len(res.Txs) == q.f.Limit {
			return q.finish(res, last), nil
		}
		res.Txs = append(res.Txs, t)
		last = e.p
	}
}

// finish ends a page that has more after last.
func (q *query) finish(res Result, last pos) Result {
	c := encodeCursor(q.f, last)
	res.Next = &c
	return res
}

// match checks every filter on t (but the transaction id and processId,
// which named() answers).
func (q *query) match(t *Tx) bool {
	f := &q.f
	at := time.UnixMilli(t.CreatedAt)
	switch {
	case f.SiteID != "" && t.Site != f.SiteID,
		f.Kind != 0 && t.Kind != f.Kind,
		f.Status != 0 && t.Status != f.Status,
		f.MinAmount != 0 && t.Amount < f.MinAmount,
		f.MaxAmount != 0 && t.Amount > f.MaxAmount,
		f.UserID != "" && t.UserID != f.UserID,
		f.Method != "" && f.Method != t.BankCode && f.Method != t.BankID,
		!f.From.IsZero() && at.Before(f.From),
		!f.To.IsZero() && !at.Before(f.To):
		return false
	case q.name == "":
		return true
	}
	return strings.Contains(t.ConvertedName, q.name) || t.SenderName != "" && strings.Contains(names.Convert(t.SenderName), q.name)
}

// named answers a filter naming one transaction (by id or processId, in
// each site): at most one per site, in the listing's order.
func (q *query) named() (Result, error) {
	f := &q.f
	var sites []ids.SiteID
	switch {
	case f.TxID != "" && f.SiteID != "" && f.SiteID != f.TxID.Site():
	case f.TxID != "":
		sites = []ids.SiteID{f.TxID.Site()}
	case f.SiteID != "":
		sites = []ids.SiteID{f.SiteID}
	default:
		var err error
		if sites, err = Sites(q.v); err != nil {
			return Result{}, err
		}
	}
	var found []Tx
	for _, site := range sites {
		t, ok, err := q.one(site)
		if err != nil {
			return Result{}, err
		}
		if ok && q.match(&t) && q.inWindow(t.pos()) {
			found = append(found, t)
		}
	}
	slices.SortFunc(found, func(a, b Tx) int {
		if a.pos().less(b.pos()) != q.reverse() {
			return -1
		}
		return 1
	})
	var res Result
	for i, t := range found {
		if len(res.Txs) == q.f.Limit {
			return q.finish(res, found[i-1].pos()), nil
		}
		res.Txs = append(res.Txs, t)
	}
	res.Examined = len(found)
	return res, nil
}

// one finds the transaction the filter names in site.
func (q *query) one(site ids.SiteID) (Tx, bool, error) {
	f := &q.f
	var t Tx
	var ok bool
	var err error
	if f.TxID != "" {
		if t, ok, err = Get(q.v, f.TxID); err != nil || !ok {
			return Tx{}, false, err
		}
	}
	if f.ProcessID != "" {
		byPID, _, found, err := ByProcessID(q.v, site, f.ProcessID)
		if err != nil || !found || ok && byPID.Index != t.Index {
			return Tx{}, false, err
		}
		t, ok = byPID, true
	}
	return t, ok, nil
}

// inWindow reports whether p is after the cursor in the listing's order.
func (q *query) inWindow(p pos) bool {
	if q.after == nil {
		return true
	}
	if q.reverse() {
		return p.less(*q.after)
	}
	return q.after.less(p)
}

// candidate is a set of streams that holds every transaction a filter
// can match, and how many entries they hold.
type candidate struct {
	fields [][]byte
	n      int64
}

// plan picks the candidate with the fewest entries and opens its streams
// from the cursor; nil when nothing can match.
func (q *query) plan() (*merged, error) {
	f := &q.f
	scope := f.SiteID
	var cands []candidate
	add := func(fields ...[]byte) error {
		c := candidate{fields: fields}
		for _, fl := range fields {
			n, err := q.count(scope, fl)
			if err != nil {
				return err
			}
			c.n += n
		}
		cands = append(cands, c)
		return nil
	}
	var adds [][][]byte
	adds = append(adds, [][]byte{fieldOf(fieldAll)})
	if f.Kind != 0 {
		adds = append(adds, [][]byte{fieldByte(fieldKind, byte(f.Kind))})
	}
	if f.Status != 0 {
		adds = append(adds, [][]byte{fieldByte(fieldStatus, byte(f.Status))})
	}
	if f.UserID != "" {
		adds = append(adds, [][]byte{fieldString(fieldUser, f.UserID)})
	}
	if f.Method != "" {
		adds = append(adds, [][]byte{fieldString(fieldMethod, f.Method)})
	}
	if f.MinAmount != 0 || f.MaxAmount != 0 {
		hi := int64(math.MaxInt64)
		if f.MaxAmount != 0 {
			hi = f.MaxAmount
		}
		var fs [][]byte
		for _, b := range buckets(f.MinAmount, hi) {
			fs = append(fs, fieldBucket(b))
		}
		adds = append(adds, fs)
	}
	for _, g := range queryTrigrams(q.name) {
		adds = append(adds, [][]byte{fieldString(fieldName, g)})
	}
	for _, fs := range adds {
		if err := add(fs...); err != nil {
			return nil, err
		}
	}
	best := slices.MinFunc(cands, func(a, b candidate) int { return int(min(max(a.n-b.n, -1), 1)) })
	if !f.From.IsZero() || !f.To.IsZero() {
		empty, err := q.window(scope)
		if err != nil || empty {
			return nil, err
		}
	}
	if best.n == 0 {
		return nil, nil
	}
	m := &merged{reverse: q.reverse()}
	for _, fl := range best.fields {
		m.ss = append(m.ss, newStream(q.v, streamKey(scope, fl), q.reverse(), q.after, q.lo, q.hi, q.f.Limit+1))
	}
	return m, nil
}

// count is how many entries a stream holds.
func (q *query) count(scope ids.SiteID, field []byte) (int64, error) {
	k := streamKey(scope, field)
	k[0] = keyCount
	return projections.Counter(q.v.Get(k))
}

// window bounds the positions of a creation time window, widened by
// clockSlack: the first transaction created at From − slack or later, and
// the first at To + slack or later. empty when none is created in it.
func (q *query) window(scope ids.SiteID) (empty bool, err error) {
	first := func(t time.Time) (*pos, error) {
		var p *pos
		base := timeKey(scope, 0)[:len(timeKey(scope, 0))-8]
		err := q.v.Scan(orderedInt(base, t.UnixMilli()), projections.PrefixEnd(base), false, func(k, _ []byte) bool {
			at := readPos(k[len(k)-posLen:])
			p = &at
			return false
		})
		return p, err
	}
	if !q.f.From.IsZero() {
		if q.lo, err = first(q.f.From.Add(-clockSlack)); err != nil || q.lo == nil {
			return true, err
		}
	}
	if !q.f.To.IsZero() {
		if q.hi, err = first(q.f.To.Add(clockSlack)); err != nil {
			return true, err
		}
	}
	return q.lo != nil && q.hi != nil && !q.lo.less(*q.hi), nil
}
