package aggregates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
)

// TestTreasury_Debit pins the treasury rule's boundaries: a reservation
// must leave more than the negative limit (landing on it is refused), an
// operator's debit may bring the available amount to 0, and a change of
// the limit is always taken, saying what it leaves.
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
		// A limit change debits (new − old limit): from −50,000 to
		// −20,000 takes 30,000 off; to −200,000 gives 150,000 back.
		{"a limit tightened, still above what is reserved", 30_000, LimitChange, 90_000, true},
		{"a limit tightened to exactly what is reserved", 120_000, LimitChange, 0, true},
		{"a limit tightened below what is reserved", 150_000, LimitChange, -30_000, true},
		{"a limit loosened", -150_000, LimitChange, 270_000, true},
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

// TestUpdateSite_negativeLimitSaysWhatIsLeft: a change of the negative
// limit goes through the treasury rule (LimitChange): it is taken even
// below what is reserved, its event says what is left available, and a
// withdrawal is then refused until room is made again.
func TestUpdateSite_negativeLimitSaysWhatIsLeft(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit int64
		left  int64
	}{
		// Balance 1,000, pending 1,200, limit −500: available 300.
		{"loosened", -2_000, 1_800},
		{"tightened", -400, 200},
		{"tightened to what is reserved", -200, 0},
		{"tightened below what is reserved", 0, -200},
		{"unchanged", -500, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{NegativeLimit: ptr(int64(-500))})
			f.fund(1_000)
			f.withdraw("w0", "u0", 1_200)
			require.Equal(t, int64(300), f.s.Available())

			d := f.do(UpdateSite{Settings: SiteSettings{NegativeLimit: ptr(c.limit)}})
			require.Len(t, d.Events, 1)
			p := d.Events[0].Payload.(*events.SiteUpdated)
			require.NotNil(t, p.Available)
			assert.Equal(t, c.left, *p.Available)
			assert.Equal(t, c.left, f.s.Available(), "the event says what the site now has")

			_, err := f.try(f.wdReq("w1", "u1", max(c.left, 1)))
			assert.ErrorIs(t, err, ErrInsufficientBalance, "landing on the new limit, or past it, is refused")
			if c.left > 1 {
				_, err := f.try(f.wdReq("w1", "u1", c.left-1))
				assert.NoError(t, err)
			}
		})
	}
	// A change that leaves the limit alone says nothing of the treasury.
	f := newFixture(t, SiteSettings{})
	d := f.do(UpdateSite{Settings: SiteSettings{Name: ptr("N")}})
	assert.Nil(t, d.Events[0].Payload.(*events.SiteUpdated).Available)
}
