package httpapi_test

import (
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"time"
)

// page fetches a hosted page without any credentials.
func fetchPage(t *testing.T, u string) (int, http.Header, string) {
	t.Helper()
	res, err := http.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, res.Header, string(b)
}

func mustGet(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	return req
}

func TestHostedPage(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(map[string]any{"hostedPage": true}, 0)

	type dep struct {
		rec   record
		token string
	}
	create := func(t *testing.T, pid, user, lang string, amount int64) dep {
		f := depositForm("ZAINCASH", pid, user, amount)
		if lang != "" {
			f.Set("lang", lang)
		}
		d := rec(t, s.post(st, pathDeposit, f))
		require.NotNil(t, d.URL, "hosted page url")
		prefix := s.URL + "/pay/" + d.TransactionID + "?t="
		require.True(t, strings.HasPrefix(*d.URL, prefix), "url %s", *d.URL)
		tok := strings.TrimPrefix(*d.URL, prefix)
		require.GreaterOrEqual(t, len(tok), 22, "token is unguessable")
		require.Equal(t, url.QueryEscape(tok), tok, "token needs no escaping")
		return dep{d, tok}
	}

	cases := []struct {
		lang, wantLang, dir, bankName, pending string
		amount                                 int64
		shown                                  string // the amount as the language writes it
	}{
		{"en", "en", "ltr", "ZAINCASH en", "Waiting for your transfer", 25000, "25,000 IQD"},
		{"ar", "ar", "rtl", "ZAINCASH ar", "بانتظار تحويلك", 31337, "٣١٬٣٣٧ د.ع"},
		{"ku", "ckb", "rtl", "ZAINCASH ku", "چاوەڕێی گواستنەوەکەتین", 1000, "١٬٠٠٠ د.ع"},
		{"fr", "en", "ltr", "ZAINCASH en", "Waiting for your transfer", 999999, "999,999 IQD"},
		{"", "en", "ltr", "ZAINCASH en", "Waiting for your transfer", 4000, "4,000 IQD"},
	}
	var deps []dep
	for i, c := range cases {
		t.Run("lang "+c.lang, func(t *testing.T) {
			d := create(t, "h-"+c.lang, "hu"+itoa(int64(i)), c.lang, c.amount)
			deps = append(deps, d)
			code, hdr, body := fetchPage(t, *d.rec.URL)
			require.Equal(t, 200, code, body)
			require.Equal(t, "text/html; charset=utf-8", hdr.Get("Content-Type"))
			require.Equal(t, "no-store", hdr.Get("Cache-Control"))
			require.Contains(t, body, `<html lang="`+c.wantLang+`" dir="`+c.dir+`">`)
			require.Contains(t, body, `id="amount" data-value="`+itoa(c.amount)+`" data-requested="`+itoa(c.amount)+`" data-requested-text="`+c.shown+`">`+c.shown+`<`)
			// Names and numbers others typed are isolated: a right-to-left
			// override in one cannot reorder the text around it.
			require.Contains(t, body, `.value,#merchant{font-weight:600;word-break:break-all;unicode-bidi:isolate}`)
			require.NotContains(t, body, `unicode-bidi:embed`)
			require.Contains(t, body, `id="order">`+d.rec.ProcessID+`<`)
			require.Contains(t, body, `id="merchant">Test Site<`)
			require.Contains(t, body, `data-status-url="/pay/`+d.rec.TransactionID+`/status?t=`+d.token+`"`)
			require.Contains(t, body, `id="name">`+d.rec.BankAccountName+`<`)
			require.Contains(t, body, `id="number" data-value="07801234567">07801234567<`, "a phone number as it is")
			require.Contains(t, body, c.bankName)
			require.Contains(t, body, c.pending)
			require.Contains(t, body, "data-copy=")
			require.Contains(t, body, `data-expires="`)
			require.NotContains(t, body, `id="test"`, "a live site's page is no test")
			// Only the page's own script runs: its nonce, new on every
			// page, is the only script source the policy allows.
			csp := hdr.Get("Content-Security-Policy")
			m := regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9_-]{22,})';`).FindStringSubmatch(csp)
			require.Len(t, m, 2, csp)
			require.NotContains(t, csp, "script-src 'unsafe-inline'")
			require.Contains(t, body, `<script nonce="`+m[1]+`">`)
			require.Equal(t, 1, strings.Count(body, "<script"))
			_, hdr2, _ := fetchPage(t, *d.rec.URL)
			require.NotEqual(t, csp, hdr2.Get("Content-Security-Policy"), "a nonce is used once")
		})
	}
	require.Len(t, deps, len(cases))
	first := deps[0]

	t.Run("wrong or missing token", func(t *testing.T) {
		id := first.rec.TransactionID
		bad := []string{
			s.URL + "/pay/" + id,
			s.URL + "/pay/" + id + "?t=",
			s.URL + "/pay/" + id + "?t=" + first.token[:len(first.token)-1],
			s.URL + "/pay/" + id + "?t=" + first.token + "x",
			s.URL + "/pay/" + id + "?t=" + strings.ToUpper(first.token),
			s.URL + "/pay/" + id + "?t=" + deps[1].token, // another deposit's token
			s.URL + "/pay/" + deps[1].rec.TransactionID + "?t=" + first.token,
			s.URL + "/pay/" + st.ID + "-zz?t=" + first.token,
			s.URL + "/pay/nope?t=" + first.token,
			s.URL + "/pay/?t=" + first.token,
		}
		for _, u := range bad {
			code, _, body := fetchPage(t, u)
			require.Equal(t, 404, code, "%s: %s", u, body)
			require.NotContains(t, body, "07801234567", "404 shows nothing of the deposit")
			require.NotContains(t, body, itoa(first.rec.Amount))
		}
	})

	t.Run("withdrawals have no page", func(t *testing.T) {
		funded := s.newSite(map[string]any{"hostedPage": true}, 100000)
		w := rec(t, s.post(funded, pathWithdraw, withdrawForm("ZAINCASH", "hw", "u1", 1000, "07712345678")))
		require.NotContains(t, dataKeys(t, s.get(funded, "/v1/transactions/"+w.TransactionID, "")), "url")
		code, _, _ := fetchPage(t, s.URL+"/pay/"+w.TransactionID+"?t=x")
		require.Equal(t, 404, code)
	})

	t.Run("site without hostedPage", func(t *testing.T) {
		plain := s.newSite(nil, 0)
		d := rec(t, s.post(plain, pathDeposit, depositForm("ZAINCASH", "np", "u1", 5000)))
		require.Nil(t, d.URL)
		code, _, _ := fetchPage(t, s.URL+"/pay/"+d.TransactionID+"?t=x")
		require.Equal(t, 404, code)
	})

	t.Run("final states", func(t *testing.T) {
		en, ar, ku := deps[0], deps[1], deps[2]
		a := rec(t, s.ops("POST", "/ops/v1/deposits/"+en.rec.TransactionID+"/approve", map[string]any{"amount": 24000}))
		require.Equal(t, *en.rec.URL, *a.URL, "the url does not change")
		code, _, body := fetchPage(t, *en.rec.URL)
		require.Equal(t, 200, code)
		// Approved for another amount than the one asked for: the page
		// says which, and why.
		require.Contains(t, body, ">Approved for 24,000 IQD: the amount received (25,000 IQD was requested).</p>")
		require.NotContains(t, body, ">Waiting for your transfer…<")
		require.NotContains(t, body, `id="number"`, "a final page no longer asks for a transfer")
		require.NotContains(t, body, `http-equiv="refresh"`)

		requireOK(t, s.ops("POST", "/ops/v1/deposits/"+ar.rec.TransactionID+"/approve", nil))
		_, _, body = fetchPage(t, *ar.rec.URL)
		require.Contains(t, body, ">تم استلام إيداعك والموافقة عليه.</p>", "approved for the amount asked for")
		require.Contains(t, body, `dir="rtl"`)

		requireOK(t, s.ops("POST", "/ops/v1/deposits/"+ku.rec.TransactionID+"/reject", map[string]any{"reason": "none"}))
		_, _, body = fetchPage(t, *ku.rec.URL)
		require.Contains(t, body, "ئەم پارەدانانە ڕەتکرایەوە.")
		require.NotContains(t, body, `id="number"`)

		// The page asks for its status without reloading, and for the
		// amount, which an approval may have set to what was received,
		// as the page's language writes it.
		for _, c := range []struct {
			d    dep
			want string
		}{
			{en, `{"status":"approved","amount":24000,"amountText":"24,000 IQD"}`},
			{ku, `{"status":"rejected","amount":1000,"amountText":"١٬٠٠٠ د.ع"}`},
			{deps[3], `{"status":"pending","amount":999999,"amountText":"999,999 IQD"}`},
		} {
			r := do(t, mustGet(t, s.URL+"/pay/"+c.d.rec.TransactionID+"/status?t="+c.d.token))
			requireOK(t, r)
			require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
			require.JSONEq(t, c.want, string(r.Data))
		}
		for _, u := range []string{"/pay/" + en.rec.TransactionID + "/status?t=" + ku.token, "/pay/" + en.rec.TransactionID + "/status",
			"/pay/nope/status?t=" + en.token} {
			requireErr(t, do(t, mustGet(t, s.URL+u)), 404, "not_found", "")
		}
	})

	t.Run("recipient text is escaped", func(t *testing.T) {
		r := s.ops("POST", "/ops/v1/banks", map[string]any{"code": "ESC", "name": map[string]string{"en": "<i>Esc</i>"},
			"identifierKind": "USERNAME", "minAmount": 1000, "maxAmount": 100000, "deposit": true, "withdraw": false,
			"accounts": []map[string]string{{"accountName": `A&B <script>alert(1)</script>`, "accountNumber": `x"y`}}})
		requireOK(t, r)
		d := rec(t, s.post(st, pathDeposit, depositForm("ESC", "esc", "esc-user", 5000)))
		_, _, body := fetchPage(t, *d.URL)
		require.NotContains(t, body, "<script>alert(1)")
		require.NotContains(t, body, "<i>Esc</i>")
		require.Contains(t, body, "A&amp;B &lt;script&gt;alert(1)&lt;/script&gt;")
		require.Contains(t, body, "&lt;i&gt;Esc&lt;/i&gt;")
	})
	_ = banks
}

// A wrong or missing token answers the page's own not-found page, in the
// language the browser asks for, never plain text and never a trace of the
// deposit.
func TestHostedPage_notFoundIsLocalized(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(map[string]any{"hostedPage": true}, 0)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "nf", "nf-u", 25000)))
	require.NotNil(t, d.URL)
	bad := s.URL + "/pay/" + d.TransactionID + "?t=wrong"
	tests := []struct {
		name, url, acceptLang, wantLang, dir, text string
	}{
		{"english by default", bad, "", "en", "ltr", "Payment page not found"},
		{"arabic", bad, "ar-IQ,ar;q=0.9,en;q=0.5", "ar", "rtl", "صفحة الدفع غير موجودة"},
		{"sorani kurdish", bad, "ckb-IQ", "ckb", "rtl", "پەڕەی پارەدان نەدۆزرایەوە"},
		{"first supported language", bad, "fr-FR,ku;q=0.8,ar;q=0.7", "ckb", "rtl", "پەڕەی پارەدان نەدۆزرایەوە"},
		{"lang parameter wins", bad + "&lang=ar", "en", "ar", "rtl", "صفحة الدفع غير موجودة"},
		{"lang parameter ckb is Sorani", bad + "&lang=ckb", "en", "ckb", "rtl", "پەڕەی پارەدان نەدۆزرایەوە"},
		{"missing token", s.URL + "/pay/" + d.TransactionID, "ar", "ar", "rtl", "صفحة الدفع غير موجودة"},
		{"malformed id", s.URL + "/pay/%2A-1?t=x", "", "en", "ltr", "Payment page not found"},
		{"not acceptable (q=0) is passed over", bad, "ar;q=0, en", "en", "ltr", "Payment page not found"},
		{"the most wanted, not the first listed", bad, "en;q=0.2, ar;q=0.9", "ar", "rtl", "صفحة الدفع غير موجودة"},
		// Paths of no page, under /pay: an end user's link gone wrong.
		{"trailing slash", s.URL + "/pay/" + d.TransactionID + "/?t=" + url.QueryEscape(d.TransactionID), "ar", "ar", "rtl", "صفحة الدفع غير موجودة"},
		{"no id", s.URL + "/pay/", "", "en", "ltr", "Payment page not found"},
		{"no slash", s.URL + "/pay", "", "en", "ltr", "Payment page not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", tc.url, nil)
			require.NoError(t, err)
			if tc.acceptLang != "" {
				req.Header.Set("Accept-Language", tc.acceptLang)
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			body := string(b)
			assert.Equal(t, 404, res.StatusCode)
			assert.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
			assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
			assert.Contains(t, body, `<html lang="`+tc.wantLang+`" dir="`+tc.dir+`">`)
			assert.Contains(t, body, tc.text)
			assert.NotContains(t, body, d.BankAccountIban)
			assert.NotContains(t, body, "25000")
		})
	}
}

// Each client address has its own budget of hosted page requests; past it
// the page answers 429 with Retry-After, and other addresses are not
// affected.
func TestHostedPage_rateLimitedPerClient(t *testing.T) {
	e := newEnv(t)
	proxy := netip.MustParsePrefix("127.0.0.0/8")
	// The limiters' clock stands still: nothing refills during the test.
	frozen := time.Now()
	s := e.newStack(stackOptions{hostedRate: 2, trusted: []netip.Prefix{proxy}, limiterNow: func() time.Time { return frozen }})
	s.seedBanks()
	st := s.newSite(map[string]any{"hostedPage": true}, 0)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "rl", "rl-u", 25000)))
	get := func(client string) *http.Response {
		req, err := http.NewRequest("GET", *d.URL, nil)
		require.NoError(t, err)
		req.Header.Set("X-Forwarded-For", client)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res
	}
	// Burst twice the rate: four requests pass, the fifth does not.
	for i := range 4 {
		assert.Equal(t, 200, get("203.0.113.7").StatusCode, "request %d", i)
	}
	res := get("203.0.113.7")
	assert.Equal(t, 429, res.StatusCode, "past the burst the client is refused")
	assert.Equal(t, "1", res.Header.Get("Retry-After"))
	assert.Equal(t, 200, get("198.51.100.9").StatusCode, "another client has its own budget")
	assert.Equal(t, 200, get("2001:db8:1:2::1").StatusCode)
	// An IPv6 client's whole /64 shares one budget.
	for i := range 3 {
		assert.Equal(t, 200, get("2001:db8:1:2::"+itoa(int64(i+2))).StatusCode)
	}
	assert.Equal(t, 429, get("2001:db8:1:2::ff").StatusCode)
	assert.Equal(t, 200, get("2001:db8:1:3::1").StatusCode)
}

// The hosted page's other answers: a store that cannot be reached is the
// page's own "temporarily unavailable" (503), never a Go error page, and a
// trusted proxy's unreadable X-Forwarded-For is the not-found page.
func TestHostedPage_unavailableAndBadProxyHeader(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	s.seedBanks()
	st := s.newSite(map[string]any{"hostedPage": true}, 0)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "un", "un-u", 25000)))
	require.NotNil(t, d.URL)

	req, err := http.NewRequest("GET", *d.URL, nil)
	require.NoError(t, err)
	req.Header.Set("X-Forwarded-For", "not-an-address")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, 404, res.StatusCode)
	assert.Contains(t, string(b), "Payment page not found")

	// The deposit's creation event is read from the store to show the
	// page; with the store gone, the page says so.
	s.closeConn()
	req.Header.Set("Accept-Language", "ar")
	req.Header.Del("X-Forwarded-For")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, 503, res.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
	assert.Contains(t, string(b), "غير متاح مؤقتاً")
	assert.NotContains(t, string(b), "25000")
}

// A site's return link and support contact are set, shown on its hosted
// pages, changed and removed through the operator API.
func TestHostedPage_returnAndSupport(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(map[string]any{"hostedPage": true, "returnUrl": "https://shop.example/orders?x=1&y=2",
		"supportContact": "واتساب +964 770 000 0000"}, 0)
	view := decodeAny(t, s.ops("GET", "/ops/v1/sites/"+st.ID, nil))
	require.Equal(t, "https://shop.example/orders?x=1&y=2", view["returnUrl"])
	require.Equal(t, "واتساب +964 770 000 0000", view["supportContact"])
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "rs1", "u1", 25000)))
	_, _, body := fetchPage(t, *d.URL)
	require.Contains(t, body, `<a id="return" href="https://shop.example/orders?x=1&amp;y=2" rel="noreferrer">Back to the shop</a>`)
	require.Contains(t, body, `<span id="support" dir="auto">واتساب &#43;964 770 000 0000</span>`)

	for _, bad := range []map[string]any{{"returnUrl": "javascript:alert(1)"}, {"returnUrl": "/relative"}, {"supportContact": "a\nb"}} {
		for k := range bad {
			requireErr(t, s.ops("PATCH", "/ops/v1/sites/"+st.ID, bad), 400, "invalid_request", k)
		}
	}
	requireOK(t, s.ops("PATCH", "/ops/v1/sites/"+st.ID, map[string]any{"returnUrl": "", "supportContact": ""}))
	view = decodeAny(t, s.ops("GET", "/ops/v1/sites/"+st.ID, nil))
	require.Nil(t, view["returnUrl"])
	require.Nil(t, view["supportContact"])
	_, _, body = fetchPage(t, *d.URL)
	require.NotContains(t, body, `id="return"`)
	require.NotContains(t, body, `id="support"`)
	items := s.history(t, st.ID)
	require.Equal(t, "site.page_updated.v1", items[1].Name, "after site.created, in its message")
	require.Equal(t, items[0].Seq, items[1].Seq)
	require.Equal(t, "site.page_updated.v1", items[len(items)-1].Name, "the removal, alone")
}
