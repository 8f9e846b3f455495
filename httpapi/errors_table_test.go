package httpapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// TestClassify pins what a client sees for every error the packages below
// return, bare, wrapped with context, and carrying its own field and
// message. The HTTP tests (errors_test.go and the others) check the same
// answers end to end; this one covers the errors they cannot provoke.
func TestClassify(t *testing.T) {
	const unavailable = "the event store cannot be reached; repeat the request with the same processId"
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		field  string
		msg    string
	}{
		{"invalid request", aggregates.ErrInvalidRequest, 400, "invalid_request", "", "the request is invalid"},
		{"invalid request with its field", &aggregates.FieldError{Field: "amount", Err: aggregates.ErrInvalidRequest, Msg: "amount must be positive"},
			400, "invalid_request", "amount", "amount must be positive"},
		{"amount out of range", aggregates.ErrAmountOutOfRange, 400, "amount_out_of_range", "", "amount is outside the method's limits"},
		{"unknown bank", aggregates.ErrUnknownBank, 400, "unknown_bank", "", "bankId matches no enabled method"},
		{"invalid identifier", aggregates.ErrInvalidIdentifier, 400, "invalid_identifier", "", "the recipient identifier does not fit the method"},
		{"insufficient balance", aggregates.ErrInsufficientBalance, 402, "insufficient_site_balance", "", "the site treasury cannot cover this withdrawal"},
		{"transaction not found", aggregates.ErrNotFound, 404, "not_found", "", "no such transaction for this site"},
		{"site not found", aggregates.ErrSiteNotFound, 404, "not_found", "", "no such site"},
		{"idempotency conflict", aggregates.ErrIdempotencyConflict, 409, "idempotency_key_conflict", "", "Idempotency-Key was already used with a different body"},
		{"process id conflict", aggregates.ErrProcessIDConflict, 409, "process_id_conflict", "", "processId was already used with different parameters"},
		{"invalid transition", aggregates.ErrInvalidTransition, 409, "invalid_transition", "", "the transaction cannot move that way"},
		{"not due", aggregates.ErrNotDue, 409, "invalid_transition", "", "the deposit has not reached its expiry"},
		{"treasury bound", &aggregates.FieldError{Field: "amount", Err: aggregates.ErrTreasuryBound, Msg: "the balance cannot move that far"},
			409, "conflict", "amount", "the balance cannot move that far"},
		{"treasury bound without its message", aggregates.ErrTreasuryBound, 409, "conflict", "amount", "the balance would leave the treasury's bound of ±9007199254740991 IQD"},
		{"site exists", aggregates.ErrSiteExists, 409, "conflict", "", "it already exists"},
		{"bank exists", aggregates.ErrBankExists, 409, "conflict", "", "it already exists"},
		{"operator not found", &aggregates.FieldError{Field: "id", Err: aggregates.ErrOperatorNotFound, Msg: `no operator with id "op_x"`},
			404, "not_found", "id", `no operator with id "op_x"`},
		{"operator revoked", &aggregates.FieldError{Field: "id", Err: aggregates.ErrOperatorRevoked, Msg: `operator "op_x" is already revoked`},
			409, "conflict", "id", `operator "op_x" is already revoked`},
		{"operator name in use", &aggregates.FieldError{Field: "name", Err: aggregates.ErrOperatorExists, Msg: `an active operator is already named "Omar"`},
			409, "conflict", "name", `an active operator is already named "Omar"`},
		{"operator error without a field names the id", aggregates.ErrOperatorRevoked, 409, "conflict", "id", "the operator is already revoked"},
		{"bad cursor", records.ErrBadCursor, 400, "invalid_request", "cursor", "cursor is not one this server issued"},
		{"callback event not found", &callbacks.Error{Field: "eventId", Err: callbacks.ErrEventNotFound, Msg: `"1-9" is not the id of a callback event`},
			404, "not_found", "eventId", `"1-9" is not the id of a callback event`},
		{"callback site without callbackUrl", &callbacks.Error{Field: "eventId", Err: callbacks.ErrNoCallbackURL, Msg: "the event's site has no callbackUrl"},
			409, "invalid_transition", "eventId", "the event's site has no callbackUrl"},
		{"no callback dispatcher", &callbacks.Error{Err: callbacks.ErrNoDispatcher, Msg: "no callback dispatcher is running"},
			503, "unavailable", "", "no callback dispatcher is running"},
		{"callback dispatcher unreachable", fmt.Errorf("resend 1-0: %w: timeout", callbacks.ErrUnavailable), 503, "unavailable", "", unavailable},
		{"callback status filter", &callbacks.Error{Field: "status", Err: callbacks.ErrInvalidFilter, Msg: "status must be pending, delivered or failed"},
			400, "invalid_request", "status", "status must be pending, delivered or failed"},
		{"callback cursor", callbacks.ErrBadCursor, 400, "invalid_request", "cursor", "cursor is not one this server issued"},
		{"callback cursor of other filters", callbacks.ErrCursorFilters, 400, "invalid_request", "cursor",
			"cursor was issued for other filters: page with the filters of the first page"},
		{"store unavailable", events.ErrUnavailable, 503, "unavailable", "", unavailable},
		{"append outcome unknown, even after a deadline", fmt.Errorf("%w: %w", events.ErrOutcomeUnknown, context.DeadlineExceeded), 504, "outcome_unknown", "",
			"the event store did not confirm whether this request was recorded; repeat it with the same processId (or Idempotency-Key) to get its outcome"},
		{"ledger closed", ledger.ErrClosed, 503, "unavailable", "", unavailable},
		{"deadline", context.DeadlineExceeded, 503, "unavailable", "", unavailable},
		{"cancelled", context.Canceled, 503, "unavailable", "", unavailable},
		{"anything else", errors.New("disk on fire"), 500, "internal", "", "internal error; quote the requestId"},
		{"an answer already made", &apiError{status: 429, code: "rate_limited", message: "slow down", retryAfter: 2}, 429, "rate_limited", "", "slow down"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{tc.err, fmt.Errorf("site s1: %w", tc.err)} {
				ae := classify(err)
				assert.Equal(t, tc.status, ae.status, "%v", err)
				assert.Equal(t, tc.code, ae.code, "%v", err)
				assert.Equal(t, tc.field, ae.field, "%v", err)
				assert.Equal(t, tc.msg, ae.message, "%v", err)
			}
		})
	}
}

// TestErrorTable_noRowShadowed: every row is the one its own error finds,
// so no later row is dead behind an earlier one.
func TestErrorTable_noRowShadowed(t *testing.T) {
	for i, rule := range errorTable {
		ae := classify(rule.err)
		assert.Equal(t, rule.status, ae.status, "row %d (%v)", i, rule.err)
		assert.Equal(t, rule.code, ae.code, "row %d (%v)", i, rule.err)
		assert.Equal(t, rule.message, ae.message, "row %d (%v)", i, rule.err)
		assert.Equal(t, rule.field, ae.field, "row %d (%v)", i, rule.err)
	}
}
