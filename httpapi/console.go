package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/console"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/matching"
	"github.com/iqdgateway/gateway/records"
)

// sessionCookie holds a signed-in operator's token (docs/console.md
// "Sessions"), base64url-encoded: HttpOnly, SameSite=Strict, Secure when
// the console is reached over HTTPS, and a session cookie (gone when the
// browser closes).
const sessionCookie = "gw_console"

// sessionValue is the session cookie's value for tok. A token may hold
// any character but white space at its ends (the operator API asks only
// for 32 of them), and net/http drops or quotes those a cookie value
// cannot hold (; " \ , and spaces): encoded, every valid token signs in.
func sessionValue(tok string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tok))
}

// sessionToken is the token of r's session cookie, "" when there is none
// or it is not one this console wrote (a cookie of the former, unencoded
// format is signed out).
func sessionToken(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	tok, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return ""
	}
	return string(tok)
}

// csrfHeader carries the page's CSRF token on the script's calls; forms
// carry it in the csrf field.
const csrfHeader = "X-CSRF-Token"

// consoleRoutes serves the operator console under /console.
func (s *Server) consoleRoutes(r chi.Router) {
	r.Use(consoleHeaders)
	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/deposits", http.StatusSeeOther)
	})
	r.Get("/static/*", s.consoleStatic(console.Static()))
	r.Get("/login", s.consoleLoginPage)
	r.Post("/login", s.consoleLogin)
	r.Post("/logout", s.consoleLogout)
	r.Group(func(r chi.Router) {
		r.Use(s.consoleSession)
		r.Get("/deposits", s.consoleTransactions("deposit"))
		r.Get("/withdrawals", s.consoleTransactions("withdrawal"))
		r.Get("/match", s.consoleMatch)
		r.Post("/match", s.consoleMatch)
		r.Get("/treasuries", s.consoleTreasuries)
		r.Get("/callbacks", s.consoleCallbacks)
		r.Get("/tx/{id}", s.consoleTx)
	})
	// The script's actions are the operator API's own routes, with the
	// session cookie for the bearer token and the CSRF token checked.
	// Its refusals are the API's JSON, a path it does not have included.
	r.Route("/api", func(r chi.Router) {
		r.Use(s.consoleAPI)
		r.NotFound(s.apiNotFound)
		r.MethodNotAllowed(s.notAllowed)
		s.opsRoutes(r)
	})
	// A page the console does not have is the console's page saying so,
	// not the API's JSON (set after /api, which keeps its own).
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		info(r).unmatched = true
		s.consoleError(w, r, http.StatusNotFound, "there is no such page in the console")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		info(r).unmatched = true
		allowed := s.allowed(r)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.consoleError(w, r, http.StatusMethodNotAllowed, r.Method+" is not allowed here; the methods are "+strings.Join(allowed, ", "))
	})
}

// apiNotFound is the router's own 404 for a path the operator API under
// /console/api does not have.
func (s *Server) apiNotFound(w http.ResponseWriter, r *http.Request) {
	info(r).unmatched = true
	s.writeErr(w, r, &apiError{status: 404, code: "not_found", message: "no such endpoint"})
}

// consoleStatic serves the console's script and style sheet, to anyone:
// files only, never a listing of the folder.
func (s *Server) consoleStatic(files fs.FS) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "*")
		if st, err := fs.Stat(files, name); name == "" || err != nil || st.IsDir() {
			s.consoleError(w, r, http.StatusNotFound, "there is no such file in the console")
			return
		}
		http.ServeFileFS(w, r, files, name)
	}
}

// consoleHeaders: never cached, never framed, scripts and styles only from
// the console itself.
func consoleHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if !strings.HasPrefix(r.URL.Path, "/console/static/") {
			h.Set("Cache-Control", "no-store")
		}
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		next.ServeHTTP(w, r)
	})
}

// session is the signed-in operator of a console request.
type session struct {
	who  caller
	csrf string
}

type sessionKey struct{}

func sessionOf(r *http.Request) session {
	ss, _ := r.Context().Value(sessionKey{}).(session)
	return ss
}

// csrfToken is the session's CSRF token: an HMAC of the session's token,
// which a page from another site cannot read or compute.
func csrfToken(tok string) string {
	m := hmac.New(sha256.New, []byte(tok))
	m.Write([]byte("console csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// resolveSession reads the session cookie.
func (s *Server) resolveSession(r *http.Request) (caller, string, error) {
	tok := sessionToken(r)
	if tok == "" {
		return caller{}, "", nil
	}
	who, err := s.authenticate(r, tok)
	return who, tok, err
}

// consoleSession lets a signed-in operator through and sends anyone else
// to the sign-in page. The role is set as opsAuth sets it, so the
// operator API's checks apply unchanged.
func (s *Server) consoleSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, tok, err := s.resolveSession(r)
		if err != nil {
			s.consoleError(w, r, http.StatusServiceUnavailable, err.Error())
			return
		}
		if who.actor == "" {
			if r.URL.Query().Get("fragment") != "" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		info(r).actor = who.actor
		ctx := context.WithValue(r.Context(), roleKey{}, who.role)
		ctx = context.WithValue(ctx, sessionKey{}, session{who: who, csrf: csrfToken(tok)})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// sameOrigin refuses a request another site's page sent: a browser names
// the sender in Sec-Fetch-Site or Origin.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	return true
}

// checkCSRF checks a state-changing console request: same origin, and the
// session's CSRF token in the header or the form.
func checkCSRF(r *http.Request, want string) bool {
	if !sameOrigin(r) {
		return false
	}
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// consoleAPI turns the session cookie into the operator API's bearer token
// after checking the CSRF token of every call that is not a read.
func (s *Server) consoleAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := sessionToken(r)
		if tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ops"`)
			s.writeErr(w, r, &apiError{status: 401, code: "unauthorized", message: "sign in to the console first"})
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !checkCSRFHeader(r, csrfToken(tok)) {
			s.writeErr(w, r, &apiError{status: 403, code: "forbidden", message: "the console's CSRF token is missing or wrong: reload the page"})
			return
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		next.ServeHTTP(w, r)
	})
}

// checkCSRFHeader is checkCSRF for JSON calls: the token only in the
// header (the body is the operator API's to read).
func checkCSRFHeader(r *http.Request, want string) bool {
	got := r.Header.Get(csrfHeader)
	return sameOrigin(r) && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// secure reports whether the console is reached over HTTPS.
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(s.cfg.Reader.PublicURL(), "https://")
}

func (s *Server) page(r *http.Request, nav, titleKey string, body any) console.Page {
	lang := console.PickLang(r)
	ss := sessionOf(r)
	q := r.URL.Query()
	q.Del("lang")
	q.Del("fragment")
	who := console.Who{Name: ss.who.name, Role: string(ss.who.role),
		CanAct: ss.who.role.Allows(aggregates.RoleOperator), IsAdmin: ss.who.role.Allows(aggregates.RoleAdmin)}
	return console.NewPage(lang, who, ss.csrf, nav, titleKey, q.Encode(), body)
}

// render writes a console page; a chosen language is kept in a cookie.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p console.Page) {
	if l := r.URL.Query().Get("lang"); l != "" {
		http.SetCookie(w, &http.Cookie{Name: console.LangCookie, Value: p.Lang, Path: "/console", MaxAge: 365 * 24 * 3600,
			HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteStrictMode})
	}
	var b bytes.Buffer
	var err error
	switch fragment := r.URL.Query().Get("fragment"); {
	case fragment == "":
		err = console.Render(&b, name, p)
	case fragment == "rows" && console.HasRows(name):
		err = console.RenderRows(&b, name, p)
	default:
		// A hand-made URL, not a fault: said plainly, and not logged as
		// an error.
		http.Error(w, fmt.Sprintf("this page has no fragment %q", fragment), http.StatusNotFound)
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "console page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (s *Server) consoleError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.consoleFail(w, r, status, &console.Failure{Code: consoleErrorCode(status), Message: msg})
}

// consoleErrPage answers with an error page stating err.
func (s *Server) consoleErrPage(w http.ResponseWriter, r *http.Request, err error) {
	status, f := s.consoleFailure(r, err)
	s.consoleFail(w, r, status, f)
}

// consoleFail answers with an error page stating f.
func (s *Server) consoleFail(w http.ResponseWriter, r *http.Request, status int, f *console.Failure) {
	if r.URL.Query().Get("fragment") != "" {
		// The script asked for a part of a page: no page around the
		// error, which would be put in the list's place.
		http.Error(w, f.Message, status)
		return
	}
	title := "error"
	if status == http.StatusNotFound {
		title = "notFound"
	}
	s.render(w, r, status, "error", s.page(r, "", title, *f))
}

// consoleErrorCode is the error code (docs/errors.md) of a console page's
// own refusal.
func consoleErrorCode(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "internal"
}

func (s *Server) consoleLoginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", s.page(r, "", "signIn", console.LoginBody{Next: safeNext(r.URL.Query().Get("next"))}))
}

// safeNext keeps a redirect after sign-in inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/console/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/console/deposits"
	}
	return next
}

func (s *Server) consoleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if !sameOrigin(r) {
		s.consoleError(w, r, http.StatusForbidden, "cross-site sign-in refused")
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	who, err := s.authenticate(r, tok)
	if err != nil {
		s.consoleError(w, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	next := safeNext(r.PostFormValue("next"))
	if who.actor == "" {
		s.render(w, r, http.StatusUnauthorized, "login", s.page(r, "", "signIn", console.LoginBody{Next: next, Error: true}))
		return
	}
	s.log.InfoContext(r.Context(), "console sign-in", "actor", who.actor)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sessionValue(tok), Path: "/console", HttpOnly: true, Secure: s.secure(r),
		SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) consoleLogout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if tok := sessionToken(r); tok != "" && !checkCSRF(r, csrfToken(tok)) {
		s.consoleError(w, r, http.StatusForbidden, "the console's CSRF token is missing or wrong: reload the page")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/console", MaxAge: -1, HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// sites names every site for the filters.
func (s *Server) consoleSites() []console.Site {
	var out []console.Site
	for _, id := range s.cfg.Ledger.SiteIDs() {
		if cfg, ok := s.cfg.Ledger.SiteConfig(id); ok {
			out = append(out, console.Site{ID: string(id), Name: cfg.Name})
		}
	}
	return out
}

// consoleFilters are the search fields of the queues; from and to are
// dates (Baghdad time), the others go to the listing as they are.
var consoleFilters = []string{"status", "site", "method", "processId", "transactionId", "userId", "name", "minAmount", "maxAmount", "from", "to", "order", "cursor"}

// consoleTransactions serves a queue: deposits (pending by default) or
// withdrawals, searched with the operator API's filters.
func (s *Server) consoleTransactions(kind string) http.HandlerFunc {
	statuses := map[string][]string{
		"deposit":    {"", "pending", "approved", "rejected", "expired"},
		"withdrawal": {"", "pending", "processing", "paid", "rejected"},
	}[kind]
	return func(w http.ResponseWriter, r *http.Request) {
		in := r.URL.Query()
		if _, ok := in["status"]; !ok {
			in.Set("status", "pending")
		}
		body := console.TxBody{Kind: kind, Statuses: statuses, Now: time.Now().UnixMilli()}
		q, fields, err := consoleSearch(kind, in)
		body.F = fields
		live := url.Values{}
		for k, v := range in {
			if k != "lang" && k != "fragment" {
				live[k] = v
			}
		}
		live.Set("fragment", "rows")
		body.LiveURL = r.URL.Path + "?" + live.Encode()
		var f records.Filter
		if err == nil {
			f, err = txFilter(q)
		}
		if err == nil {
			var page records.Page[records.OpsRecord]
			page, err = s.cfg.Reader.List(r.Context(), f)
			body.Rows = page.Items
			if page.NextCursor != nil {
				next := url.Values{}
				for k, v := range in {
					next[k] = v
				}
				next.Del("fragment")
				next.Set("cursor", *page.NextCursor)
				body.Next = r.URL.Path + "?" + next.Encode()
			}
		}
		// After the listing, which caught up with the stream: the filters
		// name the sites and methods created through other processes too.
		body.Sites = s.consoleSites()
		for _, b := range s.cfg.Ledger.Catalog().Banks() {
			body.Methods = append(body.Methods, b.Code)
		}
		status := http.StatusOK
		if err != nil {
			status, body.Error = s.consoleFailure(r, err)
		}
		s.render(w, r, status, "transactions", s.page(r, kind+"s", kind+"s", body))
	}
}

// consoleSearch turns a queue's search fields (in) into the listing's
// parameters, and the fields as given (for the form). From and to are
// dates, Baghdad time, the form's date fields: to takes in its whole day.
// The amounts may be grouped (25,000), as the form writes them.
func consoleSearch(kind string, in url.Values) (url.Values, map[string]string, error) {
	q := url.Values{"type": {kind}, "limit": {"50"}}
	fields := map[string]string{}
	var bad error
	for _, k := range consoleFilters {
		v := strings.TrimSpace(in.Get(k))
		fields[k] = v
		if v == "" {
			continue
		}
		if k == "minAmount" || k == "maxAmount" {
			// Typed as the form shows it: grouped, or in Arabic-Indic
			// digits.
			v = console.NormalizeAmount(v)
		}
		if k == "from" || k == "to" {
			d, err := time.ParseInLocation(time.DateOnly, v, console.Baghdad)
			if err != nil {
				if bad == nil {
					bad = errBad("invalid_request", k, k+" must be a date, YYYY-MM-DD (e.g. 2026-01-02)")
				}
				continue
			}
			if k == "to" {
				d = d.AddDate(0, 0, 1) // the whole day
			}
			v = d.Format(time.RFC3339)
		}
		q.Set(k, v)
	}
	return q, fields, bad
}

// consoleFailure is an error as a console page states it.
func (s *Server) consoleFailure(r *http.Request, err error) (int, *console.Failure) {
	ae := classify(err)
	// A page whose browser went away meanwhile (a live list replaced by
	// the next, a page left) failed for nobody: no error to log.
	if ae.status >= 500 && r.Context().Err() == nil {
		s.log.ErrorContext(r.Context(), "console", "path", r.URL.Path, "err", err)
	}
	return ae.status, &console.Failure{Code: ae.code, Field: ae.field, Message: ae.message}
}

// consoleMatch shows the matching form, and proposals for the transfer
// lines posted to it.
func (s *Server) consoleMatch(w http.ResponseWriter, r *http.Request) {
	body := console.MatchBody{Sites: s.consoleSites()}
	status := http.StatusOK
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, MaxMatchBody)
		if !checkCSRF(r, sessionOf(r).csrf) {
			s.consoleError(w, r, http.StatusForbidden, "the console's CSRF token is missing or wrong: reload the page")
			return
		}
		body.Text, body.Site = r.PostFormValue("lines"), r.PostFormValue("site")
		res, err := s.proposals(r.Context(), body.Text, body.Site)
		if err != nil {
			status, body.Error = s.consoleFailure(r, err)
		}
		body.Results = res
	}
	s.render(w, r, status, "match", s.page(r, "match", "match", body))
}

// proposals is POST /ops/v1/matches for pasted text.
func (s *Server) proposals(ctx context.Context, text, site string) ([]matching.Result, error) {
	id, err := siteQuery(site)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(text) == "" {
		return nil, errBad("invalid_request", "text", "no transfer lines")
	}
	ts, err := matching.Parse(text)
	if err != nil {
		return nil, errBad("invalid_request", "text", lineErrors(err))
	}
	deposits, err := s.matchCandidates(ctx, id)
	if err != nil {
		return nil, err
	}
	return match(ctx, ts, deposits)
}

func (s *Server) consoleTreasuries(w http.ResponseWriter, r *http.Request) {
	body := console.TreasuriesBody{LiveURL: r.URL.Path + "?fragment=rows"}
	sites := s.consoleSites()
	siteIDs := make([]ids.SiteID, len(sites))
	for i, site := range sites {
		siteIDs[i] = ids.SiteID(site.ID)
	}
	// The page refreshes itself: one catch-up for every site, not a read
	// of each site's subject every few seconds.
	bals, err := s.cfg.Reader.Balances(r.Context(), siteIDs)
	if err != nil {
		s.consoleErrPage(w, r, err)
		return
	}
	for i, site := range sites {
		b := bals[i]
		body.Sites = append(body.Sites, console.TreasuryRow{ID: site.ID, Name: site.Name, Balance: b.Balance,
			Pending: b.PendingWithdrawals, Available: b.Available, NegativeLimit: b.NegativeLimit})
	}
	s.render(w, r, http.StatusOK, "treasuries", s.page(r, "treasuries", "treasuries", body))
}

// consoleCallbacks lists callback deliveries, of every site or of the
// one chosen (GET /ops/v1/callbacks's status and site filters).
func (s *Server) consoleCallbacks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	body := console.CallbacksBody{Enabled: s.cfg.Callbacks != nil, Status: q.Get("status"), Site: q.Get("site"),
		Statuses: []string{"", callbacks.StatusPending, callbacks.StatusDelivered, callbacks.StatusFailed}}
	status := http.StatusOK
	if body.Enabled {
		filters := url.Values{"status": {body.Status}}
		if body.Site != "" {
			filters.Set("site", body.Site)
		}
		with := func(k, v string) string {
			u := url.Values{k: {v}}
			for fk, fv := range filters {
				u[fk] = fv
			}
			return r.URL.Path + "?" + u.Encode()
		}
		body.LiveURL = with("fragment", "rows")
		f := callbacks.Filter{Status: body.Status, Cursor: q.Get("cursor"), Limit: 50}
		var err error
		var page records.Page[callbacks.Delivery]
		if f.SiteID, err = s.callbackSite(r.Context(), body.Site); err == nil {
			page, err = s.cfg.Callbacks.List(r.Context(), f)
		}
		if err != nil && q.Get("fragment") != "" {
			// The live refresh: no list in the list's place.
			s.consoleErrPage(w, r, err)
			return
		}
		if err != nil {
			status, body.Error = s.consoleFailure(r, err)
		}
		body.Items = page.Items
		if page.NextCursor != nil {
			body.Next = with("cursor", *page.NextCursor)
		}
	}
	// After the listing's read, which caught up with the stream: the
	// filter names sites created through other processes too.
	body.Sites = s.consoleSites()
	s.render(w, r, status, "callbacks", s.page(r, "callbacks", "callbacks", body))
}

// consoleTx shows a transaction and its history; ?fragment=who answers
// only who made its last change and what it was ("approved by Omar"), for
// the operator whose action came second.
func (s *Server) consoleTx(w http.ResponseWriter, r *http.Request) {
	id, err := txParam(r)
	if err == nil {
		var rec records.Record
		rec, err = s.cfg.Reader.ByID(r.Context(), id.Site(), id)
		if err == nil {
			var body console.TxDetailBody
			body.Rec = records.OpsRecord{SiteID: id.Site(), Record: rec}
			body.Sites = s.consoleSites()
			body.Items, body.Complete, err = s.cfg.Reader.TxHistory(r.Context(), id)
			if err == nil {
				if n := len(body.Items); n > 1 && body.Complete {
					body.Last = s.actorName(body.Items[n-1].Actor)
				}
				body.Names = s.actorNames(body.Items)
				if r.URL.Query().Get("fragment") == "who" {
					w.Header().Set("Content-Type", "text/plain; charset=utf-8")
					t := s.page(r, "", "details", nil).T
					msg := t.Get("status." + rec.Status)
					if body.Last != "" {
						msg += " " + t.Get("by") + " " + body.Last
					}
					_, _ = w.Write([]byte(msg))
					return
				}
				s.render(w, r, http.StatusOK, "tx", s.page(r, "", "transactionId", body))
				return
			}
		}
	}
	if errors.Is(err, aggregates.ErrSiteNotFound) {
		err = aggregates.ErrNotFound
	}
	s.consoleErrPage(w, r, err)
}

// actorNames names the actors of a history for people (actor → name).
func (s *Server) actorNames(items []records.HistoryItem) map[string]string {
	names := map[string]string{}
	for _, it := range items {
		if _, ok := names[it.Actor]; !ok {
			names[it.Actor] = s.actorName(it.Actor)
		}
	}
	return names
}

// actorName names an event's actor for people: a named operator's name,
// else the actor as recorded (admin, merchant, system).
func (s *Server) actorName(actor string) string {
	if op, ok := s.cfg.Ledger.Operators().ByID(ids.OperatorID(actor)); ok {
		return op.Name
	}
	return actor
}
