package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"gateway/aggregates"
	"gateway/events"
	"gateway/ids"
	"gateway/records"
)

func (s *Server) merchantRoutes(r chi.Router) {
	r.Use(s.merchantAuth)
	s.merchantEndpoints(r)
}

// merchantPath reports whether some merchant endpoint has r's path, for
// any method. The path is the router's own (what is left under /v1, read
// from the raw path when there is one), and r's method is tried first: it
// is the one that matches on every request that goes on, creations
// included, so they pay for one lookup.
func (s *Server) merchantPath(r *http.Request) bool {
	path := chi.RouteContext(r.Context()).RoutePath
	rctx := chi.NewRouteContext()
	if s.merchantPaths.Match(rctx, r.Method, path) {
		return true
	}
	// The methods merchantEndpoints registers.
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		rctx.Reset()
		if m != r.Method && s.merchantPaths.Match(rctx, m, path) {
			return true
		}
	}
	return false
}

// merchantEndpoints registers the merchant API's endpoints on r (under
// /v1; without the authentication, which merchantRoutes adds).
func (s *Server) merchantEndpoints(r chi.Router) {
	r.Post("/transactions/deposit", s.createDeposit)
	r.Post("/transactions/withdraw", s.createWithdrawal)
	r.Get("/banks", s.listBanks)
	r.Get("/transactions", s.txByProcessID)
	r.Get("/transactions/{id}", s.txByID)
	r.Get("/balance", s.balance)
	r.Get("/callbacks/stream", s.callbackStream)
	r.Route("/sandbox", s.sandboxRoutes)
}

type ctxBody struct{}

// merchantAuth authenticates a merchant call before anything in it is
// parsed: body size, appKey, IP allowlist, then the signature over the exact
// bytes received, then the site's rate limit.
func (s *Server) merchantAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := info(r)
		if !s.merchantPath(r) {
			// No credentials make an unknown path known: say so first.
			ri.unmatched = true
			s.writeErr(w, r, &apiError{status: 404, code: "not_found", message: "no such endpoint"})
			return
		}
		body, err := readBody(w, r)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		signed := body
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			signed = []byte(r.URL.RawQuery)
		}
		siteID, cfg, err := s.merchantCredentials(r, signed)
		ri.siteID = siteID
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if ok, wait := s.limiter.allow("site:"+string(siteID), cfg.RateLimit); !ok {
			s.writeErr(w, r, &apiError{status: 429, code: "rate_limited", retryAfter: wait,
				message: "the site's rate limit of " + strconv.FormatInt(cfg.RateLimit, 10) + " requests per second is exceeded"})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxBody{}, body)))
	})
}

// merchantCredentials checks a merchant call's credentials against the
// site's settings as they are now: the appKey, the caller's address
// against the IP allowlist, then the signature over signed (the previous
// secret counting while its overlap lasts). The site is returned once the
// appKey is known, refused or not. The callback stream calls it again
// while it is open, so that a stream ends when its credentials stop being
// accepted (docs/callbacks.md).
func (s *Server) merchantCredentials(r *http.Request, signed []byte) (ids.SiteID, *aggregates.Config, error) {
	appKey := r.Header.Get("appKey")
	if appKey == "" {
		return "", nil, &apiError{status: 401, code: "unknown_app_key", field: "appKey", message: "the appKey header is missing"}
	}
	siteID, cfg, ok := s.cfg.Ledger.SiteByAppKey(appKey)
	if !ok && s.cfg.Ledger.CatchUpMiss(r.Context()) == nil {
		// The site may have just been created through another
		// gateway process. Unknown appKeys are also what a flood
		// of bad credentials sends: the catch-up is shared and
		// throttled, so the flood costs no store reads of its own.
		siteID, cfg, ok = s.cfg.Ledger.SiteByAppKey(appKey)
	}
	if !ok {
		return "", nil, &apiError{status: 401, code: "unknown_app_key", field: "appKey", message: "appKey is not known"}
	}
	// Computed for every request, so that a trusted proxy's unreadable
	// X-Forwarded-For is refused whatever the site's settings.
	ip, err := s.clientIP(r)
	if err != nil {
		return siteID, nil, badForwardedFor(err)
	}
	if len(cfg.IPAllowlist) > 0 && !allowed(cfg.IPAllowlist, ip) {
		return siteID, nil, &apiError{status: 403, code: "not_authorized",
			message: "this site accepts requests only from its IP allowlist"}
	}
	if problem := s.checkSignature(cfg, r, signed); problem != "" {
		return siteID, nil, &apiError{status: 401, code: "invalid_signature", field: "sign", message: problem}
	}
	return siteID, cfg, nil
}

// signRule is what a valid sign header is.
const signRule = "sign must be base64(HMAC-SHA256(secret, S)), S being the exact body of a POST or the exact query of a GET (the bytes after ?)"

// checkSignature returns "" for a request whose sign header is valid, and
// otherwise what is wrong with it, as far as that can be said without
// weakening it: a header that is missing or is not base64 of 32 bytes, or
// a signature over the request as a common mistake changes it (a trailing
// newline, a leading "?", the path included, parameters sorted). Only
// someone who holds the secret can make a signature that matches such a
// variant, so naming it tells nobody else anything.
func (s *Server) checkSignature(cfg *aggregates.Config, r *http.Request, signed []byte) string {
	sign := r.Header.Get("sign")
	if sign == "" {
		return "the sign header is missing; " + signRule
	}
	got, ok := decodeSign(sign)
	if !ok {
		if len(sign) == 2*sha256.Size && strings.Trim(strings.ToLower(sign), "0123456789abcdef") == "" {
			return "sign is a hex digest; send the 32 bytes of the HMAC-SHA256 in base64 instead"
		}
		return "sign is not base64 of 32 bytes; " + signRule
	}
	if s.signatureValid(cfg, got, signed) {
		return ""
	}
	for _, m := range signMistakes(r, signed) {
		if s.signatureValid(cfg, got, m.signed) {
			return "sign was computed over " + m.what + "; sign the exact bytes sent"
		}
	}
	return "sign does not match the request: " + signRule + "; check the secret (rotated?) and that the bytes signed are the bytes sent"
}

// signMistake is the request as a common signing mistake sees it.
type signMistake struct {
	what   string
	signed []byte
}

func signMistakes(r *http.Request, signed []byte) []signMistake {
	var out []signMistake
	add := func(what string, b []byte) {
		if !bytes.Equal(b, signed) {
			out = append(out, signMistake{what, b})
		}
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		q := string(signed)
		add("the query with a leading ?", []byte("?"+q))
		add("the path and the query", []byte(r.URL.Path+"?"+q))
		add("the path", []byte(r.URL.Path))
		if v, err := url.ParseQuery(q); err == nil {
			add("the query with its parameters sorted", []byte(v.Encode()))
		}
		if d, err := url.QueryUnescape(q); err == nil {
			add("the decoded query", []byte(d))
		}
	} else {
		add("the path and the body", append([]byte(r.URL.Path), signed...))
		if v, err := url.ParseQuery(string(signed)); err == nil {
			add("the body with its fields sorted", []byte(v.Encode()))
		}
	}
	add("the "+signedName(r)+" with a trailing newline", append(append([]byte{}, signed...), '\n'))
	if t := bytes.TrimRight(signed, "\r\n"); len(t) < len(signed) {
		add("the "+signedName(r)+" without its trailing newline", t)
	}
	if len(signed) > 0 {
		add("an empty string", nil)
	}
	return out
}

func signedName(r *http.Request) string {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return "query"
	}
	return "body"
}

// signatureValid compares got with the HMAC of signed under the site's
// secret, and under the previous one while it is still valid.
func (s *Server) signatureValid(cfg *aggregates.Config, got, signed []byte) bool {
	valid := hmac.Equal(got, mac(cfg.Secret, signed))
	if cfg.PrevSecret != "" && s.cfg.Ledger.Now().UnixMilli() < cfg.PrevSecretUntil {
		// Both are always compared so the answer time does not tell
		// which secret matched.
		valid = hmac.Equal(got, mac(cfg.PrevSecret, signed)) || valid
	}
	return valid
}

func mac(secret string, data []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(data)
	return m.Sum(nil)
}

// decodeSign accepts standard base64 with or without padding (and the URL
// alphabet, which some HTTP clients produce).
func decodeSign(s string) ([]byte, bool) {
	if s == "" || len(s) > 128 {
		return nil, false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == sha256.Size {
			return b, true
		}
	}
	return nil, false
}

// form is a parsed merchant form body.
type form url.Values

// parseForm parses the signed body as application/x-www-form-urlencoded.
func parseForm(r *http.Request, fields []string) (form, error) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, errBad("invalid_request", "", "the body must be application/x-www-form-urlencoded")
	}
	body, _ := r.Context().Value(ctxBody{}).([]byte)
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, errBad("invalid_request", "", "the body is not valid form encoding")
	}
	if err := checkParams(v, fields, "field"); err != nil {
		return nil, err
	}
	return form(v), nil
}

// checkParams refuses a parameter the call does not know, naming it, and
// one given twice: a field a merchant believes is taken (currency=IQD)
// must not be dropped without a word.
func checkParams(v url.Values, known []string, what string) error {
	ok := true
	for k, vs := range v {
		ok = ok && len(vs) == 1 && slices.Contains(known, k)
	}
	if ok {
		return nil // the usual case, without sorting the keys
	}
	// The first offending key in sorted order, so that a request with
	// several is answered the same way every time.
	for _, k := range slices.Sorted(maps.Keys(v)) {
		if !slices.Contains(known, k) {
			list := "none"
			if len(known) > 0 {
				list = strings.Join(known, ", ")
			}
			return errBad("invalid_request", k, fmt.Sprintf("%s is not a %s of this call; its %ss are %s", k, what, what, list))
		}
		if len(v[k]) > 1 {
			return errBad("invalid_request", k, k+" is given more than once")
		}
	}
	return nil
}

// queryParams reads a GET's query, which may hold only the parameters
// known.
func queryParams(r *http.Request, known ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errBad("invalid_request", "", "the query string is malformed")
	}
	return q, checkParams(q, known, "parameter")
}

// The fields of the creation calls (seed 4.1 and 4.2).
var (
	depositFields  = []string{"bankId", "processId", "amount", "userId", "userName", "name", "senderName", "lang"}
	withdrawFields = []string{"bankId", "processId", "amount", "userId", "userName", "name", "accountName", "iban"}
)

func (f form) get(k string) string {
	if vs := f[k]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// amount parses a positive whole IQD amount written in decimal digits.
func (f form) amount() (int64, error) {
	v := f.get("amount")
	bad := errBad("invalid_request", "amount", "amount must be a positive whole number of IQD, e.g. 25000")
	if v == "" || len(v) > 16 {
		return 0, bad
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, bad
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, bad
	}
	return n, nil
}

func (s *Server) request(ctx context.Context, f form) (aggregates.Request, error) {
	amt, err := f.amount()
	if err != nil {
		return aggregates.Request{}, err
	}
	ref := f.get("bankId")
	if ref == "" {
		return aggregates.Request{}, errBad("invalid_request", "bankId", "bankId is required")
	}
	req := aggregates.Request{ProcessID: f.get("processId"), Amount: amt, UserID: f.get("userId"),
		UserName: f.get("userName"), Name: f.get("name"), BankRef: ref}
	// A store that cannot be reached for the catch-up leaves the method
	// unknown: the decision answers unknown_bank, as it would have.
	if b, ok, _ := s.resolveBank(ctx, ref); ok {
		req.Bank = b
	}
	return req, nil
}

func (s *Server) createDeposit(w http.ResponseWriter, r *http.Request) {
	s.createTx(w, r, depositFields, func(req aggregates.Request, f form) aggregates.Command {
		return aggregates.RequestDeposit{Request: req, SenderName: f.get("senderName"), Lang: f.get("lang"), HostedToken: newToken()}
	})
}

func (s *Server) createWithdrawal(w http.ResponseWriter, r *http.Request) {
	s.createTx(w, r, withdrawFields, func(req aggregates.Request, f form) aggregates.Command {
		return aggregates.RequestWithdrawal{Request: req, AccountName: f.get("accountName"), IBAN: f.get("iban")}
	})
}

// createTx parses a signed form into the command mk builds and runs it.
func (s *Server) createTx(w http.ResponseWriter, r *http.Request, fields []string, mk func(aggregates.Request, form) aggregates.Command) {
	f, err := parseForm(r, fields)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	req, err := s.request(r.Context(), f)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.execTx(w, r, mk(req, f))
}

// execTx runs a command that creates (or repeats) a transaction and answers
// with its record.
func (s *Server) execTx(w http.ResponseWriter, r *http.Request, cmd aggregates.Command) {
	ri := info(r)
	ctx := r.Context()
	res, err := s.cfg.Ledger.Execute(ctx, ri.siteID, cmd, events.ActorMerchant)
	if err != nil {
		if errors.Is(err, aggregates.ErrUnknownBank) {
			err = s.unknownBank(r, err, cmd)
		}
		s.writeErr(w, r, err)
		return
	}
	rec, err := s.cfg.Reader.FromResult(ctx, ri.siteID, records.Committed(res))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, rec)
}

// unknownBank names, in a refused creation's unknown_bank answer, the
// methods the merchant can use for that kind of transaction.
func (s *Server) unknownBank(r *http.Request, err error, cmd aggregates.Command) error {
	k := aggregates.KindDeposit
	if _, ok := cmd.(aggregates.RequestWithdrawal); ok {
		k = aggregates.KindWithdrawal
	}
	var codes []string
	cfg, _ := s.cfg.Ledger.SiteConfig(info(r).siteID)
	for _, b := range s.cfg.Ledger.Catalog().Banks() {
		if _, _, _, offered := cfg.Offer(b); b.Supports(k) && offered {
			codes = append(codes, b.Code)
		}
	}
	_, msg := fieldOf(err)
	if len(codes) == 0 {
		msg += "; no " + k.String() + " method is enabled"
	} else {
		msg += "; the enabled " + k.String() + " methods are " + strings.Join(codes, ", ") + " (GET /v1/banks lists them)"
	}
	return &apiError{status: http.StatusBadRequest, code: "unknown_bank", field: "bankId", message: msg, cause: err}
}

// method is one entry of GET /v1/banks.
type method struct {
	ID             string `json:"_id"`
	Code           string `json:"code"`
	Name           string `json:"name"`
	IdentifierKind string `json:"identifierKind"`
	MinAmount      int64  `json:"minAmount"`
	MaxAmount      int64  `json:"maxAmount"`
	Deposit        bool   `json:"deposit"`
	Withdraw       bool   `json:"withdraw"`
}

func (s *Server) listBanks(w http.ResponseWriter, r *http.Request) {
	q, err := queryParams(r, "type", "lang")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	var kind aggregates.Kind
	switch q.Get("type") {
	case "":
	case "deposit":
		kind = aggregates.KindDeposit
	case "withdraw", "withdrawal":
		kind = aggregates.KindWithdrawal
	default:
		s.writeErr(w, r, errBad("invalid_request", "type", "type must be deposit or withdraw"))
		return
	}
	lang := aggregates.NormalizeLang(q.Get("lang"))
	// A listing reads its writes (docs/ARCHITECTURE.md "Read-your-writes"):
	// a method or a site's methods set through another gateway process a
	// moment ago are listed.
	if err := s.cfg.Ledger.CatchUp(r.Context()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	cfg, _ := s.cfg.Ledger.SiteConfig(info(r).siteID)
	out := []method{}
	for _, b := range s.cfg.Ledger.Catalog().Banks() {
		if !b.Enabled || (kind != 0 && !b.Supports(kind)) {
			continue
		}
		minAmount, maxAmount, _, ok := cfg.Offer(b)
		if !ok {
			continue // not this site's
		}
		out = append(out, method{ID: b.ID, Code: b.Code, Name: b.LocalName(lang), IdentifierKind: string(b.IdentifierKind),
			MinAmount: minAmount, MaxAmount: maxAmount, Deposit: b.Deposit, Withdraw: b.Withdraw})
	}
	s.writeData(w, r, out)
}

func (s *Server) txByID(w http.ResponseWriter, r *http.Request) {
	ri := info(r)
	if _, err := queryParams(r); err != nil {
		s.writeErr(w, r, err)
		return
	}
	id, err := txParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	rec, err := s.cfg.Reader.ByID(r.Context(), ri.siteID, id)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, rec)
}

func (s *Server) txByProcessID(w http.ResponseWriter, r *http.Request) {
	ri := info(r)
	q, err := queryParams(r, "processId")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	pid := q.Get("processId")
	if pid == "" {
		s.writeErr(w, r, errBad("invalid_request", "processId", "processId is required"))
		return
	}
	rec, err := s.cfg.Reader.ByProcessID(r.Context(), ri.siteID, pid)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, rec)
}

func (s *Server) balance(w http.ResponseWriter, r *http.Request) {
	if _, err := queryParams(r); err != nil {
		s.writeErr(w, r, err)
		return
	}
	b, err := s.cfg.Reader.BalanceOf(r.Context(), info(r).siteID)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, b)
}
