package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// Callbacks is what the operator API needs of the callback dispatcher
// (*callbacks.Dispatcher implements it): the deliveries, and a resend.
type Callbacks interface {
	// List returns one page of deliveries in stream order.
	List(ctx context.Context, f callbacks.Filter) (records.Page[callbacks.Delivery], error)
	// Resend delivers an event's callback again on behalf of actor.
	Resend(ctx context.Context, eventID, actor string) (callbacks.Delivery, error)
}

// listCallbacks serves GET /ops/v1/callbacks?status=&site=&cursor=&limit=.
// The status and the cursor are the dispatcher's to check.
func (s *Server) listCallbacks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := callbacks.Filter{Status: q.Get("status"), Cursor: q.Get("cursor")}
	var err error
	if f.SiteID, err = s.callbackSite(r.Context(), q.Get("site")); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if f.Limit, err = queryLimit(q.Get("limit")); err != nil {
		s.writeErr(w, r, err)
		return
	}
	page, err := s.cfg.Callbacks.List(r.Context(), f)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, page)
}

// callbackSite is the site a listing of deliveries is limited to, "" for
// all. A site that does not exist is 404, as in the transactions listing:
// an empty list would read as "nothing failed" for a misspelt id. (The
// read catches up with the stream for a site created a moment ago through
// another process.)
func (s *Server) callbackSite(ctx context.Context, v string) (ids.SiteID, error) {
	if v == "" {
		return "", nil
	}
	noSite := &apiError{status: http.StatusNotFound, code: "not_found", field: "site", message: "no such site"}
	site, err := ids.ParseSite(v)
	if err != nil {
		return "", noSite
	}
	if _, err := s.cfg.Reader.BalanceOf(ctx, site); err != nil {
		if errors.Is(err, aggregates.ErrSiteNotFound) {
			return "", noSite
		}
		return "", err
	}
	return site, nil
}

// resendCallback serves POST /ops/v1/callbacks/{eventId}/resend: the
// dispatcher parses the id, so an id that names nothing is its 404.
func (s *Server) resendCallback(w http.ResponseWriter, r *http.Request) {
	if err := decodeJSON(w, r, &struct{}{}); err != nil {
		s.writeErr(w, r, err)
		return
	}
	rec, err := s.cfg.Callbacks.Resend(r.Context(), chi.URLParam(r, "eventId"), info(r).actor)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.writeData(w, r, rec)
}
