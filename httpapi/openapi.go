package httpapi

import (
	"embed"
	"net/http"
)

// openapiFS holds the OpenAPI documents of the APIs (docs/openapi holds
// the same files; a test keeps them equal).
//
//go:embed openapi/*.json
var openapiFS embed.FS

// serveOpenAPI answers one of the OpenAPI documents.
func serveOpenAPI(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := openapiFS.ReadFile("openapi/" + name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	}
}
