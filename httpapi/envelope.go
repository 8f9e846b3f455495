package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// envelope is the shape of every JSON response (docs/merchant-api.md "Response envelope").
type envelope struct {
	Data    any    `json:"data"`
	Status  int    `json:"status"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Field   string `json:"field,omitempty"`
	// DocURL is the error code's section of docs/errors.md; DocLink the
	// same as an absolute URL (docs/merchant-api.md "Response envelope").
	// Both are set by encode for every error.
	DocURL       string `json:"docUrl,omitempty"`
	DocLink      string `json:"docLink,omitempty"`
	ResponseTime string `json:"responseTime"`
	AppVersion   string `json:"app_version"`
	RequestID    string `json:"requestId"`
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
	// unmatched: no route matched the path and method (the path is not a
	// label; see observe).
	unmatched bool
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

// writeData answers 200 with data in the envelope; a transaction record
// is hashed for r (answerFor).
func (s *Server) writeData(w http.ResponseWriter, r *http.Request, data any) {
	if rec, ok := data.(records.Record); ok {
		data = answerFor(r, rec)
	}
	s.write(w, r, envelope{Data: data, Status: http.StatusOK})
}

// writeErr maps err to the contract's codes and answers in the envelope.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	ae := classify(err)
	ri := info(r)
	lvl := slog.LevelInfo
	switch {
	case ae.routine:
		lvl = slog.LevelDebug
	case ae.limit:
		lvl = slog.LevelWarn
	case ae.status >= 500:
		lvl = slog.LevelError
	}
	s.log.Log(r.Context(), lvl, "request refused", "method", r.Method, "path", r.URL.Path,
		"status", ae.status, "code", ae.code, "site", ri.siteID, "err", err)
	if ae.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
	}
	s.write(w, r, envelope{Status: ae.status, Code: ae.code, Message: ae.message, Field: ae.field})
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, env envelope) {
	bp := bodyPool.Get().(*[]byte)
	defer bodyPool.Put(bp)
	b, status := s.encode(r, env, (*bp)[:0])
	if cap(b) <= maxPooledBody {
		*bp = b
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// encode appends env to b with what every envelope of r carries (its
// requestId, the app's version, the time taken), and returns it with its
// status: an envelope that cannot be encoded becomes a 500.
func (s *Server) encode(r *http.Request, env envelope, b []byte) ([]byte, int) {
	ri := info(r)
	env.RequestID = ri.id
	env.AppVersion = s.cfg.AppVersion
	env.ResponseTime = strconv.FormatInt(time.Since(ri.start).Milliseconds(), 10) + "ms"
	s.documented(&env)
	out, err := env.appendJSON(b)
	if err != nil {
		s.log.ErrorContext(r.Context(), "encode response", "err", err)
		env = envelope{Status: http.StatusInternalServerError, Code: "internal", Message: "the response could not be encoded",
			ResponseTime: env.ResponseTime, AppVersion: env.AppVersion, RequestID: env.RequestID}
		s.documented(&env)
		out, _ = env.appendJSON(b[:0])
	}
	return out, env.Status
}

// documented links an error's code to its documentation.
func (s *Server) documented(env *envelope) {
	if env.Code != "" {
		env.DocURL, env.DocLink = DocURL(env.Code), s.cfg.DocsURL+"/errors#"+env.Code
	}
}

// bodyPool holds response buffers: the writer copies what it is given, so
// a buffer is free again once Write returns.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledBody keeps a large listing's buffer from being held for good.
const maxPooledBody = 64 << 10

// appendJSON appends the envelope as encoding/json would write it, with a
// record (most answers carry one) written in place.
func (env envelope) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"data":`...)
	switch d := env.Data.(type) {
	case records.Record:
		b = d.AppendJSON(b)
	case records.OpsRecord:
		b = d.AppendJSON(b)
	default:
		j, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		b = append(b, j...)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(env.Status), 10)
	for _, f := range [...]struct{ key, v string }{{"code", env.Code}, {"message", env.Message}, {"field", env.Field}, {"docUrl", env.DocURL}, {"docLink", env.DocLink}} {
		if f.v != "" {
			b = append(b, ',', '"')
			b = append(b, f.key...)
			b = append(b, '"', ':')
			b = records.AppendJSONString(b, f.v)
		}
	}
	b = append(b, `,"responseTime":`...)
	b = records.AppendJSONString(b, env.ResponseTime)
	b = append(b, `,"app_version":`...)
	b = records.AppendJSONString(b, env.AppVersion)
	b = append(b, `,"requestId":`...)
	b = records.AppendJSONString(b, env.RequestID)
	return append(b, '}'), nil
}
