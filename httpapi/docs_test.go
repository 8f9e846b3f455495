package httpapi_test

import (
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocs_served: the gateway serves its documentation as HTML, and an
// error's docLink leads to the code's section of the errors page.
func TestDocs_served(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := http.Get(s.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, string(b)
	}
	r := s.get(site{AppKey: "ak_nope", Secret: "x"}, "/v1/balance", "")
	requireErr(t, r, 401, "unknown_app_key", "appKey")
	require.Equal(t, s.URL+"/docs/errors#unknown_app_key", r.DocLink)
	link := r.DocLink[len(s.URL):]
	res, page := get(link)
	require.Equal(t, 200, res.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
	assert.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'none'")
	assert.Regexp(t, `<h2 id="unknown_app_key">`, page)
	assert.Contains(t, page, `href="/docs/merchant-api#order-of-checks"`, "links between the documents lead to their pages")
	assert.NotRegexp(t, `href="[a-z-]+\.md`, page)

	res, index := get("/docs")
	require.Equal(t, 200, res.StatusCode)
	for _, p := range []string{"errors", "merchant-api", "callbacks", "operator-api"} {
		assert.Contains(t, index, `href="/docs/`+p+`"`)
		res, _ := get("/docs/" + p)
		assert.Equal(t, 200, res.StatusCode, p)
	}
	for _, p := range []string{"/docs/ARCHITECTURE", "/docs/errors.md", "/docs/..%2fREADME", "/docs/nope", "/docs/%2e%2e", "/docs/errors/x"} {
		r := s.rawDo(t, "GET", p, nil, "")
		requireErr(t, r, 404, "not_found", "")
	}
	res, _ = get("/docs/errors?x=<script>")
	assert.Equal(t, 200, res.StatusCode)
}

// TestDocs_configuredBase: with a docs base of its own (--docs-url), every
// error's docLink is under it.
func TestDocs_configuredBase(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{docsURL: "https://docs.example/gateway/"})
	r := s.get(site{AppKey: "ak_nope", Secret: "x"}, "/v1/balance", "")
	require.Equal(t, 401, r.HTTP)
	assert.Equal(t, "https://docs.example/gateway/errors#unknown_app_key", r.DocLink)
	assert.Regexp(t, regexp.MustCompile(`"docLink":"https://docs.example/gateway/errors#unknown_app_key"`), string(r.Raw))
}
