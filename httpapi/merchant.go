package httpapi

import (
	"context"
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

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/records"
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
	s.sandboxRoutes(r)
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
		if k == "" {
			// "=x" or "&=x": there is no name to put in field.
			return errBad("invalid_request", "", fmt.Sprintf("a %s without a name (=… with nothing before it) is not valid form encoding", what))
		}
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
	q, err := strictQuery(r)
	if err != nil {
		return nil, err
	}
	return q, checkParams(q, known, "parameter")
}

// strictQuery parses the request's query, refusing one with a pair that
// cannot be read (a bad escape, a ';'): r.URL.Query() drops such a pair,
// and a filter with it.
func strictQuery(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errBad("invalid_request", "", "the query string is malformed")
	}
	return q, nil
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
	if v == "" || len(v) > 16 {
		return 0, errBadAmount()
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, errBadAmount()
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, errBadAmount()
	}
	return n, nil
}

// errBadAmount is built only when it is the answer: every create reads an
// amount.
func errBadAmount() error {
	return errBad("invalid_request", "amount", "amount must be a positive whole number of IQD, e.g. 25000")
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
	_, given := q["type"]
	switch q.Get("type") {
	case "":
		if given {
			// "type=" is a type, and not one of the two: left out is
			// how every method is asked for.
			s.writeErr(w, r, errBad("invalid_request", "type", "type must be deposit or withdraw, or left out for every method"))
			return
		}
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
	if creationPath("/v1/transactions/" + chi.URLParam(r, "id")) {
		s.notAllowed(w, r)
		return
	}
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
