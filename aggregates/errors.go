package aggregates

import (
	"errors"
	"fmt"
)

// Domain errors. The HTTP layer maps them to the contract's codes with
// errors.Is; nothing here knows about HTTP.
var (
	ErrInvalidRequest   = errors.New("invalid request")
	ErrAmountOutOfRange = errors.New("amount out of range")
	ErrUnknownBank      = errors.New("unknown bank")
	// ErrBelowLimit refuses a treasury adjustment that would take the
	// treasury below its negative limit without being told to.
	ErrBelowLimit = errors.New("below the negative limit")
	// ErrTreasuryBound refuses a move that would take a site's balance
	// beyond ±MaxBalance.
	ErrTreasuryBound = errors.New("beyond the treasury's bound")
	// ErrNeedsAdmin refuses a move that only an administrator may make
	// (approving far more than a deposit asked for).
	ErrNeedsAdmin = errors.New("needs the admin role")
	// ErrNotSandbox refuses a sandbox-only action on a live site.
	ErrNotSandbox = errors.New("not a sandbox site")
	// ErrSandboxTransaction refuses an operator's action on a sandbox
	// site's transaction: paying a test withdrawal would send real money.
	ErrSandboxTransaction  = errors.New("a sandbox site's transaction moves only by its merchant")
	ErrInvalidIdentifier   = errors.New("invalid identifier")
	ErrNotFound            = errors.New("transaction not found")
	ErrProcessIDConflict   = errors.New("processId reused with different parameters")
	ErrInsufficientBalance = errors.New("insufficient site balance")
	ErrInvalidTransition   = errors.New("invalid transition")
	ErrNotDue              = errors.New("deposit has not reached its expiry")
	ErrSiteExists          = errors.New("site already exists")
	ErrSiteNotFound        = errors.New("site not found")
	ErrBankExists          = errors.New("bank code already exists")
	// ErrIdempotencyConflict refuses an operator write whose
	// Idempotency-Key was already used with a different request body.
	ErrIdempotencyConflict = errors.New("idempotency key already used with a different request")
	// ErrForeignEvent refuses a stored message that is not the aggregate's.
	ErrForeignEvent = errors.New("event does not belong to this aggregate")
)

// FieldError ties a refusal to the request field that caused it, and
// carries its explanation.
type FieldError struct {
	// Field is the request field name as the merchant sent it; "" for a
	// refusal no field of the request is to blame for (a transition the
	// transaction's status does not allow).
	Field string
	// Err is one of the sentinel errors above.
	Err error
	// Msg is a human explanation, safe to show to the merchant.
	Msg string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Msg)
}

// Unwrap lets errors.Is match the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field string, err error, format string, args ...any) error {
	return &FieldError{Field: field, Err: err, Msg: fmt.Sprintf(format, args...)}
}
