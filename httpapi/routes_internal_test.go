package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRoutes_inOpenAPI: every route the router serves for merchants (and
// the hosted page) is in docs/openapi/merchant.json, and every operation
// there is a route. The console's pages (docs/console.md) and the
// operator API are not in that document.
func TestRoutes_inOpenAPI(t *testing.T) {
	s := New(Config{AdminToken: strings.Repeat("a", 32)})
	var routes []string
	require.NoError(t, chi.Walk(s.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(strings.ReplaceAll(route, "/*/", "/"), "/*")
		if strings.HasPrefix(route, "/v1/") || strings.HasPrefix(route, "/pay/") || route == "/openapi.json" {
			routes = append(routes, method+" "+route)
		}
		return nil
	}))
	raw, err := openapiFS.ReadFile("openapi/merchant.json")
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			// chi names a path parameter by the handler's name.
			route := strings.NewReplacer("{transactionId}", "{id}").Replace(path)
			if strings.HasPrefix(path, "/pay/") {
				route = strings.NewReplacer("{transactionId}", "{txId}").Replace(path)
			}
			documented = append(documented, strings.ToUpper(method)+" "+route)
		}
	}
	slices.Sort(routes)
	slices.Sort(documented)
	assert.Equal(t, routes, documented)
	assert.Len(t, routes, 9)
}
