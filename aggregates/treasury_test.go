package aggregates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
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

// TestTreasuryBound: no adjustment or approval takes a balance beyond
// ±MaxBalance, where its sums would no longer be exact (and int64 would
// eventually wrap around); up to the bound is taken, and a refusal changes
// nothing.
func TestTreasuryBound(t *testing.T) {
	const step = 1 << 50
	tests := []struct {
		name    string
		balance int64
		cmd     func(f *fixture) Command
		refused bool
	}{
		{"a credit up to the bound", MaxBalance - step, func(*fixture) Command { return AdjustTreasury{Amount: step, Reason: "r"} }, false},
		{"a credit past the bound", MaxBalance - step + 1, func(*fixture) Command { return AdjustTreasury{Amount: step, Reason: "r"} }, true},
		{"a credit at the bound", MaxBalance, func(*fixture) Command { return AdjustTreasury{Amount: 1, Reason: "r"} }, true},
		{"a debit down to the bound", -MaxBalance + step, func(*fixture) Command {
			return AdjustTreasury{Amount: -step, Reason: "r", AllowBelowLimit: true}
		}, false},
		{"a debit past the bound", -MaxBalance + step - 1, func(*fixture) Command {
			return AdjustTreasury{Amount: -step, Reason: "r", AllowBelowLimit: true}
		}, true},
		{"a debit back from past the bound", MaxBalance + 5, func(*fixture) Command { return AdjustTreasury{Amount: -step, Reason: "r"} }, false},
		{"a debit that paying a pending withdrawal would take past the bound", 1_000_000, func(f *fixture) Command {
			f.withdraw("w1", "u1", 5000)
			f.s.Balance = -MaxBalance + step + 2500 // within the bound until the 5,000 are paid
			return AdjustTreasury{Amount: -step, Reason: "r", AllowBelowLimit: true}
		}, true},
		{"an approval up to the bound", MaxBalance - 5000, func(f *fixture) Command {
			return ApproveDeposit{TxID: tx(f.deposit("p1", "u1", 5000))}
		}, false},
		{"an approval past the bound", MaxBalance - 4999, func(f *fixture) Command {
			return ApproveDeposit{TxID: tx(f.deposit("p1", "u1", 5000))}
		}, true},
		{"an approval of a larger amount past the bound", MaxBalance - 6000, func(f *fixture) Command {
			return ApproveDeposit{TxID: tx(f.deposit("p1", "u1", 5000)), Amount: 6001}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.s.Balance = tc.balance
			cmd := tc.cmd(f)
			before := observe(f.s)
			d, err := f.try(cmd)
			if !tc.refused {
				require.NoError(t, err)
				commitEvents(t, f.s, d.Events)
				assert.LessOrEqual(t, f.s.Balance, int64(MaxBalance+5))
				assert.GreaterOrEqual(t, f.s.Balance, int64(-MaxBalance))
				return
			}
			requireErr(t, d, err, ErrTreasuryBound, "amount")
			assert.Equal(t, before, observe(f.s))
		})
	}
}

// TestCheckText_invisibleIsBlank: a required text of nothing but white
// space and invisible format characters is missing; those characters
// inside a text are kept (a zero-width non-joiner is spelling).
func TestCheckText_invisibleIsBlank(t *testing.T) {
	for _, v := range []string{"", " ", "\u200b", "\u200b \u2060", "\ufeff", "\u202e", "\u00a0\u200d",
		"\u3164", "\u115f\u1160", "\uffa0", "\u2800", "\u034f", "\ufe0f", " \u3164 "} {
		err := checkText("reason", v, maxTextLen)
		require.ErrorIs(t, err, ErrInvalidRequest, "%q", v)
		assert.Contains(t, err.Error(), "reason is required", "%q", v)
	}
	for _, v := range []string{"no transfer", "می\u200cخواهم", "a\u200bb", "김민준", "⠁", "a\u034fb"} {
		assert.NoError(t, checkText("reason", v, maxTextLen), "%q", v)
	}
}

// TestTreasuryBound_available: the available amount (the balance above the
// negative limit) stays within MaxBalance too, so that every figure of the
// treasury is exact: a credit past it is refused, and so is a negative
// limit that would put it past.
func TestTreasuryBound_available(t *testing.T) {
	limit := int64(-1_000_000)
	f := newFixture(t, SiteSettings{NegativeLimit: &limit})
	f.s.Balance = MaxBalance - 1_000_000 - 10
	before := observe(f.s)
	d, err := f.try(AdjustTreasury{Amount: 11, Reason: "r"})
	requireErr(t, d, err, ErrTreasuryBound, "amount")
	assert.Equal(t, before, observe(f.s))
	f.do(AdjustTreasury{Amount: 10, Reason: "r"})
	assert.Equal(t, int64(MaxBalance), f.s.Available())

	deeper := int64(-1_000_001)
	d, err = f.try(UpdateSite{Settings: SiteSettings{NegativeLimit: &deeper}})
	requireErr(t, d, err, ErrTreasuryBound, "negativeLimit")
	shallower := int64(-5)
	f.do(UpdateSite{Settings: SiteSettings{NegativeLimit: &shallower}})
	assert.Equal(t, int64(MaxBalance-1_000_000+5), f.s.Available())
}
