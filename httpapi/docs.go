package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// docsPage serves the documentation (docs/) as HTML pages: /docs lists
// them, /docs/errors is docs/errors.md, which every error answer's docLink
// points into by default (docs/errors.md).
func (s *Server) docsPage(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "page")
	pg, ok, err := s.docs.Get(name)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if !ok {
		s.writeErr(w, r, &apiError{status: http.StatusNotFound, code: "not_found", message: "no such page; /docs lists them"})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	_, _ = w.Write(pg.HTML)
}
