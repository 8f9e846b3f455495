// Package projections is the read side: read models on disk, fed by the
// stream. Each model folds the stream's messages, in stream order, into
// keys of its own in one embedded store (Pebble, in the data directory),
// and keeps beside them a checkpoint: the stream sequence it has applied,
// written in the same atomic batch as the changes that sequence made. A
// model is therefore never ahead of the stream and never skips a message,
// whatever stops the process, and can always be dropped and rebuilt from
// the stream (docs/ARCHITECTURE.md "Read models").
//
// Keys: every model's keys live under its name and a separator
// ("<name>\x00<key>"), so a model is dropped with one range deletion and
// models never see each other's keys. The store's own keys (format
// versions, checkpoints) live under "\x00meta\x00".
package projections

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/iqdgateway/gateway/events"
)

// Model is one read model.
type Model interface {
	// Name is the model's name, unique among the models of a DB: its
	// keys and its checkpoint are kept under it. Lower-case ASCII letters
	// only.
	Name() string
	// Version is the model's format. A model whose stored version is
	// another is dropped when the DB opens and rebuilt from the stream.
	Version() uint32
	// Apply folds one stored message, already decoded into evs, into the
	// model through b. It must depend on nothing but the model's own keys
	// and the message (the same history always makes the same model), and
	// must not fail for a message the ledger accepted: an error stops the
	// projector, the model staying at its previous checkpoint.
	Apply(b *Batch, m events.Msg, evs []events.Event) error
}

// Batch is the writes of one model in one commit. Reads through it see
// the batch's own writes first, then what is committed.
type Batch struct {
	b      *pebble.Batch
	prefix []byte
	buf    []byte
	// counters are the changes Add made to counters in this commit, by
	// model key: a counter most messages of a commit touch is read and
	// written once a commit, not once a message.
	counters map[string]int64
}

// key returns the store key of a model key, in a buffer reused by the
// next call (pebble copies keys and values into the batch).
func (b *Batch) key(k []byte) []byte {
	b.buf = append(append(b.buf[:0], b.prefix...), k...)
	return b.buf
}

// Set writes value under key.
func (b *Batch) Set(key, value []byte) error { return b.b.Set(b.key(key), value, nil) }

// Delete removes key.
func (b *Batch) Delete(key []byte) error { return b.b.Delete(b.key(key), nil) }

// Add adds delta to the counter under key: an int64, big-endian, as
// Counter reads it. The sum of a commit's changes is written when it
// commits; Get does not see it before.
func (b *Batch) Add(key []byte, delta int64) {
	if b.counters == nil {
		b.counters = map[string]int64{}
	}
	b.counters[string(key)] += delta
}

// flushCounters writes the counters Add changed.
func (b *Batch) flushCounters() error {
	for k, d := range b.counters {
		if d == 0 {
			continue
		}
		n, err := Counter(b.Get([]byte(k)))
		if err != nil {
			return err
		}
		if err := b.Set([]byte(k), binary.BigEndian.AppendUint64(nil, uint64(n+d))); err != nil {
			return err
		}
	}
	clear(b.counters)
	return nil
}

// Counter decodes a counter's value, as Batch.Get or View.Get return it
// (0 when there is none).
func Counter(value []byte, ok bool, err error) (int64, error) {
	if err != nil || !ok || len(value) != 8 {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(value)), nil
}

// Get returns a copy of the value under key; ok is false when there is
// none.
func (b *Batch) Get(key []byte) (value []byte, ok bool, err error) {
	return get(b.b, b.key(key))
}

// View reads one model's committed keys.
type View struct {
	r      pebble.Reader
	prefix []byte
}

// Get returns a copy of the value under key; ok is false when there is
// none.
func (v View) Get(key []byte) (value []byte, ok bool, err error) {
	return get(v.r, append(bytes.Clone(v.prefix), key...))
}

// Scan calls fn for every key in [lower, upper) of the model, in key order
// (reverse: descending), with the key without the model's prefix, until fn
// returns false. Key and value are valid only during the call. A nil upper
// scans to the model's end.
func (v View) Scan(lower, upper []byte, reverse bool, fn func(key, value []byte) bool) error {
	lo := append(bytes.Clone(v.prefix), lower...)
	var hi []byte
	if upper != nil {
		hi = append(bytes.Clone(v.prefix), upper...)
	} else {
		hi = PrefixEnd(v.prefix)
	}
	it, err := v.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	valid := it.First
	next := it.Next
	if reverse {
		valid, next = it.Last, it.Prev
	}
	for ok := valid(); ok; ok = next() {
		val, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("scan: %w", err)
		}
		if !fn(it.Key()[len(v.prefix):], val) {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	return nil
}

// iter is an iterator over every key of the view's model.
func (v View) iter() (*pebble.Iterator, error) {
	it, err := v.r.NewIter(&pebble.IterOptions{LowerBound: v.prefix, UpperBound: PrefixEnd(v.prefix)})
	if err != nil {
		return nil, fmt.Errorf("iterate: %w", err)
	}
	return it, nil
}

func get(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, c, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get: %w", err)
	}
	out := bytes.Clone(v)
	return out, true, c.Close()
}

// PrefixEnd is the first key after every key starting with p (nil when
// there is none): the upper bound of a scan of a prefix.
func PrefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// modelPrefix is where a model's keys live.
func modelPrefix(name string) []byte { return append([]byte(name), 0) }
