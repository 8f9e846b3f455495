package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// A gateway that is still waiting for its event store is up and not
// ready: /healthz 200, every other path (hostile ones included) 503
// unavailable in the envelope, with Retry-After and what it waits for;
// a request over the header limit is 431 headers_too_large, as later.
func TestStarting(t *testing.T) {
	log := testkit.NewLog(t, slog.LevelInfo).Logger
	srv := httptest.NewServer(httpapi.Starting("v-test", log, func() string { return "waiting for the ledger stream" }))
	t.Cleanup(srv.Close)
	get := func(method, path string) (*http.Response, map[string]any) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
		return res, body
	}
	res, body := get("GET", "/healthz")
	assert.Equal(t, 200, res.StatusCode)
	assert.Equal(t, "v-test", body["app_version"])
	assert.NotEmpty(t, res.Header.Get("Request-Id"))
	for _, c := range []struct{ method, path string }{
		{"GET", "/readyz"}, {"POST", "/v1/transactions/deposit"}, {"GET", "/ops/v1/sites"},
		{"POST", "/healthz"}, {"GET", "/v1/%2e%2e/*"}, {"GET", "/%3E"}, {"GET", "/metrics"},
	} {
		res, body := get(c.method, c.path)
		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%s %s", c.method, c.path)
		assert.Equal(t, "1", res.Header.Get("Retry-After"))
		assert.Equal(t, "unavailable", body["code"])
		assert.Nil(t, body["data"])
		assert.Contains(t, body["message"], "waiting for the ledger stream")
		assert.Contains(t, body["message"], "nothing was recorded")
	}
	// The header limit holds while the gateway starts too.
	for _, path := range []string{"/healthz", "/ops/v1/sites"} {
		res, body := get("GET", path+"?pad="+strings.Repeat("x", httpapi.MaxHeader))
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, res.StatusCode, path)
		assert.Equal(t, "headers_too_large", body["code"], path)
		assert.EqualValues(t, http.StatusRequestHeaderFieldsTooLarge, body["status"], path)
		assert.Equal(t, res.Header.Get("Request-Id"), body["requestId"], path)
		assert.True(t, res.Close, path)
	}
}
