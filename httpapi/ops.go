package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"gateway/callbacks"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"gateway/aggregates"
	"gateway/events"
	"gateway/ids"
	"gateway/projections"
)

// AdminActor names the bootstrap admin (the --admin-token) in events.
const AdminActor = "admin"

func (s *Server) opsRoutes(r chi.Router) {
	r.Use(s.opsAuth)
	// Every route names the least role that may call it (roles are
	// ordered: admin ⊃ operator ⊃ auditor).
	read := r.With(s.need(aggregates.RoleAuditor))
	act := r.With(s.need(aggregates.RoleOperator))
	admin := r.With(s.need(aggregates.RoleAdmin))

	read.Get("/sites", s.listSites)
	admin.Post("/sites", s.createSite)
	read.Get("/sites/{id}", s.getSite)
	admin.Patch("/sites/{id}", s.updateSite)
	admin.Post("/sites/{id}/secret", s.rotateSecret(false))
	admin.Post("/sites/{id}/webhook-secret", s.rotateSecret(true))
	admin.Post("/sites/{id}/adjustments", s.adjust)
	read.Get("/sites/{id}/events", s.siteEvents)
	read.Get("/banks", s.opsBanks)
	admin.Post("/banks", s.createBank)
	admin.Patch("/banks/{id}", s.updateBank)
	read.Get("/transactions", s.listTransactions)
	read.Get("/transactions/{id}", s.opsTransaction)
	act.Post("/deposits/{id}/approve", s.txAction(func(id ids.TxID, b actionBody) aggregates.Command {
		return aggregates.ApproveDeposit{TxID: id, Amount: derefInt(b.Amount)}
	}))
	act.Post("/deposits/{id}/reject", s.txAction(func(id ids.TxID, b actionBody) aggregates.Command {
		return aggregates.RejectDeposit{TxID: id, Reason: b.Reason}
	}))
	act.Post("/withdrawals/{id}/process", s.txAction(func(id ids.TxID, _ actionBody) aggregates.Command {
		return aggregates.ProcessWithdrawal{TxID: id}
	}))
	act.Post("/withdrawals/{id}/pay", s.txAction(func(id ids.TxID, b actionBody) aggregates.Command {
		return aggregates.PayWithdrawal{TxID: id, Reference: b.Reference}
	}))
	act.Post("/withdrawals/{id}/reject", s.txAction(func(id ids.TxID, b actionBody) aggregates.Command {
		return aggregates.RejectWithdrawal{TxID: id, Reason: b.Reason}
	}))
	admin.Get("/operators", s.listOperators)
	admin.Post("/operators", s.createOperator)
	admin.Delete("/operators/{id}", s.revokeOperator)
	if d := s.cfg.Callbacks; d != nil {
		wr := callbacks.Writer{Data: s.writeData, Error: s.writeErr, Actor: func(r *http.Request) string { return info(r).actor }}
		read.Get("/callbacks", d.ListHandler(wr))
		act.Post("/callbacks/{eventId}/resend", d.ResendHandler(wr))
	}
}

// roleKey carries the authenticated caller's role in the request context.
type roleKey struct{}

// operatorTokenPrefix starts every named operator's token, so other strings
// are refused without looking them up.
const operatorTokenPrefix = "op_"

// opsAuth resolves the bearer token to an actor and a role: the bootstrap
// admin token (compared in constant time, as hashes, so its length does not
// leak either) or a named operator's token (found by its SHA-256; a revoked
// or unknown token is refused). The actor is recorded on every event the
// request causes.
func (s *Server) opsAuth(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.cfg.AdminToken))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tok = strings.TrimSpace(tok)
		got := sha256.Sum256([]byte(tok))
		var actor string
		var role aggregates.Role
		switch {
		case !ok || tok == "":
		case s.cfg.AdminToken != "" && subtle.ConstantTimeCompare(got[:], want[:]) == 1:
			actor, role = AdminActor, aggregates.RoleAdmin
		case strings.HasPrefix(tok, operatorTokenPrefix):
			op, err := s.operatorByToken(r, hex.EncodeToString(got[:]))
			if err != nil {
				s.writeErr(w, r, err)
				return
			}
			if op != nil {
				actor, role = op.ID, op.Role
			}
		}
		if actor == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ops"`)
			s.writeErr(w, r, &apiError{status: 401, code: "unauthorized", message: "a valid operator bearer token is required"})
			return
		}
		info(r).actor = actor
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), roleKey{}, role)))
	})
}

// operatorByToken returns the active operator whose token hashes to h, or
// nil. The map lookup is not constant-time, but it is keyed by the token's
// SHA-256, and timing that reveals a hash's prefix does not help anyone
// find a token. A miss first waits for this process to catch up with the
// stream, so an operator created through another gateway process is
// accepted at once; a revoked operator is refused without waiting.
func (s *Server) operatorByToken(r *http.Request, h string) (*aggregates.Operator, error) {
	op, ok := s.cfg.Ledger.Operators().ByTokenHash(h)
	if !ok {
		// Throttled and shared: a flood of unknown tokens costs no store
		// reads of its own.
		if err := s.cfg.Ledger.CatchUpMiss(r.Context()); err != nil {
			return nil, err
		}
		op, ok = s.cfg.Ledger.Operators().ByTokenHash(h)
	}
	if !ok || !op.Active() {
		return nil, nil
	}
	return op, nil
}

// need refuses, before anything is read or written, a caller whose role does
// not include role.
func (s *Server) need(role aggregates.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			have, _ := r.Context().Value(roleKey{}).(aggregates.Role)
			if !have.Allows(role) {
				s.writeErr(w, r, &apiError{status: 403, code: "forbidden",
					message: fmt.Sprintf("this call needs the %s role; the token has the %s role", role, have)})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// operatorView is a named operator as the operator API shows it. The token
// appears only in the answer that creates it.
type operatorView struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Role      string  `json:"role"`
	Token     string  `json:"token,omitempty"`
	CreatedAt string  `json:"createdAt"`
	RevokedAt *string `json:"revokedAt"`
}

func viewOperator(o *aggregates.Operator) operatorView {
	v := operatorView{ID: o.ID, Name: o.Name, Role: string(o.Role), CreatedAt: projections.FormatTime(o.CreatedAt)}
	if !o.Active() {
		at := projections.FormatTime(o.RevokedAt)
		v.RevokedAt = &at
	}
	return v
}

// operatorErr maps the operators aggregate's refusals to the contract's
// codes; anything else is left to classify.
func operatorErr(err error) error {
	msg, field := "", "id"
	var fe *aggregates.FieldError
	if errors.As(err, &fe) {
		msg, field = fe.Msg, fe.Field
	}
	switch {
	case errors.Is(err, aggregates.ErrOperatorNotFound):
		return &apiError{status: 404, code: "not_found", field: field, message: msg, cause: err}
	case errors.Is(err, aggregates.ErrOperatorRevoked), errors.Is(err, aggregates.ErrOperatorExists):
		return &apiError{status: 409, code: "conflict", field: field, message: msg, cause: err}
	}
	return err
}

func (s *Server) createOperator(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name *string `json:"name"`
		Role *string `json:"role"`
	}
	if err := decodeJSON(w, r, &b); err != nil {
		s.writeErr(w, r, err)
		return
	}
	// 256 random bits: the stored SHA-256 needs no salt or stretching.
	token := operatorTokenPrefix + randomSecret()
	sum := sha256.Sum256([]byte(token))
	opID := ids.NewOperator()
	cmd := aggregates.CreateOperator{ID: string(opID), Name: deref(b.Name), Role: deref(b.Role),
		TokenHash: hex.EncodeToString(sum[:])}
	_, err := s.cfg.Ledger.ExecuteOperators(r.Context(), cmd, info(r).actor)
	if err != nil {
		s.writeErr(w, r, operatorErr(err))
		return
	}
	op, ok := s.cfg.Ledger.Operators().ByID(opID)
	if !ok {
		s.writeErr(w, r, fmt.Errorf("operator %s missing after creation", opID))
		return
	}
	v := viewOperator(op)
	v.Token = token
	s.writeData(w, r, v)
}

func (s *Server) listOperators(w http.ResponseWriter, r *http.Request) {
	// Read-your-writes across gateway processes: an operator created or
	// revoked through another one is listed as it is.
	if err := s.cfg.Ledger.CatchUp(r.Context()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	out := struct {
		Items      []operatorView `json:"items"`
		NextCursor *string        `json:"nextCursor"`
	}{Items: []operatorView{}}
	for _, o := range s.cfg.Ledger.Operators().List() {
		out.Items = append(out.Items, viewOperator(o))
	}
	s.writeData(w, r, out)
}

func (s *Server) revokeOperator(w http.ResponseWriter, r *http.Request) {
	id, err := ids.ParseOperator(chi.URLParam(r, "id"))
	if err != nil {
		s.writeErr(w, r, notFound("operator"))
		return
	}
	_, err = s.cfg.Ledger.ExecuteOperators(r.Context(), aggregates.RevokeOperator{ID: id}, info(r).actor)
	if err != nil {
		s.writeErr(w, r, operatorErr(err))
		return
	}
	op, ok := s.cfg.Ledger.Operators().ByID(id)
	if !ok {
		s.writeErr(w, r, fmt.Errorf("operator %s missing after revocation", id))
		return
	}
	s.writeData(w, r, viewOperator(op))
}

// decodeJSON reads an operator body strictly: JSON only, no unknown fields,
// nothing after the object. An empty body leaves v as it is.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	_, err := decodeJSONBody(w, r, v)
	return err
}

// idempotencyHeader makes an operator write that is not a transition safe
// to retry (README "Retrying operator writes").
const idempotencyHeader = "Idempotency-Key"

// decodeKeyed is decodeJSON for the calls that take an Idempotency-Key: it
// also returns the key ("" when the header is absent) and the SHA-256 (hex)
// of the exact body bytes, which a repeat of the key must match. A header
// that is present must hold one valid key.
func decodeKeyed(w http.ResponseWriter, r *http.Request, v any) (key, hash string, err error) {
	vals := r.Header.Values(idempotencyHeader)
	switch {
	case len(vals) > 1:
		return "", "", errBad("invalid_request", idempotencyHeader, "send one Idempotency-Key")
	case len(vals) == 1:
		key = vals[0]
		if err := aggregates.CheckIdempotencyKey(key); err != nil {
			return "", "", err
		}
	}
	body, err := decodeJSONBody(w, r, v)
	if err != nil || key == "" {
		return "", "", err
	}
	sum := sha256.Sum256(body)
	return key, hex.EncodeToString(sum[:]), nil
}

// decodeJSONBody is decodeJSON returning the body as it was read.
func decodeJSONBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	body, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return body, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, errBad("invalid_request", "", "the body must be application/json")
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, errBad("invalid_request", te.Field, fmt.Sprintf("%s must be %s", te.Field, te.Type))
		}
		// encoding/json has no typed error for DisallowUnknownFields; its
		// message is `json: unknown field "name"`. Name the field.
		if _, q, ok := strings.Cut(err.Error(), "unknown field "); ok {
			if name, uerr := strconv.Unquote(q); uerr == nil {
				return nil, errBad("invalid_request", name, name+" is not a field of this call")
			}
		}
		return nil, errBad("invalid_request", "", "the body is not valid JSON for this call: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errBad("invalid_request", "", "the body must hold one JSON object")
	}
	return body, nil
}

// siteBody is the body of site create and update; absent fields are nil.
type siteBody struct {
	Name              *string   `json:"name"`
	NegativeLimit     *int64    `json:"negativeLimit"`
	IPAllowlist       *[]string `json:"ipAllowlist"`
	CallbackURL       *string   `json:"callbackUrl"`
	HostedPage        *bool     `json:"hostedPage"`
	DepositTTLSeconds *int64    `json:"depositTtlSeconds"`
	RateLimit         *int64    `json:"rateLimit"`
}

func (b siteBody) settings() aggregates.SiteSettings {
	return aggregates.SiteSettings{Name: b.Name, NegativeLimit: b.NegativeLimit, IPAllowlist: b.IPAllowlist,
		CallbackURL: b.CallbackURL, HostedPage: b.HostedPage, DepositTTLSeconds: b.DepositTTLSeconds, RateLimit: b.RateLimit}
}

// siteView is a site as the operator API shows it. Secrets appear only in
// the answers that create them.
type siteView struct {
	ID                ids.SiteID           `json:"id"`
	Name              string               `json:"name"`
	AppKey            string               `json:"appKey"`
	Secret            string               `json:"secret,omitempty"`
	WebhookSecret     string               `json:"webhookSecret,omitempty"`
	NegativeLimit     int64                `json:"negativeLimit"`
	IPAllowlist       []string             `json:"ipAllowlist"`
	CallbackURL       *string              `json:"callbackUrl"`
	HostedPage        bool                 `json:"hostedPage"`
	DepositTTLSeconds int64                `json:"depositTtlSeconds"`
	RateLimit         int64                `json:"rateLimit"`
	CreatedAt         string               `json:"createdAt"`
	Treasury          *projections.Balance `json:"treasury,omitempty"`
}

func viewSite(id ids.SiteID, c *aggregates.Config) siteView {
	v := siteView{ID: id, Name: c.Name, AppKey: c.AppKey, NegativeLimit: c.NegativeLimit, IPAllowlist: c.IPAllowlist,
		HostedPage: c.HostedPage, DepositTTLSeconds: c.DepositTTLSeconds, RateLimit: c.RateLimit,
		CreatedAt: projections.FormatTime(c.CreatedAt)}
	if v.IPAllowlist == nil {
		v.IPAllowlist = []string{}
	}
	if c.CallbackURL != "" {
		u := c.CallbackURL
		v.CallbackURL = &u
	}
	return v
}

func (s *Server) createSite(w http.ResponseWriter, r *http.Request) {
	var b siteBody
	key, hash, err := decodeKeyed(w, r, &b)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	// A keyed site's id is derived from the key, so every repeat, through
	// any gateway process, addresses the same subject and only one of
	// them can create it.
	id := ids.NewSite()
	if key != "" {
		id = ids.SiteForKey(key)
	}
	cmd := aggregates.CreateSite{AppKey: ids.NewAppKey(), Secret: randomSecret(),
		WebhookSecret: newWebhookSecret(), Settings: b.settings(), IdempotencyKey: key, RequestHash: hash}
	ctx := r.Context()
	if _, err := s.cfg.Ledger.Execute(ctx, id, cmd, info(r).actor); err != nil {
		s.writeErr(w, r, err)
		return
	}
	cfg, err := s.createdSite(ctx, id, key != "")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	v := viewSite(id, cfg)
	v.Secret, v.WebhookSecret = cfg.Secret, cfg.WebhookSecret
	s.writeData(w, r, v)
}

// createdSite returns the settings a site creation answers with: for a
// keyed creation, the site as it was created, so that the first answer and
// every repeat are the same whatever was updated or rotated since; else
// the site as it now is.
func (s *Server) createdSite(ctx context.Context, id ids.SiteID, keyed bool) (*aggregates.Config, error) {
	var cfg *aggregates.Config
	if keyed {
		if err := s.cfg.Ledger.ViewCtx(ctx, id, func(st *aggregates.Site) error {
			cfg = st.CreatedAs()
			return nil
		}); err != nil {
			return nil, err
		}
	} else {
		cfg, _ = s.cfg.Ledger.SiteConfig(id)
	}
	if cfg == nil {
		return nil, fmt.Errorf("site %s missing after creation", id)
	}
	return cfg, nil
}

func (s *Server) listSites(w http.ResponseWriter, r *http.Request) {
	out := []siteView{}
	for _, id := range s.cfg.Ledger.SiteIDs() {
		if cfg, ok := s.cfg.Ledger.SiteConfig(id); ok {
			out = append(out, viewSite(id, cfg))
		}
	}
	s.writeData(w, r, out)
}

func (s *Server) getSite(w http.ResponseWriter, r *http.Request) {
	id, err := siteParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	b, err := s.cfg.Reader.BalanceOf(r.Context(), id)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	cfg, ok := s.cfg.Ledger.SiteConfig(id)
	if !ok {
		s.writeErr(w, r, aggregates.ErrSiteNotFound)
		return
	}
	v := viewSite(id, cfg)
	v.Treasury = &b
	s.writeData(w, r, v)
}

func (s *Server) updateSite(w http.ResponseWriter, r *http.Request) {
	var b siteBody
	if err := decodeJSON(w, r, &b); err != nil {
		s.writeErr(w, r, err)
		return
	}
	id, err := siteParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if _, err := s.run(r, id, aggregates.UpdateSite{Settings: b.settings()}); err != nil {
		s.writeErr(w, r, err)
		return
	}
	cfg, _ := s.cfg.Ledger.SiteConfig(id)
	s.writeData(w, r, viewSite(id, cfg))
}

// run executes a site command on behalf of the authenticated operator and
// returns the record of the transaction it concerned, if any.
func (s *Server) run(r *http.Request, siteID ids.SiteID, cmd aggregates.Command) (projections.Record, error) {
	ctx := r.Context()
	lr, err := s.cfg.Ledger.Execute(ctx, siteID, cmd, info(r).actor)
	if err != nil || lr.Decision.Tx < 0 {
		return projections.Record{}, err
	}
	return s.cfg.Reader.FromResult(ctx, siteID, lr)
}

func (s *Server) rotateSecret(webhook bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			OverlapSeconds *int64 `json:"overlapSeconds"`
		}
		if err := decodeJSON(w, r, &b); err != nil {
			s.writeErr(w, r, err)
			return
		}
		overlap := int64(86400)
		if b.OverlapSeconds != nil {
			overlap = *b.OverlapSeconds
		}
		if overlap < 0 || overlap > 30*86400 {
			s.writeErr(w, r, errBad("invalid_request", "overlapSeconds", "overlapSeconds must be 0 to 2592000"))
			return
		}
		secret := randomSecret()
		if webhook {
			secret = newWebhookSecret()
		}
		id, err := siteParam(r)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		cmd := aggregates.RotateSecret{Webhook: webhook, Secret: secret, Overlap: time.Duration(overlap) * time.Second}
		if _, err := s.run(r, id, cmd); err != nil {
			s.writeErr(w, r, err)
			return
		}
		until := projections.FormatTime(s.cfg.Ledger.Now().Add(cmd.Overlap).UnixMilli())
		key := "secret"
		if webhook {
			key = "webhookSecret"
		}
		s.writeData(w, r, map[string]string{key: secret, "previousValidUntil": until})
	}
}

func (s *Server) adjust(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Amount *int64 `json:"amount"`
		Reason string `json:"reason"`
	}
	key, hash, err := decodeKeyed(w, r, &b)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if b.Amount == nil {
		s.writeErr(w, r, errBad("invalid_request", "amount", "amount (a signed whole number of IQD) is required"))
		return
	}
	id, err := siteParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	cmd := aggregates.AdjustTreasury{Amount: *b.Amount, Reason: b.Reason, IdempotencyKey: key, RequestHash: hash}
	if key != "" {
		s.adjustKeyed(w, r, id, cmd)
		return
	}
	if _, err := s.run(r, id, cmd); err != nil {
		s.writeErr(w, r, err)
		return
	}
	bal, err := s.cfg.Reader.BalanceOf(r.Context(), id)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, bal)
}

// adjustKeyed runs a keyed adjustment and answers the treasury as it was
// right after the key's event: the first answer and every repeat are the
// same, whatever moved the treasury since.
func (s *Server) adjustKeyed(w http.ResponseWriter, r *http.Request, id ids.SiteID, cmd aggregates.AdjustTreasury) {
	if _, err := s.cfg.Ledger.Execute(r.Context(), id, cmd, info(r).actor); err != nil {
		s.writeErr(w, r, err)
		return
	}
	var a aggregates.AdjustmentAnswer
	var ok bool
	if err := s.cfg.Ledger.ViewCtx(r.Context(), id, func(st *aggregates.Site) error {
		a, ok = st.KeyedAdjustment(cmd.IdempotencyKey)
		return nil
	}); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if !ok {
		s.writeErr(w, r, fmt.Errorf("site %s: adjustment %q missing after it was made", id, cmd.IdempotencyKey))
		return
	}
	s.writeData(w, r, projections.Balance{Balance: a.Balance, PendingWithdrawals: a.PendingWithdrawals,
		NegativeLimit: a.NegativeLimit, Available: a.Available(), Currency: projections.Currency})
}

func (s *Server) siteEvents(w http.ResponseWriter, r *http.Request) {
	id, err := siteParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if _, ok := s.cfg.Ledger.SiteConfig(id); !ok {
		if err := s.cfg.Ledger.Sync(r.Context(), id); err != nil {
			s.writeErr(w, r, err)
			return
		}
	}
	q := r.URL.Query()
	limit, err := queryLimit(q.Get("limit"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	page, err := s.cfg.Reader.History(r.Context(), id, q.Get("cursor"), limit)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, page)
}

func queryLimit(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 1000 {
		return 0, errBad("invalid_request", "limit", "limit must be 1 to 1000")
	}
	return n, nil
}

// bankBody is the body of method create and update.
type bankBody struct {
	Code           *string               `json:"code"`
	Name           *events.LocalizedName `json:"name"`
	IdentifierKind *string               `json:"identifierKind"`
	MinAmount      *int64                `json:"minAmount"`
	MaxAmount      *int64                `json:"maxAmount"`
	Deposit        *bool                 `json:"deposit"`
	Withdraw       *bool                 `json:"withdraw"`
	Accounts       *[]events.Account     `json:"accounts"`
	Enabled        *bool                 `json:"enabled"`
}

// bankView is a method as the operator API shows it.
type bankView struct {
	ID             string               `json:"_id"`
	Code           string               `json:"code"`
	Name           events.LocalizedName `json:"name"`
	IdentifierKind string               `json:"identifierKind"`
	MinAmount      int64                `json:"minAmount"`
	MaxAmount      int64                `json:"maxAmount"`
	Deposit        bool                 `json:"deposit"`
	Withdraw       bool                 `json:"withdraw"`
	Enabled        bool                 `json:"enabled"`
	Accounts       []events.Account     `json:"accounts"`
}

func viewBank(b *aggregates.Bank) bankView {
	v := bankView{ID: b.ID, Code: b.Code, Name: b.Name, IdentifierKind: string(b.IdentifierKind), MinAmount: b.MinAmount,
		MaxAmount: b.MaxAmount, Deposit: b.Deposit, Withdraw: b.Withdraw, Enabled: b.Enabled, Accounts: b.Accounts}
	if v.Accounts == nil {
		v.Accounts = []events.Account{}
	}
	return v
}

func (s *Server) opsBanks(w http.ResponseWriter, r *http.Request) {
	out := []bankView{}
	for _, b := range s.cfg.Ledger.Catalog().Banks() {
		out = append(out, viewBank(b))
	}
	s.writeData(w, r, out)
}

func (s *Server) createBank(w http.ResponseWriter, r *http.Request) {
	var b bankBody
	key, hash, err := decodeKeyed(w, r, &b)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if b.Enabled != nil {
		s.writeErr(w, r, errBad("invalid_request", "enabled", "a new method is enabled; disable it with PATCH"))
		return
	}
	// A keyed method's _id is derived from the key, so the catalog finds
	// the first request's method when the key comes again.
	id := ids.NewBank()
	if key != "" {
		id = ids.BankForKey(key)
	}
	cmd := aggregates.CreateBank{ID: string(id), Code: deref(b.Code), IdentifierKind: deref(b.IdentifierKind),
		MinAmount: derefInt(b.MinAmount), MaxAmount: derefInt(b.MaxAmount), Deposit: derefBool(b.Deposit), Withdraw: derefBool(b.Withdraw),
		IdempotencyKey: key, RequestHash: hash}
	if b.Name != nil {
		cmd.Name = *b.Name
	}
	if b.Accounts != nil {
		cmd.Accounts = *b.Accounts
	}
	s.catalogCommand(w, r, cmd.ID, key != "", cmd)
}

func (s *Server) updateBank(w http.ResponseWriter, r *http.Request) {
	var b bankBody
	if err := decodeJSON(w, r, &b); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if b.Code != nil || b.IdentifierKind != nil {
		field := "code"
		if b.Code == nil {
			field = "identifierKind"
		}
		s.writeErr(w, r, errBad("invalid_request", field, "code and identifierKind cannot change; create a new method"))
		return
	}
	raw, err := ids.ParseBank(chi.URLParam(r, "id"))
	if err != nil {
		s.writeErr(w, r, notFound("method"))
		return
	}
	bk, ok := s.cfg.Ledger.Catalog().Resolve(string(raw))
	if !ok {
		// It may have been created through another gateway process.
		if err := s.cfg.Ledger.CatchUpMiss(r.Context()); err != nil {
			s.writeErr(w, r, err)
			return
		}
		bk, ok = s.cfg.Ledger.Catalog().Resolve(string(raw))
	}
	if !ok {
		s.writeErr(w, r, &apiError{status: 404, code: "not_found", field: "id", message: "no method with this _id or code"})
		return
	}
	id := bk.ID
	cmd := aggregates.UpdateBank{ID: id, Name: b.Name, MinAmount: b.MinAmount, MaxAmount: b.MaxAmount, Deposit: b.Deposit,
		Withdraw: b.Withdraw, Accounts: b.Accounts, Enabled: b.Enabled}
	s.catalogCommand(w, r, id, false, cmd)
}

// catalogCommand runs a catalog command and answers the method id names:
// as it was created (a keyed creation, whose first answer and repeats
// must be the same) or as it now is.
func (s *Server) catalogCommand(w http.ResponseWriter, r *http.Request, id string, asCreated bool, cmd aggregates.CatalogCommand) {
	ctx := r.Context()
	if _, err := s.cfg.Ledger.ExecuteCatalog(ctx, cmd, info(r).actor); err != nil {
		s.writeErr(w, r, err)
		return
	}
	b, ok := s.cfg.Ledger.Catalog().Resolve(id)
	if !ok {
		s.writeErr(w, r, fmt.Errorf("method %s missing after command", id))
		return
	}
	if asCreated {
		b = b.AsCreated()
	}
	s.writeData(w, r, viewBank(b))
}

func (s *Server) listTransactions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	site, err := siteQuery(q.Get("site"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	f := projections.Filter{SiteID: site, Cursor: q.Get("cursor")}
	switch q.Get("type") {
	case "":
	case "deposit":
		f.Kind = aggregates.KindDeposit
	case "withdraw", "withdrawal":
		f.Kind = aggregates.KindWithdrawal
	default:
		s.writeErr(w, r, errBad("invalid_request", "type", "type must be deposit or withdrawal"))
		return
	}
	if st := q.Get("status"); st != "" {
		var ok bool
		if f.Status, ok = aggregates.ParseStatus(st); !ok {
			s.writeErr(w, r, errBad("invalid_request", "status", "status must be one of pending, processing, approved, rejected, expired, paid"))
			return
		}
	}
	if f.Limit, err = queryLimit(q.Get("limit")); err != nil {
		s.writeErr(w, r, err)
		return
	}
	page, err := s.cfg.Reader.List(r.Context(), f)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, page)
}

func (s *Server) opsTransaction(w http.ResponseWriter, r *http.Request) {
	id, err := txParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	site := id.Site()
	rec, err := s.cfg.Reader.ByID(r.Context(), site, id)
	if err != nil {
		if errors.Is(err, aggregates.ErrSiteNotFound) {
			err = aggregates.ErrNotFound
		}
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, projections.OpsRecord{SiteID: site, Record: rec})
}

// actionBody is the optional body of a transaction action.
type actionBody struct {
	Amount    *int64 `json:"amount"`
	Reason    string `json:"reason"`
	Reference string `json:"reference"`
}

// txAction runs an operator action on the transaction named in the path and
// answers with its record as it now is.
func (s *Server) txAction(mk func(id ids.TxID, b actionBody) aggregates.Command) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b actionBody
		if err := decodeJSON(w, r, &b); err != nil {
			s.writeErr(w, r, err)
			return
		}
		if b.Amount != nil && *b.Amount <= 0 {
			s.writeErr(w, r, errBad("invalid_request", "amount", "amount must be a positive whole number of IQD"))
			return
		}
		id, err := txParam(r)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		site := id.Site()
		rec, err := s.run(r, site, mk(id, b))
		if err != nil {
			if errors.Is(err, aggregates.ErrSiteNotFound) {
				err = aggregates.ErrNotFound
			}
			s.writeErr(w, r, err)
			return
		}
		s.writeData(w, r, projections.OpsRecord{SiteID: site, Record: rec})
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefBool(p *bool) bool { return p != nil && *p }

// randomSecret is a request-signing secret: 256 random bits.
func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// newWebhookSecret is a Standard Webhooks secret: whsec_ + base64 key.
func newWebhookSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}
