package events

import (
	"bytes"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// envelope reads a wireMessage from b.
type envelope struct {
	d       *msgpack.Decoder
	b       []byte
	r       *bytes.Reader
	version int
	events  []envelopeEvent
}

// envelopeEvent is a wireEvent as read: data is a slice of the message.
type envelopeEvent struct {
	name, actor string
	time        int64
	data        []byte
	prev        [32]byte
	prevLen     int
}

// raw skips the next value and returns its bytes, nil for a nil (as a
// RawMessage field decodes it).
func (m *envelope) raw() ([]byte, error) {
	start := len(m.b) - m.r.Len()
	if err := m.skip(0); err != nil {
		return nil, err
	}
	v := m.b[start : len(m.b)-m.r.Len() : len(m.b)-m.r.Len()]
	if len(v) == 1 && v[0] == msgpcode.Nil {
		return nil, nil
	}
	return v, nil
}

// bytes reads a byte string (or nil) into into when it has that length, and
// past it otherwise; it returns the length (0 for nil).
func (m *envelope) bytes(into []byte) (int, error) {
	n, err := m.d.DecodeBytesLen()
	switch {
	case err != nil:
		return 0, err
	case n <= 0:
		return 0, nil
	case n > m.r.Len(): // a forged length: refuse it before allocating it
		return 0, io.ErrUnexpectedEOF
	case n == len(into):
		return n, m.d.ReadFull(into)
	default:
		return n, m.advance(n)
	}
}

// advance reads past n bytes of b without copying them. The decoder reads
// straight from r (a bytes.Reader is a byte scanner, so msgpack wraps it in
// no buffer) and holds nothing read ahead between values, so moving r on
// is reading them.
func (m *envelope) advance(n int) error {
	if n > m.r.Len() {
		return io.ErrUnexpectedEOF
	}
	_, err := m.r.Seek(int64(n), io.SeekCurrent)
	return err
}

// fields calls field for each key of the map that comes next (none for a
// nil map).
func (m *envelope) fields(field func(key string) error) error {
	if err := m.noExt(); err != nil {
		return err
	}
	n, err := m.d.DecodeMapLen()
	if err != nil {
		return err
	}
	for range max(n, 0) {
		key, err := m.d.DecodeString()
		if err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
	}
	return nil
}

func (m *envelope) message() error {
	return m.fields(func(key string) (err error) {
		switch key {
		case "v":
			m.version, err = m.d.DecodeInt()
		case "w": // the nonce: a byte string, of no other use here
			_, err = m.bytes(nil)
		case "e":
			var n int
			if err = m.noExt(); err != nil {
				return err
			}
			if n, err = m.d.DecodeArrayLen(); err != nil {
				return err
			}
			if n > m.r.Len() { // every event takes a byte at least: a forged length
				return io.ErrUnexpectedEOF
			}
			m.events = make([]envelopeEvent, max(n, 0))
			for i := range m.events {
				if err := m.event(&m.events[i]); err != nil {
					return err
				}
			}
		default:
			err = m.skip(0)
		}
		return err
	})
}

func (m *envelope) event(e *envelopeEvent) error {
	return m.fields(func(key string) (err error) {
		switch key {
		case "n":
			e.name, err = m.d.DecodeString()
		case "t":
			e.time, err = m.d.DecodeInt64()
		case "a":
			e.actor, err = m.d.DecodeString()
		case "d":
			e.data, err = m.raw()
		case "p":
			e.prevLen, err = m.bytes(e.prev[:])
		default:
			err = m.skip(0)
		}
		return err
	})
}

// noExt refuses an extension where a map or an array is due: msgpack's
// DecodeMapLen and DecodeArrayLen read past an extension header (its
// encoding of maps as extensions), where the struct decoder refuses it.
func (m *envelope) noExt() error {
	c, err := m.d.PeekCode()
	if err != nil {
		return err
	}
	if msgpcode.IsFixedExt(c) || msgpcode.IsExt(c) {
		return fmt.Errorf("unexpected code=%x", c)
	}
	return nil
}

// maxDepth bounds how deep skip follows nested arrays and maps: a message
// of nothing but array headers must not take the stack.
const maxDepth = 1000

// skip reads past the next value. It refuses a length longer than what is
// left before acting on it: msgpack's own Skip reads a forged byte length a
// megabyte at a time up to four gigabytes.
func (m *envelope) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	c, err := m.d.PeekCode()
	if err != nil {
		return err
	}
	n, per := 0, 0
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err = m.d.DecodeArrayLen()
		per = 1
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err = m.d.DecodeMapLen()
		per = 2
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		_, err = m.bytes(nil)
		return err
	case msgpcode.IsFixedExt(c) || msgpcode.IsExt(c):
		if _, n, err = m.d.DecodeExtHeader(); err != nil {
			return err
		}
		return m.advance(n)
	default: // a scalar: its size is in its code
		return m.d.Skip()
	}
	if err != nil {
		return err
	}
	if n > m.r.Len() {
		return io.ErrUnexpectedEOF
	}
	for range max(n, 0) * per {
		if err := m.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}
