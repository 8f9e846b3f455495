package httpapi_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// consoleClient is a browser without a browser: it keeps no cookies and
// follows no redirects, so that each answer is seen as it is.
type consoleClient struct {
	t      *testing.T
	base   string
	cookie string
}

type htmlPage struct {
	status int
	header http.Header
	body   string
}

func (c *consoleClient) do(method, path, body string, hdr map[string]string) htmlPage {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	require.NoError(c.t, err)
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "gw_console", Value: c.cookie})
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := cl.Do(req)
	require.NoError(c.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(c.t, err)
	return htmlPage{res.StatusCode, res.Header, string(b)}
}

// formHeader is a form post's header.
func formHeader() map[string]string {
	return map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
}

// csrf reads the page's CSRF token.
func csrf(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `<meta name="csrf" content="`)
	require.True(t, ok, "no CSRF token in the page")
	tok, _, _ := strings.Cut(rest, `"`)
	require.Len(t, tok, 64)
	return tok
}

// TestConsole_sessions: signing in and out, what the cookie is, and that
// only a valid token gets in.
func TestConsole_sessions(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	s.newSite(nil, 0)
	op := s.newOperator(t, "Omar Operator", "operator")
	c := &consoleClient{t: t, base: s.URL}

	p := c.do("GET", "/console/deposits?status=pending", "", nil)
	require.Equal(t, 303, p.status)
	require.Equal(t, "/console/login?next=%2Fconsole%2Fdeposits%3Fstatus%3Dpending", p.header.Get("Location"))
	require.Equal(t, 401, c.do("GET", "/console/deposits?fragment=rows", "", nil).status, "a live refresh is told, not redirected")
	require.Equal(t, 303, c.do("GET", "/console", "", nil).status)

	p = c.do("GET", "/console/login", "", nil)
	require.Equal(t, 200, p.status)
	require.Equal(t, "no-store", p.header.Get("Cache-Control"))
	require.Equal(t, "DENY", p.header.Get("X-Frame-Options"))
	require.Contains(t, p.header.Get("Content-Security-Policy"), "script-src 'self'")

	login := func(tok, next string, hdr map[string]string) htmlPage {
		h := formHeader()
		for k, v := range hdr {
			h[k] = v
		}
		return c.do("POST", "/console/login", url.Values{"token": {tok}, "next": {next}}.Encode(), h)
	}
	for _, bad := range []string{"", "nope", adminToken + "x", "op_" + strings.Repeat("a", 43)} {
		p = login(bad, "", nil)
		require.Equal(t, 401, p.status, bad)
		require.Contains(t, p.body, "This token is not valid.")
		require.Empty(t, p.header.Values("Set-Cookie"))
	}
	require.Equal(t, 403, login(op.Token, "", map[string]string{"Origin": "https://evil.example"}).status)
	require.Equal(t, 403, login(op.Token, "", map[string]string{"Sec-Fetch-Site": "cross-site"}).status)

	for next, want := range map[string]string{
		"":                      "/console/deposits",
		"/console/match":        "/console/match",
		"//evil.example/":       "/console/deposits",
		"https://evil.example/": "/console/deposits",
		"/console/\\evil":       "/console/deposits",
		"/ops/v1/sites":         "/console/deposits",
	} {
		p = login(op.Token, next, map[string]string{"Origin": s.URL})
		require.Equal(t, 303, p.status)
		require.Equal(t, want, p.header.Get("Location"), next)
	}
	cookie := p.header.Get("Set-Cookie")
	require.Contains(t, cookie, "gw_console="+op.Token)
	for _, attr := range []string{"Path=/console", "HttpOnly", "SameSite=Strict"} {
		require.Contains(t, cookie, attr)
	}
	require.NotContains(t, cookie, "Secure", "plain HTTP")
	require.NotContains(t, cookie, "Max-Age", "a session cookie")

	c.cookie = op.Token
	p = c.do("GET", "/console/deposits", "", nil)
	require.Equal(t, 200, p.status)
	require.Contains(t, p.body, "Omar Operator")
	tok := csrf(t, p.body)

	// Sign-out needs the page's token.
	require.Equal(t, 403, c.do("POST", "/console/logout", "", formHeader()).status)
	require.Equal(t, 403, c.do("POST", "/console/logout", "csrf="+strings.Repeat("0", 64), formHeader()).status)
	p = c.do("POST", "/console/logout", "csrf="+tok, formHeader())
	require.Equal(t, 303, p.status)
	require.Contains(t, p.header.Get("Set-Cookie"), "Max-Age=0")

	// A revoked operator's cookie no longer gets in.
	requireOK(t, s.ops("DELETE", "/ops/v1/operators/"+op.ID, nil))
	require.Equal(t, 303, c.do("GET", "/console/deposits", "", nil).status)
	require.Equal(t, 401, c.do("POST", "/console/api/deposits/x-1/approve", "{}",
		map[string]string{"X-CSRF-Token": tok, "Content-Type": "application/json"}).status)
}

// TestConsole_api: the console's calls are the operator API's, with the
// session cookie and the page's CSRF token.
func TestConsole_api(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "c1", "u1", 25000)))
	op := s.newOperator(t, "Omar Operator", "operator")
	c := &consoleClient{t: t, base: s.URL, cookie: op.Token}
	tok := csrf(t, c.do("GET", "/console/deposits", "", nil).body)
	approve := "/console/api/deposits/" + d.TransactionID + "/approve"
	js := func(extra map[string]string) map[string]string {
		h := map[string]string{"Content-Type": "application/json"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	for name, h := range map[string]map[string]string{
		"no token":              nil,
		"wrong token":           {"X-CSRF-Token": strings.Repeat("0", 64)},
		"another session's":     {"X-CSRF-Token": csrf(t, (&consoleClient{t: t, base: s.URL, cookie: adminToken}).do("GET", "/console/deposits", "", nil).body)},
		"from another site":     {"X-CSRF-Token": tok, "Sec-Fetch-Site": "cross-site"},
		"with another origin":   {"X-CSRF-Token": tok, "Origin": "https://evil.example"},
		"token in a form field": {"Content-Type": "application/x-www-form-urlencoded"},
	} {
		t.Run(name, func(t *testing.T) {
			body := `{"amount":1000}`
			if h["Content-Type"] != "" {
				body = "csrf=" + tok
			}
			p := c.do("POST", approve, body, js(h))
			require.Equal(t, 403, p.status, p.body)
			require.Contains(t, p.body, "CSRF")
		})
	}
	require.Equal(t, "pending", s.status(t, d.TransactionID).Status)

	// Reads need no token; a call with it is the operator's own.
	p := c.do("GET", "/console/api/transactions?processId=c1", "", nil)
	require.Equal(t, 200, p.status)
	require.Contains(t, p.body, d.TransactionID)
	p = c.do("POST", approve, `{"amount":24000}`, js(map[string]string{"X-CSRF-Token": tok, "Origin": s.URL, "Sec-Fetch-Site": "same-origin"}))
	require.Equal(t, 200, p.status, p.body)
	items := s.history(t, st.ID)
	require.Equal(t, op.ID, items[len(items)-1].Actor)

	// The second approval is the API's 409, and the page tells who.
	p = c.do("POST", approve, `{}`, js(map[string]string{"X-CSRF-Token": tok}))
	require.Equal(t, 409, p.status)
	p = c.do("GET", "/console/tx/"+d.TransactionID+"?fragment=who", "", nil)
	require.Equal(t, 200, p.status)
	require.Equal(t, "approved by Omar Operator", p.body)
	p = c.do("GET", "/console/tx/"+d.TransactionID+"?fragment=who&lang=ar", "", nil)
	require.Equal(t, "مقبول بواسطة Omar Operator", p.body)
}

// TestConsole_pages: every page answers for a signed-in operator, and
// what cannot be shown is a page saying so.
func TestConsole_pages(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{noRun: true}})
	s.seedBanks()
	st := s.newSite(map[string]any{"name": "<b>Shop</b>"}, 100_000)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "<script>x</script>", "u1", 25000)))
	c := &consoleClient{t: t, base: s.URL, cookie: adminToken}
	for _, path := range []string{"/console/deposits", "/console/withdrawals", "/console/match", "/console/treasuries",
		"/console/callbacks", "/console/tx/" + d.TransactionID, "/console/deposits?fragment=rows", "/console/callbacks?fragment=rows"} {
		p := c.do("GET", path, "", nil)
		require.Equal(t, 200, p.status, path)
		require.Equal(t, "text/html; charset=utf-8", p.header.Get("Content-Type"))
		require.NotContains(t, p.body, "<script>x</script>", path)
		require.NotContains(t, p.body, "<b>Shop</b>", path)
	}
	require.Contains(t, c.do("GET", "/console/treasuries", "", nil).body, "100,000")

	for path, want := range map[string]struct {
		status int
		text   string
	}{
		"/console/deposits?minAmount=abc":      {400, "minAmount must be a positive whole number of IQD"},
		"/console/deposits?site=s-nope":        {404, "site"},
		"/console/tx/" + st.ID + "-999":        {404, "Not found"},
		"/console/tx/nope":                     {404, "Not found"},
		"/console/callbacks?status=sideways":   {400, "status must be pending, delivered or failed"},
		"/console/withdrawals?cursor=garbage!": {400, "cursor"},
	} {
		p := c.do("GET", path, "", nil)
		require.Equal(t, want.status, p.status, path)
		require.Contains(t, p.body, want.text, path)
	}

	// The matching form: CSRF first, then the lines.
	tok := csrf(t, c.do("GET", "/console/match", "", nil).body)
	post := func(v url.Values) htmlPage {
		return c.do("POST", "/console/match", v.Encode(), formHeader())
	}
	require.Equal(t, 403, post(url.Values{"lines": {"25000,Ali Kareem"}}).status)
	p := post(url.Values{"csrf": {tok}, "lines": {"25000,Ali Kareem"}})
	require.Equal(t, 200, p.status)
	require.Contains(t, p.body, `data-tx="`+d.TransactionID+`"`)
	p = post(url.Values{"csrf": {tok}, "lines": {"12x,Ali"}})
	require.Equal(t, 400, p.status)
	require.Contains(t, p.body, "line 1, amount")

	p = c.do("GET", "/console/static/console.js", "", nil)
	require.Equal(t, 200, p.status)
	assert.Contains(t, p.header.Get("Content-Type"), "javascript")
	require.Equal(t, 404, c.do("GET", "/console/static/nope.js", "", nil).status)
}

// TestConsole_sandboxRows: a sandbox site's transactions are marked in
// the queues, in matching and on their page, and offer no action: only
// their merchant moves them.
func TestConsole_sandboxRows(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{noRun: true}})
	s.seedBanks()
	sb := s.newSite(map[string]any{"sandbox": true}, 100_000)
	live := s.newSite(nil, 100_000)
	sd := rec(t, s.post(sb, pathDeposit, depositForm("ZAINCASH", "sb-1", "u1", 25000)))
	ld := rec(t, s.post(live, pathDeposit, depositForm("ZAINCASH", "lv-1", "u1", 25000)))
	sw := rec(t, s.post(sb, pathWithdraw, withdrawForm("ZAINCASH", "sbw-1", "u2", 5000, "07712345678")))
	c := &consoleClient{t: t, base: s.URL, cookie: adminToken}
	row := func(body, id string) string {
		i := strings.Index(body, `<tr id="tx-`+id+`"`)
		require.GreaterOrEqual(t, i, 0, "row of %s", id)
		j := strings.Index(body[i:], "</tr>")
		return body[i : i+j]
	}
	deps := c.do("GET", "/console/deposits", "", nil).body
	require.Contains(t, row(deps, sd.TransactionID), "badge sandbox")
	require.NotContains(t, row(deps, sd.TransactionID), "data-action")
	require.Contains(t, row(deps, ld.TransactionID), `data-action="approve"`)
	require.NotContains(t, row(deps, ld.TransactionID), "badge sandbox")
	require.NotContains(t, row(c.do("GET", "/console/withdrawals", "", nil).body, sw.TransactionID), "data-action")
	require.Contains(t, c.do("GET", "/console/tx/"+sd.TransactionID, "", nil).body, "badge sandbox")

	tok := csrf(t, c.do("GET", "/console/match", "", nil).body)
	p := c.do("POST", "/console/match", url.Values{"csrf": {tok}, "lines": {"25000,Ali Kareem"}}.Encode(), formHeader())
	require.Equal(t, 200, p.status)
	i := strings.Index(p.body, `data-tx="`+sd.TransactionID+`"`)
	require.GreaterOrEqual(t, i, 0, "the sandbox deposit is proposed")
	proposal := p.body[i : i+strings.Index(p.body[i:], "</tr>")]
	require.Contains(t, proposal, "badge sandbox")
	require.NotContains(t, proposal, "data-action")
}
