package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// Ids taken from URLs become JetStream subject tokens further down, where
// '*' and '>' are wildcards and '.' separates tokens: "GET /pay/*-1" once
// made the gateway read every site's messages into a phantom site "*". The
// tests here send hostile ids to every route that takes one, through the
// real router over a real embedded JetStream, and then look at the stream
// itself.

// routeKind says how a route is authenticated and how it answers.
type routeKind int

const (
	merchantRoute routeKind = iota // signed by site A's merchant; envelope
	opsRoute                       // admin bearer token; envelope
	hostedRoute                    // no credentials; HTML, or a plain 404
)

// idRoute is a route that takes an id in its path or its query.
type idRoute struct {
	name    string
	kind    routeKind
	methods []string
	// tmpl is the request target; {id} is where the id goes and {token}
	// the hosted page token of the fixture's deposit.
	tmpl string
	// body is sent with every method but GET. It is valid for the route,
	// so that the id is the only thing a refusal can be about (the
	// controls check that the route accepts it with a real id).
	body string
	// real is an id the fixture made that the route accepts.
	real func(*idFixture) string
}

// idRoutes is every route that takes an id, in an order in which the
// controls can run one after the other (a withdrawal is processed before
// it is paid).
var idRoutes = []idRoute{
	{"merchant tx", merchantRoute, []string{"GET"}, "/v1/transactions/{id}", "",
		func(fx *idFixture) string { return fx.dep.TransactionID }},
	{"merchant processId", merchantRoute, []string{"GET"}, "/v1/transactions?processId={id}", "",
		func(fx *idFixture) string { return fx.dep.ProcessID }},
	{"site", opsRoute, []string{"GET", "PATCH"}, "/ops/v1/sites/{id}", `{"name":"Renamed Shop"}`,
		func(fx *idFixture) string { return fx.a.ID }},
	{"site secret", opsRoute, []string{"POST"}, "/ops/v1/sites/{id}/secret", `{"overlapSeconds":86400}`,
		func(fx *idFixture) string { return fx.a.ID }},
	{"site webhook secret", opsRoute, []string{"POST"}, "/ops/v1/sites/{id}/webhook-secret", `{"overlapSeconds":86400}`,
		func(fx *idFixture) string { return fx.a.ID }},
	{"site adjustment", opsRoute, []string{"POST"}, "/ops/v1/sites/{id}/adjustments", `{"amount":1,"reason":"probe"}`,
		func(fx *idFixture) string { return fx.a.ID }},
	{"site events", opsRoute, []string{"GET"}, "/ops/v1/sites/{id}/events", "",
		func(fx *idFixture) string { return fx.a.ID }},
	{"site methods", opsRoute, []string{"PUT"}, "/ops/v1/sites/{id}/methods", `{"all":true}`,
		func(fx *idFixture) string { return fx.a.ID }},
	{"bank", opsRoute, []string{"PATCH"}, "/ops/v1/banks/{id}", `{"minAmount":1000}`,
		func(fx *idFixture) string { return fx.bank.ID }},
	{"transactions by site", opsRoute, []string{"GET"}, "/ops/v1/transactions?site={id}", "",
		func(fx *idFixture) string { return fx.a.ID }},
	{"ops tx", opsRoute, []string{"GET"}, "/ops/v1/transactions/{id}", "",
		func(fx *idFixture) string { return fx.dep.TransactionID }},
	{"approve deposit", opsRoute, []string{"POST"}, "/ops/v1/deposits/{id}/approve", `{}`,
		func(fx *idFixture) string { return fx.dep.TransactionID }},
	{"reject deposit", opsRoute, []string{"POST"}, "/ops/v1/deposits/{id}/reject", `{"reason":"probe"}`,
		func(fx *idFixture) string { return fx.dep2 }},
	{"process withdrawal", opsRoute, []string{"POST"}, "/ops/v1/withdrawals/{id}/process", "",
		func(fx *idFixture) string { return fx.wd }},
	{"pay withdrawal", opsRoute, []string{"POST"}, "/ops/v1/withdrawals/{id}/pay", `{"reference":"probe"}`,
		func(fx *idFixture) string { return fx.wd }},
	{"reject withdrawal", opsRoute, []string{"POST"}, "/ops/v1/withdrawals/{id}/reject", `{"reason":"probe"}`,
		func(fx *idFixture) string { return fx.wd2 }},
	{"revoke operator", opsRoute, []string{"DELETE"}, "/ops/v1/operators/{id}", "",
		func(fx *idFixture) string { return fx.op.ID }},
	{"callbacks by site", opsRoute, []string{"GET"}, "/ops/v1/callbacks?site={id}", "",
		func(fx *idFixture) string { return fx.a.ID }},
	{"resend callback", opsRoute, []string{"POST"}, "/ops/v1/callbacks/{id}/resend", "",
		func(fx *idFixture) string { return fx.event }},
	{"hosted page", hostedRoute, []string{"GET"}, "/pay/{id}?t={token}", "",
		func(fx *idFixture) string { return fx.dep.TransactionID }},
}

// inQuery reports whether the id goes into the query string.
func (r idRoute) inQuery() bool {
	q := strings.IndexByte(r.tmpl, '?')
	return q >= 0 && q < strings.Index(r.tmpl, "{id}")
}

// target is the request target with id written into it as given: the
// bytes go onto the request line unchanged.
func (r idRoute) target(fx *idFixture, id string) string {
	return strings.NewReplacer("{id}", id, "{token}", fx.token).Replace(r.tmpl)
}

// idFixture is a gateway with two funded sites and one of every object an
// id can name.
type idFixture struct {
	s *stack
	// a is the site whose merchant signs the merchant requests: a large
	// treasury, a hosted page and a callback URL. b is small.
	a, b site
	// bank is the method the transactions use; banks are all methods.
	bank  bank
	banks map[string]bank
	op    operatorCreated
	// dep and dep2 are pending deposits of a (dep has a hosted page
	// whose token is token); wd and wd2 pending withdrawals of a.
	dep      record
	dep2     string
	wd, wd2  string
	approved string
	// event is the webhook id of approved's deposit.approved event.
	event string
	// other is b's deposit: a real id, but not a's merchant's.
	other record
	token string
	// txs are all the transactions made.
	txs []string
}

func newIDFixture(t testing.TB) *idFixture {
	t.Helper()
	e := newEnv(t)
	rcv := newReceiver(t, 200)
	// The hosted page's rate limit is off: every request comes from one
	// address, and the ids, not the rate, are what is tested here
	// (TestHostedPage_rateLimitedPerClient tests the limit).
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}, hostedRate: -1})
	fx := &idFixture{s: s}
	fx.banks = s.seedBanks()
	fx.bank = fx.banks["ZAINCASH"]
	fx.a = s.newSite(map[string]any{"name": "Big Shop", "hostedPage": true, "callbackUrl": rcv.url()}, 1_000_000)
	fx.b = s.newSite(map[string]any{"name": "Small Shop"}, 50_000)
	fx.op = s.newOperator(t, "Probe Target", "operator")
	// A resend is forwarded to the active dispatcher, and answers 503
	// while there is none.
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")

	fx.approved = s.approvedDeposit(t, fx.a)
	fx.event = s.eventID(t, fx.a.ID, "deposit.approved.v1", fx.approved)
	fx.dep = rec(t, s.postT(t, fx.a, pathDeposit, depositForm("ZAINCASH", "hostile-dep-1", "hu1", 7000)))
	fx.dep2 = rec(t, s.postT(t, fx.a, pathDeposit, depositForm("ZAINCASH", "hostile-dep-2", "hu2", 8000))).TransactionID
	fx.wd = rec(t, s.postT(t, fx.a, pathWithdraw, withdrawForm("ZAINCASH", "hostile-wd-1", "hu3", 10_000, "07712345678"))).TransactionID
	fx.wd2 = rec(t, s.postT(t, fx.a, pathWithdraw, withdrawForm("ZAINCASH", "hostile-wd-2", "hu4", 11_000, "07712345678"))).TransactionID
	fx.other = rec(t, s.postT(t, fx.b, pathDeposit, depositForm("ZAINCASH", "hostile-other", "hu5", 9000)))
	fx.txs = []string{fx.approved, fx.dep.TransactionID, fx.dep2, fx.wd, fx.wd2, fx.other.TransactionID}

	require.NotNil(t, fx.dep.URL, "site a has a hosted page")
	u, err := url.Parse(*fx.dep.URL)
	require.NoError(t, err)
	fx.token = u.Query().Get("t")
	require.NotEmpty(t, fx.token)
	return fx
}

// rawDo sends one request with target written verbatim on the request line
// (http.NewRequest would re-escape it, or refuse it) and reads the answer.
// The body of an answer that is not JSON is kept raw.
func (s *stack) rawDo(t testing.TB, method, target string, hdr map[string]string, body string) resp {
	t.Helper()
	addr := strings.TrimPrefix(s.URL, "http://")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, addr)
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	if body != "" || method != http.MethodGet {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	_, err = io.WriteString(conn, b.String())
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	out := resp{HTTP: res.StatusCode, Header: res.Header, Raw: raw}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		// A body that is not valid JSON is left for the envelope check
		// to report.
		_ = json.Unmarshal(raw, &out)
	}
	return out
}

// call sends method to target with the credentials route needs: site a's
// merchant signature over the raw query, or the admin token.
func (fx *idFixture) call(t testing.TB, route idRoute, method, target string) resp {
	t.Helper()
	hdr := map[string]string{}
	body := ""
	if method != http.MethodGet {
		body = route.body
	}
	switch route.kind {
	case merchantRoute:
		// The server signs over the bytes after the first '?'.
		_, query, _ := strings.Cut(target, "?")
		hdr["appKey"] = fx.a.AppKey
		hdr["sign"] = sign(fx.a.Secret, []byte(query))
	case opsRoute:
		hdr["Authorization"] = "Bearer " + adminToken
		if body != "" {
			hdr["Content-Type"] = "application/json"
		}
	}
	return fx.s.rawDo(t, method, target, hdr, body)
}

// assertEnvelope checks the envelope every JSON answer has, and that an
// error carries a code and no data.
func assertEnvelope(t testing.TB, r resp) bool {
	t.Helper()
	if !assert.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"),
		"content type %q, body %q", r.Header.Get("Content-Type"), r.Raw) {
		return false
	}
	var keys map[string]json.RawMessage
	if !assert.NoError(t, json.Unmarshal(r.Raw, &keys), "body %q", r.Raw) {
		return false
	}
	ok := true
	for _, k := range []string{"data", "status", "responseTime", "app_version", "requestId"} {
		ok = assert.Contains(t, keys, k, "envelope key missing: %s", r.Raw) && ok
	}
	ok = assert.Equal(t, r.HTTP, r.Status, "envelope status: %s", r.Raw) && ok
	ok = assert.NotEmpty(t, r.RequestID, "requestId: %s", r.Raw) && ok
	ok = assert.Equal(t, r.Header.Get("Request-Id"), r.RequestID, "Request-Id header: %s", r.Raw) && ok
	if r.HTTP >= 300 {
		ok = assert.NotEmpty(t, r.Code, "error without code: %s", r.Raw) && ok
		ok = assert.Equal(t, "null", string(keys["data"]), "data on an error: %s", r.Raw) && ok
	}
	return ok
}

// assertIDAnswer checks what every answer to an id route must be: no
// server error, no successful write, and the envelope. The hosted page
// answers a GET with the page or a 404 (plain text from the page, the
// envelope from the router when the path is not the page's); any other
// method gets the router's envelope.
func assertIDAnswer(t testing.TB, route idRoute, method string, r resp, writeAllowed bool) {
	t.Helper()
	assert.Less(t, r.HTTP, 500, "server error: %s", r.Raw)
	if method != http.MethodGet && !writeAllowed {
		assert.False(t, r.HTTP >= 200 && r.HTTP < 300, "%s succeeded: %s", method, r.Raw)
	}
	if route.kind == hostedRoute && method == http.MethodGet {
		if r.HTTP == http.StatusOK {
			assert.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "text/html"), "hosted page: %q", r.Raw)
			return
		}
		assert.Equal(t, http.StatusNotFound, r.HTTP, "hosted page: %q", r.Raw)
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			return
		}
	}
	assertEnvelope(t, r)
}

// hostileID is an id as it goes on the wire: raw bytes, or percent-encoded
// where the raw bytes cannot be sent at all. A raw space ends the request
// target, and net/http refuses control bytes (tab included) and malformed
// escapes in it with its own 400 before any handler runs, so spaces, tabs
// and control characters are sent percent-encoded (the handler then sees
// the decoded bytes); "unsendable forms never reach the gateway" checks
// that the raw forms are refused that way.
type hostileID struct{ name, wire string }

// hostileIDs are ids no route may act on. None names anything the fixture
// made for the ops routes; the last ones look valid but name nothing, or
// name a's objects in another spelling.
func hostileIDs(fx *idFixture) []hostileID {
	a := fx.a.ID
	return []hostileID{
		{"star", "*"},
		{"gt", ">"},
		{"star tx", "*-1"},
		{"gt tx", ">-1"},
		{"dot in site", "a.b-1"},
		{"subject gt", "ledger.site.>"},
		{"subject star", "ledger.site.*"},
		{"subject of a", "ledger.site." + a},
		{"dotdot", ".."},
		{"dot", "."},
		{"no site part", "-1"},
		{"no index part", "s1-"},
		{"empty", ""}, // an empty path segment: "//" before the rest
		{"slash", "/"},
		{"dash only", "-"},
		{"pct star", "%2A"},
		{"pct gt tx", "%3E-1"},
		{"pct dotdot", "%2E%2E"},
		{"pct dot in site", "a%2Eb-1"},
		{"pct slash", "a%2Fb-1"},
		{"pct nul", "%00"},
		{"pct nul in tx", "a%00-1"},
		{"pct space", "%20"},
		{"pct space in tx", "a%20b-1"},
		{"plus", "a+b-1"}, // a space in a query
		{"pct tab", "%09"},
		{"pct tab in tx", "a%09-1"},
		{"pct crlf", "a%0D%0A-1"},
		{"pct del", "%7F"},
		{"pct escape", "%1B"},
		{"pct nbsp", "%C2%A0"},
		{"pct zero width space", "a%E2%80%8B-1"},
		{"pct invalid utf8", "%FF%FE-1"},
		{"pct fullwidth star", "%EF%BC%8A"},
		{"double encoded star", "%252A"},
		{"pct star after a", a + "%2A"},
		{"pct dot gt after a", a + "%2E%3E"},
		{"long tx", strings.Repeat("a", 57) + "-1"},
		{"long site", strings.Repeat("s", 57)},
		{"very long", strings.Repeat("a", 60_000)},
		{"unknown site", "szzzzzzzzzzzzz"},
		{"unknown site tx", "szzzzzzzzzzzzz-1"},
		{"a upper case", strings.ToUpper(a)},
		{"a upper case tx", strings.ToUpper(a) + "-1"},
		{"a dot gt", a + ".>"},
		{"a dot star", a + ".*"},
		{"a star", a + "*"},
		{"a tx past end", a + "-zz"},
		{"a tx leading zero", a + "-01"},
		{"a tx index zero", a + "-0"},
		{"a tx index overflow", a + "-zzzzzzzzzzzzz"},
		{"a tx of a tx", a + "-1-1"},
		{"a tx upper index", a + "-A"},
		{"event zero", "0-0"},
		{"event of the catalog", "1-0"},
		{"event overflow", "18446744073709551616-0"},
		{"event negative index", "1--1"},
		{"event index overflow", "1-65537"},
	}
}

// foreignIDs are b's ids: real, but not a's merchant's, so the merchant
// routes and the hosted page (with a's token) must not find them.
func foreignIDs(fx *idFixture) []hostileID {
	return []hostileID{
		{"b site", fx.b.ID},
		{"b tx", fx.other.TransactionID},
		{"b processId", fx.other.ProcessID},
	}
}

// TestHostileIDs_everyRoute sends every hostile id to every route that
// takes an id, then checks that nothing was written, no site appeared, both
// treasuries are as they were, and the stream holds only literal subjects.
func TestHostileIDs_everyRoute(t *testing.T) {
	fx := newIDFixture(t)
	s := fx.s
	ctx := context.Background()

	balA, balB := s.balanceOf(t, fx.a), s.balanceOf(t, fx.b)
	require.Equal(t, int64(50_000), balB.Balance)
	lastSeq, err := s.Store.LastSeq(ctx)
	require.NoError(t, err)

	for _, route := range idRoutes {
		cases := hostileIDs(fx)
		if route.kind != opsRoute {
			cases = append(cases, foreignIDs(fx)...)
		}
		for _, method := range route.methods {
			for _, id := range cases {
				if route.inQuery() && id.wire == "" {
					continue // an empty filter is no filter: a plain listing
				}
				t.Run(route.name+"/"+method+"/"+id.name, func(t *testing.T) {
					r := fx.call(t, route, method, route.target(fx, id.wire))
					assertIDAnswer(t, route, method, r, false)
					// None of these ids names anything this caller
					// may see: a refusal, or a listing of nothing.
					if route.inQuery() && route.kind == opsRoute && r.HTTP == http.StatusOK {
						assert.JSONEq(t, `{"items":[],"nextCursor":null}`, string(r.Data))
						return
					}
					assert.GreaterOrEqual(t, r.HTTP, 400, "%s", r.Raw)
				})
			}
		}
	}

	// What the table cannot send raw: net/http answers 400 itself, before
	// any handler (no Request-Id), so such bytes reach the gateway only
	// percent-encoded, as the table sends them.
	t.Run("unsendable forms never reach the gateway", func(t *testing.T) {
		for _, wire := range []string{"a b", "a\tb", "a\x00b", "a\x01b", "a\x7fb", "a\rb", "a\nb", "%zz", "%", "a%2"} {
			target := "/ops/v1/sites/" + wire
			assert.False(t, sendable(target), "%q", target)
			r := fx.s.rawDo(t, http.MethodGet, target, map[string]string{"Authorization": "Bearer " + adminToken}, "")
			assert.Equal(t, http.StatusBadRequest, r.HTTP, "%q: %q", target, r.Raw)
			assert.Empty(t, r.Header.Get("Request-Id"), "%q reached the gateway", target)
		}
	})
	t.Run("nothing was written", func(t *testing.T) {
		after, err := s.Store.LastSeq(ctx)
		require.NoError(t, err)
		assert.Equal(t, lastSeq, after, "the ledger stream grew")
	})
	t.Run("balances are unchanged", func(t *testing.T) {
		assert.Equal(t, balA, s.balanceOf(t, fx.a))
		assert.Equal(t, balB, s.balanceOf(t, fx.b))
	})
	t.Run("only the two sites exist", func(t *testing.T) {
		want := []string{fx.a.ID, fx.b.ID}
		slices.Sort(want)
		r := s.opsT(t, "GET", "/ops/v1/sites", nil)
		requireOK(t, r)
		var listed page[struct {
			ID string `json:"id"`
		}]
		r.decode(t, &listed)
		require.Nil(t, listed.NextCursor)
		var got []string
		for _, l := range listed.Items {
			got = append(got, l.ID)
		}
		slices.Sort(got)
		assert.Equal(t, want, got)
		var known []string
		for _, id := range s.Ledger.SiteIDs() {
			known = append(known, string(id))
		}
		assert.Equal(t, want, known, "the ledger's sites")
	})
	t.Run("only the transactions made are listed", func(t *testing.T) {
		var got []string
		for _, r := range s.opsList(t, "", 100) {
			got = append(got, r.TransactionID)
		}
		assert.ElementsMatch(t, fx.txs, got)
	})
	t.Run("the stream holds only literal subjects", func(t *testing.T) {
		assert.NotZero(t, assertLedgerSubjects(t, fx, 1))
	})
	t.Run("snapshots are named by real sites", func(t *testing.T) {
		require.NoError(t, s.Ledger.Snapshot(ctx))
		names, err := s.Store.ListSnapshots(ctx)
		require.NoError(t, err)
		for _, n := range names {
			assert.Contains(t, []string{"checkpoint", "site-" + fx.a.ID, "site-" + fx.b.ID}, n, "snapshot %q", n)
		}
		assert.Contains(t, names, "site-"+fx.a.ID)
		assert.Contains(t, names, "site-"+fx.b.ID)
	})
	t.Run("treasuries are still apart", func(t *testing.T) {
		// b's 50,000 cannot cover 60,000; a's 1,000,000 can. A merged
		// treasury would let b pay.
		r := s.postT(t, fx.b, pathWithdraw, withdrawForm("ZAINCASH", "hostile-big-b", "hu6", 60_000, "07712345678"))
		requireErr(t, r, 402, "insufficient_site_balance", "amount")
		w := rec(t, s.postT(t, fx.a, pathWithdraw, withdrawForm("ZAINCASH", "hostile-big-a", "hu7", 60_000, "07712345678")))
		assert.Equal(t, int64(60_000), w.Amount)
		assert.Equal(t, balB, s.balanceOf(t, fx.b))
	})
	// The controls show the refusals above were about the ids: the same
	// requests with real ids succeed.
	t.Run("controls", func(t *testing.T) {
		for _, route := range idRoutes {
			for _, method := range route.methods {
				t.Run(route.name+"/"+method, func(t *testing.T) {
					r := fx.call(t, route, method, route.target(fx, route.real(fx)))
					require.Equal(t, http.StatusOK, r.HTTP, "%s", r.Raw)
					assertIDAnswer(t, route, method, r, true)
					fx.rotated(t, route, r)
				})
			}
		}
	})
}

// TestHostileIDs_sandboxAndStream sends the hostile ids where the table
// above cannot: to the sandbox actions, which need a sandbox site's
// merchant, and as the callback stream's position (?after= and
// Last-Event-ID), which needs a signed ts and answers a valid id with a
// stream that does not end. Every one is refused, nothing is written and
// the stream holds only literal subjects; the controls show the refusals
// were about the ids.
func TestHostileIDs_sandboxAndStream(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	sb := s.newSite(map[string]any{"name": "Sandbox Shop", "sandbox": true}, 1_000_000)
	other := s.newSite(map[string]any{"name": "Other Sandbox", "sandbox": true}, 1_000_000)
	dep := rec(t, s.post(sb, pathDeposit, depositForm("ZAINCASH", "hs-dep", "hu1", 7000))).TransactionID
	wd := rec(t, s.post(sb, pathWithdraw, withdrawForm("ZAINCASH", "hs-wd", "hu2", 10_000, "07712345678"))).TransactionID
	otherDep := rec(t, s.post(other, pathDeposit, depositForm("ZAINCASH", "hs-other", "hu3", 7000))).TransactionID
	fx := &idFixture{s: s, a: sb, b: other}
	cases := append(hostileIDs(fx), hostileID{"other site", other.ID}, hostileID{"other site's tx", otherDep})
	ctx := context.Background()
	lastSeq, err := s.Store.LastSeq(ctx)
	require.NoError(t, err)

	// In the order the controls can run: the withdrawal is processed
	// before it is paid. A control runs on the routes that can still move
	// their transaction then (control): one deposit and one withdrawal
	// cannot also be rejected or expired once settled.
	routes := []struct {
		tmpl, body, real string
		control          bool
	}{
		{"/v1/sandbox/transactions/{id}/callbacks", "type=deposit.approved", dep, true},
		{"/v1/sandbox/deposits/{id}/reject", "reason=probe", dep, false},
		{"/v1/sandbox/deposits/{id}/expire", "", dep, false},
		{"/v1/sandbox/deposits/{id}/approve", "amount=7000", dep, true},
		{"/v1/sandbox/withdrawals/{id}/reject", "reason=probe", wd, false},
		{"/v1/sandbox/withdrawals/{id}/process", "", wd, true},
		{"/v1/sandbox/withdrawals/{id}/pay", "reference=probe", wd, true},
	}
	post := func(t *testing.T, tmpl, id, body string) resp {
		return s.rawDo(t, http.MethodPost, strings.ReplaceAll(tmpl, "{id}", id), map[string]string{
			"appKey": sb.AppKey, "sign": sign(sb.Secret, []byte(body)),
			"Content-Type": "application/x-www-form-urlencoded"}, body)
	}
	for _, route := range routes {
		for _, id := range cases {
			t.Run(route.tmpl+"/"+id.name, func(t *testing.T) {
				r := post(t, route.tmpl, id.wire, route.body)
				assert.Less(t, r.HTTP, 500, "server error: %s", r.Raw)
				assert.GreaterOrEqual(t, r.HTTP, 400, "%s", r.Raw)
				assertEnvelope(t, r)
			})
		}
	}
	for _, id := range cases {
		if id.wire == "" {
			continue // no position: the stream follows from now on
		}
		if _, err := ids.ParseEvent(id.wire); err == nil {
			continue // a position, of whatever site: the stream tests follow those
		}
		t.Run("stream after/"+id.name, func(t *testing.T) {
			query := "after=" + id.wire + "&ts=" + strconv.FormatInt(time.Now().Unix(), 10)
			r := s.rawDo(t, http.MethodGet, "/v1/callbacks/stream?"+query,
				map[string]string{"appKey": sb.AppKey, "sign": sign(sb.Secret, []byte(query))}, "")
			assert.Equal(t, http.StatusBadRequest, r.HTTP, "%s", r.Raw)
			assertEnvelope(t, r)
		})
		t.Run("stream Last-Event-ID/"+id.name, func(t *testing.T) {
			query := "ts=" + strconv.FormatInt(time.Now().Unix(), 10)
			r := s.rawDo(t, http.MethodGet, "/v1/callbacks/stream?"+query, map[string]string{"appKey": sb.AppKey,
				"sign": sign(sb.Secret, []byte(query)), "Last-Event-ID": id.wire}, "")
			assert.Equal(t, http.StatusBadRequest, r.HTTP, "%s", r.Raw)
			assertEnvelope(t, r)
		})
	}

	t.Run("nothing was written", func(t *testing.T) {
		after, err := s.Store.LastSeq(ctx)
		require.NoError(t, err)
		assert.Equal(t, lastSeq, after, "the ledger stream grew")
		assert.Equal(t, "pending", rec(t, s.get(other, "/v1/transactions/"+otherDep, "")).Status)
	})
	t.Run("the stream holds only literal subjects", func(t *testing.T) {
		assert.NotZero(t, assertLedgerSubjects(t, fx, 1))
	})
	t.Run("controls", func(t *testing.T) {
		for _, route := range routes {
			if route.control {
				r := post(t, route.tmpl, route.real, route.body)
				assert.Equal(t, http.StatusOK, r.HTTP, "%s: %s", route.tmpl, r.Raw)
			}
		}
	})
}

// rotated takes a's new secret from a successful rotation, so the merchant
// requests after it are signed right.
func (fx *idFixture) rotated(t testing.TB, route idRoute, r resp) {
	t.Helper()
	if route.tmpl != "/ops/v1/sites/{id}/secret" || r.HTTP != http.StatusOK {
		return
	}
	var d struct {
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &d), "%s", r.Raw)
	require.NotEmpty(t, d.Secret)
	fx.a.Secret = d.Secret
}

// assertLedgerSubjects reads the ledger stream from sequence from: every
// message is on the catalog's subject, the operators' or one of the two
// sites'. It returns how many messages it read.
func assertLedgerSubjects(t testing.TB, fx *idFixture, from uint64) int {
	t.Helper()
	allowed := map[string]bool{events.CatalogSubject: true, events.OperatorsSubject: true,
		events.SitePrefix + fx.a.ID: true, events.SitePrefix + fx.b.ID: true}
	n := 0
	err := fx.s.Store.Read(context.Background(), events.SubjectPrefix+">", from, func(m events.Msg) error {
		n++
		assert.True(t, allowed[m.Subject], "message %d on subject %q", m.Seq, m.Subject)
		return nil
	})
	require.NoError(t, err)
	return n
}

// FuzzPathIDs sends fuzzed ids to the id routes through the real router. It
// chooses the route, the method (one of the route's, or any), the id, and
// whether the id goes on the wire as it is or escaped. Placeholders in the
// id ({a}, {b}, {tx}, {wd}, {otx}, {bank}, {op}, {event}, {pid}) become the
// fixture's real ids, so the fuzzer can mutate around ids that exist. It
// checks: no 5xx, the envelope (the hosted page: HTML or 404), no
// successful write unless the request named an object the test made, a
// merchant only ever sees its own site's records, and after every request
// no site but the two exists and the stream holds only literal subjects.
func FuzzPathIDs(f *testing.F) {
	fx := newIDFixture(f)
	s := fx.s
	ctx := context.Background()
	for i, route := range idRoutes {
		for j := range route.methods {
			for _, id := range hostileIDs(fx) {
				// Hostile forms are given literally, the ones built
				// from a's id with its placeholder.
				f.Add(uint8(i), uint8(j), strings.ReplaceAll(id.wire, fx.a.ID, "{a}"), false)
			}
		}
	}
	for i := range idRoutes {
		for k, ph := range []string{"{a}", "{b}", "{tx}", "{wd}", "{otx}", "{bank}", "{op}", "{event}", "{pid}"} {
			f.Add(uint8(i), uint8(0), ph, false)
			f.Add(uint8(i), uint8(128+k%5), ph, false) // any method
		}
		f.Add(uint8(i), uint8(0), "{a}.*", true)
		f.Add(uint8(i), uint8(0), "* >\t\x00", true)
		f.Add(uint8(i), uint8(0), "\x00\x01\x1f\x7f", true)
		f.Add(uint8(i), uint8(0), "ledger.site.>", true)
	}

	anyMethod := []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	seen, err := s.Store.LastSeq(ctx)
	require.NoError(f, err)
	require.NotZero(f, assertLedgerSubjects(f, fx, 1))
	sites := []ids.SiteID{ids.SiteID(fx.a.ID), ids.SiteID(fx.b.ID)}
	slices.Sort(sites)

	f.Fuzz(func(t *testing.T, routeIx, methodIx uint8, id string, escape bool) {
		route := idRoutes[int(routeIx)%len(idRoutes)]
		method := route.methods[int(methodIx)%len(route.methods)]
		if methodIx >= 128 {
			method = anyMethod[int(methodIx-128)%len(anyMethod)]
		}
		real := map[string]string{"{a}": fx.a.ID, "{b}": fx.b.ID, "{tx}": fx.dep.TransactionID, "{wd}": fx.wd,
			"{otx}": fx.other.TransactionID, "{bank}": fx.bank.ID, "{op}": fx.op.ID, "{event}": fx.event,
			"{pid}": fx.dep.ProcessID}
		for ph, v := range real {
			id = strings.ReplaceAll(id, ph, v)
		}
		wire := id
		if escape {
			wire = url.PathEscape(id)
			if route.inQuery() {
				wire = url.QueryEscape(id)
			}
		}
		target := route.target(fx, wire)
		if !sendable(target) {
			t.Skip("net/http refuses this request target before any handler runs")
		}
		r := fx.call(t, route, method, target)
		assertIDAnswer(t, route, method, r, namesMade(fx, route, target))
		fx.rotated(t, route, r)
		if route.kind == merchantRoute && r.HTTP == http.StatusOK {
			var d record
			require.NoError(t, json.Unmarshal(r.Data, &d), "%s", r.Raw)
			tx, err := ids.ParseTx(d.TransactionID)
			require.NoError(t, err)
			assert.Equal(t, ids.SiteID(fx.a.ID), tx.Site(), "a's merchant got another site's record: %s", r.Raw)
		}
		if route.kind == hostedRoute && r.HTTP == http.StatusOK {
			assert.True(t, namesMade(fx, route, target), "a hosted page for %q", target)
		}

		assert.Equal(t, sites, s.Ledger.SiteIDs(), "the ledger's sites")
		last, err := s.Store.LastSeq(ctx)
		require.NoError(t, err)
		if last > seen {
			assertLedgerSubjects(t, fx, seen+1)
			seen = last
		}
	})
}

// sendable reports whether net/http passes a request line with target to
// the handler: no space (it would end the target), no control byte, and a
// path whose escapes decode.
func sendable(target string) bool {
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	_, err := url.ParseRequestURI(target)
	return err == nil
}

// namesMade reports whether the request's path names an object the
// fixture made, as a whole segment: only then may a write succeed. (A
// fuzzed id can hold '/' or '?', which moves the request to another route
// of the same object.)
func namesMade(fx *idFixture, route idRoute, target string) bool {
	made := []string{fx.a.ID, fx.b.ID, fx.approved, fx.dep.TransactionID, fx.dep2, fx.wd, fx.wd2,
		fx.other.TransactionID, fx.op.ID, fx.event}
	for _, b := range fx.banks {
		made = append(made, b.ID, b.Code) // a method is found by either
	}
	path, query, _ := strings.Cut(target, "?")
	parts := strings.Split(path, "/")
	if route.inQuery() {
		q, err := url.ParseQuery(query)
		if err == nil {
			for _, vs := range q {
				parts = append(parts, vs...)
			}
		}
	}
	for _, p := range parts {
		if slices.Contains(made, p) {
			return true
		}
	}
	return false
}
