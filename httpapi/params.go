package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/iqdgateway/gateway/ids"
)

// Ids in paths and queries are parsed here, at the edge, into their types:
// everything below takes the type. An id that does not parse names nothing
// the gateway could have made, so it is answered like an unknown one: 404,
// never a read of the store.

func notFound(what string) *apiError {
	return &apiError{status: http.StatusNotFound, code: "not_found", message: "no such " + what}
}

// siteParam parses the {id} of a site route.
func siteParam(r *http.Request) (ids.SiteID, error) {
	id, err := ids.ParseSite(chi.URLParam(r, "id"))
	if err != nil {
		return "", notFound("site")
	}
	return id, nil
}

// txParam parses the {id} of a transaction route.
func txParam(r *http.Request) (ids.TxID, error) {
	id, err := ids.ParseTx(chi.URLParam(r, "id"))
	if err != nil {
		return "", notFound("transaction")
	}
	return id, nil
}

// siteQuery parses the optional site filter of a listing ("" when absent).
func siteQuery(v string) (ids.SiteID, error) {
	if v == "" {
		return "", nil
	}
	id, err := ids.ParseSite(v)
	if err != nil {
		return "", notFound("site")
	}
	return id, nil
}
