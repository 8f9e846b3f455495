package transactions

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/iqdgateway/gateway/aggregates/names"
	"github.com/iqdgateway/gateway/ids"
)

// Keys of the model (under the projections prefix "transactions\x00"):
//
//	t <site> <index u32>             the transaction's value (Tx)
//	p <site> <processId>             <index u32> <alias byte>: processIds and aliases
//	c <site>                         the site exists
//	i <scope> <field> <pos>          <site> <index u32>: one entry of a stream
//	n <scope> <field>                the stream's entry count (int64)
//	w <scope> <createdAt ms> <pos>   creation times, to find a time window's positions
//
// Strings are length-prefixed (appendStr), numbers big-endian, so that
// numeric order is key order. A stream is every entry under one
// "i <scope> <field>", in creation order across sites (pos): a listing in
// either order is a scan of a stream, forwards or backwards, from the
// cursor's position. Every index exists in two scopes: across sites and
// within one site.
const (
	keyTx     = 't'
	keyPID    = 'p'
	keySite   = 'c'
	keyStream = 'i'
	keyCount  = 'n'
	keyTime   = 'w'
)

// Fields of a stream (the byte after the scope).
const (
	fieldAll    = 'a'
	fieldKind   = 'k'
	fieldStatus = 's'
	fieldUser   = 'u'
	fieldMethod = 'm'
	fieldAmount = '$'
	fieldName   = 'g' // a trigram of the converted name or senderName
)

// pos is a transaction's place in the stream: its creation message and
// the creation event's index in it (records' creation order).
type pos struct {
	seq uint64
	ev  uint16
}

func (p pos) less(q pos) bool { return p.seq < q.seq || p.seq == q.seq && p.ev < q.ev }

const posLen = 10

func (p pos) append(b []byte) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint64(b, p.seq), p.ev)
}

func readPos(b []byte) pos {
	return pos{seq: binary.BigEndian.Uint64(b), ev: binary.BigEndian.Uint16(b[8:])}
}

func txKey(site ids.SiteID, i int32) []byte {
	return binary.BigEndian.AppendUint32(appendStr([]byte{keyTx}, string(site)), uint32(i))
}

func pidKey(site ids.SiteID, pid string) []byte {
	return appendStr(appendStr([]byte{keyPID}, string(site)), pid)
}

func siteKey(site ids.SiteID) []byte { return appendStr([]byte{keySite}, string(site)) }

// scope is "" across sites, or one site.
func appendScope(b []byte, site ids.SiteID) []byte {
	if site == "" {
		return append(b, 'g')
	}
	return appendStr(append(b, 's'), string(site))
}

// streamKey is the prefix of a stream's entries: "i <scope> <field>".
func streamKey(site ids.SiteID, field []byte) []byte {
	return append(appendScope([]byte{keyStream}, site), field...)
}

// Field values.
func fieldOf(f byte) []byte               { return []byte{f} }
func fieldByte(f, v byte) []byte          { return []byte{f, v} }
func fieldString(f byte, s string) []byte { return appendStr([]byte{f}, s) }
func fieldBucket(b int) []byte            { return []byte{fieldAmount, byte(b)} }
func timeKey(site ids.SiteID, ms int64) []byte {
	return orderedInt(appendScope([]byte{keyTime}, site), ms)
}

// orderedInt appends v so that byte order is numeric order (sign bit
// flipped).
func orderedInt(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(v)^(1<<63))
}

// fields returns the fields t is indexed under (in each scope).
func (t *Tx) fields() [][]byte {
	fs := [][]byte{fieldOf(fieldAll), fieldByte(fieldKind, byte(t.Kind)),
		fieldString(fieldUser, t.UserID), fieldString(fieldMethod, t.BankCode)}
	if t.BankID != t.BankCode {
		fs = append(fs, fieldString(fieldMethod, t.BankID))
	}
	for _, g := range t.trigrams() {
		fs = append(fs, fieldString(fieldName, g))
	}
	return append(fs, t.changing()...)
}

// changing are the fields of t that its later events change: its status
// and its amount (an approval for another amount). Nothing else indexed
// ever changes after the creation, so an update moves only these.
func (t *Tx) changing() [][]byte {
	return [][]byte{fieldByte(fieldStatus, byte(t.Status)), fieldBucket(bucket(t.Amount))}
}

// entries returns the keys t is found under in every stream and in the
// time index, with the value of each stream entry.
func (t *Tx) entries() (keys [][]byte, ref []byte) {
	keys, ref = t.streamEntries(t.fields())
	p := t.pos()
	for _, scope := range []ids.SiteID{"", t.Site} {
		keys = append(keys, p.append(timeKey(scope, t.CreatedAt)))
	}
	return keys, ref
}

// changingEntries returns the keys of the streams that t's changing fields
// put it in.
func (t *Tx) changingEntries() (keys [][]byte, ref []byte) { return t.streamEntries(t.changing()) }

// streamEntries returns t's keys in the streams of fields, in both scopes.
func (t *Tx) streamEntries(fields [][]byte) (keys [][]byte, ref []byte) {
	ref = binary.BigEndian.AppendUint32(appendStr(nil, string(t.Site)), uint32(t.Index))
	p := t.pos()
	for _, scope := range []ids.SiteID{"", t.Site} {
		for _, f := range fields {
			keys = append(keys, p.append(streamKey(scope, f)))
		}
	}
	return keys, ref
}

// countKey is where the count of the stream holding entry k is kept (nil
// for a time index entry, which is not counted).
func countKey(k []byte) []byte {
	if k[0] != keyStream {
		return nil
	}
	c := bytes.Clone(k[:len(k)-posLen])
	c[0] = keyCount
	return c
}

// trigrams returns every sequence of three runes of the converted name and
// of the converted senderName, once each: a name query of three runes or
// more matches only transactions holding all of its trigrams, so a
// transaction holding its rarest one is a candidate.
func (t *Tx) trigrams() []string {
	var out []string
	add := func(s string) {
		r := []rune(s)
		for i := 0; i+3 <= len(r); i++ {
			out = append(out, string(r[i:i+3]))
		}
	}
	add(t.ConvertedName)
	if t.SenderName != "" {
		add(names.Convert(t.SenderName))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// queryTrigrams returns the trigrams of a converted name query (none when
// it is shorter than three runes).
func queryTrigrams(q string) []string {
	return (&Tx{ConvertedName: q}).trigrams()
}

// bucket groups amounts for range queries: a bucket is a quarter of a
// power of two (the amount's bit length and the two bits after its
// leading one), so a range covers whole buckets but for the two at its
// ends, each at most a quarter wider than what it holds of the range.
// Amounts are positive; anything else is bucket 0.
func bucket(a int64) int {
	if a <= 0 {
		return 0
	}
	n := bits.Len64(uint64(a)) // 1..63
	if n <= 2 {
		return n * 4
	}
	return n*4 + int(uint64(a)>>(n-3))&3
}

// buckets returns the buckets holding every amount in [lo, hi].
func buckets(lo, hi int64) []int {
	var out []int
	for b := bucket(lo); b <= bucket(hi); b++ {
		out = append(out, b)
	}
	return out
}
