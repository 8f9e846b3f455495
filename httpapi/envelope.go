package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"gateway/aggregates"
	"gateway/events"
	"gateway/ids"
	"gateway/ledger"
	"gateway/projections"
)

// envelope is the shape of every JSON response (seed 2.1, CONTRACT §1).
type envelope struct {
	Data         any    `json:"data"`
	Status       int    `json:"status"`
	Code         string `json:"code,omitempty"`
	Message      string `json:"message,omitempty"`
	Field        string `json:"field,omitempty"`
	ResponseTime string `json:"responseTime"`
	AppVersion   string `json:"app_version"`
	RequestID    string `json:"requestId"`
}

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
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errBad(code, field, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, field: field, message: msg}
}

type ctxKey int

const (
	keyRequest ctxKey = iota
)

// reqInfo travels with a request: its id, start time and the site or
// operator it was authenticated as.
type reqInfo struct {
	id     string
	start  time.Time
	siteID ids.SiteID
	actor  string
}

func info(r *http.Request) *reqInfo {
	if ri, ok := r.Context().Value(keyRequest).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{id: newRequestID(), start: time.Now()}
}

// withRequestID gives every request an id (the caller's Request-Id when it
// is a sane token, so ids can be followed across systems) and echoes it.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Request-Id")
		if !saneID(id) {
			id = newRequestID()
		}
		w.Header().Set("Request-Id", id)
		ri := &reqInfo{id: id, start: time.Now()}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyRequest, ri)))
	})
}

func saneID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// writeData answers 200 with data in the envelope.
func (s *Server) writeData(w http.ResponseWriter, r *http.Request, data any) {
	s.write(w, r, envelope{Data: data, Status: http.StatusOK})
}

// writeErr maps err to the contract's codes and answers in the envelope.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.classify(err)
	ri := info(r)
	lvl := slog.LevelInfo
	if ae.status >= 500 {
		lvl = slog.LevelError
	}
	s.log.Log(r.Context(), lvl, "request refused", "requestId", ri.id, "method", r.Method, "path", r.URL.Path,
		"status", ae.status, "code", ae.code, "site", ri.siteID, "err", err)
	if ae.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
	}
	s.write(w, r, envelope{Status: ae.status, Code: ae.code, Message: ae.message, Field: ae.field})
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, env envelope) {
	ri := info(r)
	env.RequestID = ri.id
	env.AppVersion = s.cfg.AppVersion
	env.ResponseTime = strconv.FormatInt(time.Since(ri.start).Milliseconds(), 10) + "ms"
	b, err := json.Marshal(env)
	if err != nil {
		s.log.Error("encode response", "requestId", ri.id, "err", err)
		env = envelope{Status: http.StatusInternalServerError, Code: "internal", Message: "the response could not be encoded",
			ResponseTime: env.ResponseTime, AppVersion: env.AppVersion, RequestID: env.RequestID}
		b, _ = json.Marshal(env)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(env.Status)
	_, _ = w.Write(append(b, '\n'))
}

// classify maps domain and store errors to the contract's codes.
func (s *Server) classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	field, msg := "", ""
	var fe *aggregates.FieldError
	if errors.As(err, &fe) {
		field, msg = fe.Field, fe.Msg
	}
	pick := func(status int, code, def string) *apiError {
		if msg == "" {
			msg = def
		}
		return &apiError{status: status, code: code, message: msg, field: field, cause: err}
	}
	switch {
	case errors.Is(err, aggregates.ErrInvalidRequest):
		return pick(400, "invalid_request", "the request is invalid")
	case errors.Is(err, aggregates.ErrAmountOutOfRange):
		return pick(400, "amount_out_of_range", "amount is outside the method's limits")
	case errors.Is(err, aggregates.ErrUnknownBank):
		return pick(400, "unknown_bank", "bankId matches no enabled method")
	case errors.Is(err, aggregates.ErrInvalidIdentifier):
		return pick(400, "invalid_identifier", "the recipient identifier does not fit the method")
	case errors.Is(err, aggregates.ErrInsufficientBalance):
		return pick(402, "insufficient_site_balance", "the site treasury cannot cover this withdrawal")
	case errors.Is(err, aggregates.ErrNotFound):
		return pick(404, "not_found", "no such transaction for this site")
	case errors.Is(err, aggregates.ErrSiteNotFound):
		return pick(404, "not_found", "no such site")
	case errors.Is(err, aggregates.ErrIdempotencyConflict):
		return pick(409, "idempotency_key_conflict", "Idempotency-Key was already used with a different body")
	case errors.Is(err, aggregates.ErrProcessIDConflict):
		return pick(409, "process_id_conflict", "processId was already used with different parameters")
	case errors.Is(err, aggregates.ErrInvalidTransition):
		return pick(409, "invalid_transition", "the transaction cannot move that way")
	case errors.Is(err, aggregates.ErrNotDue):
		return pick(409, "invalid_transition", "the deposit has not reached its expiry")
	case errors.Is(err, aggregates.ErrSiteExists), errors.Is(err, aggregates.ErrBankExists):
		return pick(409, "conflict", "it already exists")
	case errors.Is(err, projections.ErrBadCursor):
		return &apiError{status: 400, code: "invalid_request", field: "cursor", message: "cursor is not one this server issued", cause: err}
	case errors.Is(err, events.ErrUnavailable), errors.Is(err, ledger.ErrClosed),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return pick(503, "unavailable", "the event store cannot be reached; repeat the request with the same processId")
	}
	return &apiError{status: 500, code: "internal", message: "internal error; quote the requestId", cause: err}
}
