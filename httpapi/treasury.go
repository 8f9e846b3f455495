package httpapi

import (
	"fmt"
	"net/http"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

func (s *Server) adjust(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Amount          *int64 `json:"amount"`
		Reason          string `json:"reason"`
		AllowBelowLimit bool   `json:"allowBelowLimit"`
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
	cmd := aggregates.AdjustTreasury{Amount: *b.Amount, Reason: b.Reason, IdempotencyKey: key, RequestHash: hash,
		AllowBelowLimit: b.AllowBelowLimit}
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
	if err := s.cfg.Ledger.Read(r.Context(), id, ledger.Local, func(st *aggregates.Site) error {
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
	s.writeData(w, r, records.Balance{Balance: a.Balance, PendingWithdrawals: a.PendingWithdrawals,
		NegativeLimit: a.NegativeLimit, Available: a.Available(), Currency: records.Currency})
}
