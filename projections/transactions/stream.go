package transactions

import (
	"bytes"

	"github.com/iqdgateway/gateway/projections"
)

// entry is one index entry: a transaction's position and the rest of its
// value's key (txKey without its first byte).
type entry struct {
	p   pos
	ref []byte
}

// stream reads one stream's entries in a listing's order, a chunk at a
// time: a merge holds several open at once, and View.Scan holds its
// iterator only during the call.
type stream struct {
	v      projections.View
	prefix []byte
	// lo and hi bound the entries still to read: lo ≤ key < hi.
	lo, hi  []byte
	reverse bool
	chunk   int
	buf     []entry
	next    int
	done    bool
}

// maxChunk bounds a chunk: a page that checks many rows reads them in a
// few scans rather than one per page size.
const maxChunk = 1024

// newStream reads the stream under prefix between positions: from after
// (exclusive; none when after is nil) in the order given, within [lo, hi)
// when set.
func newStream(v projections.View, prefix []byte, reverse bool, after *pos, lo, hi *pos, chunk int) *stream {
	s := &stream{v: v, prefix: prefix, reverse: reverse, chunk: min(max(chunk, 16), maxChunk),
		lo: prefix, hi: projections.PrefixEnd(prefix)}
	if lo != nil {
		s.lo = lo.append(bytes.Clone(prefix))
	}
	if hi != nil {
		s.hi = hi.append(bytes.Clone(prefix))
	}
	if after != nil {
		k := after.append(bytes.Clone(prefix))
		if reverse {
			if bytes.Compare(k, s.hi) < 0 {
				s.hi = k
			}
		} else if k = append(k, 0); bytes.Compare(k, s.lo) > 0 {
			s.lo = k
		}
	}
	return s
}

// head returns the stream's next entry without taking it.
func (s *stream) head() (entry, bool, error) {
	if s.next < len(s.buf) {
		return s.buf[s.next], true, nil
	}
	if s.done || bytes.Compare(s.lo, s.hi) >= 0 {
		return entry{}, false, nil
	}
	s.buf, s.next = s.buf[:0], 0
	var last []byte
	err := s.v.Scan(s.lo, s.hi, s.reverse, func(k, v []byte) bool {
		if len(k) != len(s.prefix)+posLen {
			return true // another stream whose field extends this one's: none do, by appendStr
		}
		s.buf = append(s.buf, entry{p: readPos(k[len(s.prefix):]), ref: bytes.Clone(v)})
		if len(s.buf) == s.chunk {
			last = bytes.Clone(k)
			return false
		}
		return true
	})
	if err != nil {
		return entry{}, false, err
	}
	if last == nil {
		s.done = true
	} else if s.reverse {
		s.hi = last
	} else {
		s.lo = append(last, 0)
	}
	s.chunk = min(2*s.chunk, maxChunk)
	if len(s.buf) == 0 {
		return entry{}, false, nil
	}
	return s.buf[0], true, nil
}

// take drops the head.
func (s *stream) take() { s.next++ }

// merged reads several streams as one, in the listing's order. The streams
// of one merge hold disjoint entries (a transaction's amount is in one
// bucket).
type merged struct {
	ss      []*stream
	reverse bool
}

func (m *merged) next() (entry, bool, error) {
	best := -1
	var be entry
	for i, s := range m.ss {
		e, ok, err := s.head()
		if err != nil {
			return entry{}, false, err
		}
		if ok && (best < 0 || m.before(e.p, be.p)) {
			best, be = i, e
		}
	}
	if best < 0 {
		return entry{}, false, nil
	}
	m.ss[best].take()
	return be, true, nil
}

// before reports whether p comes before q in the listing.
func (m *merged) before(p, q pos) bool {
	if m.reverse {
		return q.less(p)
	}
	return p.less(q)
}
