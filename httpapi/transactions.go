package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

func (s *Server) listTransactions(w http.ResponseWriter, r *http.Request) {
	q, err := strictQuery(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	f, err := txFilter(q)
	if err != nil {
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

// txFilters are the parameters of GET /ops/v1/transactions, each with how
// it sets the filter (docs/operator-api.md "Searching transactions").
var txFilters = map[string]func(f *records.Filter, v string) error{
	"site": func(f *records.Filter, v string) (err error) {
		f.SiteID, err = siteQuery(v)
		return err
	},
	"type": func(f *records.Filter, v string) error {
		switch v {
		case "deposit":
			f.Kind = aggregates.KindDeposit
		case "withdraw", "withdrawal":
			f.Kind = aggregates.KindWithdrawal
		default:
			return errBad("invalid_request", "type", "type must be deposit or withdrawal")
		}
		return nil
	},
	"status": func(f *records.Filter, v string) error {
		var ok bool
		if f.Status, ok = aggregates.ParseStatus(v); !ok {
			return errBad("invalid_request", "status", "status must be one of pending, processing, approved, rejected, expired, paid")
		}
		return nil
	},
	"transactionId": func(f *records.Filter, v string) error {
		id, err := ids.ParseTx(v)
		if err != nil {
			return errBad("invalid_request", "transactionId", "transactionId is not a transaction id of this gateway")
		}
		f.TxID = id
		return nil
	},
	"processId": textFilter("processId", func(f *records.Filter) *string { return &f.ProcessID }),
	"userId":    textFilter("userId", func(f *records.Filter) *string { return &f.UserID }),
	"name":      textFilter("name", func(f *records.Filter) *string { return &f.Name }),
	"method":    textFilter("method", func(f *records.Filter) *string { return &f.Method }),
	"minAmount": func(f *records.Filter, v string) (err error) {
		f.MinAmount, err = queryAmount("minAmount", v)
		return err
	},
	"maxAmount": func(f *records.Filter, v string) (err error) {
		f.MaxAmount, err = queryAmount("maxAmount", v)
		return err
	},
	"from": func(f *records.Filter, v string) (err error) {
		f.From, err = queryTime("from", v)
		return err
	},
	"to": func(f *records.Filter, v string) (err error) {
		f.To, err = queryTime("to", v)
		return err
	},
	"order": func(f *records.Filter, v string) error {
		switch v {
		case "oldest":
			f.Order = records.Oldest
		case "newest":
			f.Order = records.Newest
		default:
			return errBad("invalid_request", "order", "order must be oldest or newest")
		}
		return nil
	},
	"cursor": func(f *records.Filter, v string) error {
		f.Cursor = v
		return nil
	},
	"limit": func(f *records.Filter, v string) (err error) {
		f.Limit, err = queryLimit(v)
		return err
	},
}

// maxSearchText bounds a text filter: longer than any stored value.
const maxSearchText = 256

// textFilter sets the text filter field to the parameter's value.
func textFilter(field string, dst func(*records.Filter) *string) func(*records.Filter, string) error {
	return func(f *records.Filter, v string) error {
		if len(v) > maxSearchText {
			return errBad("invalid_request", field, fmt.Sprintf("%s is at most %d bytes", field, maxSearchText))
		}
		*dst(f) = v
		return nil
	}
}

// txFilter reads the listing's parameters. A parameter it does not know is
// refused, naming it, rather than ignored: a search that quietly drops a
// misspelt filter answers with everything, which looks like a result.
func txFilter(q url.Values) (records.Filter, error) {
	var f records.Filter
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same request names the same parameter
	for _, k := range keys {
		set, ok := txFilters[k]
		if !ok {
			return f, errBad("invalid_request", k, fmt.Sprintf("unknown parameter %q; the filters are %s", k, filterNames()))
		}
		if len(q[k]) > 1 {
			return f, errBad("invalid_request", k, k+" is given more than once")
		}
		if v := q[k][0]; v != "" {
			if err := set(&f, v); err != nil {
				return f, err
			}
		}
	}
	if f.MinAmount != 0 && f.MaxAmount != 0 && f.MinAmount > f.MaxAmount {
		return f, errBad("invalid_request", "maxAmount", "maxAmount is below minAmount")
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, errBad("invalid_request", "to", "to must be after from")
	}
	return f, nil
}

func filterNames() string {
	n := make([]string, 0, len(txFilters))
	for k := range txFilters {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// queryAmount reads an amount bound: a positive whole number of IQD.
func queryAmount(field, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, errBad("invalid_request", field, field+" must be a positive whole number of IQD")
	}
	return n, nil
}

// queryTime reads a time bound: RFC 3339, as records show times; its "T"
// and "Z" may be lower case (RFC 3339 section 5.6), and its offset is
// checked as Go's parser does not: an hour past 23 or a minute past 59
// ("-24:00") is no offset.
func queryTime(field, v string) (time.Time, error) {
	v = strings.ToUpper(v)
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !strings.HasSuffix(v, "Z") && !validOffset(v[len(v)-6:]) {
		return time.Time{}, errBad("invalid_request", field, field+" must be a time in RFC 3339, e.g. 2026-01-02T15:04:05Z")
	}
	return t, nil
}

// validOffset reports whether off, "±hh:mm", is an offset RFC 3339 allows.
func validOffset(off string) bool {
	h, err1 := strconv.Atoi(off[1:3])
	m, err2 := strconv.Atoi(off[4:6])
	return err1 == nil && err2 == nil && h <= 23 && m <= 59
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
func (s *Server) txAction(mk func(id ids.TxID, b actionBody, role aggregates.Role) aggregates.Command) http.HandlerFunc {
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
		role, _ := r.Context().Value(roleKey{}).(aggregates.Role)
		rec, err := s.run(r, site, mk(id, b, role))
		s.writeTx(w, r, site, rec, err)
	}
}
