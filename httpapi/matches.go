package httpapi

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/matching"
	"github.com/iqdgateway/gateway/records"
)

// MaxMatchBody bounds the body of POST /ops/v1/matches: a statement of
// matching.MaxLines lines.
const MaxMatchBody = 512 << 10

// LateWindow is how long after its creation an expired deposit is still
// proposed for a transfer (docs/operator-api.md "Matching transfers"):
// a late transfer can still be approved.
const LateWindow = 72 * time.Hour

// maxCandidates bounds the deposits one matching compares.
const maxCandidates = 50_000

// matchBody is the JSON body of POST /ops/v1/matches: the statement's
// lines as pasted (text) or as records (transfers), not both.
type matchBody struct {
	Text      string         `json:"text"`
	Transfers []transferBody `json:"transfers"`
}

type transferBody struct {
	Amount    int64  `json:"amount"`
	Name      string `json:"name"`
	Time      string `json:"time"`
	Method    string `json:"method"`
	Reference string `json:"reference"`
}

// matches proposes pending deposits for incoming transfers (package
// matching). It reads and writes nothing else: approving a proposal is the
// approve action, with its role.
func (s *Server) matches(w http.ResponseWriter, r *http.Request) {
	site, err := siteQuery(r.URL.Query().Get("site"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	transfers, err := readTransfers(w, r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	deposits, err := s.matchCandidates(r.Context(), site)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	res, err := match(r.Context(), transfers, deposits)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, records.Page[matching.Result]{Items: res})
}

// match is matching.Match under the request's deadline. A matching cut
// short recorded nothing, like every 503 (docs/errors.md "unavailable"),
// and repeating it as it is would take as long again: the message says
// what to send instead.
func match(ctx context.Context, transfers []matching.Transfer, deposits []records.OpsRecord) ([]matching.Result, error) {
	res, err := matching.Match(ctx, transfers, deposits)
	if err != nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, code: "unavailable", cause: err,
			message: "the matching did not finish within the request's deadline; nothing was recorded: send fewer transfer lines, or match one site at a time"}
	}
	return res, nil
}

// readTransfers reads the transfers: text/csv, text/tab-separated-values
// or text/plain bodies are the statement's lines; JSON is matchBody.
func readTransfers(w http.ResponseWriter, r *http.Request) ([]matching.Transfer, error) {
	body, err := readBodyUpTo(w, r, MaxMatchBody)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var text string
	var b matchBody
	switch mt {
	case "text/csv", "text/tab-separated-values", "text/plain":
		text = string(body)
	default:
		if err := unmarshalStrict(r, body, &b); err != nil {
			return nil, err
		}
		text = b.Text
	}
	switch {
	case text != "" && len(b.Transfers) > 0:
		return nil, errBad("invalid_request", "transfers", "give text or transfers, not both")
	case len(b.Transfers) > 0:
		return transfersOf(b.Transfers)
	case strings.TrimSpace(text) == "":
		return nil, errBad("invalid_request", "text", "no transfer lines: give text (CSV or TSV: amount, name, time, method, reference) or transfers")
	}
	ts, err := matching.Parse(text)
	if err != nil {
		return nil, errBad("invalid_request", "text", lineErrors(err))
	}
	return ts, nil
}

// transfersOf checks transfers given as JSON.
func transfersOf(in []transferBody) ([]matching.Transfer, error) {
	if len(in) > matching.MaxLines {
		return nil, errBad("invalid_request", "transfers", fmt.Sprintf("at most %d transfers", matching.MaxLines))
	}
	out := make([]matching.Transfer, len(in))
	for i, t := range in {
		field := func(f string) string { return fmt.Sprintf("transfers[%d].%s", i, f) }
		if t.Amount <= 0 || t.Amount > 1<<50 {
			return nil, errBad("invalid_request", field("amount"), "amount must be a positive whole number of IQD")
		}
		if strings.TrimSpace(t.Name) == "" {
			return nil, errBad("invalid_request", field("name"), "the sender's name is missing")
		}
		for _, f := range []struct{ name, v string }{{"name", t.Name}, {"method", t.Method}, {"reference", t.Reference}} {
			if why := matching.CheckText(f.v); why != "" {
				return nil, errBad("invalid_request", field(f.name), f.name+": "+why)
			}
		}
		out[i] = matching.Transfer{Amount: t.Amount, Name: t.Name, Method: t.Method, Reference: t.Reference}
		if t.Time != "" {
			at, err := matching.ParseTime(t.Time)
			if err != nil {
				return nil, errBad("invalid_request", field("time"), err.Error())
			}
			out[i].Time = at
		}
	}
	return out, nil
}

// lineErrors lists a statement's unreadable lines, the first 20.
func lineErrors(err error) string {
	var lines []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			lines = append(lines, e.Error())
		}
	} else {
		lines = []string{err.Error()}
	}
	more := ""
	if len(lines) > 20 {
		more = fmt.Sprintf("; and %d more lines", len(lines)-20)
		lines = lines[:20]
	}
	what := "the transfer lines could not be read, nothing was matched: "
	if errors.Is(err, matching.ErrTooMany) || errors.Is(err, matching.ErrNoLines) {
		what = ""
	}
	return what + strings.Join(lines, "; ") + more
}

// matchCandidates lists the deposits a transfer may pay for: every pending
// one, and those expired that were created within LateWindow.
func (s *Server) matchCandidates(ctx context.Context, site ids.SiteID) ([]records.OpsRecord, error) {
	var out []records.OpsRecord
	for _, f := range []records.Filter{
		{SiteID: site, Kind: aggregates.KindDeposit, Status: aggregates.StatusPending, Limit: 1000},
		{SiteID: site, Kind: aggregates.KindDeposit, Status: aggregates.StatusExpired, Limit: 1000, From: s.cfg.Now().Add(-LateWindow)},
	} {
		for {
			page, err := s.cfg.Reader.List(ctx, f)
			if err != nil {
				return nil, err
			}
			out = append(out, page.Items...)
			if len(out) > maxCandidates {
				return nil, errBad("invalid_request", "site", fmt.Sprintf("more than %d deposits to compare: match one site at a time", maxCandidates))
			}
			if page.NextCursor == nil {
				break
			}
			f.Cursor = *page.NextCursor
		}
	}
	return out, nil
}
