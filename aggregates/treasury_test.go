package aggregates

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTreasury_Debit pins the treasury rule's two boundaries: a
// reservation must leave more than the negative limit (landing on it is
// refused), an operator's debit may bring the available amount to 0.
func TestTreasury_Debit(t *testing.T) {
	// Available: 100,000 − 30,000 − (−50,000) = 120,000.
	tr := Treasury{Balance: 100_000, PendingWithdrawals: 30_000, NegativeLimit: -50_000}
	assert.Equal(t, int64(120_000), tr.Available())
	for _, c := range []struct {
		name   string
		amount int64
		kind   DebitKind
		left   int64
		ok     bool
	}{
		{"a reservation leaving 1", 119_999, Reservation, 1, true},
		{"a reservation landing on the limit", 120_000, Reservation, 0, false},
		{"a reservation past the limit", 120_001, Reservation, -1, false},
		{"a small reservation", 1, Reservation, 119_999, true},
		{"an operator's debit to 0", 120_000, OperatorDebit, 0, true},
		{"an operator's debit past the limit", 120_001, OperatorDebit, -1, false},
		{"an operator's debit leaving 1", 119_999, OperatorDebit, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			left, ok := tr.Debit(c.amount, c.kind)
			assert.Equal(t, c.left, left)
			assert.Equal(t, c.ok, ok)
		})
	}
	// A treasury already below its limit (a limit tightened, an
	// operator's debit allowed below it) refuses both.
	under := Treasury{Balance: 0, PendingWithdrawals: 10, NegativeLimit: 0}
	_, ok := under.Debit(1, Reservation)
	assert.False(t, ok)
	_, ok = under.Debit(1, OperatorDebit)
	assert.False(t, ok)
}
