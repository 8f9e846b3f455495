package httpapi

import (
	"log/slog"
	"net/http"
)

// Starting is what a gateway serves until its ledger is open: the process
// is up (/healthz 200) and nothing else is (every other path, /readyz
// included, answers 503 unavailable with a Retry-After), so a load
// balancer keeps it out of rotation and a merchant's retry is told to come
// back, while the gateway waits for its event store (a cluster that is
// forming, without a leader, or unreachable). waiting says what it waits
// for; it is shown in /readyz's message. A request over the header limit
// is refused as the gateway refuses it once started (limitHeaders).
func Starting(appVersion string, log *slog.Logger, waiting func() string) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: Config{AppVersion: appVersion}, log: log}
	return withRequestID(s.limitHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s.writeData(w, r, map[string]string{"status": "ok"})
			return
		}
		// Not written through writeErr: a starting gateway answering 503
		// is expected, not an error to log once per request.
		w.Header().Set("Retry-After", "1")
		s.write(w, r, envelope{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Message: "the gateway is starting: " + waiting() + "; nothing was recorded"})
	})))
}
