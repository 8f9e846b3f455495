package events

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// The payload shapes as v1 writers stored them, before the idempotency key.
type (
	siteCreatedV1 struct {
		SiteID            string   `msgpack:"id"`
		Name              string   `msgpack:"name"`
		AppKey            string   `msgpack:"appKey"`
		Secret            string   `msgpack:"secret"`
		WebhookSecret     string   `msgpack:"webhookSecret"`
		NegativeLimit     int64    `msgpack:"negativeLimit"`
		IPAllowlist       []string `msgpack:"ipAllowlist"`
		CallbackURL       string   `msgpack:"callbackUrl"`
		HostedPage        bool     `msgpack:"hostedPage"`
		DepositTTLSeconds int64    `msgpack:"depositTtl"`
		RateLimit         int64    `msgpack:"rateLimit"`
	}
	treasuryAdjustedV1 struct {
		Amount int64  `msgpack:"amount"`
		Reason string `msgpack:"reason"`
	}
	bankCreatedV1 struct {
		BankID         string        `msgpack:"id"`
		Code           string        `msgpack:"code"`
		Name           LocalizedName `msgpack:"name"`
		IdentifierKind string        `msgpack:"kind"`
		MinAmount      int64         `msgpack:"min"`
		MaxAmount      int64         `msgpack:"max"`
		Deposit        bool          `msgpack:"deposit"`
		Withdraw       bool          `msgpack:"withdraw"`
		Accounts       []Account     `msgpack:"accounts"`
	}
)

// storedMessage seals one event whose payload bytes are exactly data, as a
// writer of another version would have stored them.
func storedMessage(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	b, err := msgpack.Marshal(&wireMessage{Version: messageVersion, Events: []wireEvent{
		{Name: name, Time: 1700000000000, Actor: "op-1", Data: data, Prev: make([]byte, 32)}}})
	require.NoError(t, err)
	return b
}

func TestDecode_v1UpcastsToTheKeyedPayloads(t *testing.T) {
	tests := []struct {
		name string
		old  any
		want Payload
	}{
		{SiteCreatedV1Name, &siteCreatedV1{SiteID: "s1", Name: "Shop", AppKey: "ak_1", Secret: "sec", WebhookSecret: "whsec_x",
			NegativeLimit: -5, IPAllowlist: []string{"10.0.0.0/8"}, DepositTTLSeconds: 1800},
			&SiteCreated{SiteID: "s1", Name: "Shop", AppKey: "ak_1", Secret: "sec", WebhookSecret: "whsec_x",
				NegativeLimit: -5, IPAllowlist: []string{"10.0.0.0/8"}, DepositTTLSeconds: 1800}},
		{TreasuryAdjustedV1Name, &treasuryAdjustedV1{Amount: -700, Reason: "fee"}, &TreasuryAdjusted{Amount: -700, Reason: "fee"}},
		{BankCreatedV1Name, &bankCreatedV1{BankID: "b1", Code: "ZC", Name: LocalizedName{En: "Z"}, IdentifierKind: "PHONE",
			MinAmount: 1, MaxAmount: 9, Deposit: true, Accounts: []Account{{AccountName: "A", AccountNumber: "1"}}},
			&BankCreated{BankID: "b1", Code: "ZC", Name: LocalizedName{En: "Z"}, IdentifierKind: "PHONE",
				MinAmount: 1, MaxAmount: 9, Deposit: true, Accounts: []Account{{AccountName: "A", AccountNumber: "1"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := msgpack.Marshal(tc.old)
			require.NoError(t, err)
			got, err := Decode(storedMessage(t, tc.name, data))
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tc.name, got[0].Name, "the stored name is kept: the hash chain covers it")
			assert.Equal(t, tc.want, got[0].Payload)

			// An unkeyed payload encodes as v1 did, byte for byte, so
			// a v1 event's hash is the same whichever build computes it.
			again, err := msgpack.Marshal(tc.want)
			require.NoError(t, err)
			assert.Equal(t, data, again)
			h, err := Hash(got[0])
			require.NoError(t, err)
			assert.Equal(t, hashParts([32]byte{}, tc.name, got[0].Time, got[0].Actor, data), h)
		})
	}
}

// A treasury.adjusted.v3, written before allowBelowLimit existed, reads
// as v3 without it.
func TestDecode_treasuryAdjustedV2(t *testing.T) {
	type v2 struct {
		Amount         int64  `msgpack:"amount"`
		Reason         string `msgpack:"reason"`
		IdempotencyKey string `msgpack:"idempotencyKey,omitempty"`
		RequestHash    string `msgpack:"requestHash,omitempty"`
	}
	data, err := msgpack.Marshal(&v2{Amount: -5, Reason: "fee", IdempotencyKey: "k", RequestHash: "h"})
	require.NoError(t, err)
	got, err := Decode(storedMessage(t, TreasuryAdjustedV2Name, data))
	require.NoError(t, err)
	assert.Equal(t, &TreasuryAdjusted{Amount: -5, Reason: "fee", IdempotencyKey: "k", RequestHash: "h"}, got[0].Payload)
	assert.Equal(t, TreasuryAdjustedV2Name, got[0].Name)
}

func TestDecode_keyedPayloads(t *testing.T) {
	const key, hash = "retry-1", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	tests := []struct {
		v1, v2 string
		p      Payload
	}{
		{SiteCreatedV1Name, SiteCreatedName, &SiteCreated{SiteID: "s1", Name: "Shop", IdempotencyKey: key, RequestHash: hash}},
		{TreasuryAdjustedV1Name, TreasuryAdjustedName, &TreasuryAdjusted{Amount: 5, Reason: "r", IdempotencyKey: key, RequestHash: hash}},
		{BankCreatedV1Name, BankCreatedName, &BankCreated{BankID: "b1", Code: "ZC", IdempotencyKey: key, RequestHash: hash}},
	}
	for _, tc := range tests {
		t.Run(tc.v2, func(t *testing.T) {
			assert.Equal(t, tc.v2, tc.p.EventName(), "writers emit the newest")
			assert.Regexp(t, `\.v[23]$`, tc.v2)
			assert.Regexp(t, `\.v1$`, tc.v1)

			b, _, err := Seal([32]byte{}, []Event{{Name: tc.p.EventName(), Time: 1, Actor: "op", Payload: tc.p}})
			require.NoError(t, err)
			got, err := Decode(b)
			require.NoError(t, err)
			assert.Equal(t, tc.p, got[0].Payload, "v2 keeps the key and the request hash")

			data, err := msgpack.Marshal(tc.p)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, msgpack.Unmarshal(data, &m))
			assert.Equal(t, key, m["idempotencyKey"], "stored field names never change")
			assert.Equal(t, hash, m["requestHash"])

			// No v1 writer stored a key; a v1 event that holds one
			// answers no repeat.
			got, err = Decode(storedMessage(t, tc.v1, data))
			require.NoError(t, err)
			switch p := got[0].Payload.(type) {
			case *SiteCreated:
				assert.Empty(t, p.IdempotencyKey+p.RequestHash)
			case *TreasuryAdjusted:
				assert.Empty(t, p.IdempotencyKey+p.RequestHash)
			case *BankCreated:
				assert.Empty(t, p.IdempotencyKey+p.RequestHash)
			default:
				t.Fatalf("decoded as %T", p)
			}
		})
	}
}

// site.updated.v1 reads as v2 without Available, and v2 keeps it.
func TestDecode_siteUpdatedV1(t *testing.T) {
	type v1 struct {
		Name          *string `msgpack:"name,omitempty"`
		NegativeLimit *int64  `msgpack:"negativeLimit,omitempty"`
	}
	name, limit, left := "Shop", int64(-500), int64(-20)
	data, err := msgpack.Marshal(&v1{Name: &name, NegativeLimit: &limit})
	require.NoError(t, err)
	got, err := Decode(storedMessage(t, SiteUpdatedV1Name, data))
	require.NoError(t, err)
	assert.Equal(t, &SiteUpdated{Name: &name, NegativeLimit: &limit}, got[0].Payload)
	assert.Equal(t, SiteUpdatedV1Name, got[0].Name, "the stored name is kept: the hash chain covers it")

	// A v1 that held the field anyway says nothing: no v1 writer meant it.
	withLeft, err := msgpack.Marshal(&SiteUpdated{NegativeLimit: &limit, Available: &left})
	require.NoError(t, err)
	got, err = Decode(storedMessage(t, SiteUpdatedV1Name, withLeft))
	require.NoError(t, err)
	assert.Nil(t, got[0].Payload.(*SiteUpdated).Available)

	got, err = Decode(storedMessage(t, SiteUpdatedName, withLeft))
	require.NoError(t, err)
	assert.Equal(t, &SiteUpdated{NegativeLimit: &limit, Available: &left}, got[0].Payload)
	var m map[string]any
	require.NoError(t, msgpack.Unmarshal(withLeft, &m))
	assert.EqualValues(t, left, m["available"], "stored field names never change")
}
