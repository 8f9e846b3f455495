package httpapi_test

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the hosted page's golden files (testdata/hosted) from what the server answers")

// TestHostedPage_golden holds the hosted page's answers, status, headers
// and body, byte for byte to testdata/hosted: a deposit's page in every
// language and state (pending with each kind of number, approved,
// approved for another amount, rejected, expired, a sandbox site's), and
// the error pages (404, 429, 431, 503) in every language. Only what is
// random in an answer (the transaction id, the token, the script's nonce,
// the expiry, the requestId) is replaced by a placeholder, after checking
// that it is where it belongs. `go test ./httpapi/ -run TestHostedPage_golden
// -update` writes the files again; a change of the page then shows in
// their diff. The page's rendering itself (its wording, escaping, numbers,
// states) is tested in hostedpage.
func TestHostedPage_golden(t *testing.T) {
	var c clock
	e := newEnv(t)
	s := e.newStack(stackOptions{now: c.now, hostedRate: -1})
	s.seedBanks()
	// The merchant's own texts, which the page must escape: markup,
	// quotes and a right-to-left override.
	shop := s.newSite(map[string]any{"name": "Babylon <b>Games</b> & \"Co\" 'x' \u202eevil", "hostedPage": true,
		"returnUrl": "https://shop.example/orders?x=1&y=2", "supportContact": "واتساب +964 770 000 0000 <script>"}, 0)
	sandbox := s.newSite(map[string]any{"name": "Sandbox Shop", "hostedPage": true, "sandbox": true}, 0)
	expiring := s.newSite(map[string]any{"hostedPage": true, "depositTtlSeconds": 60}, 0)

	type page struct {
		name  string
		rec   record
		token string
	}
	var pages []page
	deposit := func(st site, lang, state, bank string) page {
		t.Helper()
		f := depositForm(bank, "order-"+lang+"-"+state, "u-"+lang+"-"+state, 25000)
		f.Set("lang", lang)
		d := rec(t, s.post(st, pathDeposit, f))
		require.NotNil(t, d.URL)
		_, tok, ok := strings.Cut(*d.URL, "?t=")
		require.True(t, ok, *d.URL)
		return page{name: lang + "-" + state, rec: d, token: tok}
	}
	pendingBank := map[string]string{"en": "QICARD", "ar": "NBI", "ku": "ZAINCASH"}
	var expired []page
	for _, lang := range []string{"en", "ar", "ku"} {
		pages = append(pages, deposit(shop, lang, "pending", pendingBank[lang]))
		p := deposit(shop, lang, "approved", "ZAINCASH")
		requireOK(t, s.ops("POST", "/ops/v1/deposits/"+p.rec.TransactionID+"/approve", nil))
		pages = append(pages, p)
		p = deposit(shop, lang, "approvedFor", "NBI")
		requireOK(t, s.ops("POST", "/ops/v1/deposits/"+p.rec.TransactionID+"/approve", map[string]any{"amount": 24000}))
		pages = append(pages, p)
		p = deposit(shop, lang, "rejected", "RAFIDAIN")
		requireOK(t, s.ops("POST", "/ops/v1/deposits/"+p.rec.TransactionID+"/reject", map[string]any{"reason": "none"}))
		pages = append(pages, p)
		pages = append(pages, deposit(sandbox, lang, "sandbox", "GAMEWALLET"))
		expired = append(expired, deposit(expiring, lang, "expired", "QICARD"))
	}

	for _, p := range pages {
		golden(t, p.name, hostedAnswer(t, mustGet(t, *p.rec.URL), p.rec, p.token))
	}
	// Past their expiry, the same users' next deposits expire the first.
	c.advance(61 * time.Second)
	for _, p := range expired {
		f := depositForm("QICARD", "again-"+p.name, "u-"+p.name, 25000)
		require.NotEqual(t, p.rec.TransactionID, rec(t, s.post(expiring, pathDeposit, f)).TransactionID)
		ans := hostedAnswer(t, mustGet(t, *p.rec.URL), p.rec, p.token)
		require.Contains(t, ans, `data-status="expired"`)
		golden(t, p.name, ans)
	}

	wrong := s.URL + "/pay/" + pages[0].rec.TransactionID + "?t=wrong"
	for lang, accept := range map[string]string{"en": "", "ar": "ar-IQ,ar;q=0.9", "ku": "ckb"} {
		req := mustGet(t, wrong)
		req.Header.Set("Accept-Language", accept)
		golden(t, "404-"+lang, hostedAnswer(t, req, pages[0].rec, ""))
		req = mustGet(t, s.URL+"/pay/x?t=y&lang="+lang+"&pad="+strings.Repeat("x", 70<<10))
		golden(t, "431-"+lang, hostedAnswer(t, req, record{}, ""))
	}

	// Another gateway on the same stream, its client past its rate.
	frozen := time.Now()
	limited := e.newStack(stackOptions{hostedRate: 1, limiterNow: func() time.Time { return frozen }})
	for range 2 {
		fetchPage(t, limited.URL+"/pay/x?t=y")
	}
	for _, lang := range []string{"en", "ar", "ku"} {
		golden(t, "429-"+lang, hostedAnswer(t, mustGet(t, limited.URL+"/pay/x?t=y&lang="+lang), record{}, ""))
	}

	// And one whose store is gone: it knows the deposit and cannot read it.
	gone := e.newStack(stackOptions{hostedRate: -1})
	gone.closeConn()
	for _, lang := range []string{"en", "ar", "ku"} {
		req := mustGet(t, strings.Replace(*pages[0].rec.URL, s.URL, gone.URL, 1)+"&lang="+lang)
		golden(t, "503-"+lang, hostedAnswer(t, req, pages[0].rec, pages[0].token))
	}
}

var (
	nonceHeader = regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9_-]{22,})';`)
	nonceScript = regexp.MustCompile(`<script nonce="([^"]*)">`)
	expiresAttr = regexp.MustCompile(`data-expires="([0-9]+)"`)
)

// hostedAnswer is req's answer as a golden file holds it: the status line,
// the headers but Date, sorted, a blank line and the body, with d's
// transaction id, the token, the nonce, the expiry and the requestId
// replaced by placeholders.
func hostedAnswer(t *testing.T, req *http.Request, d record, token string) string {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	body := string(raw)
	var r []string
	if m := nonceHeader.FindStringSubmatch(res.Header.Get("Content-Security-Policy")); m != nil {
		s := nonceScript.FindStringSubmatch(body)
		require.NotNil(t, s, "the page's script")
		require.Equal(t, m[1], s[1], "the script carries the policy's nonce")
		r = append(r, m[1], "{nonce}")
	} else {
		require.NotContains(t, body, "<script", "no policy nonce, no script")
	}
	if m := expiresAttr.FindStringSubmatch(body); m != nil {
		require.NotNil(t, d.ExpiresAt)
		at, err := time.Parse(time.RFC3339Nano, *d.ExpiresAt)
		require.NoError(t, err)
		require.Equal(t, strconv.FormatInt(at.UnixMilli(), 10), m[1], "the countdown ends at the deposit's expiry")
		r = append(r, m[0], `data-expires="{expiresMs}"`)
	}
	if token != "" {
		r = append(r, token, "{token}")
	}
	if d.TransactionID != "" {
		r = append(r, d.TransactionID, "{txId}")
	}
	norm := strings.NewReplacer(r...)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", res.Proto, res.Status)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range res.Header {
			if k != "Date" && !yield(k) {
				return
			}
		}
	}) {
		for _, v := range res.Header[k] {
			if k == "Request-Id" {
				v = "{requestId}"
			}
			fmt.Fprintf(&b, "%s: %s\n", k, norm.Replace(v))
		}
	}
	b.WriteString("\n")
	b.WriteString(norm.Replace(body))
	return b.String()
}

// golden compares got with testdata/hosted/name.golden, or writes it there
// with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "hosted", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "-update writes it")
	require.Equal(t, string(want), got, "%s: the hosted page's answer changed (-update rewrites the golden file)", name)
}
