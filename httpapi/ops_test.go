package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// siteCount is the number of sites the operator API lists.
func siteCount(t *testing.T, s *stack) int {
	t.Helper()
	r := s.ops("GET", "/ops/v1/sites", nil)
	requireOK(t, r)
	var list page[map[string]any]
	r.decode(t, &list)
	require.Nil(t, list.NextCursor)
	return len(list.Items)
}

func TestOpsAuth(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "p1", "u1", 25000)))
	nSites := siteCount(t, s)
	nEvents := s.eventCount(t, st.ID)

	endpoints := []struct{ method, path, body string }{
		{"GET", "/ops/v1/sites", ""},
		{"POST", "/ops/v1/sites", `{"name":"evil"}`},
		{"GET", "/ops/v1/sites/" + st.ID, ""},
		{"POST", "/ops/v1/sites/" + st.ID + "/secret", `{}`},
		{"POST", "/ops/v1/sites/" + st.ID + "/adjustments", `{"amount":1000000,"reason":"x"}`},
		{"GET", "/ops/v1/sites/" + st.ID + "/events", ""},
		{"GET", "/ops/v1/transactions", ""},
		{"POST", "/ops/v1/deposits/" + d.TransactionID + "/approve", `{}`},
		{"POST", "/ops/v1/banks", `{"code":"EVIL"}`},
		{"PATCH", "/ops/v1/banks/ZAINCASH", `{"enabled":false}`},
	}
	auths := map[string]string{
		"missing":               "",
		"wrong token":           "Bearer wrong",
		"empty bearer":          "Bearer ",
		"basic":                 "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+adminToken)),
		"token without scheme":  adminToken,
		"token with suffix":     "Bearer " + adminToken + "x",
		"token prefix":          "Bearer " + adminToken[:len(adminToken)-1],
		"merchant secret":       "Bearer " + st.Secret,
		"merchant appKey":       "Bearer " + st.AppKey,
		"token in other header": "",
	}
	for name, auth := range auths {
		for _, ep := range endpoints {
			t.Run(name+" "+ep.method+" "+ep.path, func(t *testing.T) {
				hdr := map[string]string{"Content-Type": "application/json"}
				if auth != "" {
					hdr["Authorization"] = auth
				}
				if name == "token in other header" {
					hdr["X-Admin-Token"] = adminToken
					hdr["appKey"] = st.AppKey
				}
				r := s.send(t, ep.method, ep.path, ep.body, hdr)
				requireErr(t, r, 401, "unauthorized", "")
				require.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer")
			})
		}
	}
	require.Equal(t, nSites, siteCount(t, s))
	require.Equal(t, nEvents, s.eventCount(t, st.ID))
	require.Equal(t, "pending", rec(t, s.get(st, "/v1/transactions/"+d.TransactionID, "")).Status)
	require.Equal(t, balance{Currency: "IQD"}, s.balanceOf(t, st))
}

func TestOpsCreateSite(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	n := siteCount(t, s)
	cases := []struct {
		name, body, field string
		ct                string
	}{
		{"positive negativeLimit", `{"name":"x","negativeLimit":1}`, "negativeLimit", ""},
		{"negativeLimit not a number", `{"name":"x","negativeLimit":"-5"}`, "negativeLimit", ""},
		{"negativeLimit fraction", `{"name":"x","negativeLimit":-5.5}`, "negativeLimit", ""},
		{"bad CIDR prefix", `{"name":"x","ipAllowlist":["10.0.0.0/33"]}`, "ipAllowlist", ""},
		{"bad CIDR text", `{"name":"x","ipAllowlist":["127.0.0.1","office"]}`, "ipAllowlist", ""},
		{"empty CIDR", `{"name":"x","ipAllowlist":[""]}`, "ipAllowlist", ""},
		{"allowlist not a list", `{"name":"x","ipAllowlist":"10.0.0.0/8"}`, "ipAllowlist", ""},
		{"relative callbackUrl", `{"name":"x","callbackUrl":"/callbacks"}`, "callbackUrl", ""},
		{"host-less callbackUrl", `{"name":"x","callbackUrl":"https:///cb"}`, "callbackUrl", ""},
		{"ftp callbackUrl", `{"name":"x","callbackUrl":"ftp://shop.example/cb"}`, "callbackUrl", ""},
		{"callbackUrl with credentials", `{"name":"x","callbackUrl":"https://u:p@shop.example/cb"}`, "callbackUrl", ""},
		{"unknown field", `{"name":"x","bogus":1}`, "bogus", ""},
		{"secret cannot be chosen", `{"name":"x","secret":"mine"}`, "secret", ""},
		{"missing name", `{"negativeLimit":0}`, "name", ""},
		{"blank name", `{"name":"   "}`, "name", ""},
		{"ttl too short", `{"name":"x","depositTtlSeconds":59}`, "depositTtlSeconds", ""},
		{"ttl too long", `{"name":"x","depositTtlSeconds":604801}`, "depositTtlSeconds", ""},
		{"negative rateLimit", `{"name":"x","rateLimit":-1}`, "rateLimit", ""},
		{"hostedPage not bool", `{"name":"x","hostedPage":"yes"}`, "hostedPage", ""},
		{"not json", `name=x`, "", ""},
		{"two objects", `{"name":"x"}{"name":"y"}`, "", ""},
		{"array", `[{"name":"x"}]`, "", ""},
		{"form content type", `{"name":"x"}`, "", "application/x-www-form-urlencoded"},
		{"empty body", ``, "name", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := "application/json"
			if c.ct != "" {
				ct = c.ct
			}
			r := s.send(t, "POST", "/ops/v1/sites", c.body, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": ct})
			requireErr(t, r, 400, "invalid_request", c.field)
		})
	}
	require.Equal(t, n, siteCount(t, s), "no site was created")

	t.Run("valid", func(t *testing.T) {
		r := s.ops("POST", "/ops/v1/sites", map[string]any{"name": "Shop", "negativeLimit": -500000,
			"ipAllowlist": []string{"203.0.113.0/24", "127.0.0.1"}, "callbackUrl": "https://shop.example/cb",
			"hostedPage": true, "depositTtlSeconds": 900, "rateLimit": 50})
		requireOK(t, r)
		m := decodeAny(t, r)
		for _, k := range []string{"id", "appKey", "secret", "webhookSecret", "createdAt"} {
			require.NotEmpty(t, m[k], k)
		}
		require.Regexp(t, `^whsec_`, m["webhookSecret"])
		require.Equal(t, "Shop", m["name"])
		require.Equal(t, -500000.0, m["negativeLimit"])
		require.Equal(t, []any{"203.0.113.0/24", "127.0.0.1"}, m["ipAllowlist"])
		require.Equal(t, "https://shop.example/cb", m["callbackUrl"])
		require.Equal(t, true, m["hostedPage"])
		require.Equal(t, 900.0, m["depositTtlSeconds"])
		require.Equal(t, 50.0, m["rateLimit"])
		// Reading it back never shows the secrets.
		g := s.ops("GET", "/ops/v1/sites/"+m["id"].(string), nil)
		requireOK(t, g)
		gm := decodeAny(t, g)
		require.NotContains(t, gm, "secret")
		require.NotContains(t, gm, "webhookSecret")
		require.NotContains(t, string(g.Raw), m["secret"].(string))
		require.Equal(t, map[string]any{"balance": 0.0, "pendingWithdrawals": 0.0, "negativeLimit": -500000.0,
			"available": 500000.0, "currency": "IQD"}, gm["treasury"])
		l := s.ops("GET", "/ops/v1/sites", nil)
		require.NotContains(t, string(l.Raw), m["secret"].(string))
		require.NotContains(t, string(l.Raw), m["webhookSecret"].(string))
		require.Equal(t, n+1, siteCount(t, s))
	})
	t.Run("defaults", func(t *testing.T) {
		r := s.ops("POST", "/ops/v1/sites", map[string]any{"name": "Plain"})
		requireOK(t, r)
		m := decodeAny(t, r)
		require.Equal(t, 0.0, m["negativeLimit"])
		require.Equal(t, []any{}, m["ipAllowlist"])
		require.Nil(t, m["callbackUrl"])
		require.Equal(t, false, m["hostedPage"])
		require.Equal(t, 1800.0, m["depositTtlSeconds"])
		require.Equal(t, 0.0, m["rateLimit"])
	})
	t.Run("unknown site", func(t *testing.T) {
		requireErr(t, s.ops("GET", "/ops/v1/sites/snope", nil), 404, "not_found", "")
	})
}

func TestOpsUpdateSite(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(map[string]any{"name": "Before"}, 0)
	get := func() map[string]any {
		r := s.ops("GET", "/ops/v1/sites/"+st.ID, nil)
		requireOK(t, r)
		return decodeAny(t, r)
	}
	orig := get()
	before := s.eventCount(t, st.ID)
	for _, c := range []struct{ body, field string }{
		{`{"negativeLimit":5}`, "negativeLimit"},
		{`{"ipAllowlist":["x"]}`, "ipAllowlist"},
		{`{"callbackUrl":"relative/path"}`, "callbackUrl"},
		{`{"depositTtlSeconds":10}`, "depositTtlSeconds"},
		{`{"name":""}`, "name"},
		{`{"appKey":"ak_mine"}`, "appKey"},
		{`{"rateLimit":1.5}`, "rateLimit"},
	} {
		t.Run(c.body, func(t *testing.T) {
			r := s.send(t, "PATCH", "/ops/v1/sites/"+st.ID, c.body, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
			requireErr(t, r, 400, "invalid_request", c.field)
		})
	}
	require.Equal(t, before, s.eventCount(t, st.ID))
	require.Equal(t, orig, get())
	requireErr(t, s.ops("PATCH", "/ops/v1/sites/snope", map[string]any{"name": "x"}), 404, "not_found", "")

	r := s.ops("PATCH", "/ops/v1/sites/"+st.ID, map[string]any{"name": "After", "negativeLimit": -1000, "hostedPage": true,
		"depositTtlSeconds": 120, "callbackUrl": "http://shop.example/cb", "rateLimit": 100, "ipAllowlist": []string{"127.0.0.0/8"}})
	requireOK(t, r)
	m := decodeAny(t, r)
	require.NotContains(t, m, "secret")
	want := map[string]any{"name": "After", "negativeLimit": -1000.0, "hostedPage": true, "depositTtlSeconds": 120.0,
		"callbackUrl": "http://shop.example/cb", "rateLimit": 100.0, "ipAllowlist": []any{"127.0.0.0/8"}}
	got := get()
	for k, v := range want {
		require.Equal(t, v, m[k], k)
		require.Equal(t, v, got[k], k)
	}
	// 0 − 0 − (−1000): the update says what the new limit left; a read
	// of the site has its treasury instead.
	require.Equal(t, 1000.0, m["available"])
	require.NotContains(t, got, "available")
	require.Equal(t, orig["appKey"], got["appKey"])
	require.Equal(t, orig["createdAt"], got["createdAt"])
	// The merchant API follows the new settings.
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "p1", "u1", 25000)))
	require.NotNil(t, d.URL)
	require.Equal(t, 120*time.Second, parseTime(t, *d.ExpiresAt).Sub(parseTime(t, d.CreatedAt)))
	require.Equal(t, int64(-1000), s.balanceOf(t, st).NegativeLimit)
	// 0 − 0 − 1000 lands exactly on the new limit: refused.
	requireErr(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "w1", "u1", 1000, "07712345678")), 402, "insufficient_site_balance", "amount")
	// The new rate limit (burst 200) and allowlist (loopback) let the
	// merchant in.
	requireOK(t, s.get(st, "/v1/balance", ""))
}

// TestOpsUpdateSite_negativeLimit: a change of the negative limit is
// taken even below what is reserved (how an operator stops payouts at
// once), and its answer says what is left available.
func TestOpsUpdateSite_negativeLimit(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(map[string]any{"negativeLimit": -5000}, 10000)
	requireOK(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "w1", "u1", 12000, "07712345678")))
	require.Equal(t, int64(3000), s.balanceOf(t, st).Available)

	for _, c := range []struct {
		body      map[string]any
		available any // nil: absent
	}{
		{map[string]any{"negativeLimit": -6000}, 4000.0},
		{map[string]any{"negativeLimit": 0}, -2000.0},
		{map[string]any{"name": "Renamed"}, nil},
		{map[string]any{"negativeLimit": 0, "rateLimit": 50}, -2000.0},
	} {
		r := s.ops("PATCH", "/ops/v1/sites/"+st.ID, c.body)
		requireOK(t, r)
		m := decodeAny(t, r)
		if c.available == nil {
			require.NotContains(t, m, "available", "%v", c.body)
			continue
		}
		require.Equal(t, c.available, m["available"], "%v", c.body)
	}
	b := s.balanceOf(t, st)
	require.Equal(t, balance{Balance: 10000, PendingWithdrawals: 12000, NegativeLimit: 0, Available: -2000, Currency: "IQD"}, b)
	// Nothing more is paid out until room is made; what was reserved stands.
	requireErr(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "w2", "u2", 1000, "07712345678")), 402, "insufficient_site_balance", "amount")
}

func TestOpsAdjustments(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	st := s.newSite(map[string]any{"negativeLimit": -5000}, 0)
	steps := []struct {
		body string
		want int64
	}{
		{`{"amount":100000,"reason":"top-up"}`, 100000},
		{`{"amount":-30000,"reason":"fee"}`, 70000},
		{`{"amount":-80000,"reason":"correction","allowBelowLimit":true}`, -10000},
	}
	for _, c := range steps {
		r := s.send(t, "POST", "/ops/v1/sites/"+st.ID+"/adjustments", c.body, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
		requireOK(t, r)
		var b balance
		r.decode(t, &b)
		require.Equal(t, balance{Balance: c.want, NegativeLimit: -5000, Available: c.want + 5000, Currency: "IQD"}, b)
		require.Equal(t, b, s.balanceOf(t, st))
	}
	before := s.eventCount(t, st.ID)
	for _, c := range []struct{ body, field string }{
		{`{"reason":"x"}`, "amount"},
		{`{"amount":0,"reason":"x"}`, "amount"},
		{`{"amount":1.5,"reason":"x"}`, "amount"},
		{`{"amount":"100","reason":"x"}`, "amount"},
		{`{"amount":5}`, "reason"},
		{`{"amount":1,"reason":"x","allowBelowLimit":"yes"}`, "allowBelowLimit"},
		{`{"amount":5,"reason":"   "}`, "reason"},
		{`{"amount":5,"reason":"` + strings.Repeat("r", 257) + `"}`, "reason"},
		{`{"amount":5,"reason":"x","extra":true}`, "extra"},
		{``, "amount"},
	} {
		t.Run(c.body, func(t *testing.T) {
			r := s.send(t, "POST", "/ops/v1/sites/"+st.ID+"/adjustments", c.body, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
			requireErr(t, r, 400, "invalid_request", c.field)
		})
	}
	require.Equal(t, before, s.eventCount(t, st.ID))
	requireErr(t, s.ops("POST", "/ops/v1/sites/snope/adjustments", map[string]any{"amount": 5, "reason": "x"}), 404, "not_found", "")
	items := s.history(t, st.ID)
	last := items[len(items)-1]
	require.Equal(t, "treasury.adjusted.v3", last.Name)
	require.Equal(t, "admin", last.Actor)
	require.Equal(t, map[string]any{"amount": -80000.0, "reason": "correction", "allowBelowLimit": true}, last.Data)
	// Further below without allowBelowLimit: refused, naming what is available.
	r := s.ops("POST", "/ops/v1/sites/"+st.ID+"/adjustments", map[string]any{"amount": -1, "reason": "x"})
	requireErr(t, r, 409, "conflict", "amount")
	require.Contains(t, r.Message, "(available is -5000); send allowBelowLimit: true")
	require.Equal(t, len(items), s.eventCount(t, st.ID))
}

func TestOpsBanks(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	type bankOut struct {
		ID             string            `json:"_id"`
		Code           string            `json:"code"`
		Name           map[string]string `json:"name"`
		IdentifierKind string            `json:"identifierKind"`
		MinAmount      int64             `json:"minAmount"`
		MaxAmount      int64             `json:"maxAmount"`
		Deposit        bool              `json:"deposit"`
		Withdraw       bool              `json:"withdraw"`
		Enabled        bool              `json:"enabled"`
		Accounts       []map[string]string
	}
	valid := func() map[string]any {
		return map[string]any{"code": "FASTPAY", "name": map[string]string{"en": "FastPay", "ar": "فاست باي", "ku": "فاست پەی"},
			"identifierKind": "PHONE", "minAmount": 2000, "maxAmount": 50000, "deposit": true, "withdraw": true,
			"accounts": []map[string]string{{"accountName": "Shop FP", "accountNumber": "07509999999"}}}
	}
	mod := func(k string, v any) map[string]any {
		b := valid()
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	nBanks := func() int {
		r := s.ops("GET", "/ops/v1/banks", nil)
		requireOK(t, r)
		var l page[bankOut]
		r.decode(t, &l)
		return len(l.Items)
	}
	n := nBanks()
	cases := []struct {
		name   string
		body   map[string]any
		status int
		code   string
		field  string
	}{
		{"existing code", mod("code", "ZAINCASH"), 409, "conflict", "code"},
		{"code equal to an _id", mod("code", banks["NBI"].ID), 409, "conflict", "code"},
		{"missing code", mod("code", nil), 400, "invalid_request", "code"},
		{"code with space", mod("code", "FAST PAY"), 400, "invalid_request", "code"},
		{"code too long", mod("code", strings.Repeat("C", 33)), 400, "invalid_request", "code"},
		{"missing name", mod("name", nil), 400, "invalid_request", "name"},
		{"name without en", mod("name", map[string]string{"ar": "x"}), 400, "invalid_request", "name"},
		{"unknown kind", mod("identifierKind", "EMAIL"), 400, "invalid_request", "identifierKind"},
		{"lower-case kind", mod("identifierKind", "phone"), 400, "invalid_request", "identifierKind"},
		{"min 0", mod("minAmount", 0), 400, "invalid_request", "minAmount"},
		{"max below min", mod("maxAmount", 1999), 400, "invalid_request", "maxAmount"},
		{"neither kind", func() map[string]any { b := mod("deposit", false); b["withdraw"] = false; return b }(), 400, "invalid_request", "deposit"},
		{"deposit without accounts", mod("accounts", nil), 400, "invalid_request", "accounts"},
		{"account without number", mod("accounts", []map[string]string{{"accountName": "x"}}), 400, "invalid_request", "accounts"},
		{"enabled given", mod("enabled", true), 400, "invalid_request", "enabled"},
		{"unknown field", mod("color", "red"), 400, "invalid_request", "color"},
		{"min not integer", mod("minAmount", 1.5), 400, "invalid_request", "minAmount"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireErr(t, s.ops("POST", "/ops/v1/banks", c.body), c.status, c.code, c.field)
		})
	}
	require.Equal(t, n, nBanks(), "no method was created")

	r := s.ops("POST", "/ops/v1/banks", valid())
	requireOK(t, r)
	var fp bankOut
	r.decode(t, &fp)
	require.Regexp(t, `^[0-9a-f]{24}$`, fp.ID)
	require.Equal(t, bankOut{ID: fp.ID, Code: "FASTPAY", Name: map[string]string{"en": "FastPay", "ar": "فاست باي", "ku": "فاست پەی"},
		IdentifierKind: "PHONE", MinAmount: 2000, MaxAmount: 50000, Deposit: true, Withdraw: true, Enabled: true,
		Accounts: []map[string]string{{"accountName": "Shop FP", "accountNumber": "07509999999"}}}, fp)
	require.Equal(t, n+1, nBanks())
	d := rec(t, s.post(st, pathDeposit, depositForm("FASTPAY", "fp1", "u1", 2000)))
	require.Equal(t, fp.ID, d.BankID)
	require.Equal(t, "07509999999", d.BankAccountIban)

	// PATCH, by _id or by code.
	upd := []struct {
		name  string
		path  string
		body  map[string]any
		field string
	}{
		{"code cannot change", "FASTPAY", map[string]any{"code": "FP2"}, "code"},
		{"kind cannot change", fp.ID, map[string]any{"identifierKind": "CARD_NO"}, "identifierKind"},
		{"min above max", "FASTPAY", map[string]any{"minAmount": 60000}, "maxAmount"},
		{"neither kind", fp.ID, map[string]any{"deposit": false, "withdraw": false}, "deposit"},
		{"no accounts for a deposit method", fp.ID, map[string]any{"accounts": []any{}}, "accounts"},
		{"unknown field", fp.ID, map[string]any{"code2": "x"}, "code2"},
		{"name without en", fp.ID, map[string]any{"name": map[string]string{"ar": "x"}}, "name"},
	}
	for _, c := range upd {
		t.Run("patch "+c.name, func(t *testing.T) {
			requireErr(t, s.ops("PATCH", "/ops/v1/banks/"+c.path, c.body), 400, "invalid_request", c.field)
		})
	}
	t.Run("patch unknown method", func(t *testing.T) {
		r := s.ops("PATCH", "/ops/v1/banks/NOPE", map[string]any{"enabled": false})
		require.Contains(t, []int{400, 404}, r.HTTP, "%s", r.Raw)
		checkEnvelope(t, r)
		require.Contains(t, []string{"not_found", "unknown_bank"}, r.Code)
	})
	r = s.ops("PATCH", "/ops/v1/banks/FASTPAY", map[string]any{"name": map[string]string{"en": "Fast Pay", "ar": "فاست", "ku": "فاست"},
		"maxAmount": 60000, "withdraw": false,
		"accounts": []map[string]string{{"accountName": "New FP", "accountNumber": "07501111111"}}})
	requireOK(t, r)
	var fp2 bankOut
	r.decode(t, &fp2)
	require.Equal(t, bankOut{ID: fp.ID, Code: "FASTPAY", Name: map[string]string{"en": "Fast Pay", "ar": "فاست", "ku": "فاست"},
		IdentifierKind: "PHONE", MinAmount: 2000, MaxAmount: 60000, Deposit: true, Withdraw: false, Enabled: true,
		Accounts: []map[string]string{{"accountName": "New FP", "accountNumber": "07501111111"}}}, fp2)
	d2 := rec(t, s.post(st, pathDeposit, depositForm("FASTPAY", "fp2", "u2", 60000)))
	require.Equal(t, "New FP", d2.BankAccountName)
	require.Equal(t, "07501111111", d2.BankAccountIban)
	require.Equal(t, "Fast Pay", d2.BankName)
	requireErr(t, s.post(st, pathWithdraw, withdrawForm("FASTPAY", "fp3", "u2", 5000, "07712345678")), 400, "unknown_bank", "bankId")
	// The earlier deposit keeps the account it was given.
	require.Equal(t, "07509999999", rec(t, s.get(st, "/v1/transactions/"+d.TransactionID, "")).BankAccountIban)
}

func TestOpsTransactionListing(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	a := s.newSite(nil, 1_000_000)
	b := s.newSite(nil, 1_000_000)
	var ids []string
	for i, u := range []string{"u1", "u2", "u3", "u4"} {
		ids = append(ids, rec(t, s.post(a, pathDeposit, depositForm("ZAINCASH", "d"+u, u, int64(1000*(i+1))))).TransactionID)
	}
	for i := 0; i < 3; i++ {
		ids = append(ids, rec(t, s.post(a, pathWithdraw, withdrawForm("QICARD", "w"+itoa(int64(i)), "x", 2000, "6375000012345678"))).TransactionID)
	}
	var bIDs []string
	for _, u := range []string{"u1", "u2"} {
		bIDs = append(bIDs, rec(t, s.post(b, pathDeposit, depositForm("ZAINCASH", "b"+u, u, 3000))).TransactionID)
	}
	for _, limit := range []int{1, 2, 3, 7, 100} {
		t.Run("site paging limit "+itoa(int64(limit)), func(t *testing.T) {
			l := s.opsList(t, "site="+a.ID, limit)
			require.Equal(t, ids, txIDs(l...), "every transaction once, in creation order")
			for _, r := range l {
				require.Equal(t, a.ID, r.SiteID)
				require.NotEmpty(t, r.Hash)
			}
		})
	}
	t.Run("all sites", func(t *testing.T) {
		l := s.opsList(t, "", 3)
		got := txIDs(l...)
		require.ElementsMatch(t, append(append([]string{}, ids...), bIDs...), got)
		for _, r := range l {
			require.True(t, strings.HasPrefix(r.TransactionID, r.SiteID+"-"))
		}
	})
	// Move some transactions.
	requireOK(t, s.ops("POST", "/ops/v1/deposits/"+ids[0]+"/approve", nil))
	requireOK(t, s.ops("POST", "/ops/v1/deposits/"+ids[1]+"/reject", map[string]any{"reason": "no transfer"}))
	requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+ids[4]+"/process", nil))
	filters := []struct {
		query string
		want  []string
	}{
		{"site=" + a.ID + "&type=deposit", ids[:4]},
		{"site=" + a.ID + "&type=withdrawal", ids[4:]},
		{"site=" + a.ID + "&type=withdraw", ids[4:]},
		{"site=" + a.ID + "&status=pending", []string{ids[2], ids[3], ids[5], ids[6]}},
		{"site=" + a.ID + "&status=approved", ids[:1]},
		{"site=" + a.ID + "&status=rejected", ids[1:2]},
		{"site=" + a.ID + "&status=processing", ids[4:5]},
		{"site=" + a.ID + "&status=paid", []string{}},
		{"site=" + a.ID + "&type=deposit&status=pending", ids[2:4]},
		{"site=" + a.ID + "&type=withdrawal&status=pending", ids[5:]},
		{"type=deposit&status=pending", append(append([]string{}, ids[2:4]...), bIDs...)},
		{"site=" + b.ID, bIDs},
	}
	for _, f := range filters {
		for _, limit := range []int{1, 3} {
			t.Run(f.query+" limit "+itoa(int64(limit)), func(t *testing.T) {
				got := txIDs(s.opsList(t, f.query, limit)...)
				if strings.Contains(f.query, "site=") {
					require.Equal(t, f.want, got)
				} else {
					require.ElementsMatch(t, f.want, got)
				}
			})
		}
	}
	// The listing shows current records.
	l := s.opsList(t, "site="+a.ID+"&status=rejected", 10)
	require.Equal(t, "no transfer", *l[0].StatusReason)

	bad := []struct{ query, status, code, field string }{
		{"cursor=!!!", "400", "invalid_request", "cursor"},
		{"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("garbage")), "400", "invalid_request", "cursor"},
		{"cursor=" + base64.RawURLEncoding.EncodeToString([]byte(a.ID+"\x00-1")), "400", "invalid_request", "cursor"},
		{"type=payout", "400", "invalid_request", "type"},
		{"status=done", "400", "invalid_request", "status"},
		{"limit=0", "400", "invalid_request", "limit"},
		{"limit=-1", "400", "invalid_request", "limit"},
		{"limit=abc", "400", "invalid_request", "limit"},
		{"limit=1001", "400", "invalid_request", "limit"},
		{"site=snope", "404", "not_found", ""},
	}
	for _, c := range bad {
		t.Run("bad "+c.query, func(t *testing.T) {
			st := 400
			if c.status == "404" {
				st = 404
			}
			requireErr(t, s.ops("GET", "/ops/v1/transactions?"+c.query, nil), st, c.code, c.field)
		})
	}
	t.Run("single transaction", func(t *testing.T) {
		r := s.ops("GET", "/ops/v1/transactions/"+ids[0], nil)
		d := rec(t, r)
		require.Equal(t, a.ID, d.SiteID)
		require.Equal(t, "approved", d.Status)
		requireErr(t, s.ops("GET", "/ops/v1/transactions/"+a.ID+"-zz", nil), 404, "not_found", "")
		requireErr(t, s.ops("GET", "/ops/v1/transactions/nope", nil), 404, "not_found", "")
		requireErr(t, s.ops("GET", "/ops/v1/transactions/snope-1", nil), 404, "not_found", "")
	})
}

func TestOpsSiteEvents(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(map[string]any{"hostedPage": true}, 500_000)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "h1", "u1", 25000)))
	requireOK(t, s.ops("POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", map[string]any{"amount": 24000}))
	newSecret, _ := rotate(t, s, st, nil)
	wr := s.ops("POST", "/ops/v1/sites/"+st.ID+"/webhook-secret", nil)
	requireOK(t, wr)
	newWebhook := decodeAny(t, wr)["webhookSecret"].(string)
	requireOK(t, s.ops("PATCH", "/ops/v1/sites/"+st.ID, map[string]any{"rateLimit": 10}))
	w := rec(t, s.post(newSecret, pathWithdraw, withdrawForm("ZAINCASH", "w1", "u2", 10000, "07712345678")))
	requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+w.TransactionID+"/process", nil))
	requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+w.TransactionID+"/pay", map[string]any{"reference": "ZC-1"}))

	items := s.history(t, st.ID)
	names := []string{}
	actors := []string{}
	for _, it := range items {
		names = append(names, it.Name)
		actors = append(actors, it.Actor)
	}
	require.Equal(t, []string{"site.created.v2", "treasury.adjusted.v3", "deposit.requested.v1", "deposit.approved.v1",
		"site.secret_rotated.v1", "site.webhook_secret_rotated.v1", "site.updated.v2", "withdrawal.requested.v1",
		"withdrawal.processing.v1", "withdrawal.paid.v1"}, names)
	require.Equal(t, []string{"admin", "admin", "merchant", "admin", "admin", "admin", "admin", "merchant", "admin", "admin"}, actors)
	require.Equal(t, "[redacted]", items[0].Data["secret"])
	require.Equal(t, "[redacted]", items[0].Data["webhookSecret"])
	require.Equal(t, st.AppKey, items[0].Data["appKey"])
	require.Equal(t, "[redacted]", items[2].Data["hostedToken"])
	require.Equal(t, d.TransactionID, items[2].Data["tx"])
	require.Equal(t, 24000.0, items[3].Data["amount"])
	require.Equal(t, 25000.0, items[3].Data["requested"])
	require.Equal(t, "[redacted]", items[4].Data["secret"])
	require.Equal(t, "[redacted]", items[5].Data["secret"])
	require.Equal(t, "ZC-1", items[9].Data["reference"])
	// No secret or hosted page token appears anywhere in the history.
	all, err := json.Marshal(items)
	require.NoError(t, err)
	token := (*d.URL)[strings.Index(*d.URL, "?t=")+3:]
	for _, secret := range []string{st.Secret, st.WebhookSecret, newSecret.Secret, newWebhook, token} {
		require.NotContains(t, string(all), secret)
	}
	// In order, and a hash chain.
	require.Equal(t, strings.Repeat("0", 64), items[0].Prev)
	for i := 1; i < len(items); i++ {
		prev, cur := items[i-1], items[i]
		require.True(t, cur.Seq > prev.Seq || (cur.Seq == prev.Seq && cur.Index == prev.Index+1), "order at %d", i)
		require.Equal(t, prev.Hash, cur.Prev, "chain at %d", i)
		require.False(t, parseTime(t, cur.Time).Before(parseTime(t, prev.Time)))
	}

	// Cursor paging (limit counts messages) walks the same history.
	for _, limit := range []int{1, 2, 3} {
		t.Run("paging limit "+itoa(int64(limit)), func(t *testing.T) {
			var got []historyItem
			cursor := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 100)
				q := "?limit=" + itoa(int64(limit))
				if cursor != "" {
					q += "&cursor=" + cursor
				}
				r := s.ops("GET", "/ops/v1/sites/"+st.ID+"/events"+q, nil)
				requireOK(t, r)
				var p page[historyItem]
				r.decode(t, &p)
				require.NotEmpty(t, p.Items)
				got = append(got, p.Items...)
				if p.NextCursor == nil {
					break
				}
				cursor = *p.NextCursor
			}
			require.Equal(t, items, got)
		})
	}
	for _, c := range []struct{ q, field string }{{"cursor=abc", "cursor"}, {"cursor=0", "cursor"}, {"cursor=-1", "cursor"}, {"cursor=01", "cursor"}, {"cursor=%2B1", "cursor"},
		{"limit=0", "limit"}, {"limit=x", "limit"}} {
		requireErr(t, s.ops("GET", "/ops/v1/sites/"+st.ID+"/events?"+c.q, nil), 400, "invalid_request", c.field)
	}
	requireErr(t, s.ops("GET", "/ops/v1/sites/snope/events", nil), 404, "not_found", "")
	// Another site's history is separate.
	other := s.newSite(nil, 0)
	require.Len(t, s.history(t, other.ID), 1)
}

// TestOpsActions drives the transaction state machines through the
// operator API.
func TestOpsActions(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(map[string]any{"negativeLimit": -20_000}, 100_000)

	t.Run("approve with a different amount", func(t *testing.T) {
		d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "ap1", "u1", 25000)))
		bal := s.balanceOf(t, st)
		r := s.ops("POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", map[string]any{"amount": 24000})
		a := rec(t, r)
		require.Equal(t, st.ID, a.SiteID)
		require.Equal(t, "approved", a.Status)
		require.Equal(t, int64(24000), a.Amount)
		require.Equal(t, int64(25000), a.RequestedAmount)
		require.Nil(t, a.StatusReason)
		require.Equal(t, responseHash(st.Secret, d.TransactionID, d.BankID, 24000), a.Hash, "hash uses the approved amount")
		m := rec(t, s.get(st, "/v1/transactions/"+d.TransactionID, ""))
		require.Equal(t, "approved", m.Status)
		require.Equal(t, int64(24000), m.Amount)
		require.Equal(t, int64(25000), m.RequestedAmount)
		require.Equal(t, a.Hash, m.Hash)
		require.Equal(t, d.CreatedAt, m.CreatedAt)
		require.False(t, parseTime(t, m.UpdatedAt).Before(parseTime(t, m.CreatedAt)))
		require.Equal(t, bal.Balance+24000, s.balanceOf(t, st).Balance, "credited with the approved amount")
		// A merchant repeat of the original request still matches (the
		// fingerprint is the requested amount) and shows the approved one.
		rep := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "ap1", "u1", 25000)))
		require.Equal(t, m, rep)
	})
	t.Run("approve without amount", func(t *testing.T) {
		d := rec(t, s.post(st, pathDeposit, depositForm("QICARD", "ap2", "u2", 5000)))
		bal := s.balanceOf(t, st)
		a := rec(t, s.ops("POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", nil))
		require.Equal(t, int64(5000), a.Amount)
		require.Equal(t, d.Hash, a.Hash)
		require.Equal(t, bal.Balance+5000, s.balanceOf(t, st).Balance)
	})
	t.Run("approve amount invalid", func(t *testing.T) {
		d := rec(t, s.post(st, pathDeposit, depositForm("QICARD", "ap3", "u3", 5000)))
		n := s.eventCount(t, st.ID)
		for _, body := range []string{`{"amount":0}`, `{"amount":-5}`, `{"amount":1.5}`, `{"amount":"5"}`, `{"amt":5}`} {
			r := s.send(t, "POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", body, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
			field := "amount"
			if body == `{"amt":5}` {
				field = "amt"
			}
			requireErr(t, r, 400, "invalid_request", field)
		}
		require.Equal(t, n, s.eventCount(t, st.ID))
		requireOK(t, s.ops("POST", "/ops/v1/deposits/"+d.TransactionID+"/reject", map[string]any{"reason": "cleanup"}))
	})
	t.Run("reject deposit", func(t *testing.T) {
		d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "rj1", "u4", 9000)))
		bal := s.balanceOf(t, st)
		n := s.eventCount(t, st.ID)
		for _, body := range []any{nil, map[string]any{"reason": "  "}, map[string]any{"reason": strings.Repeat("r", 257)}} {
			requireErr(t, s.ops("POST", "/ops/v1/deposits/"+d.TransactionID+"/reject", body), 400, "invalid_request", "reason")
		}
		require.Equal(t, n, s.eventCount(t, st.ID))
		r := rec(t, s.ops("POST", "/ops/v1/deposits/"+d.TransactionID+"/reject", map[string]any{"reason": "no transfer arrived"}))
		require.Equal(t, "rejected", r.Status)
		require.Equal(t, "no transfer arrived", *r.StatusReason)
		require.Equal(t, int64(9000), r.Amount)
		m := rec(t, s.get(st, "/v1/transactions", "processId=rj1"))
		require.Equal(t, "rejected", m.Status)
		require.Equal(t, "no transfer arrived", *m.StatusReason)
		require.Equal(t, bal, s.balanceOf(t, st))
	})
	t.Run("process then pay withdrawal", func(t *testing.T) {
		w := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "pw1", "u5", 30000, "07712345678")))
		bal := s.balanceOf(t, st)
		p := rec(t, s.ops("POST", "/ops/v1/withdrawals/"+w.TransactionID+"/process", nil))
		require.Equal(t, "processing", p.Status)
		require.Nil(t, p.StatusReason)
		require.Equal(t, bal, s.balanceOf(t, st), "taking a withdrawal moves no money")
		paid := rec(t, s.ops("POST", "/ops/v1/withdrawals/"+w.TransactionID+"/pay", map[string]any{"reference": "ZC-778812"}))
		require.Equal(t, "paid", paid.Status)
		require.Equal(t, "ZC-778812", *paid.StatusReason)
		require.Equal(t, w.Hash, paid.Hash)
		after := s.balanceOf(t, st)
		require.Equal(t, bal.Balance-30000, after.Balance)
		require.Equal(t, bal.PendingWithdrawals-30000, after.PendingWithdrawals)
		require.Equal(t, bal.Available, after.Available)
		require.Equal(t, "paid", rec(t, s.get(st, "/v1/transactions/"+w.TransactionID, "")).Status)
		// Pay without a reference.
		w2 := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "pw2", "u5", 1000, "07712345678")))
		requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+w2.TransactionID+"/process", nil))
		p2 := rec(t, s.ops("POST", "/ops/v1/withdrawals/"+w2.TransactionID+"/pay", nil))
		require.Equal(t, "paid", p2.Status)
		require.Nil(t, p2.StatusReason)
	})
	t.Run("reject withdrawal releases the reservation", func(t *testing.T) {
		for _, processFirst := range []bool{false, true} {
			bal := s.balanceOf(t, st)
			w := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "rw-"+map[bool]string{false: "p", true: "q"}[processFirst], "u6", 40000, "07712345678")))
			require.Equal(t, bal.Available-40000, s.balanceOf(t, st).Available)
			if processFirst {
				requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+w.TransactionID+"/process", nil))
			}
			r := rec(t, s.ops("POST", "/ops/v1/withdrawals/"+w.TransactionID+"/reject", map[string]any{"reason": "wallet closed"}))
			require.Equal(t, "rejected", r.Status)
			require.Equal(t, "wallet closed", *r.StatusReason)
			require.Equal(t, bal, s.balanceOf(t, st))
		}
	})
	t.Run("a released reservation can be used again", func(t *testing.T) {
		bal := s.balanceOf(t, st)
		amount := bal.Available - 1
		w := rec(t, s.post(st, pathWithdraw, withdrawForm("RAFIDAIN", "all-1", "u7", amount, "123456")))
		requireErr(t, s.post(st, pathWithdraw, withdrawForm("RAFIDAIN", "all-2", "u7", 1000, "123456")), 402, "insufficient_site_balance", "amount")
		requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+w.TransactionID+"/reject", map[string]any{"reason": "x"}))
		rec(t, s.post(st, pathWithdraw, withdrawForm("RAFIDAIN", "all-2", "u7", 1000, "123456")))
	})

	t.Run("refused transitions", func(t *testing.T) {
		dep := func(pid, user string) string {
			return rec(t, s.post(st, pathDeposit, depositForm("GAMEWALLET", pid, user, 1000))).TransactionID
		}
		wd := func(pid string) string {
			return rec(t, s.post(st, pathWithdraw, withdrawForm("GAMEWALLET", pid, "wu", 1000, "player1"))).TransactionID
		}
		approved := dep("t-ap", "t1")
		requireOK(t, s.ops("POST", "/ops/v1/deposits/"+approved+"/approve", nil))
		rejected := dep("t-rj", "t2")
		requireOK(t, s.ops("POST", "/ops/v1/deposits/"+rejected+"/reject", map[string]any{"reason": "x"}))
		pending := dep("t-pd", "t3")
		wPending := wd("t-wp")
		wProcessing := wd("t-wg")
		requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+wProcessing+"/process", nil))
		wPaid := wd("t-wpd")
		requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+wPaid+"/process", nil))
		requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+wPaid+"/pay", nil))
		wRejected := wd("t-wr")
		requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+wRejected+"/reject", map[string]any{"reason": "x"}))

		reason := map[string]any{"reason": "r"}
		cases := []struct {
			name, path string
			body       any
		}{
			{"approve approved", "/ops/v1/deposits/" + approved + "/approve", nil},
			{"approve approved with amount", "/ops/v1/deposits/" + approved + "/approve", map[string]any{"amount": 5}},
			{"reject approved", "/ops/v1/deposits/" + approved + "/reject", reason},
			{"approve rejected", "/ops/v1/deposits/" + rejected + "/approve", nil},
			{"reject rejected", "/ops/v1/deposits/" + rejected + "/reject", reason},
			{"approve a withdrawal", "/ops/v1/deposits/" + wPending + "/approve", nil},
			{"reject a withdrawal as deposit", "/ops/v1/deposits/" + wPending + "/reject", reason},
			{"process a deposit", "/ops/v1/withdrawals/" + pending + "/process", nil},
			{"pay a deposit", "/ops/v1/withdrawals/" + pending + "/pay", nil},
			{"reject a deposit as withdrawal", "/ops/v1/withdrawals/" + pending + "/reject", reason},
			{"pay a pending withdrawal", "/ops/v1/withdrawals/" + wPending + "/pay", nil},
			{"process a processing withdrawal", "/ops/v1/withdrawals/" + wProcessing + "/process", nil},
			{"process a paid withdrawal", "/ops/v1/withdrawals/" + wPaid + "/process", nil},
			{"pay a paid withdrawal", "/ops/v1/withdrawals/" + wPaid + "/pay", nil},
			{"reject a paid withdrawal", "/ops/v1/withdrawals/" + wPaid + "/reject", reason},
			{"process a rejected withdrawal", "/ops/v1/withdrawals/" + wRejected + "/process", nil},
			{"pay a rejected withdrawal", "/ops/v1/withdrawals/" + wRejected + "/pay", nil},
			{"reject a rejected withdrawal", "/ops/v1/withdrawals/" + wRejected + "/reject", reason},
		}
		n := s.eventCount(t, st.ID)
		bal := s.balanceOf(t, st)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				requireErr(t, s.ops("POST", c.path, c.body), 409, "invalid_transition", "")
			})
		}
		require.Equal(t, n, s.eventCount(t, st.ID), "refused transitions write nothing")
		require.Equal(t, bal, s.balanceOf(t, st))
		for id, want := range map[string]string{approved: "approved", rejected: "rejected", pending: "pending", wPending: "pending",
			wProcessing: "processing", wPaid: "paid", wRejected: "rejected"} {
			require.Equal(t, want, rec(t, s.get(st, "/v1/transactions/"+id, "")).Status)
		}
		for _, p := range []string{"/ops/v1/deposits/" + st.ID + "-zz/approve", "/ops/v1/deposits/nope/approve",
			"/ops/v1/withdrawals/snope-1/process", "/ops/v1/withdrawals/" + st.ID + "-0/pay"} {
			requireErr(t, s.ops("POST", p, nil), 404, "not_found", "")
		}
		require.Equal(t, n, s.eventCount(t, st.ID))
	})
}

// An operator action that is stored is answered with its record even when
// the store fails to give the record's creation event for a while (a
// stream changing leader): never 503, which would say nothing was done.
func TestOpsActionStoredWhileReadsFail(t *testing.T) {
	e := newEnv(t)
	fails := new(atomic.Int64)
	s := e.newStack(stackOptions{getFails: fails})
	s.seedBanks()
	st := s.newSite(nil, 500_000)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "rf-1", "u1", 25000)))
	fails.Store(3)
	approved := rec(t, s.ops("POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", nil))
	assert.Equal(t, "approved", approved.Status)
	assert.Equal(t, d.TransactionID, approved.TransactionID)
	assert.LessOrEqual(t, fails.Load(), int64(0), "the injected failures were met")
}

// TestOpsParams: every operator call refuses a query parameter it does not
// take, or one given twice, naming it, before it reads or writes anything:
// an ignored filter answers with everything, which looks like a result.
func TestOpsParams(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{noRun: true}})
	s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	w := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "prm-1", "u1", 10000, "07712345678")))
	before := s.eventCount(t, st.ID)
	tests := []struct {
		method, path, field string
	}{
		{"GET", "/ops/v1/sites?foo=1", "foo"},
		{"GET", "/ops/v1/sites/" + st.ID + "?limit=5", "limit"},
		{"GET", "/ops/v1/sites/" + st.ID + "/events?foo=1", "foo"},
		{"GET", "/ops/v1/sites/" + st.ID + "/events?limit=1&limit=2", "limit"},
		{"GET", "/ops/v1/callbacks?foo=1", "foo"},
		{"GET", "/ops/v1/callbacks?status=failed&status=pending", "status"},
		{"GET", "/ops/v1/banks?type=deposit", "type"},
		{"GET", "/ops/v1/operators?cursor=x", "cursor"},
		{"GET", "/ops/v1/transactions/" + w.TransactionID + "?site=" + st.ID, "site"},
		{"POST", "/ops/v1/sites/" + st.ID + "/adjustments?amount=5", "amount"},
		{"POST", "/ops/v1/withdrawals/" + w.TransactionID + "/process?force=1", "force"},
		{"POST", "/ops/v1/callbacks/1-0/resend?x=1", "x"},
		// A pair that cannot be read is refused, not dropped with its
		// filter (a bad escape; ';', which is no separator).
		{"GET", "/ops/v1/callbacks?status=%zz", ""},
		{"GET", "/ops/v1/callbacks?status=failed;limit=1", ""},
		{"GET", "/ops/v1/transactions?status=approved;limit=1", ""},
		{"GET", "/ops/v1/transactions?name=%zz", ""},
		{"GET", "/ops/v1/sites/" + st.ID + "/events?limit=1;x", ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			var body any
			if tc.method == "POST" {
				body = map[string]any{"amount": 5, "reason": "param"}
				if !strings.Contains(tc.path, "adjustments") {
					body = map[string]any{}
				}
			}
			r := s.ops(tc.method, tc.path, body)
			requireErr(t, r, 400, "invalid_request", tc.field)
		})
	}
	require.Equal(t, before, s.eventCount(t, st.ID))
	require.Equal(t, "pending", rec(t, s.ops("GET", "/ops/v1/transactions/"+w.TransactionID, nil)).Status)
	// The parameters a call takes are still taken.
	requireOK(t, s.ops("GET", "/ops/v1/sites/"+st.ID+"/events?limit=1", nil))
	requireOK(t, s.ops("GET", "/ops/v1/callbacks?status=failed&limit=5", nil))
}

// TestOpsAuth_schemeAndRepeats: the scheme's name is case-insensitive
// (RFC 9110 section 11.1), and a request with two Authorization headers
// is no caller, whichever comes first: it could carry two identities.
func TestOpsAuth_schemeAndRepeats(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	for _, auth := range []string{"bearer " + adminToken, "BEARER " + adminToken, "Bearer " + adminToken} {
		requireOK(t, s.send(t, "GET", "/ops/v1/sites", "", map[string]string{"Authorization": auth}))
	}
	for _, pair := range [][2]string{
		{"Bearer " + adminToken, "Bearer wrong"},
		{"Bearer wrong", "Bearer " + adminToken},
		{"Bearer " + adminToken, "Bearer " + adminToken},
	} {
		req, err := http.NewRequest("GET", s.URL+"/ops/v1/sites", nil)
		require.NoError(t, err)
		req.Header.Add("Authorization", pair[0])
		req.Header.Add("Authorization", pair[1])
		r := do(t, req)
		requireErr(t, r, 401, "unauthorized", "")
	}
}
