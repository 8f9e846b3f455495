package httpapi

import (
	"errors"
	"net/http"

	"gateway/aggregates"
	"gateway/ids"
	"gateway/records"
)

func (s *Server) listTransactions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	site, err := siteQuery(q.Get("site"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	f := records.Filter{SiteID: site, Cursor: q.Get("cursor")}
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
	s.writeTx(w, r, site, rec, err)
}

// writeTx answers with the record of a transaction named in the path. The
// path names the transaction, so a site that does not exist is a
// transaction that does not exist.
func (s *Server) writeTx(w http.ResponseWriter, r *http.Request, site ids.SiteID, rec records.Record, err error) {
	if err != nil {
		if errors.Is(err, aggregates.ErrSiteNotFound) {
			err = aggregates.ErrNotFound
		}
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, records.OpsRecord{SiteID: site, Record: rec})
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
		s.writeTx(w, r, site, rec, err)
	}
}
