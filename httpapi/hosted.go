package httpapi

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/hostedpage"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// hostedPage serves the deposit's payment page (docs/merchant-api.md "Hosted payment page"). It needs no
// login, so it is built to cost nothing to whoever guesses: each client
// address is rate limited, and a token is checked against the state in
// memory before anything is read from the store (records.Reader.Hosted).
// Anything but the exact token of an existing deposit is the page's own
// "not found", which neither confirms nor denies that a transaction exists.
func (s *Server) hostedPage(w http.ResponseWriter, r *http.Request) {
	h := s.hostedRecord(r)
	if h.status != http.StatusOK {
		if h.wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(h.wait))
		}
		s.hostedError(w, r, h.status)
		return
	}
	d := hostedpage.Deposit{Rec: h.rec, StatusURL: "/pay/" + string(h.id) + "/status?t=" + url.QueryEscape(h.tok)}
	if cfg, ok := s.cfg.Ledger.SiteConfig(h.id.Site()); ok {
		d.Merchant, d.ReturnURL, d.Support, d.Sandbox = cfg.Name, cfg.ReturnURL, cfg.SupportContact, cfg.Sandbox
	}
	d.Nonce = newToken()
	pageHeaders(w, d.Nonce)
	if err := s.payPage.Render(w, d); err != nil {
		s.log.ErrorContext(r.Context(), "hosted page", "tx", h.id, "err", err)
	}
}

// hosted is the deposit a hosted page request names.
type hosted struct {
	id  ids.TxID
	tok string
	rec records.Record
	// status is 200, or the error page's: 404 for anything but the exact
	// token of an existing deposit, 429 past the client's rate (wait
	// seconds), 503 when the store does not answer.
	status, wait int
}

// hostedRecord finds the deposit of a hosted page request.
func (s *Server) hostedRecord(r *http.Request) hosted {
	ip, err := s.clientIP(r)
	if err != nil {
		// A trusted proxy sent an X-Forwarded-For nobody can read.
		return hosted{status: http.StatusNotFound}
	}
	if ok, wait := s.limiter.allow(clientKey(ip), s.cfg.HostedRateLimit); !ok {
		return hosted{status: http.StatusTooManyRequests, wait: wait}
	}
	id, err := ids.ParseTx(chi.URLParam(r, "txId"))
	tok := r.URL.Query().Get("t")
	if err != nil || tok == "" || len(tok) > 64 {
		return hosted{status: http.StatusNotFound}
	}
	rec, err := s.cfg.Reader.Hosted(r.Context(), id, tok)
	if err != nil {
		if !errors.Is(err, aggregates.ErrNotFound) {
			s.log.WarnContext(r.Context(), "hosted page", "tx", id, "err", err)
			return hosted{status: http.StatusServiceUnavailable}
		}
		return hosted{status: http.StatusNotFound}
	}
	return hosted{id: id, tok: tok, rec: rec, status: http.StatusOK}
}

// hostedState is what the page polls for.
type hostedState struct {
	Status string `json:"status"`
	Amount int64  `json:"amount"`
	// AmountText is the amount as the page writes it, in its language.
	AmountText string `json:"amountText"`
}

// hostedStatus serves GET /pay/{txId}/status?t=: the deposit's status and
// amount, which the page asks for every few seconds while it is pending.
func (s *Server) hostedStatus(w http.ResponseWriter, r *http.Request) {
	h := s.hostedRecord(r)
	w.Header().Set("Cache-Control", "no-store")
	switch h.status {
	case http.StatusOK:
		// The amount too: an operator may approve the amount actually
		// received, and the page then shows it without a reload.
		s.writeData(w, r, hostedState{Status: h.rec.Status, Amount: h.rec.Amount, AmountText: s.payPage.AmountText(h.rec)})
	case http.StatusTooManyRequests:
		s.writeErr(w, r, &apiError{status: h.status, code: "rate_limited", message: "too many requests", retryAfter: h.wait})
	case http.StatusServiceUnavailable:
		s.writeErr(w, r, &apiError{status: h.status, code: "unavailable", message: "the status cannot be read right now"})
	default:
		s.writeErr(w, r, &apiError{status: http.StatusNotFound, code: "not_found", message: "no such payment page"})
	}
}

// pageHeaders are the hosted pages' headers: never cached, never framed,
// no referrer leaking the token, styles only inline, and no script but the
// page's own, which carries nonce ("" for a page without a script): one
// escaping slip that let a merchant's text into the page would still not
// run.
func pageHeaders(w http.ResponseWriter, nonce string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	script := "'none'"
	if nonce != "" {
		script = "'nonce-" + nonce + "'"
	}
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src "+script+"; connect-src 'self'; base-uri 'none'; form-action 'none'")
}

// hostedError answers one of the hosted page's error pages, in the language
// the browser asks for: the deposit's own language is unknown (or must not
// be revealed) here.
func (s *Server) hostedError(w http.ResponseWriter, r *http.Request, status int) {
	pageHeaders(w, "")
	w.WriteHeader(status)
	if err := s.payPage.RenderError(w, status, hostedpage.PickLang(r)); err != nil {
		s.log.ErrorContext(r.Context(), "hosted error page", "err", err)
	}
}

// clientKey is the rate-limit key of a client address: an IPv6 client gets
// a /64 (one subscriber's whole network), an IPv4 one its address.
func clientKey(ip netip.Addr) string {
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return "ip:" + p.String()
	}
	return "ip:" + ip.String()
}
