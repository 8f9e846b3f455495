package httpapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/internal/testkit"
)

// spec is a loaded OpenAPI document and its router.
type spec struct {
	doc    *openapi3.T
	router routers.Router
	// seen counts, per operation, the statuses validated.
	seen map[string]map[int]bool
}

// The HTML pages are text, checked as a string.
func init() {
	openapi3filter.RegisterBodyDecoder("text/html", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(r)
		return string(b), err
	})
}

// loadSpec loads an OpenAPI document as the server serves it, checks it
// is a valid 3.1 document and equal to its copy under docs/openapi.
func loadSpec(t *testing.T, base, path, docsCopy string) *spec {
	t.Helper()
	res, err := http.Get(base + path)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "application/json; charset=utf-8", res.Header.Get("Content-Type"))
	served, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	committed, err := os.ReadFile(docsCopy)
	require.NoError(t, err)
	require.Equal(t, string(committed), string(served), "%s differs from what the server serves at %s", docsCopy, path)

	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(served)
	require.NoError(t, err)
	require.True(t, doc.IsOpenAPI31OrLater())
	require.NoError(t, doc.Validate(context.Background()))
	// The document's server is relative ("/"); the router matches full
	// URLs, here the test server's.
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return &spec{doc: doc, router: router, seen: map[string]map[int]bool{}}
}

// check sends req and validates the request (when valid is set) and the
// response against the document; it returns the response body.
func (sp *spec) check(t *testing.T, req *http.Request, valid bool, wantStatus int) []byte {
	t.Helper()
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		require.NoError(t, err)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, wantStatus, res.StatusCode, "%s %s: %s", req.Method, req.URL, got)

	// The document describes the request as the server saw it.
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := sp.router.FindRoute(vreq)
	require.NoError(t, err, "%s %s is not in the document", req.Method, req.URL.Path)
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if valid {
		require.NoError(t, openapi3filter.ValidateRequest(context.Background(), in), "%s %s", req.Method, req.URL)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), out), "%s %s → %d %s", req.Method, req.URL, res.StatusCode, got)
	op := route.Operation.OperationID
	if sp.seen[op] == nil {
		sp.seen[op] = map[int]bool{}
	}
	sp.seen[op][res.StatusCode] = true
	return got
}

// saw counts a status checked by hand (a stream's).
func (sp *spec) saw(op string, status int) {
	if sp.seen[op] == nil {
		sp.seen[op] = map[int]bool{}
	}
	sp.seen[op][status] = true
}

// covered requires that every status of every operation was validated,
// but those listed as not reachable from outside.
func (sp *spec) covered(t *testing.T, unreachable map[string]bool) {
	t.Helper()
	for path, item := range sp.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				key := op.OperationID + " " + status
				if unreachable[key] || unreachable["* "+status] {
					continue
				}
				code := 0
				for _, c := range status {
					code = code*10 + int(c-'0')
				}
				require.True(t, sp.seen[op.OperationID][code], "%s %s (%s) answers %s, which no test request saw", method, path, op.OperationID, status)
			}
		}
	}
}

// mcall is a merchant call: its method, path, query and form.
type mcall struct {
	method, path, query string
	form                url.Values
}

// TestOpenAPI_merchant validates live answers of the merchant API, for
// every operation and every status it documents, against
// docs/openapi/merchant.json (served at /openapi.json).
func TestOpenAPI_merchant(t *testing.T) {
	e := newEnv(t)
	proxy := netip.MustParsePrefix("127.0.0.1/32")
	s := e.newStack(stackOptions{trusted: []netip.Prefix{proxy}})
	s.seedBanks()
	st := s.newSite(map[string]any{"hostedPage": true}, 50_000)
	walled := s.newSite(map[string]any{"ipAllowlist": []string{"203.0.113.0/24"}}, 0)
	limited := s.newSite(map[string]any{"rateLimit": 1}, 0)
	sp := loadSpec(t, s.URL, "/openapi.json", "../docs/openapi/merchant.json")

	signed := func(site site, method, path string, form url.Values, query string) *http.Request {
		var req *http.Request
		var err error
		if method == http.MethodPost {
			body := form.Encode()
			req, err = http.NewRequest(method, s.URL+path, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("sign", sign(site.Secret, []byte(body)))
		} else {
			u := s.URL + path
			if query != "" {
				u += "?" + query
			}
			req, err = http.NewRequest(method, u, nil)
			require.NoError(t, err)
			req.Header.Set("sign", sign(site.Secret, []byte(query)))
		}
		req.Header.Set("appKey", site.AppKey)
		return req
	}
	dep := func(pid, user string, amount int64) url.Values { return depositForm("ZAINCASH", pid, user, amount) }

	// Deposits.
	d := sp.check(t, signed(st, "POST", pathDeposit, dep("oa-1", "u1", 25000), ""), true, 200)
	var created struct{ Data record }
	require.NoError(t, json.Unmarshal(d, &created))
	sp.check(t, signed(st, "POST", pathDeposit, dep("oa-1", "u1", 25000), ""), true, 200)                     // a repeat
	sp.check(t, signed(st, "POST", pathDeposit, with(dep("oa-2", "u1", 25000), "name", nil), ""), false, 400) // missing name
	sp.check(t, signed(st, "POST", pathDeposit, dep("oa-3", "u3", 5), ""), true, 400)                         // out of range
	sp.check(t, signed(st, "POST", pathDeposit, depositForm("NOPE", "oa-4", "u4", 5000), ""), true, 400)      // unknown bank
	sp.check(t, signed(st, "POST", pathDeposit, dep("oa-1", "u1", 30000), ""), true, 409)                     // processId reused

	// Withdrawals.
	wd := func(pid string, amount int64, iban string) url.Values {
		return withdrawForm("ZAINCASH", pid, "w1", amount, iban)
	}
	w := sp.check(t, signed(st, "POST", pathWithdraw, wd("ow-1", 10000, "07712345678"), ""), true, 200)
	var withdrawal struct{ Data record }
	require.NoError(t, json.Unmarshal(w, &withdrawal))
	sp.check(t, signed(st, "POST", pathWithdraw, wd("ow-2", 10000, "12"), ""), true, 400)
	sp.check(t, signed(st, "POST", pathWithdraw, wd("ow-3", 900000, "07712345678"), ""), true, 402)
	sp.check(t, signed(st, "POST", pathWithdraw, wd("ow-1", 20000, "07712345678"), ""), true, 409)

	// Reads.
	sp.check(t, signed(st, "GET", "/v1/banks", nil, "type=deposit&lang=ar"), true, 200)
	sp.check(t, signed(st, "GET", "/v1/banks", nil, "type=sideways"), false, 400)
	sp.check(t, signed(st, "GET", "/v1/transactions", nil, "processId=oa-1"), true, 200)
	sp.check(t, signed(st, "GET", "/v1/transactions", nil, "processId=nope"), true, 404)
	sp.check(t, signed(st, "GET", "/v1/transactions", nil, "processId=oa-1&x=1"), false, 400)
	sp.check(t, signed(st, "GET", "/v1/transactions/"+created.Data.TransactionID, nil, ""), true, 200)
	sp.check(t, signed(st, "GET", "/v1/transactions/"+withdrawal.Data.TransactionID, nil, ""), true, 200)
	sp.check(t, signed(st, "GET", "/v1/transactions/"+st.ID+"-999", nil, ""), true, 404)
	sp.check(t, signed(st, "GET", "/v1/transactions/"+st.ID+"-1", nil, "x=1"), false, 400)
	sp.check(t, signed(st, "GET", "/v1/balance", nil, ""), true, 200)
	sp.check(t, signed(st, "GET", "/v1/balance", nil, "x=1"), false, 400)

	// A sandbox site's own actions.
	sbx := s.newSite(map[string]any{"sandbox": true}, 100_000)
	sdep := func(pid string) string {
		var out struct{ Data record }
		require.NoError(t, json.Unmarshal(sp.check(t, signed(sbx, "POST", pathDeposit, dep(pid, "su-"+pid, 5000), ""), true, 200), &out))
		return out.Data.TransactionID
	}
	swd := func(pid string) string {
		var out struct{ Data record }
		require.NoError(t, json.Unmarshal(sp.check(t, signed(sbx, "POST", pathWithdraw, wd(pid, 1000, "07712345678"), ""), true, 200), &out))
		return out.Data.TransactionID
	}
	form := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	sa, sr, se := sdep("sa"), sdep("sr"), sdep("se")
	wp, wr := swd("wp"), swd("wr")
	sandbox := []struct {
		path string
		form url.Values
	}{
		{"/v1/sandbox/deposits/" + sa + "/approve", form("amount", "4000")},
		{"/v1/sandbox/deposits/" + sr + "/reject", form("reason", "no")},
		{"/v1/sandbox/deposits/" + se + "/expire", nil},
		{"/v1/sandbox/withdrawals/" + wp + "/process", nil},
		{"/v1/sandbox/withdrawals/" + wp + "/pay", form("reference", "R")},
		{"/v1/sandbox/withdrawals/" + wr + "/reject", nil},
	}
	testCallback := "/v1/sandbox/transactions/" + sa + "/callbacks"
	sp.check(t, signed(sbx, "POST", testCallback, form("type", "deposit.approved"), ""), true, 200)
	sp.check(t, signed(sbx, "POST", testCallback, form("type", "withdrawal.paid"), ""), true, 400)
	sp.check(t, signed(st, "POST", testCallback, form("type", "deposit.approved"), ""), true, 403)
	sp.check(t, signed(sbx, "POST", "/v1/sandbox/transactions/"+sbx.ID+"-999/callbacks", form("type", "deposit.approved"), ""), true, 404)
	sandboxCalls := []mcall{{"POST", testCallback, "", form("type", "deposit.approved")}}
	for _, c := range sandbox {
		sp.check(t, signed(sbx, "POST", c.path, c.form, ""), true, 200)
		sp.check(t, signed(sbx, "POST", c.path, c.form, ""), true, 409) // once is all
		sp.check(t, signed(sbx, "POST", c.path, form("bogus", "1"), ""), false, 400)
		sp.check(t, signed(st, "POST", c.path, c.form, ""), true, 403) // a live site
		missing := strings.Replace(c.path, "/"+strings.Split(c.path, "/")[4]+"/", "/"+sbx.ID+"-999/", 1)
		sp.check(t, signed(sbx, "POST", missing, c.form, ""), true, 404)
		sandboxCalls = append(sandboxCalls, mcall{"POST", c.path, "", c.form})
	}

	// What every merchant call may answer before its own checks: no or an
	// unknown appKey, a wrong signature, a caller outside the allowlist,
	// a body over 16 KiB, the site's rate limit.
	calls := []mcall{
		{"POST", pathDeposit, "", dep("oa-9", "u9", 5000)},
		{"POST", pathWithdraw, "", wd("ow-9", 1000, "07712345678")},
		{"GET", "/v1/banks", "type=deposit", nil},
		{"GET", "/v1/transactions", "processId=oa-1", nil},
		{"GET", "/v1/transactions/" + created.Data.TransactionID, "", nil},
		{"GET", "/v1/balance", "", nil},
		{"GET", "/v1/callbacks/stream", withTs(""), nil},
	}
	calls = append(calls, sandboxCalls...)
	for _, c := range calls {
		req := signed(st, c.method, c.path, c.form, c.query)
		req.Header.Del("appKey")
		sp.check(t, req, false, 401)
		req = signed(st, c.method, c.path, c.form, c.query)
		req.Header.Set("sign", sign("wrong", []byte("x")))
		sp.check(t, req, false, 401)
		req = signed(walled, c.method, c.path, c.form, c.query)
		req.Header.Set("X-Forwarded-For", "198.51.100.7")
		sp.check(t, req, c.method == "GET", 403)
		req = signed(st, c.method, c.path, c.form, c.query)
		req.Body = io.NopCloser(strings.NewReader(strings.Repeat("x", 16<<10+1)))
		req.ContentLength = 16<<10 + 1
		sp.check(t, req, false, 413)
		// rateLimit 1 is a burst of 2: the third in the second is refused.
		for i := range 3 {
			req = signed(limited, c.method, c.path, c.form, c.query)
			if i < 2 {
				res, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				res.Body.Close()
				continue
			}
			sp.check(t, req, false, 429)
		}
	}

	// The callback stream: a refusal is an envelope; an answer is a
	// stream that does not end, checked by its head.
	sp.check(t, signed(st, "GET", "/v1/callbacks/stream", nil, withTs("after=abc")), false, 400)
	sp.check(t, signed(st, "GET", "/v1/callbacks/stream", nil, ""), false, 400)
	sp.check(t, signed(st, "GET", "/v1/callbacks/stream", nil, "ts=1"), false, 401)
	sctx, scancel := context.WithCancel(context.Background())
	res, err := http.DefaultClient.Do(signed(st, "GET", "/v1/callbacks/stream", nil, withTs("")).WithContext(sctx))
	require.NoError(t, err)
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	first := make([]byte, 4)
	_, err = io.ReadFull(res.Body, first)
	require.NoError(t, err)
	require.Equal(t, "id: ", string(first), "the stream's position opens it")
	scancel()
	res.Body.Close()
	sp.saw("callbackStream", 200)

	// The hosted page and its status.
	page := *created.Data.URL
	get := func(u string) *http.Request {
		req, err := http.NewRequest("GET", u, nil)
		require.NoError(t, err)
		return req
	}
	sp.check(t, get(page), true, 200)
	sp.check(t, get(strings.Replace(page, "?t=", "?t=x", 1)), true, 404)
	sp.check(t, get(strings.Replace(page, "?t=", "/status?t=", 1)), true, 200)
	sp.check(t, get(strings.Replace(page, "?t=", "/status?t=x", 1)), true, 404)
	sp.check(t, get(s.URL+"/openapi.json"), true, 200)

	sp.covered(t, map[string]bool{
		// A fault of the gateway, an outage and an unknown outcome cannot
		// be caused from outside; their answers are the same Error.
		"* 500": true, "* 503": true, "* 504": true,
		// The hosted page's rate limit is per client address, 20 a
		// second: TestHostedPage_rateLimited covers it.
		"hostedPage 429": true, "hostedStatus 429": true,
	})
}

// TestOpenAPI_ops validates live answers of the operator API, for every
// operation and every status it documents, against
// docs/openapi/ops.json (served at /ops/openapi.json).
func TestOpenAPI_ops(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 200)
	st := s.callbackSite(t, rcv.url())
	requireOK(t, s.ops("POST", "/ops/v1/sites/"+st.ID+"/adjustments", map[string]any{"amount": 1_000_000, "reason": "opening"}))
	bare := s.callbackSite(t, "")
	// A treasury near the bound: a deeper negative limit would take its
	// available amount past it (409 on PATCH).
	full := s.newSite(nil, 0)
	for range 7 {
		requireOK(t, s.ops("POST", "/ops/v1/sites/"+full.ID+"/adjustments", map[string]any{"amount": 1 << 50, "reason": "near the bound"}))
	}
	auditor := s.newOperator(t, "Aya Auditor", "auditor").Token
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")
	sp := loadSpec(t, s.URL, "/ops/openapi.json", "../docs/openapi/ops.json")

	d1 := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "oo-1", "u1", 25000)))
	d2 := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "oo-2", "u2", 30000)))
	w1 := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "ow-1", "w1", 10000, "07712345678")))
	w2 := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "ow-2", "w2", 10000, "07712345678")))
	approvedTx := s.approvedDeposit(t, st)
	approvedEvent := rcv.waitCalls(t, approvedTx, 1)[0].ID
	bareEvent := s.eventID(t, bare.ID, "deposit.approved.v1", s.approvedDeposit(t, bare))

	req := func(token, method, path, body, ct string, hdr ...string) *http.Request {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		r, err := http.NewRequest(method, s.URL+path, rd)
		require.NoError(t, err)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	const js = "application/json"
	admin := adminToken
	check := func(token, method, path, body string, status int, hdr ...string) []byte {
		t.Helper()
		ct := ""
		if body != "" {
			ct = js
		}
		return sp.check(t, req(token, method, path, body, ct, hdr...), status == 200, status)
	}
	newBank := check(admin, "POST", "/ops/v1/banks", `{"code":"OAPI","name":{"en":"O","ar":"O","ku":"O"},"identifierKind":"PHONE","minAmount":1000,"maxAmount":100000,"deposit":true,"withdraw":true,"accounts":[{"accountName":"A","accountNumber":"07801234567"}]}`, 200)
	var bank struct {
		Data struct {
			ID string `json:"_id"`
		}
	}
	require.NoError(t, json.Unmarshal(newBank, &bank))
	opBody := check(admin, "POST", "/ops/v1/operators", `{"name":"Zed","role":"auditor"}`, 200)
	var zed struct{ Data struct{ ID string } }
	require.NoError(t, json.Unmarshal(opBody, &zed))

	// The 200s and the refusals of each call's own.
	ok := []struct {
		method, path, body string
		status             int
		hdr                []string
	}{
		{"GET", "/ops/v1/sites", "", 200, nil},
		{"POST", "/ops/v1/sites", `{"name":"New Shop","returnUrl":"https://shop.example/"}`, 200, []string{"Idempotency-Key", "k1"}},
		{"POST", "/ops/v1/sites", `{"name":"Other Shop"}`, 409, []string{"Idempotency-Key", "k1"}},
		{"POST", "/ops/v1/sites", `{}`, 400, nil},
		{"GET", "/ops/v1/sites/" + st.ID, "", 200, nil},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"rateLimit":0,"supportContact":"help"}`, 200, nil},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"negativeLimit":-1000}`, 200, nil},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"rateLimit":-1}`, 400, nil},
		{"PATCH", "/ops/v1/sites/" + full.ID, `{"negativeLimit":-1125899906842624}`, 409, nil},
		{"POST", "/ops/v1/sites/" + bare.ID + "/secret", `{"overlapSeconds":60}`, 200, nil},
		{"POST", "/ops/v1/sites/" + bare.ID + "/secret", `{"overlapSeconds":-1}`, 400, nil},
		{"POST", "/ops/v1/sites/" + bare.ID + "/webhook-secret", `{}`, 200, nil},
		{"POST", "/ops/v1/sites/" + bare.ID + "/webhook-secret", `{"overlapSeconds":-1}`, 400, nil},
		{"POST", "/ops/v1/sites/" + st.ID + "/adjustments", `{"amount":1000,"reason":"top-up"}`, 200, []string{"Idempotency-Key", "k2"}},
		{"POST", "/ops/v1/sites/" + st.ID + "/adjustments", `{"amount":2000,"reason":"top-up"}`, 409, []string{"Idempotency-Key", "k2"}},
		{"POST", "/ops/v1/sites/" + st.ID + "/adjustments", `{"amount":0,"reason":"x"}`, 400, nil},
		{"PUT", "/ops/v1/sites/" + bare.ID + "/methods", `{"methods":[{"bank":"ZAINCASH","minAmount":2000,"accounts":[{"accountName":"Bare","accountNumber":"07801111111"}]}]}`, 200, nil},
		{"PUT", "/ops/v1/sites/" + bare.ID + "/methods", `{"methods":[{"bank":"NOPE"}]}`, 400, nil},
		{"PUT", "/ops/v1/sites/" + bare.ID + "/methods", `{"all":true}`, 200, nil},
		{"GET", "/ops/v1/sites/" + st.ID + "/events?limit=5", "", 200, nil},
		{"GET", "/ops/v1/sites/" + st.ID + "/events?cursor=abc", "", 400, nil},
		{"GET", "/ops/v1/banks", "", 200, nil},
		{"POST", "/ops/v1/banks", `{"code":"OAPI","name":{"en":"O","ar":"O","ku":"O"},"identifierKind":"PHONE","minAmount":1000,"maxAmount":100000,"deposit":true,"withdraw":true}`, 409, nil},
		{"POST", "/ops/v1/banks", `{"code":"BAD"}`, 400, nil},
		{"PATCH", "/ops/v1/banks/" + bank.Data.ID, `{"enabled":true,"maxAmount":200000}`, 200, nil},
		{"PATCH", "/ops/v1/banks/" + bank.Data.ID, `{"minAmount":-5}`, 400, nil},
		{"GET", "/ops/v1/transactions?type=deposit&status=pending&limit=2", "", 200, nil},
		{"GET", "/ops/v1/transactions?bogus=1", "", 400, nil},
		{"GET", "/ops/v1/transactions/" + d1.TransactionID, "", 200, nil},
		{"GET", "/ops/v1/transactions/" + w1.TransactionID, "", 200, nil},
		{"POST", "/ops/v1/matches", `{"text":"25000,Ali Kareem"}`, 200, nil},
		{"POST", "/ops/v1/matches", `{"text":"12x,Ali"}`, 400, nil},
		{"POST", "/ops/v1/deposits/" + d2.TransactionID + "/approve", `{"amount":29000}`, 200, nil},
		{"POST", "/ops/v1/deposits/" + d2.TransactionID + "/approve", `{}`, 409, nil},
		{"POST", "/ops/v1/deposits/" + d1.TransactionID + "/approve", `{"amount":0}`, 400, nil},
		{"POST", "/ops/v1/deposits/" + d1.TransactionID + "/reject", `{"reason":"no transfer"}`, 200, nil},
		{"POST", "/ops/v1/deposits/" + d1.TransactionID + "/reject", `{"reason":"again"}`, 409, nil},
		{"POST", "/ops/v1/deposits/" + d1.TransactionID + "/reject", `{"bogus":1}`, 400, nil},
		{"POST", "/ops/v1/withdrawals/" + w1.TransactionID + "/process", "", 200, nil},
		{"POST", "/ops/v1/withdrawals/" + w1.TransactionID + "/process", "", 409, nil},
		{"POST", "/ops/v1/withdrawals/" + w1.TransactionID + "/process", `{"bogus":1}`, 400, nil},
		{"POST", "/ops/v1/withdrawals/" + w1.TransactionID + "/pay", `{"reference":"ZC-1"}`, 200, nil},
		{"POST", "/ops/v1/withdrawals/" + w1.TransactionID + "/pay", `{}`, 409, nil},
		{"POST", "/ops/v1/withdrawals/" + w1.TransactionID + "/pay", `{"bogus":1}`, 400, nil},
		{"POST", "/ops/v1/withdrawals/" + w2.TransactionID + "/reject", `{"reason":"closed"}`, 200, nil},
		{"POST", "/ops/v1/withdrawals/" + w2.TransactionID + "/reject", `{"reason":"again"}`, 409, nil},
		{"POST", "/ops/v1/withdrawals/" + w2.TransactionID + "/reject", `{"bogus":1}`, 400, nil},
		{"GET", "/ops/v1/operators", "", 200, nil},
		{"POST", "/ops/v1/operators", `{"name":"Zed","role":"auditor"}`, 409, nil},
		{"POST", "/ops/v1/operators", `{"name":"","role":"auditor"}`, 400, nil},
		{"DELETE", "/ops/v1/operators/" + zed.Data.ID, "", 200, nil},
		{"DELETE", "/ops/v1/operators/" + zed.Data.ID, "", 409, nil},
		{"GET", "/ops/v1/callbacks?limit=5", "", 200, nil},
		{"GET", "/ops/v1/callbacks?status=sideways", "", 400, nil},
		{"POST", "/ops/v1/callbacks/" + approvedEvent + "/resend", "", 200, nil},
		{"POST", "/ops/v1/callbacks/" + bareEvent + "/resend", "", 409, nil},
	}
	for _, c := range ok {
		check(admin, c.method, c.path, c.body, c.status, c.hdr...)
	}
	for _, p := range []string{"/healthz", "/readyz", "/ops/openapi.json"} {
		sp.check(t, req("", "GET", p, "", ""), true, 200)
	}

	// What any call may answer: no token (401), a role too low (403), an
	// id of nothing (404), a body over the limit (413).
	big := `{"reason":"` + strings.Repeat("x", 16<<10) + `"}`
	for path, item := range sp.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security != nil && len(*op.Security) == 0 {
				continue // no token needed
			}
			concrete := strings.NewReplacer("{id}", concreteID(path, st.ID, d2.TransactionID, bank.Data.ID, zed.Data.ID),
				"{eventId}", approvedEvent).Replace(path)
			body := ""
			if op.RequestBody != nil {
				body = cmp.Or(validBodies[op.OperationID], "{}")
			}
			if op.Responses.Value("401") != nil {
				check("", method, concrete, body, 401)
			}
			if op.Responses.Value("403") != nil {
				check(auditor, method, concrete, body, 403)
			}
			if op.Responses.Value("404") != nil {
				missing := strings.NewReplacer("{id}", concreteID(path, "snope", "snope-999", "0123456789abcdef01234567", "op_nope"),
					"{eventId}", "999999-0").Replace(path)
				if !strings.Contains(path, "{") {
					missing += "?site=%21" // not a site id
				}
				check(admin, method, missing, body, 404)
			}
			if op.Responses.Value("413") != nil {
				payload := big
				if strings.HasSuffix(path, "/matches") {
					payload = `{"text":"` + strings.Repeat("x", 512<<10) + `"}`
				}
				check(admin, method, concrete, payload, 413)
			}
		}
	}
	sp.covered(t, map[string]bool{"* 500": true, "* 503": true, "* 504": true})
}

// validBodies are bodies each call takes, so that what is checked is the
// refusal at hand and not the body's.
var validBodies = map[string]string{
	"createSite":       `{"name":"Shop"}`,
	"setSiteMethods":   `{"all":true}`,
	"adjustTreasury":   `{"amount":1,"reason":"x"}`,
	"createBank":       `{"code":"OTHER","name":{"en":"O","ar":"O","ku":"O"},"identifierKind":"PHONE","minAmount":1000,"maxAmount":100000,"deposit":true}`,
	"matchTransfers":   `{"text":"1000,Ali"}`,
	"rejectDeposit":    `{"reason":"x"}`,
	"rejectWithdrawal": `{"reason":"x"}`,
	"createOperator":   `{"name":"Quinn","role":"auditor"}`,
}

// concreteID is the id a path's {id} stands for: a site's, a
// transaction's, a method's or an operator's.
func concreteID(path, site, tx, bank, operator string) string {
	switch {
	case strings.HasPrefix(path, "/ops/v1/sites/"):
		return site
	case strings.HasPrefix(path, "/ops/v1/banks/"):
		return bank
	case strings.HasPrefix(path, "/ops/v1/operators/"):
		return operator
	}
	return tx
}
