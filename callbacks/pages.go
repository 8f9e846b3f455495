package callbacks

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/ids"
)

// The delivery log lives in the CALLBACKS bucket as pages, not in memory:
// page P holds the first-attempt deliveries of the callbacks whose events
// are at stream sequences [P*pageSeqs, (P+1)*pageSeqs), under the key
// "page.P". A callback's page follows from its webhook id, so a lookup is
// one read, a listing reads the pages in order, and no process keeps more
// of the log than the few pages it is writing (docs/callbacks.md).
//
// A ledger message is one site's and holds at most the ledger's batch of
// commands (256), so a page stays far below the server's payload limit
// (about 12 bytes a delivery: 64 messages of 256 callbacks are 200 KB).
const (
	pagePrefix = "page."
	pageSeqs   = 64
	// pageVersion is the first byte of every page.
	pageVersion = 1
	// openPages bounds the pages the writer keeps with their revision, so
	// that appending to the page being filled needs no read.
	openPages = 8
	// scanPages bounds the pages one listing request reads; a listing
	// that finds too few deliveries within them answers what it found and
	// a cursor that continues after the last page read.
	scanPages = 1024
)

func pageOf(seq uint64) uint64 { return seq / pageSeqs }

func pageKey(p uint64) string { return pagePrefix + strconv.FormatUint(p, 10) }

// pageEntry is one first-attempt delivery of a page.
type pageEntry struct {
	k    key
	site ids.SiteID
	code uint16
	at   int64 // attempt time, Unix ms
}

// encodePage encodes entries (sorted by key, unique, all of page p):
//
//	version byte
//	uvarint messages; per message:
//	  uvarint seq-p*pageSeqs, uvarint len(site), site, uvarint callbacks;
//	  per callback: uvarint index, uvarint status code, varint attempt
//	  time in ms minus the previous callback's (the first: minus zero)
func encodePage(p uint64, es []pageEntry) []byte {
	b := make([]byte, 0, 16+len(es)*12)
	b = append(b, pageVersion)
	groups := 0
	for i := range es {
		if i == 0 || es[i].k.seq != es[i-1].k.seq {
			groups++
		}
	}
	b = binary.AppendUvarint(b, uint64(groups))
	var prevAt int64
	for i := 0; i < len(es); {
		j := i
		for j < len(es) && es[j].k.seq == es[i].k.seq {
			j++
		}
		b = binary.AppendUvarint(b, es[i].k.seq-p*pageSeqs)
		b = binary.AppendUvarint(b, uint64(len(es[i].site)))
		b = append(b, es[i].site...)
		b = binary.AppendUvarint(b, uint64(j-i))
		for _, e := range es[i:j] {
			b = binary.AppendUvarint(b, uint64(e.k.idx))
			b = binary.AppendUvarint(b, uint64(e.code))
			b = binary.AppendVarint(b, e.at-prevAt)
			prevAt = e.at
		}
		i = j
	}
	return b
}

// errBadPage is a page this build cannot read.
var errBadPage = errors.New("delivery log page unreadable")

// decodePage decodes page p, refusing anything encodePage could not have
// written: counts larger than the bytes left, sequences outside the page
// or out of order, site ids that are not ids, status codes that are not
// HTTP's.
func decodePage(p uint64, b []byte) ([]pageEntry, error) {
	bad := func(what string) error { return fmt.Errorf("%w: page %d: %s", errBadPage, p, what) }
	if len(b) == 0 || b[0] != pageVersion {
		return nil, bad("unknown version")
	}
	r := pageReader{b: b[1:]}
	groups := r.uvarint()
	// A message takes at least four bytes (offset, site length, one-byte
	// site, count), a callback three.
	if r.err || groups > uint64(len(r.b))/4 {
		return nil, bad("message count")
	}
	var out []pageEntry
	var prevAt int64
	var prevOff uint64
	for g := uint64(0); g < groups; g++ {
		off := r.uvarint()
		if r.err || off >= pageSeqs || (g > 0 && off <= prevOff) {
			return nil, bad("sequence")
		}
		prevOff = off
		site, err := ids.ParseSite(string(r.bytes(r.uvarint())))
		if r.err || err != nil {
			return nil, bad("site id")
		}
		n := r.uvarint()
		if r.err || n == 0 || n > uint64(len(r.b))/3 {
			return nil, bad("callback count")
		}
		if out == nil {
			out = make([]pageEntry, 0, min(n*groups, uint64(len(b))/3))
		}
		prevIdx := -1
		for c := uint64(0); c < n; c++ {
			idx, code, at := r.uvarint(), r.uvarint(), r.varint()
			if r.err || idx > 1<<16 || int(idx) <= prevIdx || code < 100 || code > 999 {
				return nil, bad("callback")
			}
			prevIdx = int(idx)
			prevAt += at
			out = append(out, pageEntry{k: key{p*pageSeqs + off, int(idx)}, site: site, code: uint16(code), at: prevAt})
		}
	}
	if len(r.b) != 0 {
		return nil, bad("trailing bytes")
	}
	return out, nil
}

type pageReader struct {
	b   []byte
	err bool
}

func (r *pageReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *pageReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *pageReader) bytes(n uint64) []byte {
	if r.err || n == 0 || n > uint64(len(r.b)) {
		r.err = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// mergeEntries merges b into a (both sorted, unique); a callback in both
// keeps a's entry, the first delivery logged. added is how many of b were
// new.
func mergeEntries(a, b []pageEntry) (out []pageEntry, added int) {
	out = make([]pageEntry, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0:
			return append(out, a...), added
		case len(a) == 0:
			return append(out, b...), added + len(b)
		}
		switch c := a[0].k.cmp(b[0].k); {
		case c < 0:
			out, a = append(out, a[0]), a[1:]
		case c > 0:
			out, b, added = append(out, b[0]), b[1:], added+1
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out, added
}

// pageLog reads and writes the pages. Only the active dispatcher writes;
// every write is conditional on the page's revision, so a dispatcher that
// lost its lease and still writes cannot erase what its successor wrote.
type pageLog struct {
	kv jetstream.KeyValue
	// scanMax is scanPages (tests lower it).
	scanMax int

	mu sync.Mutex
	// open are the pages this process wrote last, with their revisions.
	open map[uint64]openPage
}

type openPage struct {
	entries []pageEntry
	rev     uint64
}

func newPageLog(kv jetstream.KeyValue) *pageLog {
	return &pageLog{kv: kv, scanMax: scanPages, open: map[uint64]openPage{}}
}

// read returns page p and its revision (0: no such page). A page this
// build cannot read is errBadPage, with its revision.
func (pl *pageLog) read(ctx context.Context, p uint64) ([]pageEntry, uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e, err := pl.kv.Get(rctx, pageKey(p))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read delivery log page %d: %w: %v", p, ErrUnavailable, err)
	}
	es, err := decodePage(p, e.Value())
	return es, e.Revision(), err
}

// add stores es (any order) in their pages. It returns once every page
// holds them; an error leaves some of them unstored, and the caller
// writes them again.
func (pl *pageLog) add(ctx context.Context, es []pageEntry) error {
	es = slices.Clone(es)
	slices.SortFunc(es, func(a, b pageEntry) int { return a.k.cmp(b.k) })
	es = slices.CompactFunc(es, func(a, b pageEntry) bool { return a.k == b.k })
	for len(es) > 0 {
		p := pageOf(es[0].k.seq)
		n := 1
		for n < len(es) && pageOf(es[n].k.seq) == p {
			n++
		}
		if err := pl.addTo(ctx, p, es[:n]); err != nil {
			return err
		}
		es = es[n:]
	}
	return nil
}

// addTo merges es into page p, reading it again when another writer
// changed it.
func (pl *pageLog) addTo(ctx context.Context, p uint64, es []pageEntry) error {
	pl.mu.Lock()
	cur, known := pl.open[p]
	pl.mu.Unlock()
	for {
		if !known {
			entries, rev, err := pl.read(ctx, p)
			if errors.Is(err, errBadPage) {
				// Unreadable: replaced. The log only describes deliveries
				// whose messages are acknowledged; nothing depends on it
				// but the listing.
				entries, err = nil, nil
			}
			if err != nil {
				return err
			}
			cur, known = openPage{entries: entries, rev: rev}, true
		}
		merged, added := mergeEntries(cur.entries, es)
		if added == 0 {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var rev uint64
		var err error
		if cur.rev == 0 {
			rev, err = pl.kv.Create(wctx, pageKey(p), encodePage(p, merged))
		} else {
			rev, err = pl.kv.Update(wctx, pageKey(p), encodePage(p, merged), cur.rev)
		}
		cancel()
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			known = false // another writer: read it again
			continue
		}
		if err != nil {
			pl.forget(p)
			return fmt.Errorf("write delivery log page %d: %w", p, err)
		}
		pl.keep(p, openPage{entries: merged, rev: rev})
		return nil
	}
}

// keep remembers page p as written, forgetting the lowest pages beyond
// openPages: deliveries follow the stream, so the page being filled is
// among the highest.
func (pl *pageLog) keep(p uint64, op openPage) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.open[p] = op
	for len(pl.open) > openPages {
		low := p
		for q := range pl.open {
			low = min(low, q)
		}
		delete(pl.open, low)
	}
}

func (pl *pageLog) forget(p uint64) {
	pl.mu.Lock()
	delete(pl.open, p)
	pl.mu.Unlock()
}

// lookup returns the entry of k, if its page holds one.
func (pl *pageLog) lookup(ctx context.Context, k key) (pageEntry, bool, error) {
	es, _, err := pl.read(ctx, pageOf(k.seq))
	if errors.Is(err, errBadPage) {
		return pageEntry{}, false, nil // unreadable by this build: as if absent
	}
	if err != nil {
		return pageEntry{}, false, err
	}
	i, found := slices.BinarySearchFunc(es, k, func(e pageEntry, k key) int { return e.k.cmp(k) })
	if !found {
		return pageEntry{}, false, nil
	}
	return es[i], true, nil
}

// scan returns, in stream order, up to limit entries after `after` whose
// sequence is at most last, for which keep is true. It reads at most
// scanPages pages; when it stops before last with fewer than limit, done
// is false and upTo is the last sequence it covered.
//
// Reading one page at a time costs a round trip each; a listing mostly
// needs one or two (a page holds every callback of 64 messages).
func (pl *pageLog) scan(ctx context.Context, after key, last uint64, limit int, keep func(pageEntry) bool) (out []pageEntry, upTo uint64, done bool, err error) {
	p := pageOf(after.seq)
	for read := 0; p*pageSeqs <= last; p, read = p+1, read+1 {
		if read == pl.scanMax {
			return out, p*pageSeqs - 1, false, nil
		}
		es, _, err := pl.read(ctx, p)
		if errors.Is(err, errBadPage) {
			continue // unreadable by this build; shown by none
		}
		if err != nil {
			return nil, 0, false, err
		}
		i, _ := slices.BinarySearchFunc(es, after, func(e pageEntry, k key) int { return cmp.Or(e.k.cmp(k), -1) })
		for _, e := range es[i:] {
			if e.k.cmp(after) <= 0 || e.k.seq > last || !keep(e) {
				continue
			}
			out = append(out, e)
			if len(out) == limit {
				return out, e.k.seq, true, nil
			}
		}
	}
	return out, last, true, nil
}
