package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// proposal and result are the data of POST /ops/v1/matches.
type proposal struct {
	Deposit     record `json:"deposit"`
	Score       int    `json:"score"`
	Reason      string `json:"reason"`
	AmountMatch string `json:"amountMatch"`
	NameMatch   string `json:"nameMatch"`
	MethodMatch string `json:"methodMatch"`
}

type matchResult struct {
	Transfer struct {
		Line      int     `json:"line"`
		Amount    int64   `json:"amount"`
		Name      string  `json:"name"`
		Time      *string `json:"time"`
		Method    string  `json:"method"`
		Reference string  `json:"reference"`
	} `json:"transfer"`
	Proposals []proposal `json:"proposals"`
}

func (s *stack) matchText(t testing.TB, token, query, contentType, text string) resp {
	t.Helper()
	return s.send(t, "POST", "/ops/v1/matches"+query, text, map[string]string{"Authorization": "Bearer " + token, "Content-Type": contentType})
}

func matchResults(t testing.TB, r resp) []matchResult {
	t.Helper()
	requireOK(t, r)
	var p page[matchResult]
	r.decode(t, &p)
	require.Nil(t, p.NextCursor)
	return p.Items
}

// TestMatches: transfer lines pasted from a statement get the pending
// deposits they may pay for, ranked; approving the best one is the approve
// action, with its roles: an auditor sees the proposals and cannot approve.
func TestMatches(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	a := s.newSite(nil, 0)
	b := s.newSite(nil, 0)
	dep := func(st site, pid, user, name string, amount int64) record {
		f := depositForm("ZAINCASH", pid, user, amount)
		f.Set("name", name)
		return rec(t, s.post(st, pathDeposit, f))
	}
	ali := dep(a, "m1", "u1", "Ali Kareem", 25000)
	ahmed := dep(b, "m2", "u2", "أحمد حسن", 25000)
	// A sandbox site's deposit of the same amount and name is proposed
	// last, below every live one: no real transfer pays a test.
	test := dep(s.newSite(map[string]any{"sandbox": true}, 0), "m9", "u9", "أحمد حسن", 25000)
	sara := dep(a, "m3", "u3", "Sara Ahmed", 40000)
	done := dep(a, "m4", "u4", "Done Already", 7000)
	requireOK(t, s.ops("POST", "/ops/v1/deposits/"+done.TransactionID+"/approve", nil))

	auditor := s.newOperator(t, "Aya Auditor", "auditor").Token
	operator := s.newOperator(t, "Omar Operator", "operator").Token
	text := "amount\tname\ttime\tmethod\treference\n" +
		"25,000\tاحمد  حسن\t2099-01-01 10:00\tZAINCASH\tZC-1\n" +
		"24000\tSara Ahmed\t\t\tZC-2\n" +
		"7000\tDone Already\t\t\tZC-3\n"
	for _, ct := range []string{"text/tab-separated-values", "text/plain; charset=utf-8"} {
		res := matchResults(t, s.matchText(t, auditor, "", ct, text))
		require.Len(t, res, 3)
		require.Equal(t, 2, res[0].Transfer.Line)
		require.Equal(t, "ZC-1", res[0].Transfer.Reference)
		require.Equal(t, "2099-01-01T07:00:00Z", *res[0].Transfer.Time, "Baghdad time")
		// Both 25,000 deposits, the one of that name first (أحمد حسن
		// written without its hamza); the sandbox site's last.
		require.Len(t, res[0].Proposals, 3)
		require.Equal(t, test.TransactionID, res[0].Proposals[2].Deposit.TransactionID)
		require.Contains(t, res[0].Proposals[2].Reason, "sandbox")
		require.Equal(t, ahmed.TransactionID, res[0].Proposals[0].Deposit.TransactionID)
		require.Equal(t, b.ID, res[0].Proposals[0].Deposit.SiteID)
		require.Equal(t, "exact", res[0].Proposals[0].NameMatch)
		require.Equal(t, ali.TransactionID, res[0].Proposals[1].Deposit.TransactionID)
		require.Equal(t, "different", res[0].Proposals[1].NameMatch)
		require.Contains(t, res[0].Proposals[0].Reason, "amount matches exactly; name matches exactly")
		// Another amount, found by the name.
		require.Len(t, res[1].Proposals, 1)
		require.Equal(t, sara.TransactionID, res[1].Proposals[0].Deposit.TransactionID)
		require.Equal(t, "different", res[1].Proposals[0].AmountMatch)
		require.Contains(t, res[1].Proposals[0].Reason, "24,000 received, 40,000 requested")
		// An approved deposit is no candidate.
		require.Empty(t, res[2].Proposals)
	}

	// One site only.
	res := matchResults(t, s.matchText(t, auditor, "?site="+a.ID, "text/csv", "25000,Ahmed Hasan\n"))
	require.Len(t, res[0].Proposals, 1)
	require.Equal(t, ali.TransactionID, res[0].Proposals[0].Deposit.TransactionID)

	// As JSON, the same.
	r := s.opsAs(t, auditor, "POST", "/ops/v1/matches", map[string]any{"transfers": []map[string]any{
		{"amount": 24000, "name": "sara ahmed", "time": "2026-01-01T00:00:00Z", "reference": "R"}}})
	jres := matchResults(t, r)
	require.Equal(t, sara.TransactionID, jres[0].Proposals[0].Deposit.TransactionID)
	require.Equal(t, 0, jres[0].Transfer.Line)
	// A pasted text in JSON.
	jres = matchResults(t, s.opsAs(t, auditor, "POST", "/ops/v1/matches", map[string]any{"text": "40000,Sara Ahmed"}))
	require.Equal(t, "exact", jres[0].Proposals[0].AmountMatch)

	// The auditor cannot approve the proposal; the operator approves it
	// with the amount received, as the approve action does.
	path := "/ops/v1/deposits/" + sara.TransactionID + "/approve"
	requireErr(t, s.opsAs(t, auditor, "POST", path, map[string]any{"amount": 24000}), 403, "forbidden", "")
	got := rec(t, s.opsAs(t, operator, "POST", path, map[string]any{"amount": 24000}))
	require.Equal(t, "approved", got.Status)
	require.Equal(t, int64(24000), got.Amount)
	// No longer proposed.
	res = matchResults(t, s.matchText(t, auditor, "", "text/csv", "24000,Sara Ahmed\n"))
	require.Empty(t, res[0].Proposals)
}

// TestMatches_refused: what cannot be read is a 400 naming where, and
// nothing is matched.
func TestMatches_refused(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	tr := func(m map[string]any) map[string]any { return map[string]any{"transfers": []map[string]any{m}} }
	for _, tc := range []struct {
		name, query, ct, body string
		json                  any
		status                int
		field, message        string
	}{
		{name: "bad lines, every one named", ct: "text/csv", body: "25000,Ali\nabc,Sara\n100,\n", status: 400, field: "text",
			message: "nothing was matched: line 2, amount: \"abc\" is not a whole number of IQD; line 3, name: the sender's name is missing"},
		{name: "a quote never closed", ct: "text/csv", body: "25000,\"Ahmed Ali\n30000,Omar Hasan\n40000,Zainab Kareem\n", status: 400, field: "text",
			message: "nothing was matched: line 1, name: unterminated quote"},
		{name: "no lines", ct: "text/csv", body: "\n\n", status: 400, field: "text", message: "no transfer lines"},
		{name: "empty JSON", json: map[string]any{}, status: 400, field: "text", message: "no transfer lines"},
		{name: "both", json: map[string]any{"text": "1,a", "transfers": []map[string]any{{"amount": 1, "name": "a"}}}, status: 400, field: "transfers"},
		{name: "unknown field", json: map[string]any{"lines": "1,a"}, status: 400, field: "lines"},
		{name: "unknown parameter", query: "?sites=x", json: tr(map[string]any{"amount": 1, "name": "a"}), status: 400, field: "sites"},
		{name: "site twice", query: "?site=a&site=b", json: tr(map[string]any{"amount": 1, "name": "a"}), status: 400, field: "site", message: "site is given more than once"},
		{name: "unknown site", query: "?site=snope", json: tr(map[string]any{"amount": 1, "name": "a"}), status: 404},
		{name: "zero amount", json: tr(map[string]any{"amount": 0, "name": "a"}), status: 400, field: "transfers[0].amount"},
		{name: "a fraction", json: tr(map[string]any{"amount": 1.5, "name": "a"}), status: 400, field: "transfers.amount"},
		{name: "no name", json: tr(map[string]any{"amount": 5, "name": " "}), status: 400, field: "transfers[0].name"},
		{name: "bad time", json: tr(map[string]any{"amount": 5, "name": "a", "time": "noon"}), status: 400, field: "transfers[0].time"},
		{name: "long reference", json: tr(map[string]any{"amount": 5, "name": "a", "reference": strings.Repeat("r", 257)}), status: 400, field: "transfers[0].reference"},
		{name: "a NUL in a name", json: tr(map[string]any{"amount": 5, "name": "Al\x00i"}), status: 400, field: "transfers[0].name", message: "holds a control character"},
		{name: "a NUL in a CSV name", ct: "text/csv", body: "25000,Al\x00i\n", status: 400, field: "text", message: "line 1, name: holds a control character"},
		{name: "too many lines", ct: "text/csv", body: strings.Repeat("1,a\n", 1001), status: 400, field: "text", message: "more than 1000 transfers"},
		{name: "too large", ct: "text/csv", body: strings.Repeat("x", 512<<10+1), status: 413},
		{name: "another content type", ct: "application/xml", body: "<x/>", status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			ct := tc.ct
			if tc.json != nil {
				raw, err := json.Marshal(tc.json)
				require.NoError(t, err)
				body, ct = string(raw), "application/json"
			}
			r := s.matchText(t, adminToken, tc.query, ct, body)
			code := map[int]string{400: "invalid_request", 404: "not_found", 413: "body_too_large"}[tc.status]
			requireErr(t, r, tc.status, code, tc.field)
			require.Contains(t, r.Message, tc.message)
		})
	}
}

// TestOpsBodies_exact: an operator body's keys are matched exactly, a null
// that would leave a field unchanged is refused, and a value of the wrong
// type is said in words; nothing is written.
func TestOpsBodies_exact(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(map[string]any{"callbackUrl": "https://shop.example/cb"}, 0)
	before := s.eventCount(t, st.ID)
	raw := func(method, path, body string) resp {
		return s.send(t, method, path, body, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
	}
	for _, c := range []struct {
		method, path, body, field, message string
	}{
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"ratelimit":5}`, "ratelimit", "the field is rateLimit (names are matched exactly)"},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"CallbackURL":""}`, "CallbackURL", "the field is callbackUrl"},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"callbackUrl":null}`, "callbackUrl", `cannot be null; send "" to remove it`},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"rateLimit":null}`, "rateLimit", "cannot be null; leave the field out"},
		{"POST", "/ops/v1/sites/" + st.ID + "/adjustments", `{"amount":5,"reason":"x","allowBelowLimit":null}`, "allowBelowLimit", "cannot be null; give a value"},
		{"POST", "/ops/v1/sites/" + st.ID + "/adjustments", `{"amount":5,"reason":null}`, "reason", "cannot be null"},
		{"POST", "/ops/v1/sites", `{"name":"x","hostedPage":null}`, "hostedPage", "cannot be null"},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"rateLimit":1.5}`, "rateLimit", "rateLimit must be an integer (no decimals, no quotes)"},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"negativeLimit":"-5"}`, "negativeLimit", "must be an integer number of IQD"},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"hostedPage":"yes"}`, "hostedPage", "hostedPage must be true or false"},
		{"POST", "/ops/v1/sites/" + st.ID + "/adjustments", `{"amount":"5","reason":"x"}`, "amount", "amount must be an integer number of IQD"},
		{"PATCH", "/ops/v1/banks/" + banks["ZAINCASH"].ID, `{"name":{"EN":"x","ar":"y","ku":"z"}}`, "name.EN", "the field is en"},
		{"PATCH", "/ops/v1/banks/" + banks["ZAINCASH"].ID, `{"accounts":[{"accountName":"a","accountnumber":"1"}]}`, "accounts[0].accountnumber", "the field is accountNumber"},
		{"POST", "/ops/v1/operators", `{"Name":"x","role":"auditor"}`, "Name", "the field is name"},
	} {
		t.Run(c.body, func(t *testing.T) {
			r := raw(c.method, c.path, c.body)
			requireErr(t, r, 400, "invalid_request", c.field)
			require.Contains(t, r.Message, c.message)
		})
	}
	require.Equal(t, before, s.eventCount(t, st.ID))
	// "" still removes the callbackUrl.
	requireOK(t, raw("PATCH", "/ops/v1/sites/"+st.ID, `{"callbackUrl":""}`))
	require.Nil(t, decodeAny(t, s.ops("GET", "/ops/v1/sites/"+st.ID, nil))["callbackUrl"])
}

// TestOpsBodies_oneObject: an operator body is one JSON object or nothing
// (empty, or null, which JSON clients send for nothing); an array or a
// scalar is refused before anything is done.
func TestOpsBodies_oneObject(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	w := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "one-1", "u1", 10000, "07712345678")))
	before := s.eventCount(t, st.ID)
	hdr := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	for _, path := range []string{
		"/ops/v1/withdrawals/" + w.TransactionID + "/process",
		"/ops/v1/sites/" + st.ID + "/webhook-secret",
		"/ops/v1/sites/" + st.ID + "/adjustments",
	} {
		for _, body := range []string{"[]", `[{"amount":5}]`, `"x"`, "1", "true", "nullx"} {
			t.Run(path+" "+body, func(t *testing.T) {
				r := s.send(t, "POST", path, body, hdr)
				requireErr(t, r, 400, "invalid_request", "")
				require.Equal(t, "the body must hold one JSON object", r.Message)
			})
		}
	}
	r := s.send(t, "DELETE", "/ops/v1/operators/op_x", "[]", hdr)
	requireErr(t, r, 400, "invalid_request", "")
	require.Equal(t, before, s.eventCount(t, st.ID))
	require.Equal(t, "pending", rec(t, s.ops("GET", "/ops/v1/transactions/"+w.TransactionID, nil)).Status)
	// null is no body, as an empty one is.
	requireOK(t, s.send(t, "POST", "/ops/v1/withdrawals/"+w.TransactionID+"/process", " null ", hdr))
	require.Equal(t, "processing", rec(t, s.ops("GET", "/ops/v1/transactions/"+w.TransactionID, nil)).Status)
}

// TestOpsBodies_duplicateKeys: a key given twice in one object of an
// operator body, at any depth, is refused naming it, as the merchant API
// refuses a field given twice; nothing is written, where the last value
// would otherwise have been taken (an approval of 25,000 for a body that
// also says 1,000, an IP allowlist emptied).
func TestOpsBodies_duplicateKeys(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(map[string]any{"ipAllowlist": []string{"127.0.0.1/32"}}, 1_000_000)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "dk-1", "u1", 25000)))
	w := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "dk-2", "u2", 10000, "07712345678")))
	before := s.eventCount(t, st.ID)
	raw := func(method, path, body string) resp {
		return s.send(t, method, path, body, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
	}
	bankPath := "/ops/v1/banks/" + banks["ZAINCASH"].ID
	for _, c := range []struct {
		method, path, body, field string
	}{
		{"POST", "/ops/v1/deposits/" + d.TransactionID + "/approve", `{"amount":1000,"amount":25000}`, "amount"},
		{"POST", "/ops/v1/deposits/" + d.TransactionID + "/reject", `{"reason":"no transfer","reason":"x","amount":1}`, "reason"},
		{"POST", "/ops/v1/withdrawals/" + w.TransactionID + "/reject", `{"reason":"a", "reason" : "b"}`, "reason"},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"ipAllowlist":["127.0.0.1/32"],"ipAllowlist":[]}`, "ipAllowlist"},
		{"PATCH", "/ops/v1/sites/" + st.ID, `{"rateLimit":5,"name":"A","rateLimit":0}`, "rateLimit"},
		{"POST", "/ops/v1/sites/" + st.ID + "/adjustments", `{"amount":-1000,"reason":"fee","amount":-900000}`, "amount"},
		{"POST", "/ops/v1/sites/" + st.ID + "/secret", `{"overlapSeconds":0,"overlapSeconds":60}`, "overlapSeconds"},
		{"PATCH", bankPath, `{"name":{"en":"x","ar":"y","ku":"z","en":"w"}}`, "name.en"},
		{"PATCH", bankPath, `{"accounts":[{"accountName":"A","accountNumber":"07801234567"},{"accountName":"B","accountName":"C","accountNumber":"07801234568"}]}`, "accounts[1].accountName"},
		{"POST", "/ops/v1/operators", `{"name":"Zed","role":"auditor","role":"admin"}`, "role"},
		{"POST", "/ops/v1/matches", `{"text":"25000,Ahmed Ali","text":""}`, "text"},
		{"POST", "/ops/v1/matches", `{"transfers":[{"amount":25000,"name":"Ali","amount":1}]}`, "transfers[0].amount"},
	} {
		t.Run(c.body, func(t *testing.T) {
			r := raw(c.method, c.path, c.body)
			requireErr(t, r, 400, "invalid_request", c.field)
			require.Contains(t, r.Message, c.field+" is given more than once")
		})
	}
	require.Equal(t, before, s.eventCount(t, st.ID))
	require.Equal(t, "pending", rec(t, s.ops("GET", "/ops/v1/transactions/"+d.TransactionID, nil)).Status)
	// One key in several objects is no repeat.
	requireOK(t, raw("PATCH", bankPath, `{"accounts":[{"accountName":"A","accountNumber":"07801234567"},{"accountName":"B","accountNumber":"07801234568"}]}`))
}

// TestOpsBodies_invalidUTF8: an operator body that is not UTF-8 is
// refused; encoding/json would have stored U+FFFD in place of each bad
// byte, a name or reason other than the one sent.
func TestOpsBodies_invalidUTF8(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "u8-1", "u1", 25000)))
	before := s.eventCount(t, st.ID)
	hdr := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	for path, body := range map[string]string{
		"/ops/v1/deposits/" + d.TransactionID + "/reject": "{\"reason\":\"no \xff transfer\"}",
		"/ops/v1/sites/" + st.ID + "/adjustments":         "{\"amount\":5,\"reason\":\"fee \xc3\"}",
	} {
		r := s.send(t, "POST", path, body, hdr)
		requireErr(t, r, 400, "invalid_request", "")
		require.Contains(t, r.Message, "UTF-8")
	}
	// Half a surrogate pair escaped would be read as U+FFFD too.
	for path, body := range map[string]string{
		"/ops/v1/deposits/" + d.TransactionID + "/reject": `{"reason":"no \ud800 transfer"}`,
		"/ops/v1/sites/" + st.ID + "/adjustments":         `{"amount":5,"reason":"fee \udc00"}`,
	} {
		r := s.send(t, "POST", path, body, hdr)
		requireErr(t, r, 400, "invalid_request", "")
		require.Contains(t, r.Message, "surrogate")
	}
	require.Equal(t, before, s.eventCount(t, st.ID))
	// A whole pair is one character, stored as sent.
	r := s.send(t, "POST", "/ops/v1/deposits/"+d.TransactionID+"/reject", `{"reason":"no transfer \ud83d\ude00"}`, hdr)
	require.Equal(t, 200, r.Status, r.Message)
	require.Equal(t, before+1, s.eventCount(t, st.ID))
}
