package events

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func sample() []Event {
	return []Event{
		{Name: TreasuryAdjustedName, Time: 1700000000000, Actor: "op1", Payload: &TreasuryAdjusted{Amount: 50000, Reason: "top up"}},
		{Name: WithdrawalRequestedName, Time: 1700000000001, Actor: ActorMerchant, Payload: &WithdrawalRequested{TxID: "s1-1", ProcessID: "proc-77", Amount: 25000, IBAN: "07701234567"}},
	}
}

func TestSealDecode_roundTrip(t *testing.T) {
	evs := sample()
	b, last, err := Seal([32]byte{}, evs)
	require.NoError(t, err)
	got, err := Decode(b)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, evs[0].Payload, got[0].Payload)
	assert.Equal(t, evs[1].Payload, got[1].Payload)
	assert.Equal(t, "op1", got[0].Actor)
	assert.Equal(t, [32]byte{}, got[0].Prev)

	h0, err := Hash(got[0])
	require.NoError(t, err)
	assert.Equal(t, h0, got[1].Prev, "second event chains onto the first")
	h1, err := Hash(got[1])
	require.NoError(t, err)
	assert.Equal(t, last, h1, "Seal returns the hash of the last event")
}

func TestHash_detectsTamperedPayload(t *testing.T) {
	b, _, err := Seal([32]byte{}, sample())
	require.NoError(t, err)
	// Rewrite the withdrawal amount in place: the message still decodes but
	// the next hash no longer matches what Seal produced.
	tampered := bytes.Replace(b, []byte("proc-77"), []byte("proc-78"), 1)
	require.NotEqual(t, b, tampered)
	orig, err := Decode(b)
	require.NoError(t, err)
	got, err := Decode(tampered)
	require.NoError(t, err)
	ho, _ := Hash(orig[1])
	ht, _ := Hash(got[1])
	assert.NotEqual(t, ho, ht)
}

func TestDecode_errors(t *testing.T) {
	unknown, err := msgpack.Marshal(&wireMessage{Version: 1, Events: []wireEvent{{Name: "nope.v1", Prev: make([]byte, 32)}}})
	require.NoError(t, err)
	badPrev, err := msgpack.Marshal(&wireMessage{Version: 1, Events: []wireEvent{{Name: DepositExpiredName, Data: []byte{0x80}, Prev: []byte{1}}}})
	require.NoError(t, err)
	badVersion, err := msgpack.Marshal(&wireMessage{Version: 9})
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		in   []byte
		want error
	}{
		"garbage":      {[]byte{0xc1, 0x00}, ErrCorrupt},
		"unknown name": {unknown, ErrUnknownEvent},
		"short prev":   {badPrev, ErrCorrupt},
		"version":      {badVersion, ErrCorrupt},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(tc.in)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestDecodeExcept(t *testing.T) {
	b, _, err := Seal([32]byte{}, sample())
	require.NoError(t, err)
	full, err := Decode(b)
	require.NoError(t, err)
	skipWithdrawals := func(name string) bool { return name == WithdrawalRequestedName }

	got, err := DecodeExcept(b, skipWithdrawals)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, full[0], got[0], "an event not skipped decodes as by Decode")
	assert.Nil(t, got[1].Payload, "a skipped event's payload is not decoded")
	assert.Equal(t, []any{full[1].Name, full[1].Time, full[1].Actor, full[1].Prev},
		[]any{got[1].Name, got[1].Time, got[1].Actor, got[1].Prev})
	hf, err := Hash(full[1])
	require.NoError(t, err)
	hg, err := Hash(got[1])
	require.NoError(t, err)
	assert.Equal(t, hf, hg, "a skipped event still hashes as stored")

	// A skipped payload is not read: one that would not decode is no error.
	badPayload, err := msgpack.Marshal(&wireMessage{Version: 1, Events: []wireEvent{
		{Name: WithdrawalRequestedName, Data: []byte{0xa1, 'x'}, Prev: make([]byte, 32)}}}) // a string, not a map
	require.NoError(t, err)
	_, err = Decode(badPayload)
	require.ErrorIs(t, err, ErrCorrupt)
	got, err = DecodeExcept(badPayload, skipWithdrawals)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Nil(t, got[0].Payload)

	// The envelope is read as by Decode.
	badPrev, err := msgpack.Marshal(&wireMessage{Version: 1, Events: []wireEvent{{Name: WithdrawalRequestedName, Data: []byte{0x80}, Prev: []byte{1}}}})
	require.NoError(t, err)
	for name, in := range map[string][]byte{"garbage": {0xc1, 0x00}, "short prev": badPrev} {
		_, err := DecodeExcept(in, skipWithdrawals)
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
}

func TestSealIsUniquePerMessage(t *testing.T) {
	evs := func() []Event {
		return []Event{{Name: TreasuryAdjustedName, Time: 1, Actor: "op-1", Payload: &TreasuryAdjusted{Amount: 5, Reason: "r"}}}
	}
	a, ha, err := Seal([32]byte{}, evs())
	require.NoError(t, err)
	b, hb, err := Seal([32]byte{}, evs())
	require.NoError(t, err)
	assert.NotEqual(t, a, b, "two writers' identical decisions must not produce identical messages")
	assert.Equal(t, ha, hb, "the nonce is not part of the hash chain")
	da, err := Decode(a)
	require.NoError(t, err)
	db, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, da[0].Payload, db[0].Payload)
}

// sealByReflection is how Seal wrote a message before it wrote the envelope
// by hand: msgpack's reflection over wireMessage, a buffer per payload.
func sealByReflection(t *testing.T, prev [32]byte, evs []Event, nonce []byte) ([]byte, [32]byte) {
	t.Helper()
	m := wireMessage{Version: messageVersion, Events: make([]wireEvent, len(evs)), Nonce: nonce}
	for i, e := range evs {
		data, err := msgpack.Marshal(e.Payload)
		require.NoError(t, err)
		m.Events[i] = wireEvent{Name: e.Name, Time: e.Time, Actor: e.Actor, Data: data, Prev: append([]byte(nil), prev[:]...)}
		prev = hashParts(prev, e.Name, e.Time, e.Actor, data)
	}
	b, err := msgpack.Marshal(&m)
	require.NoError(t, err)
	return b, prev
}

// Stored messages are hashed and audited as bytes: the hand-written
// envelope must be byte for byte what the reflection wrote, for any events.
func TestSeal_sameBytesAsReflection(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), 70_000))
	cases := map[string][]Event{
		"two events": sample(),
		"none":       {},
		"one":        sample()[:1],
		"negative and large times, long strings, empty actor": {
			{Name: TreasuryAdjustedName, Time: -1, Actor: "", Payload: &TreasuryAdjusted{Amount: -5, Reason: long}},
			{Name: TreasuryAdjustedName, Time: 1 << 62, Actor: long[:300], Payload: &TreasuryAdjusted{Amount: 1}},
			{Name: WithdrawalRequestedName, Time: 0, Actor: "علي", Payload: &WithdrawalRequested{TxID: "s-1", Name: "\xff\x00"}},
		},
	}
	for name, evs := range cases {
		t.Run(name, func(t *testing.T) {
			for _, nonce := range [][]byte{nil, {1, 2, 3, 4, 5, 6, 7, 8}} {
				prev := [32]byte{9, 8, 7}
				want, wantLast := sealByReflection(t, prev, evs, nonce)
				got, gotLast, err := seal(prev, evs, nonce)
				require.NoError(t, err)
				assert.Equal(t, want, got)
				assert.Equal(t, wantLast, gotLast)
				// Each event's payload bytes and chain link are the stored ones.
				dec, err := Decode(got)
				require.NoError(t, err)
				require.Len(t, dec, len(evs))
				for i := range evs {
					assert.Equal(t, dec[i].data, evs[i].data)
					assert.Equal(t, dec[i].Prev, evs[i].Prev)
				}
			}
		})
	}
	// A payload msgpack cannot encode is an error.
	_, _, err := seal([32]byte{}, []Event{{Name: "x", Payload: badPayload{C: make(chan int)}}}, nil)
	assert.Error(t, err)
}

type badPayload struct{ C chan int }

func (badPayload) EventName() string { return "x" }
