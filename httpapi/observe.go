package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// Metrics receives the measurement of every request (docs/metrics.md
// "HTTP"); the process's metrics package implements it.
type Metrics interface {
	// RequestStarted counts a request in flight until RequestDone.
	RequestStarted()
	// RequestDone observes a finished request by its route pattern, method
	// and status.
	RequestDone(route, method string, status int, took time.Duration)
}

// nopMetrics is the default: a server without metrics measures nothing.
type nopMetrics struct{}

func (nopMetrics) RequestStarted()                                {}
func (nopMetrics) RequestDone(string, string, int, time.Duration) {}

// routeUnmatched labels requests that matched no route, or no route for
// their method: their paths are the caller's to choose, and a label taken
// from them would let anyone create series without end.
const routeUnmatched = "unmatched"

// observe measures every request by the route pattern chi matched (known
// once the request has been routed, that is after next returns), never by
// its path.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := s.cfg.Metrics
		m.RequestStarted()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		start := time.Now()
		// Deferred: an aborted handler (http.ErrAbortHandler) is still
		// counted, and no longer in flight.
		defer func() {
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			m.RequestDone(routeOf(r), methodOf(r.Method), status, time.Since(start))
		}()
		next.ServeHTTP(ww, r)
	})
}

// routeOf is the pattern of the route r matched, or routeUnmatched.
func routeOf(r *http.Request) string {
	if info(r).unmatched {
		return routeUnmatched
	}
	rctx := chi.RouteContext(r.Context())
	if rctx == nil {
		return routeUnmatched
	}
	if p := rctx.RoutePattern(); p != "" {
		return p
	}
	return routeUnmatched
}

// methodOf keeps the methods of HTTP and names any other "other": a method
// is a token the caller chooses.
func methodOf(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// requestLog adds the requestId of the request a record is about (the one
// in the Request-Id header and the envelope) to every record logged with
// that request's context, so that a line can be found from the answer a
// merchant quotes. Only the id is read: it never changes once set, while
// the rest of reqInfo is written as the request goes.
type requestLog struct{ slog.Handler }

func (h requestLog) Handle(ctx context.Context, rec slog.Record) error {
	if ri, ok := ctx.Value(keyRequest).(*reqInfo); ok {
		rec.AddAttrs(slog.String("requestId", ri.id))
	}
	return h.Handler.Handle(ctx, rec)
}

func (h requestLog) WithAttrs(as []slog.Attr) slog.Handler {
	return requestLog{h.Handler.WithAttrs(as)}
}

func (h requestLog) WithGroup(name string) slog.Handler {
	return requestLog{h.Handler.WithGroup(name)}
}
