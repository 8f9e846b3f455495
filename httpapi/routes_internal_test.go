package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/records"
)

// TestRoutes_inOpenAPI: every route the router serves is in one of the
// OpenAPI documents (the merchant API and the hosted page in
// merchant.json, the operator API and the health checks in ops.json),
// and every operation there is a route. The console's pages
// (docs/console.md; its /console/api is the operator API's own routes)
// and /metrics (docs/metrics.md, only when configured) are in neither.
func TestRoutes_inOpenAPI(t *testing.T) {
	// With a dispatcher, so that its routes are there too.
	s := New(Config{AdminToken: strings.Repeat("a", 32), Callbacks: routeOnly{}})
	var merchant, ops []string
	require.NoError(t, chi.Walk(s.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(strings.ReplaceAll(route, "/*/", "/"), "/*")
		switch {
		case strings.HasPrefix(route, "/v1/") || strings.HasPrefix(route, "/pay/") || route == "/openapi.json":
			merchant = append(merchant, method+" "+route)
		case strings.HasPrefix(route, "/ops/") || route == "/healthz" || route == "/readyz":
			ops = append(ops, method+" "+route)
		case strings.HasPrefix(route, "/console"), strings.HasPrefix(route, "/docs"):
			// Pages for people, not API calls: the console
			// (docs/console.md) and the documentation (docs/errors.md).
		default:
			t.Errorf("route %s %s is in no OpenAPI document", method, route)
		}
		return nil
	}))
	for _, c := range []struct {
		file   string
		routes []string
		params *strings.Replacer
	}{
		// chi names a path parameter as the handlers read it.
		{"merchant.json", merchant, strings.NewReplacer("/pay/{transactionId}", "/pay/{txId}", "{transactionId}", "{id}")},
		{"ops.json", ops, strings.NewReplacer()},
	} {
		raw, err := openapiFS.ReadFile("openapi/" + c.file)
		require.NoError(t, err)
		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(raw, &doc))
		var documented []string
		for path, item := range doc.Paths {
			for method := range item {
				documented = append(documented, strings.ToUpper(method)+" "+c.params.Replace(path))
			}
		}
		slices.Sort(c.routes)
		slices.Sort(documented)
		assert.Equal(t, c.routes, documented, c.file)
		assert.NotEmpty(t, c.routes)
	}
}

// routeOnly is a Callbacks that is never called: it only makes New
// register the callback routes.
type routeOnly struct{}

func (routeOnly) List(context.Context, callbacks.Filter) (records.Page[callbacks.Delivery], error) {
	return records.Page[callbacks.Delivery]{}, nil
}

func (routeOnly) Resend(context.Context, string, string) (callbacks.Delivery, error) {
	return callbacks.Delivery{}, nil
}
