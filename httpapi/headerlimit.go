package httpapi

import (
	"fmt"
	"net/http"
	"strings"
)

// MaxHeader is the largest request line plus headers a request may have
// (docs/errors.md#headers_too_large).
const MaxHeader = 64 << 10

// ServerMaxHeaderBytes is the http.Server's MaxHeaderBytes for this
// handler. net/http answers a request over its own limit in plain text,
// before any handler runs, and enforces it only roughly (a few KiB of
// buffering pass); set above MaxHeader, it refuses only requests far past
// it, and limitHeaders answers the rest exactly and in the envelope. It is
// also what one request's headers may hold in memory while they are read,
// so it is not set higher than that needs.
const ServerMaxHeaderBytes = 4 * MaxHeader

// headerSize is the size of r's request line and header lines as sent
// with one space after each colon, each with its CRLF, not counting the
// blank line that ends them: what net/http's limit counts, near enough
// (the Host header, which net/http takes out of the map, included).
func headerSize(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + 2 + len(v) + 2
		}
	}
	return n
}

// limitHeaders refuses a request whose request line and headers are over
// MaxHeader before anything else reads them: 431 headers_too_large, in the
// envelope (the hosted page's own HTML page for a browser on a payment
// link), and the connection closed, as net/http would close it.
func (s *Server) limitHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := headerSize(r)
		if n <= MaxHeader {
			next.ServeHTTP(w, r)
			return
		}
		// Not through writeErr: its log line would carry the whole path,
		// which may be a quarter of a mebibyte here.
		s.log.InfoContext(r.Context(), "request refused", "method", clip(r.Method), "path", clip(r.URL.Path),
			"status", http.StatusRequestHeaderFieldsTooLarge, "code", errHeadersTooLarge.code, "headerBytes", n)
		w.Header().Set("Connection", "close")
		if hostedPagePath(r.URL.Path) {
			s.hostedError(w, r, http.StatusRequestHeaderFieldsTooLarge)
			return
		}
		s.write(w, r, envelope{Status: errHeadersTooLarge.status, Code: errHeadersTooLarge.code, Message: errHeadersTooLarge.message})
	})
}

var errHeadersTooLarge = &apiError{status: http.StatusRequestHeaderFieldsTooLarge, code: "headers_too_large",
	message: fmt.Sprintf("the request line and headers are over %d KiB", MaxHeader>>10)}

// hostedPagePath reports whether path answers HTML, as a browser on a
// payment link expects: every /pay path (the router's "not found" there is
// the page's own) but the status that the page itself polls.
func hostedPagePath(path string) bool {
	if path != "/pay" && !strings.HasPrefix(path, "/pay/") {
		return false
	}
	rest := strings.TrimPrefix(path, "/pay/")
	id, tail, ok := strings.Cut(rest, "/")
	return !ok || id == "" || tail != "status"
}

// clip shortens a caller's text for a log line.
func clip(s string) string {
	const limit = 256
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}
