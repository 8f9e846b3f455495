package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// sandboxRoutes are a sandbox site's own actions on its transactions
// (docs/merchant-api.md "Sandbox sites"): what an operator does on a live
// site, done by the merchant through signed calls, to try the whole flow
// without real money or an operator. They are the operator actions'
// commands, recorded with the merchant as actor; a live site's merchant
// is refused (403) before anything is read.
func (s *Server) sandboxRoutes(r chi.Router) {
	// Registered whole under /sandbox rather than mounted there: a mount
	// would answer /sandbox itself, which is no endpoint, with the
	// credentials' checks instead of a 404 at once.
	r = r.With(s.sandboxOnly)
	r.Post("/sandbox/deposits/{id}/approve", s.sandboxAction([]string{"amount"}, func(id ids.TxID, f form) (aggregates.Command, error) {
		var amount int64
		if _, given := f["amount"]; given {
			// Held to the creation calls' rule: decimal digits only, so
			// "+5", " 5" or "" is refused there and here alike; only an
			// amount left out means the requested one.
			n, err := f.amount()
			if err != nil {
				return nil, err
			}
			amount = n
		}
		return aggregates.ApproveDeposit{TxID: id, Amount: amount, AnyAmount: true}, nil
	}))
	r.Post("/sandbox/deposits/{id}/reject", s.sandboxAction([]string{"reason"}, func(id ids.TxID, f form) (aggregates.Command, error) {
		return aggregates.RejectDeposit{TxID: id, Reason: orDefault(f.get("reason"), "rejected in the sandbox")}, nil
	}))
	r.Post("/sandbox/deposits/{id}/expire", s.sandboxAction(nil, func(id ids.TxID, _ form) (aggregates.Command, error) {
		return aggregates.ExpireDeposit{TxID: id, Now: true}, nil
	}))
	r.Post("/sandbox/withdrawals/{id}/process", s.sandboxAction(nil, func(id ids.TxID, _ form) (aggregates.Command, error) {
		return aggregates.ProcessWithdrawal{TxID: id}, nil
	}))
	r.Post("/sandbox/withdrawals/{id}/pay", s.sandboxAction([]string{"reference"}, func(id ids.TxID, f form) (aggregates.Command, error) {
		return aggregates.PayWithdrawal{TxID: id, Reference: f.get("reference")}, nil
	}))
	r.Post("/sandbox/withdrawals/{id}/reject", s.sandboxAction([]string{"reason"}, func(id ids.TxID, f form) (aggregates.Command, error) {
		return aggregates.RejectWithdrawal{TxID: id, Reason: orDefault(f.get("reason"), "rejected in the sandbox")}, nil
	}))
	r.Post("/sandbox/transactions/{id}/callbacks", s.sandboxAction([]string{"type"}, func(id ids.TxID, f form) (aggregates.Command, error) {
		if f.get("type") == "" {
			return nil, errBad("invalid_request", "type", "type is required: the callback type to send")
		}
		return aggregates.SandboxCallback{TxID: id, Type: f.get("type")}, nil
	}))
}

// orDefault is v, or d when v is blank (shows nothing): an optional text
// left blank counts as not given.
func orDefault(v, d string) string {
	if aggregates.Blank(v) {
		return d
	}
	return v
}

// sandboxOnly refuses the sandbox routes to a live site's merchant.
func (s *Server) sandboxOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cfg, ok := s.cfg.Ledger.SiteConfig(info(r).siteID); !ok || !cfg.Sandbox {
			s.writeErr(w, r, &apiError{status: http.StatusForbidden, code: "forbidden",
				message: "this is not a sandbox site: its transactions move only by an operator"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sandboxAction runs the command mk makes of the signed form (which may
// hold only fields) on a transaction of the caller's own site.
func (s *Server) sandboxAction(fields []string, mk func(ids.TxID, form) (aggregates.Command, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ri := info(r)
		id, err := txParam(r)
		if err == nil && id.Site() != ri.siteID {
			err = aggregates.ErrNotFound // another site's: as if there were none
		}
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		f, err := parseForm(r, fields)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		cmd, err := mk(id, f)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		ri.actor = events.ActorMerchant
		rec, err := s.run(r, ri.siteID, cmd)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		s.writeData(w, r, rec)
	}
}
