package httpapi_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSignature_mistakes: a refused signature says what is wrong as far as
// that can be said without the secret: a missing or malformed header, or
// the signing mistake that the signature does match.
func TestSignature_mistakes(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	body := "userId=u1&processId=sig-1&bankId=ZAINCASH&amount=25000&userName=user_u1&name=Ali+Kareem"
	query := "processId=sig-1&lang=en"
	hexSign := func(data string) string {
		m := hmac.New(sha256.New, []byte(st.Secret))
		m.Write([]byte(data))
		return hex.EncodeToString(m.Sum(nil))
	}
	sorted := func(q string) string {
		v, err := url.ParseQuery(q)
		require.NoError(t, err)
		return v.Encode()
	}
	require.NotEqual(t, body, sorted(body), "the test body is not already sorted")
	require.NotEqual(t, query, sorted(query))
	tests := []struct {
		name, method, sign, message string
	}{
		{"missing", "POST", "", "the sign header is missing"},
		{"not base64", "POST", "!!!", "sign is not base64 of 32 bytes"},
		{"too short", "POST", "c2hvcnQ=", "sign is not base64 of 32 bytes"},
		{"hex digest", "POST", hexSign(body), "sign is a hex digest"},
		{"trailing newline", "POST", sign(st.Secret, []byte(body+"\n")), "sign was computed over the body with a trailing newline"},
		{"path and body", "POST", sign(st.Secret, []byte(pathDeposit+body)), "sign was computed over the path and the body"},
		{"fields sorted", "POST", sign(st.Secret, []byte(sorted(body))), "sign was computed over the body with its fields sorted"},
		{"empty string", "POST", sign(st.Secret, nil), "sign was computed over an empty string"},
		{"another secret", "POST", sign("not the secret", []byte(body)), "sign does not match the request"},
		{"leading ?", "GET", sign(st.Secret, []byte("?"+query)), "sign was computed over the query with a leading ?"},
		{"path and query", "GET", sign(st.Secret, []byte("/v1/transactions?"+query)), "sign was computed over the path and the query"},
		{"query sorted", "GET", sign(st.Secret, []byte(sorted(query))), "sign was computed over the query with its parameters sorted"},
		{"query with newline", "GET", sign(st.Secret, []byte(query+"\n")), "sign was computed over the query with a trailing newline"},
		{"GET, another secret", "GET", sign("nope", []byte(query)), "sign does not match the request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{"appKey": st.AppKey}
			if tc.sign != "" {
				hdr["sign"] = tc.sign
			}
			var r resp
			if tc.method == "POST" {
				hdr["Content-Type"] = "application/x-www-form-urlencoded"
				r = s.send(t, http.MethodPost, pathDeposit, body, hdr)
			} else {
				r = s.send(t, http.MethodGet, "/v1/transactions?"+query, "", hdr)
			}
			requireErr(t, r, 401, "invalid_signature", "sign")
			require.Contains(t, r.Message, tc.message)
		})
	}
	// Nothing was created by the refused requests; the right one works.
	s.unchanged(t, st, s.eventCount(t, st.ID), "sig-1")
	requireOK(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "sig-1", "u1", 25000)))
}

// TestUnknownParams: a field or parameter the call does not take is
// refused, naming it and the ones it does take; nothing is recorded.
func TestUnknownParams(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	before := s.eventCount(t, st.ID)
	dep := depositForm("ZAINCASH", "up-1", "u1", 25000)
	dep.Set("currency", "IQD")
	r := s.post(st, pathDeposit, dep)
	requireErr(t, r, 400, "invalid_request", "currency")
	require.Contains(t, r.Message, "currency is not a field of this call; its fields are bankId, processId, amount, userId, userName, name, senderName, lang")
	wd := withdrawForm("ZAINCASH", "up-2", "u1", 1000, "07712345678")
	wd.Set("senderName", "someone") // a deposit's field
	requireErr(t, s.post(st, pathWithdraw, wd), 400, "invalid_request", "senderName")
	s.unchanged(t, st, before, "up-1")
	s.unchanged(t, st, before, "up-2")

	for _, c := range []struct{ path, query, field string }{
		{"/v1/banks", "type=deposit&currency=IQD", "currency"},
		{"/v1/transactions", "processId=up-1&site=x", "site"},
		{"/v1/balance", "currency=IQD", "currency"},
		{"/v1/transactions/" + st.ID + "-1", "verbose=1", "verbose"},
		{"/v1/banks", "type=deposit&type=withdraw", "type"},
	} {
		r := s.get(st, c.path, c.query)
		requireErr(t, r, 400, "invalid_request", c.field)
	}
	// What the calls take still works; lang keeps falling back to en.
	dep.Del("currency")
	dep.Set("lang", "fr")
	require.Equal(t, "en", rec(t, s.post(st, pathDeposit, dep)).Lang)
	requireOK(t, s.get(st, "/v1/banks", "type=deposit&lang=ar"))
}

// TestUnknownMerchantPath: an unknown path is a 404 before any credential
// is asked for; a known one is authenticated first.
func TestUnknownMerchantPath(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	for _, p := range []string{"/v1/nope", "/v1/transactions/deposit/extra", "/v1/sandbox/deposits/x/refund", "/v1/", "/v1/sandbox", "/v1/sandbox/"} {
		requireErr(t, s.send(t, "GET", p, "", nil), 404, "not_found", "")
		requireErr(t, s.send(t, "POST", p, "", nil), 404, "not_found", "")
		requireErr(t, s.get(st, p, ""), 404, "not_found", "")
	}
	requireErr(t, s.send(t, "GET", "/v1/balance", "", nil), 401, "unknown_app_key", "appKey")
	requireErr(t, s.send(t, "POST", "/v1/sandbox/deposits/x/approve", "", nil), 401, "unknown_app_key", "appKey")
	requireErr(t, s.send(t, "DELETE", "/v1/balance", "", nil), 401, "unknown_app_key", "appKey")
	r := s.send(t, "DELETE", "/v1/balance", "", map[string]string{"appKey": st.AppKey, "sign": sign(st.Secret, nil)})
	requireErr(t, r, 405, "method_not_allowed", "")
}

// TestSignature_repeatedHeaders: a request with two appKey or two sign
// headers is refused whichever comes first, even when one of them is
// right: taking either would be a guess at who is calling.
func TestSignature_repeatedHeaders(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	a := s.newSite(nil, 0)
	b := s.newSite(nil, 0)
	good := sign(a.Secret, nil)
	for _, tc := range []struct {
		name          string
		appKeys, sigs []string
		code, field   string
	}{
		{"two appKeys, the right one first", []string{a.AppKey, b.AppKey}, []string{good}, "unknown_app_key", "appKey"},
		{"two appKeys, the right one last", []string{b.AppKey, a.AppKey}, []string{good}, "unknown_app_key", "appKey"},
		{"two signs, the right one first", []string{a.AppKey}, []string{good, "AAAA"}, "invalid_signature", "sign"},
		{"two signs, both right", []string{a.AppKey}, []string{good, good}, "invalid_signature", "sign"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, s.URL+"/v1/balance", nil)
			require.NoError(t, err)
			for _, k := range tc.appKeys {
				req.Header.Add("appKey", k)
			}
			for _, v := range tc.sigs {
				req.Header.Add("sign", v)
			}
			requireErr(t, do(t, req), 401, tc.code, tc.field)
		})
	}
	requireOK(t, s.get(a, "/v1/balance", ""))
}
