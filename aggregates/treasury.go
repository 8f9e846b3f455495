package aggregates

// Treasury is what the treasury rule reads: a site's balance, the
// withdrawals reserved from it until they are paid or rejected, and its
// negative limit (at most 0).
type Treasury struct {
	Balance, PendingWithdrawals, NegativeLimit int64
}

// DebitKind says which boundary of the treasury rule a debit meets.
type DebitKind uint8

// Debit kinds.
const (
	// Reservation is a withdrawal's: it must leave the balance above the
	// negative limit; landing exactly on it is refused (seed 8).
	Reservation DebitKind = iota
	// OperatorDebit is a treasury adjustment's: it may bring the
	// available amount to 0, and below only when the operator says so
	// (the caller's decision, with what Debit says is left).
	OperatorDebit
	// LimitChange is a change of the negative limit, a debit of (new
	// limit − old limit) from what is available, a credit when the limit
	// is loosened. It is always allowed: tightening the limit below what
	// is already reserved is how an operator stops payouts at once, and
	// what it leaves (negative then) is what its event and answer say.
	LimitChange
)

// Available is balance − pending withdrawals − negative limit: what is
// left to reserve or debit.
func (t Treasury) Available() int64 {
	return t.Balance - t.PendingWithdrawals - t.NegativeLimit
}

// Debit is the treasury rule, the one place it is written
// (docs/merchant-api.md "Treasury rule"; docs/ARCHITECTURE.md "Where each
// invariant is enforced"): it returns what would be left available once
// amount (positive) is taken off, and whether the rule allows it for a
// debit of kind k.
func (t Treasury) Debit(amount int64, k DebitKind) (left int64, ok bool) {
	left = t.Available() - amount
	switch k {
	case Reservation:
		return left, left > 0
	case LimitChange:
		return left, true
	}
	return left, left >= 0
}
