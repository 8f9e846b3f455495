package callbacks

import "errors"

// Errors of the operator calls, List and Resend. They are this package's
// own: httpapi maps each to a status, so no error of another package is
// wrapped here to borrow its status. The refusals reach the caller inside
// an *Error, which names the request field and says what is wrong.
var (
	// ErrEventNotFound means the id names no final-state event of a site.
	ErrEventNotFound = errors.New("no such callback event")
	// ErrNoCallbackURL means the event's site has no callbackUrl to resend
	// to.
	ErrNoCallbackURL = errors.New("the site has no callbackUrl")
	// ErrNoDispatcher means no process is delivering callbacks right now,
	// so a resend has nowhere to run.
	ErrNoDispatcher = errors.New("no callback dispatcher is running")
	// ErrUnavailable means the delivery state or the active dispatcher
	// could not be reached in time.
	ErrUnavailable = errors.New("callback dispatcher unavailable")
	// ErrInvalidFilter means a listing filter has a value it cannot take.
	ErrInvalidFilter = errors.New("invalid callback filter")
	// ErrBadCursor means a listing cursor that List did not issue.
	ErrBadCursor = errors.New("invalid callback cursor")
	// ErrCursorFilters means a listing cursor List issued for other
	// filters.
	ErrCursorFilters = errors.New("callback cursor of other filters")
)

// Error is a refused operator call: one of the errors above, the request
// field it concerns ("" for none) and a message safe to show the operator.
type Error struct {
	// Err is one of the sentinel errors above.
	Err error
	// Field is the request field as the operator sent it (eventId, status).
	Field string
	// Msg explains the refusal; it holds nothing the operator did not send.
	Msg string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Unwrap lets errors.Is match the sentinel.
func (e *Error) Unwrap() error { return e.Err }
