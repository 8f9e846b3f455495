package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// apiError is an error with its contract code and HTTP status.
type apiError struct {
	status  int
	code    string
	message string
	field   string
	// retryAfter is set for 429 (seconds).
	retryAfter int
	// cause is logged, never shown.
	cause error
	// routine marks an answer that is part of the normal course, such as
	// a readiness probe's 503 while the gateway starts: logged at Debug,
	// where every other 5xx is an Error.
	routine bool
	// limit marks a 5xx that is a configured limit of this process
	// reached, not a fault: logged at Warn, for the operator to raise it.
	limit bool
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// DocURL is where an error code is explained (docs/errors.md).
func DocURL(code string) string { return "docs/errors.md#" + code }

func errBad(code, field, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, field: field, message: msg}
}

// errorRule is one row of the error table: an error the packages below
// return, and the answer a client gets for it.
type errorRule struct {
	// err is matched with errors.Is.
	err    error
	status int
	code   string
	// field and message are the defaults for an error that does not carry
	// its own (see fieldOf).
	field, message string
}

// errorTable maps the domain's, the store's and the dispatcher's errors
// to the contract's codes; the first row whose error matches wins. It is
// the only place where an error becomes a status, so that every handler
// answers a refusal alike. It is never modified.
var errorTable = []errorRule{
	{aggregates.ErrInvalidRequest, 400, "invalid_request", "", "the request is invalid"},
	{aggregates.ErrAmountOutOfRange, 400, "amount_out_of_range", "", "amount is outside the method's limits"},
	{aggregates.ErrUnknownBank, 400, "unknown_bank", "", "bankId matches no enabled method"},
	{aggregates.ErrInvalidIdentifier, 400, "invalid_identifier", "", "the recipient identifier does not fit the method"},
	{aggregates.ErrInsufficientBalance, 402, "insufficient_site_balance", "", "the site treasury cannot cover this withdrawal"},
	{aggregates.ErrNotFound, 404, "not_found", "", "no such transaction for this site"},
	{aggregates.ErrSiteNotFound, 404, "not_found", "", "no such site"},
	{aggregates.ErrIdempotencyConflict, 409, "idempotency_key_conflict", "", "Idempotency-Key was already used with a different body"},
	{aggregates.ErrProcessIDConflict, 409, "process_id_conflict", "", "processId was already used with different parameters"},
	{aggregates.ErrInvalidTransition, 409, "invalid_transition", "", "the transaction cannot move that way"},
	{aggregates.ErrNotDue, 409, "invalid_transition", "", "the deposit has not reached its expiry"},
	{aggregates.ErrBelowLimit, 409, "conflict", "amount", "the adjustment would take the treasury below its negative limit"},
	{aggregates.ErrTreasuryBound, 409, "conflict", "amount", "the balance would leave the treasury's bound of ±9007199254740991 IQD"},
	{aggregates.ErrSandboxTransaction, 409, "invalid_transition", "", "a sandbox site's transactions move only by its merchant's sandbox calls (/v1/sandbox), never by an operator"},
	{aggregates.ErrNotSandbox, 403, "forbidden", "", "this is not a sandbox site: only an operator moves its transactions"},
	{aggregates.ErrNeedsAdmin, 403, "forbidden", "", "this needs the admin role"},
	{aggregates.ErrSiteExists, 409, "conflict", "", "it already exists"},
	{aggregates.ErrBankExists, 409, "conflict", "", "it already exists"},
	{aggregates.ErrOperatorNotFound, 404, "not_found", "id", "no such operator"},
	{aggregates.ErrOperatorRevoked, 409, "conflict", "id", "the operator is already revoked"},
	{aggregates.ErrOperatorExists, 409, "conflict", "id", "it already exists"},
	{records.ErrBadCursor, 400, "invalid_request", "cursor", "cursor is not one this server issued"},
	{records.ErrCursorFilters, 400, "invalid_request", "cursor", "cursor was issued for other filters or the other order: page with the filters and order of the first page"},
	{callbacks.ErrEventNotFound, 404, "not_found", "eventId", "no such callback event"},
	{callbacks.ErrNoCallbackURL, 409, "invalid_transition", "eventId", "the event's site has no callbackUrl"},
	{callbacks.ErrNoDispatcher, 503, "unavailable", "", "no callback dispatcher is running (a gateway with callbacks on, or 'gateway callbacks'); try again once one is"},
	{callbacks.ErrUnavailable, 503, "unavailable", "", msgUnavailable},
	{callbacks.ErrInvalidFilter, 400, "invalid_request", "", "the request is invalid"},
	{callbacks.ErrBadCursor, 400, "invalid_request", "cursor", "cursor is not one this server issued"},
	{callbacks.ErrCursorFilters, 400, "invalid_request", "cursor", "cursor was issued for other filters: page with the filters of the first page"},
	{events.ErrOutcomeUnknown, 504, "outcome_unknown", "", "the event store did not confirm whether this request was recorded; " +
		"repeat it with the same processId (or Idempotency-Key) to get its outcome"},
	{events.ErrHistoryLost, 503, "unavailable", "", "this transaction's stored history cannot be read: a message is missing from the event store (the operators are told); nothing was recorded"},
	{events.ErrUnavailable, 503, "unavailable", "", msgUnavailable},
	{ledger.ErrClosed, 503, "unavailable", "", msgUnavailable},
	{context.DeadlineExceeded, 503, "unavailable", "", msgUnavailable},
	{context.Canceled, 503, "unavailable", "", msgUnavailable},
}

// msgUnavailable answers every outage: the merchant's repeat with the same
// processId is safe (docs/merchant-api.md "Unavailable and internal errors").
const msgUnavailable = "the event store cannot be reached; repeat the request with the same processId"

// classify maps err to the answer a client gets: an *apiError as it is,
// else the first matching row of errorTable, else a 500 that shows nothing
// of err (it is logged).
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	field, msg := fieldOf(err)
	for _, rule := range errorTable {
		if !errors.Is(err, rule.err) {
			continue
		}
		if field == "" {
			field = rule.field
		}
		if msg == "" {
			msg = rule.message
		}
		return &apiError{status: rule.status, code: rule.code, message: msg, field: field, cause: err}
	}
	return &apiError{status: 500, code: "internal", message: "internal error; quote the requestId", cause: err}
}

// fieldOf returns the request field an error concerns and its message,
// safe to show, when it carries them ("" otherwise).
func fieldOf(err error) (field, msg string) {
	var fe *aggregates.FieldError
	if errors.As(err, &fe) {
		return fe.Field, fe.Msg
	}
	var ce *callbacks.Error
	if errors.As(err, &ce) {
		return ce.Field, ce.Msg
	}
	return "", ""
}
