package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// siteView is a site as the operator API shows it: its settings, as
// declared once in aggregates.Settings, and who it is. Secrets appear only
// in the answers that create them.
type siteView struct {
	ID ids.SiteID `json:"id"`
	aggregates.Settings
	// IPAllowlist, CallbackURL, ReturnURL and Support shadow the settings'
	// own fields: the API shows no allowlist as [] and no URL or contact
	// as null.
	IPAllowlist []string `json:"ipAllowlist"`
	CallbackURL *string  `json:"callbackUrl"`
	ReturnURL   *string  `json:"returnUrl"`
	Support     *string  `json:"supportContact"`
	Sandbox     bool     `json:"sandbox"`
	// Methods is null when the site offers every enabled method.
	Methods       []siteMethodView `json:"methods"`
	AppKey        string           `json:"appKey"`
	Secret        string           `json:"secret,omitempty"`
	WebhookSecret string           `json:"webhookSecret,omitempty"`
	CreatedAt     string           `json:"createdAt"`
	Treasury      *records.Balance `json:"treasury,omitempty"`
	// Available is only in the answer of an update that sets
	// negativeLimit: what its event says the new limit left available.
	Available *int64 `json:"available,omitempty"`
}

// siteMethodView is a method as a site offers it (0 and [] mean the
// method's own limits and accounts).
type siteMethodView struct {
	BankID    string           `json:"bankId"`
	MinAmount int64            `json:"minAmount"`
	MaxAmount int64            `json:"maxAmount"`
	Accounts  []events.Account `json:"accounts"`
}

func orEmpty(a []events.Account) []events.Account {
	if a == nil {
		return []events.Account{}
	}
	return a
}

// setSiteMethods serves PUT /ops/v1/sites/{id}/methods: the methods the
// site offers (docs/operator-api.md "Methods of a site").
func (s *Server) setSiteMethods(w http.ResponseWriter, r *http.Request) {
	var b struct {
		All     bool `json:"all"`
		Methods []struct {
			Bank      string           `json:"bank"`
			MinAmount int64            `json:"minAmount"`
			MaxAmount int64            `json:"maxAmount"`
			Accounts  []events.Account `json:"accounts"`
		} `json:"methods"`
	}
	if err := decodeJSON(w, r, &b); err != nil {
		s.writeErr(w, r, err)
		return
	}
	id, err := siteParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	cmd := aggregates.SetSiteMethods{All: b.All}
	for i, m := range b.Methods {
		bk, ok, err := s.resolveBank(r.Context(), m.Bank)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if !ok {
			s.writeErr(w, r, &apiError{status: 400, code: "unknown_bank", field: fmt.Sprintf("methods[%d].bank", i),
				message: fmt.Sprintf("%q is no method's code or _id", m.Bank)})
			return
		}
		cmd.Methods = append(cmd.Methods, events.SiteMethod{BankID: bk.ID, MinAmount: m.MinAmount, MaxAmount: m.MaxAmount, Accounts: m.Accounts})
	}
	if _, err := s.run(r, id, cmd); err != nil {
		s.writeErr(w, r, err)
		return
	}
	cfg, ok := s.cfg.Ledger.SiteConfig(id)
	if !ok {
		s.writeErr(w, r, aggregates.ErrSiteNotFound)
		return
	}
	s.writeData(w, r, viewSite(id, cfg))
}

// orNull shows "" as null.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func viewSite(id ids.SiteID, c *aggregates.Config) siteView {
	v := siteView{ID: id, Settings: c.Settings, IPAllowlist: c.IPAllowlist, AppKey: c.AppKey,
		CreatedAt: records.FormatTime(c.CreatedAt)}
	if v.IPAllowlist == nil {
		v.IPAllowlist = []string{}
	}
	v.CallbackURL, v.ReturnURL, v.Support = orNull(c.CallbackURL), orNull(c.ReturnURL), orNull(c.SupportContact)
	v.Sandbox = c.Sandbox
	if c.OwnMethods {
		v.Methods = []siteMethodView{}
		for _, m := range c.Methods {
			v.Methods = append(v.Methods, siteMethodView{BankID: m.BankID, MinAmount: m.MinAmount, MaxAmount: m.MaxAmount,
				Accounts: orEmpty(m.Accounts)})
		}
	}
	return v
}

func (s *Server) createSite(w http.ResponseWriter, r *http.Request) {
	// The body is the settings change itself; absent fields are nil.
	var b aggregates.SiteSettings
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
	appKey, secret, webhookSecret := NewSiteSecrets()
	cmd := aggregates.CreateSite{AppKey: appKey, Secret: secret,
		WebhookSecret: webhookSecret, Settings: b, IdempotencyKey: key, RequestHash: hash}
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
		if err := s.cfg.Ledger.Read(ctx, id, ledger.Local, func(st *aggregates.Site) error {
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
	// A listing reads its writes (docs/ARCHITECTURE.md "Read-your-writes"):
	// a site created through another gateway process a moment ago, or
	// before this one's start-up replay has reached it, is listed.
	if err := s.cfg.Ledger.CatchUp(r.Context()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	out := []siteView{}
	for _, id := range s.cfg.Ledger.SiteIDs() {
		if cfg, ok := s.cfg.Ledger.SiteConfig(id); ok {
			out = append(out, viewSite(id, cfg))
		}
	}
	s.writeData(w, r, records.Page[siteView]{Items: out})
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
	// The body is the settings change itself; absent fields are nil.
	var b aggregates.SiteSettings
	if err := decodeJSON(w, r, &b); err != nil {
		s.writeErr(w, r, err)
		return
	}
	id, err := siteParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	lr, err := s.cfg.Ledger.Execute(r.Context(), id, aggregates.UpdateSite{Settings: b}, info(r).actor)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	cfg, _ := s.cfg.Ledger.SiteConfig(id)
	v := viewSite(id, cfg)
	for _, e := range lr.Events {
		if p, ok := e.Payload.(*events.SiteUpdated); ok {
			v.Available = p.Available
		}
	}
	s.writeData(w, r, v)
}

// run executes a site command on behalf of the authenticated operator and
// returns the record of the transaction it concerned, if any.
func (s *Server) run(r *http.Request, siteID ids.SiteID, cmd aggregates.Command) (records.Record, error) {
	ctx := r.Context()
	lr, err := s.cfg.Ledger.Execute(ctx, siteID, cmd, info(r).actor)
	if err != nil || lr.Decision.Tx < 0 {
		return records.Record{}, err
	}
	return s.cfg.Reader.FromResult(ctx, siteID, records.Committed(lr))
}

func (s *Server) siteEvents(w http.ResponseWriter, r *http.Request) {
	id, err := siteParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if _, ok := s.cfg.Ledger.SiteConfig(id); !ok {
		if err := s.cfg.Ledger.Read(r.Context(), id, ledger.Fresh, nil); err != nil {
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
