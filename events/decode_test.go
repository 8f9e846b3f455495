package events

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// reflectDecode is Decode as it was written first, through msgpack's
// reflection into wireMessage: the reference the envelope reader must agree
// with on every input, valid or not.
func reflectDecode(b []byte) ([]Event, error) {
	var m wireMessage
	if err := msgpack.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if m.Version != messageVersion {
		return nil, fmt.Errorf("%w: message version %d", ErrCorrupt, m.Version)
	}
	out := make([]Event, len(m.Events))
	for i, w := range m.Events {
		p, err := decodePayload(w.Name, w.Data)
		if err != nil {
			return nil, err
		}
		if len(w.Prev) != 32 {
			return nil, fmt.Errorf("%w: %s prev hash has %d bytes", ErrCorrupt, w.Name, len(w.Prev))
		}
		e := Event{Name: w.Name, Time: w.Time, Actor: w.Actor, Payload: p, data: w.Data}
		copy(e.Prev[:], w.Prev)
		out[i] = e
	}
	return out, nil
}

// forgedLength says whether b declares an array, map, string, byte string or
// extension
// longer than the bytes left could hold. msgpack's reflection (v5.4.1)
// allocates a forged array length whole, and a forged byte length a
// megabyte at a time up to it (seconds for four gigabytes), so the
// reference must not see b; Decode refuses it at once.
func forgedLength(b []byte) bool {
	r := bytes.NewReader(b)
	d := msgpack.NewDecoder(r)
	var walk func() bool
	walk = func() bool {
		c, err := d.PeekCode()
		if err != nil {
			return false
		}
		n, per := 0, 0
		switch {
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			n, err = d.DecodeArrayLen()
			per = 1
		case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
			n, err = d.DecodeMapLen()
			per = 2
		case msgpcode.IsString(c) || c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32:
			if n, err = d.DecodeBytesLen(); err != nil || n > r.Len() {
				return err == nil
			}
			_ = d.ReadFull(make([]byte, max(n, 0)))
			return false
		case msgpcode.IsFixedExt(c) || msgpcode.IsExt(c):
			if _, n, err = d.DecodeExtHeader(); err != nil || n > r.Len() {
				return err == nil
			}
			_ = d.ReadFull(make([]byte, max(n, 0)))
			return false
		default:
			_ = d.Skip()
			return false
		}
		if err != nil {
			return false
		}
		if n > r.Len() {
			return true
		}
		for range n * per {
			if walk() {
				return true
			}
		}
		return false
	}
	return walk()
}

// sameDecode fails unless Decode and reflectDecode agree on b: the same
// events (payloads, hashes), or both an error.
func sameDecode(t *testing.T, b []byte) {
	t.Helper()
	if forgedLength(b) {
		_, err := Decode(b)
		require.ErrorIs(t, err, ErrCorrupt, "% x: a forged length", b)
		return
	}
	got, gotErr := Decode(b)
	want, wantErr := reflectDecode(b)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("% x: Decode error %v, reflection error %v", b, gotErr, wantErr)
	}
	if wantErr != nil {
		// Both refuse it. The reason may differ on shapes Seal never
		// writes (an event as an array, which reflection takes as a
		// struct of no fields and then finds no event name in).
		require.True(t, errors.Is(gotErr, ErrCorrupt) || errors.Is(gotErr, ErrUnknownEvent), "% x: %v", b, gotErr)
		return
	}
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Payload, got[i].Payload)
		require.Equal(t, want[i].Name, got[i].Name)
		require.Equal(t, want[i].Time, got[i].Time)
		require.Equal(t, want[i].Actor, got[i].Actor)
		require.Equal(t, want[i].Prev, got[i].Prev)
		wh, err := Hash(want[i])
		require.NoError(t, err)
		gh, err := Hash(got[i])
		require.NoError(t, err)
		require.Equal(t, wh, gh, "the chain hash covers the payload as stored")
	}
}

// envelopes are valid and hand-made messages: field order, unknown and nil
// fields, wrong types and lengths.
func envelopes(t testing.TB) [][]byte {
	sealed, _, err := Seal([32]byte{1}, sample())
	require.NoError(t, err)
	payload, err := msgpack.Marshal(&TreasuryAdjusted{Amount: 7, Reason: "r"})
	require.NoError(t, err)
	prev := make([]byte, 32)
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		return b
	}
	ev := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	good := ev("n", TreasuryAdjustedName, "t", int64(5), "a", "op", "d", msgpack.RawMessage(payload), "p", prev)
	return [][]byte{
		sealed,
		enc(map[string]any{"e": []any{good}, "v": 1}), // events before the version
		enc(map[string]any{"v": 1, "e": []any{good}, "x": []int{1, 2}}),
		enc(map[string]any{"v": 1, "e": nil}),
		enc(map[string]any{"v": 1}),
		enc(map[string]any{"v": 2, "e": []any{good}}),
		enc(map[string]any{"v": "1", "e": []any{good}}),
		enc(nil),
		enc([]int{1}),
		enc(map[string]any{"v": 1, "e": []any{nil}}),
		enc(map[string]any{"v": 1, "e": []any{ev("n", TreasuryAdjustedName, "t", int64(5), "a", "op", "d", nil, "p", prev)}}),
		enc(map[string]any{"v": 1, "e": []any{ev("n", TreasuryAdjustedName, "t", int64(5), "a", "op", "d", msgpack.RawMessage(payload))}}),
		enc(map[string]any{"v": 1, "e": []any{ev("n", TreasuryAdjustedName, "t", int64(5), "a", "op", "d", msgpack.RawMessage(payload), "p", prev[:31])}}),
		enc(map[string]any{"v": 1, "e": []any{ev("n", TreasuryAdjustedName, "t", "5", "a", "op", "d", msgpack.RawMessage(payload), "p", prev)}}),
		enc(map[string]any{"v": 1, "e": []any{ev("n", "no.such.event", "t", int64(5), "d", msgpack.RawMessage(payload), "p", prev)}}),
		enc(map[string]any{"v": 1, "e": []any{ev("n", TreasuryAdjustedName, "t", int64(5), "d", msgpack.RawMessage(payload), "p", string(prev), "z", true)}}),
		enc(map[string]any{"v": 1, "e": []any{ev("n", TreasuryAdjustedName, "t", int64(5), "d", enc("not a payload"), "p", prev)}}),
		{0x82, 0xa1, 'v', 0x01, 0xa1, 'e', 0xdd, 0xff, 0xff, 0xff, 0xff},                        // an array length past the end
		{0x82, 0xa1, 'v', 0x01, 0xa1, 'e', 0x91, 0x81, 0xa1, 'p', 0xc6, 0xff, 0xff, 0xff, 0xff}, // and a bin length
		{},
	}
}

func TestDecode_agreesWithReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i, b := range envelopes(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			sameDecode(t, b)
			for n := range len(b) { // every truncation
				sameDecode(t, b[:n])
			}
			for range 300 { // and byte flips
				m := append([]byte(nil), b...)
				if len(m) == 0 {
					break
				}
				m[rng.IntN(len(m))] ^= byte(1 + rng.IntN(255))
				sameDecode(t, m)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, b := range envelopes(f) {
		f.Add(b)
	}
	f.Fuzz(sameDecode)
}
