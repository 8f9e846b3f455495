package aggregates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gateway/events"
)

// TestAdjustTreasury_belowLimitRecorded: the stored allowBelowLimit says
// the debit took the treasury below its negative limit (docs/events.md
// "treasury.adjusted.v3"), whatever the operator sent; a keyed repeat
// still answers as the first request did.
func TestAdjustTreasury_belowLimitRecorded(t *testing.T) {
	tests := []struct {
		name   string
		amount int64
		allow  bool
		want   bool
	}{
		{"a credit with the flag", 500, true, false},
		{"a debit within the limit with the flag", -6000, true, false},
		{"a debit below the limit with the flag", -6001, true, true},
		{"a debit within the limit without the flag", -6000, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{NegativeLimit: ptr(int64(-1000))})
			f.do(AdjustTreasury{Amount: 5000, Reason: "opening"}) // available 6000
			cmd := AdjustTreasury{Amount: tc.amount, Reason: "r", AllowBelowLimit: tc.allow,
				IdempotencyKey: "adjust-1", RequestHash: hashA}
			d := f.do(cmd)
			require.Len(t, d.Events, 1)
			assert.Equal(t, tc.want, d.Events[0].Payload.(*events.TreasuryAdjusted).AllowBelowLimit)
			first, ok := f.s.KeyedAdjustment("adjust-1")
			require.True(t, ok)

			again, err := f.try(cmd)
			require.NoError(t, err)
			assert.Equal(t, Decision{Tx: -1, Repeat: true}, again)
			a, _ := f.s.KeyedAdjustment("adjust-1")
			assert.Equal(t, first, a)
			assert.Equal(t, 6000+tc.amount, a.Available())
		})
	}
}
