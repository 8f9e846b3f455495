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
