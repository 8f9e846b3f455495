package httpapi_test

import (
	"encoding/base64"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/records"
)

// consoleClient is a browser without a browser: it keeps no cookies and
// follows no redirects, so that each answer is seen as it is.
type consoleClient struct {
	t    *testing.T
	base string
	// token is the signed-in operator's token, sent in the session cookie
	// as the console writes it; cookie, when set, is sent as the cookie's
	// value instead, as it is.
	token, cookie string
}

// sessionCookie is the session cookie's value for tok (base64url).
func sessionCookie(tok string) string { return base64.RawURLEncoding.EncodeToString([]byte(tok)) }

type htmlPage struct {
	status int
	header http.Header
	body   string
}

func (c *consoleClient) do(method, path, body string, hdr map[string]string) htmlPage {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	require.NoError(c.t, err)
	switch {
	case c.cookie != "":
		req.AddCookie(&http.Cookie{Name: "gw_console", Value: c.cookie})
	case c.token != "":
		req.AddCookie(&http.Cookie{Name: "gw_console", Value: sessionCookie(c.token)})
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
	require.Contains(t, cookie, "gw_console="+sessionCookie(op.Token))
	for _, attr := range []string{"Path=/console", "HttpOnly", "SameSite=Strict"} {
		require.Contains(t, cookie, attr)
	}
	require.NotContains(t, cookie, "Secure", "plain HTTP")
	require.NotContains(t, cookie, "Max-Age", "a session cookie")

	// A cookie of the former format (the token as it is) is signed out.
	c.cookie = op.Token
	require.Equal(t, 303, c.do("GET", "/console/deposits", "", nil).status)
	c.cookie, c.token = "", op.Token
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
	c := &consoleClient{t: t, base: s.URL, token: op.Token}
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
		"another session's":     {"X-CSRF-Token": csrf(t, (&consoleClient{t: t, base: s.URL, token: adminToken}).do("GET", "/console/deposits", "", nil).body)},
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
	c := &consoleClient{t: t, base: s.URL, token: adminToken}
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
		// A field is named by the form's label, not the API's parameter.
		"/console/deposits?minAmount=abc":                  {400, "“<bdi>Amount from</bdi>” must be a positive whole number of IQD"},
		"/console/deposits?minAmount=3000&maxAmount=2,000": {400, "“<bdi>Amount to</bdi>” is below “<bdi>Amount from</bdi>”"},
		"/console/deposits?minAmount=abc&lang=ar":          {400, `الطلب غير صالح (<bdi>المبلغ من</bdi>): <bdi dir="ltr">“<bdi>المبلغ من</bdi>” must be`},
		"/console/deposits?site=s-nope":                    {404, "no such site"},
		"/console/tx/" + st.ID + "-999":                    {404, "Not found"},
		"/console/tx/nope":                                 {404, "Not found"},
		"/console/callbacks?status=sideways":               {400, "“<bdi>Status</bdi>” must be pending, delivered or failed"},
		"/console/callbacks?site=s-nope":                   {404, "Site: no such site"},
		"/console/withdrawals?cursor=garbage!":             {400, "cursor"},
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
	c := &consoleClient{t: t, base: s.URL, token: adminToken}
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
	require.Contains(t, proposal, "a sandbox site&#39;s test deposit")
	require.Less(t, strings.Index(p.body, `data-tx="`+ld.TransactionID+`"`), i, "the live deposit first")
	require.NotContains(t, proposal, "data-action")
}

// TestConsole_anyAdminToken: any token the operator API takes signs in to
// the console, also one with characters a cookie value cannot hold as they
// are (; " \ , and spaces): the cookie carries it encoded.
func TestConsole_anyAdminToken(t *testing.T) {
	pad := strings.Repeat("x", 32)
	for _, tok := range []string{pad + `;path=/`, pad + `"quoted"`, pad + `back\slash`, pad + ",comma", pad + " with spaces", pad + "توكن"} {
		t.Run(tok[32:], func(t *testing.T) {
			srv := httptest.NewServer(httpapi.New(httpapi.Config{AdminToken: tok, Reader: records.NewReader(nil, nil, "http://gw.example"),
				Logger: slog.New(slog.DiscardHandler)}))
			t.Cleanup(srv.Close)
			jar, err := cookiejar.New(nil)
			require.NoError(t, err)
			cl := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			get := func(method, path string, form url.Values) (*http.Response, string) {
				req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(form.Encode()))
				require.NoError(t, err)
				if form != nil {
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				}
				res, err := cl.Do(req)
				require.NoError(t, err)
				defer res.Body.Close()
				b, err := io.ReadAll(res.Body)
				require.NoError(t, err)
				return res, string(b)
			}

			res, _ := get("POST", "/console/login", url.Values{"token": {tok}, "next": {"/console/tx/nope"}})
			require.Equal(t, 303, res.StatusCode)
			require.Equal(t, "/console/tx/nope", res.Header.Get("Location"))
			for _, attr := range []string{"Path=/console", "HttpOnly", "SameSite=Strict"} {
				require.Contains(t, res.Header.Get("Set-Cookie"), attr)
			}
			// Signed in: the page itself (a transaction that is not
			// there), not the way back to the sign-in.
			res, page := get("GET", "/console/tx/nope", nil)
			require.Equal(t, 404, res.StatusCode, page)
			require.Contains(t, page, "Signed in as")
			// The script's calls carry it too: the API's own 404, not 401.
			res, body := get("GET", "/console/api/nope", nil)
			require.Equal(t, 404, res.StatusCode, body)
			// And the page's CSRF token is the session's.
			res, _ = get("POST", "/console/logout", url.Values{"csrf": {csrf(t, page)}})
			require.Equal(t, 303, res.StatusCode)
			require.Equal(t, "/console/login", res.Header.Get("Location"))
			res, _ = get("GET", "/console/tx/nope", nil)
			require.Equal(t, 303, res.StatusCode, "signed out")
		})
	}
}

// TestConsole_refusals: what the console answers for what it does not
// have (a page, a file, a fragment, a method) and for a search it cannot
// run: its own HTML page saying so in words, or, for the script's
// fragments, the words alone; never an ERROR in the log.
func TestConsole_refusals(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{noRun: true}})
	s.seedBanks()
	st := s.newSite(nil, 100_000)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "r-1", "u1", 25000)))
	c := &consoleClient{t: t, base: s.URL, token: adminToken}
	const page, plain, jsonType = "text/html; charset=utf-8", "text/plain; charset=utf-8", "application/json; charset=utf-8"
	for _, tc := range []struct {
		method, path string
		status       int
		contentType  string
		text         string
	}{
		{"GET", "/console/match?fragment=rows", 404, plain, `this page has no fragment "rows"`},
		{"GET", "/console/tx/" + d.TransactionID + "?fragment=rows", 404, plain, `this page has no fragment "rows"`},
		{"GET", "/console/deposits?fragment=nope", 404, plain, `this page has no fragment "nope"`},
		{"GET", "/console/callbacks?fragment=rows&status=sideways", 400, plain, "status must be pending, delivered or failed"},
		{"GET", "/console/treasuries?fragment=rows", 200, page, "100,000"},
		{"GET", "/console/static/", 404, page, "there is no such file in the console"},
		{"GET", "/console/static/nope.js", 404, page, "there is no such file in the console"},
		{"GET", "/console/nonexistent", 404, page, "there is no such page in the console"},
		{"GET", "/console/logout", 405, page, "GET is not allowed here; the methods are POST"},
		{"GET", "/console/api/nonexistent", 404, jsonType, `"code":"not_found"`},
		{"GET", "/console/deposits?from=2026-13-01", 400, page, "“<bdi>From</bdi>” must be a date, YYYY-MM-DD (e.g. 2026-01-02)"},
		{"GET", "/console/deposits?to=2026-01-02T15:04:05Z", 400, page, "“<bdi>To</bdi>” must be a date, YYYY-MM-DD"},
		// In Arabic the code's text and the field's label come first, the
		// API's English words after them, isolated, the field named by its
		// label there too.
		{"GET", "/console/deposits?from=2026-13-01&lang=ar", 400, page, `الطلب غير صالح (<bdi>من</bdi>): <bdi dir="ltr">“<bdi>من</bdi>” must be a date, YYYY-MM-DD`},
		{"GET", "/console/nonexistent?lang=ckb", 404, page, `نەدۆزرایەوە: <bdi dir="ltr">there is no such page in the console</bdi>`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			p := c.do(tc.method, tc.path, "", nil)
			require.Equal(t, tc.status, p.status, p.body)
			assert.Equal(t, tc.contentType, p.header.Get("Content-Type"))
			assert.Contains(t, p.body, tc.text)
			assert.NotContains(t, p.body, "RFC 3339")
			if tc.contentType == page && !strings.Contains(tc.path, "fragment=") {
				assert.Contains(t, p.body, `<main id="main">`, "the console's own page")
			}
		})
	}
	// A file is still served to anyone.
	p := (&consoleClient{t: t, base: s.URL}).do("GET", "/console/static/console.css", "", nil)
	require.Equal(t, 200, p.status)
	require.Contains(t, p.header.Get("Content-Type"), "text/css")
	require.Equal(t, 405, c.do("GET", "/console/logout", "", nil).status)
	require.Equal(t, "POST", c.do("GET", "/console/logout", "", nil).header.Get("Allow"))
}

// TestConsole_langLinks: the language links keep the page as it is
// (filters, cursor), lang and fragment excepted.
func TestConsole_langLinks(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	s.newSite(nil, 0)
	c := &consoleClient{t: t, base: s.URL, token: adminToken}
	hrefs := regexp.MustCompile(`<a href="([^"]*)" lang="(\w+)"`)
	for _, tc := range []struct {
		path string
		want url.Values
	}{
		{"/console/deposits", url.Values{}},
		{"/console/deposits?status=approved&name=Ali+K%C3%A4reem&from=2026-01-02&cursor=abc&lang=ar",
			url.Values{"status": {"approved"}, "name": {"Ali Käreem"}, "from": {"2026-01-02"}, "cursor": {"abc"}}},
		{"/console/callbacks?status=failed", url.Values{"status": {"failed"}}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			body := c.do("GET", tc.path, "", nil).body
			links := hrefs.FindAllStringSubmatch(body, -1)
			require.Len(t, links, 3)
			for _, l := range links {
				u, err := url.Parse(html.UnescapeString(l[1]))
				require.NoError(t, err)
				want := url.Values{"lang": {l[2]}}
				for k, v := range tc.want {
					want[k] = v
				}
				assert.Equal(t, want, u.Query(), l[1])
			}
		})
	}
}

// TestConsole_bidiIsolated: every text a merchant or an operator wrote
// (names, senderName, processId, userId, site and operator names,
// reasons) is isolated on every page, so that a right-to-left override in
// it cannot reorder the text around it.
func TestConsole_bidiIsolated(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	const rlo = "\u202e"
	st := s.newSite(map[string]any{"name": "Shop" + rlo + "gpj.exe"}, 100_000)
	op := s.newOperator(t, "Omar"+rlo+"rotarepO", "operator")
	f := depositForm("ZAINCASH", "pid"+rlo+"1", "uid"+rlo+"1", 25000)
	f.Set("name", "Ali"+rlo+"Kareem")
	f.Set("senderName", "Sender"+rlo+"Name")
	d := rec(t, s.post(st, pathDeposit, f))
	w := rec(t, s.post(st, pathWithdraw, with(withdrawForm("ZAINCASH", "wid"+rlo+"1", "u2", 5000, "07712345678"),
		"accountName", ptr("Acc"+rlo+"Name"))))
	requireOK(t, s.opsAs(t, op.Token, "POST", "/ops/v1/withdrawals/"+w.TransactionID+"/reject", map[string]any{"reason": "why" + rlo + "not"}))

	c := &consoleClient{t: t, base: s.URL, token: op.Token}
	tok := csrf(t, c.do("GET", "/console/match", "", nil).body)
	for _, p := range []htmlPage{
		c.do("GET", "/console/deposits", "", nil),
		c.do("GET", "/console/withdrawals?status=", "", nil),
		c.do("GET", "/console/treasuries", "", nil),
		c.do("GET", "/console/tx/"+d.TransactionID, "", nil),
		c.do("GET", "/console/tx/"+w.TransactionID, "", nil),
		c.do("POST", "/console/match", url.Values{"csrf": {tok}, "lines": {"25000,Ali" + rlo + "Kareem,,ZAINCASH,ref" + rlo + "1"}}.Encode(), formHeader()),
	} {
		require.Equal(t, 200, p.status, p.body)
		require.Contains(t, p.body, rlo)
		for i := strings.Index(p.body, rlo); i >= 0; i = next(p.body, rlo, i) {
			before := p.body[:i]
			tagStart, tagEnd := strings.LastIndex(before, "<"), strings.LastIndex(before, ">")
			if tagStart > tagEnd {
				continue // in an attribute: an attribute's text reorders nothing else
			}
			tag := before[tagStart : tagEnd+1]
			value := before[tagEnd+1:]
			if strings.HasPrefix(tag, "<option") || strings.HasPrefix(tag, "<textarea") {
				continue // a control of its own
			}
			assert.True(t, strings.HasPrefix(tag, "<bdi") && !strings.ContainsAny(value, " ·/("),
				"not isolated: %s", p.body[max(0, tagStart-80):min(len(p.body), i+40)])
		}
	}
}

// next is the index of sub in s after i, or -1.
func next(s, sub string, i int) int {
	j := strings.Index(s[i+len(sub):], sub)
	if j < 0 {
		return -1
	}
	return i + len(sub) + j
}

// TestConsole_txPage: a transaction's page names the people in its
// history (not their operator ids), and its two headings differ.
func TestConsole_txPage(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	op := s.newOperator(t, "Omar Operator", "operator")
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "h-1", "u1", 25000)))
	requireOK(t, s.opsAs(t, op.Token, "POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", nil))

	body := (&consoleClient{t: t, base: s.URL, token: adminToken}).do("GET", "/console/tx/"+d.TransactionID, "", nil).body
	_, history, ok := strings.Cut(body, `id="tx-history"`)
	require.True(t, ok)
	assert.Contains(t, history, `<td class="actor"><bdi>Omar Operator</bdi></td>`)
	assert.Contains(t, history, `<td class="actor"><bdi>merchant</bdi></td>`)
	assert.NotContains(t, body, op.ID)
	h1 := regexp.MustCompile(`<h1>(.*?)</h1>`).FindStringSubmatch(body)
	h2 := regexp.MustCompile(`<h2 id="history">(.*?)</h2>`).FindStringSubmatch(body)
	require.Len(t, h1, 2)
	require.Len(t, h2, 2)
	assert.Equal(t, "Transaction", h1[1])
	assert.Equal(t, "History", h2[1])
}

// TestConsole_treasuriesReadTheStoreOnce: the treasuries list, which
// refreshes itself every few seconds, catches up with the stream once for
// every site (a read of its last sequence), not once per site, and shows
// each site's balance.
func TestConsole_treasuriesReadTheStoreOnce(t *testing.T) {
	e := newEnv(t)
	var reads atomic.Int64
	s := e.newStack(stackOptions{reads: &reads})
	var sites []site
	for i := range 6 {
		sites = append(sites, s.newSite(nil, int64(1000*(i+1))))
	}
	c := &consoleClient{t: t, base: s.URL, token: adminToken}
	before := reads.Load()
	p := c.do("GET", "/console/treasuries?fragment=rows", "", nil)
	require.Equal(t, 200, p.status, p.body)
	assert.Equal(t, int64(1), reads.Load()-before, "one read for six sites")
	for i, st := range sites {
		assert.Contains(t, p.body, st.ID)
		assert.Contains(t, p.body, records.Group(int64(1000*(i+1))))
	}
}

// TestConsole_callbacksBySite: the callbacks list names each delivery's
// site and is filtered by it (GET /ops/v1/callbacks's site filter), the
// filter kept by the live refresh and the language links.
func TestConsole_callbacksBySite(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 200)
	one := s.newSite(map[string]any{"name": "Shop One", "callbackUrl": rcv.url()}, 0)
	two := s.newSite(map[string]any{"name": "Shop Two", "callbackUrl": rcv.url()}, 0)
	id1 := s.eventID(t, one.ID, "deposit.approved.v1", s.approvedDeposit(t, one))
	id2 := s.eventID(t, two.ID, "deposit.approved.v1", s.approvedDeposit(t, two))
	s.waitDelivery(t, "", id1, "delivered", 0)
	s.waitDelivery(t, "", id2, "delivered", 0)
	c := &consoleClient{t: t, base: s.URL, token: adminToken}
	row := func(body, id string) string {
		i := strings.Index(body, `<tr id="cb-`+id+`"`)
		if i < 0 {
			return ""
		}
		return body[i : i+strings.Index(body[i:], "</tr>")]
	}

	all := c.do("GET", "/console/callbacks", "", nil)
	require.Equal(t, 200, all.status)
	assert.Contains(t, row(all.body, id1), `<td class="site"><bdi>Shop One</bdi></td>`)
	assert.Contains(t, row(all.body, id2), `<td class="site"><bdi>Shop Two</bdi></td>`)
	assert.Contains(t, all.body, `<option value="`+two.ID+`">Shop Two</option>`)

	for _, path := range []string{"/console/callbacks?site=" + two.ID, "/console/callbacks?fragment=rows&site=" + two.ID} {
		p := c.do("GET", path, "", nil)
		require.Equal(t, 200, p.status, path)
		assert.NotEmpty(t, row(p.body, id2), path)
		assert.Empty(t, row(p.body, id1), "%s lists another site's delivery", path)
	}
	p := c.do("GET", "/console/callbacks?site="+two.ID+"&status=delivered", "", nil)
	assert.Contains(t, p.body, `<option value="`+two.ID+`" selected>`)
	assert.Contains(t, p.body, `data-live="/console/callbacks?fragment=rows&amp;site=`+two.ID+`&amp;status=delivered"`)
	assert.Contains(t, p.body, `href="?site=`+two.ID+`&amp;status=delivered&amp;lang=ar"`)

	// A site that does not exist is said so, not an empty list that would
	// read as "nothing failed".
	p = c.do("GET", "/console/callbacks?site=s-nope", "", nil)
	require.Equal(t, 404, p.status)
	assert.Contains(t, p.body, `id="search-error">Site: no such site</p>`)
	p = c.do("GET", "/console/callbacks?site=s-nope&fragment=rows", "", nil)
	require.Equal(t, 404, p.status)
	assert.Equal(t, "text/plain; charset=utf-8", p.header.Get("Content-Type"))
}

// TestConsole_amountFilters: the queue's amount filters take an amount as
// the form shows it, grouped (25,000), and in Arabic-Indic digits.
func TestConsole_amountFilters(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	small := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "a-1", "u1", 5000)))
	big := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "a-2", "u2", 25000)))
	c := &consoleClient{t: t, base: s.URL, token: adminToken}
	for _, q := range []string{"minAmount=25%2C000", "minAmount=%D9%A2%D9%A5%D9%AC%D9%A0%D9%A0%D9%A0", "minAmount=20,000&maxAmount=30,000"} {
		p := c.do("GET", "/console/deposits?"+q, "", nil)
		require.Equal(t, 200, p.status, "%s: %s", q, p.body)
		assert.Contains(t, p.body, `id="tx-`+big.TransactionID+`"`, q)
		assert.NotContains(t, p.body, `id="tx-`+small.TransactionID+`"`, q)
	}
}
