package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

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
	Scoped         *bool                 `json:"scoped"`
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
	Scoped         bool                 `json:"scoped"`
	Accounts       []events.Account     `json:"accounts"`
}

func viewBank(b *aggregates.Bank) bankView {
	v := bankView{ID: b.ID, Code: b.Code, Name: b.Name, IdentifierKind: string(b.IdentifierKind), MinAmount: b.MinAmount,
		MaxAmount: b.MaxAmount, Deposit: b.Deposit, Withdraw: b.Withdraw, Enabled: b.Enabled, Scoped: b.Scoped, Accounts: b.Accounts}
	if v.Accounts == nil {
		v.Accounts = []events.Account{}
	}
	return v
}

func (s *Server) opsBanks(w http.ResponseWriter, r *http.Request) {
	// Read-your-writes, as listSites.
	if err := s.cfg.Ledger.CatchUp(r.Context()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	out := []bankView{}
	for _, b := range s.cfg.Ledger.Catalog().Banks() {
		out = append(out, viewBank(b))
	}
	// One page: the methods are few.
	s.writeData(w, r, records.Page[bankView]{Items: out})
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
		Scoped: derefBool(b.Scoped), IdempotencyKey: key, RequestHash: hash}
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
	bk, ok, err := s.resolveBank(r.Context(), string(raw))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if !ok {
		s.writeErr(w, r, &apiError{status: 404, code: "not_found", field: "id", message: "no method with this _id or code"})
		return
	}
	id := bk.ID
	cmd := aggregates.UpdateBank{ID: id, Name: b.Name, MinAmount: b.MinAmount, MaxAmount: b.MaxAmount, Deposit: b.Deposit,
		Withdraw: b.Withdraw, Accounts: b.Accounts, Enabled: b.Enabled, Scoped: b.Scoped}
	s.catalogCommand(w, r, id, false, cmd)
}

// resolveBank finds a method by _id or code; on a miss it first catches
// up with the stream, as the method may have just been created through
// another gateway process.
func (s *Server) resolveBank(ctx context.Context, ref string) (*aggregates.Bank, bool, error) {
	if b, ok := s.cfg.Ledger.Catalog().Resolve(ref); ok {
		return b, true, nil
	}
	if err := s.cfg.Ledger.CatchUpMiss(ctx); err != nil {
		return nil, false, err
	}
	b, ok := s.cfg.Ledger.Catalog().Resolve(ref)
	return b, ok, nil
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
