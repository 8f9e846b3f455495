package console

import (
	"bytes"
	"context"
	"html"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/matching"
	"github.com/iqdgateway/gateway/records"
)

// Every text has all three languages, and every key a page asks for
// exists.
func TestTexts(t *testing.T) {
	for k, m := range texts {
		for _, l := range Langs {
			assert.NotEmpty(t, m[l], "%s has no %s text", k, l)
		}
		assert.Len(t, m, len(Langs), k)
	}
	for _, k := range jsKeys {
		assert.Contains(t, texts, k)
	}
}

func TestPickLang(t *testing.T) {
	assert.Equal(t, "ckb", known("ku"))
	assert.Equal(t, "rtl", Dir("ckb"))
	assert.Equal(t, "rtl", Dir("ar"))
	assert.Equal(t, "ltr", Dir("en"))
}

func TestGroup(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 12: "12", 1000: "1,000", 25000: "25,000", 1234567: "1,234,567", -1000000: "-1,000,000"} {
		assert.Equal(t, want, Group(n))
	}
}

// Every page renders in every language without a missing text: a key
// with no text would show as the key itself.
func TestRender(t *testing.T) {
	rec := records.OpsRecord{SiteID: "s1"}
	rec.TransactionID, rec.Status, rec.Type, rec.Amount, rec.RequestedAmount = "s1-1", "pending", "deposit", 25000, 25000
	rec.CreatedAt = "2026-03-01T12:04:05.000Z"
	rec.Deposit = &records.DepositFields{}
	bodies := map[string]any{
		"login":        LoginBody{Error: true},
		"transactions": TxBody{Kind: "deposit", F: map[string]string{}, Statuses: []string{"", "pending"}, Rows: []records.OpsRecord{rec}},
		"match":        MatchBody{},
		"treasuries":   TreasuriesBody{Sites: []TreasuryRow{{ID: "s1", Name: "Shop", Balance: 1000000}}},
		"callbacks":    CallbacksBody{Enabled: true, Statuses: []string{""}},
		"tx":           TxDetailBody{Rec: rec, Complete: true},
		"error":        Failure{Code: "internal", Message: "oops"},
	}
	for name, body := range bodies {
		for _, lang := range Langs {
			var b bytes.Buffer
			p := NewPage(lang, Who{Name: "Omar", Role: "operator", CanAct: true}, "tok", name, "deposits", "", body)
			require.NoError(t, Render(&b, name, p), name)
			html := b.String()
			assert.Contains(t, html, `lang="`+lang+`" dir="`+Dir(lang)+`"`)
			for k := range texts {
				// A key that is also a word in English (by, to) may
				// appear; the dotted ones never should.
				if len(k) > 6 && (k[:5] == "role." || k[:7] == "status.") {
					assert.NotContains(t, html, ">"+k+"<", "%s %s shows the key %s", name, lang, k)
				}
			}
		}
	}
	var b bytes.Buffer
	require.NoError(t, RenderRows(&b, "transactions", NewPage("en", Who{}, "", "", "deposits", "", bodies["transactions"])))
	assert.Contains(t, b.String(), "25,000")
	assert.NotContains(t, b.String(), "<html")
	assert.ErrorIs(t, RenderRows(&b, "login", NewPage("en", Who{}, "", "", "deposits", "", nil)), ErrNoList)
	assert.ErrorIs(t, RenderRows(&b, "match", NewPage("en", Who{}, "", "", "match", "", MatchBody{})), ErrNoList)
	for name, want := range map[string]bool{"transactions": true, "treasuries": true, "callbacks": true, "match": false, "tx": false, "login": false, "nope": false} {
		assert.Equal(t, want, HasRows(name), name)
	}
	b.Reset()
	require.NoError(t, RenderRows(&b, "treasuries", NewPage("en", Who{IsAdmin: true}, "", "", "treasuries", "", bodies["treasuries"])))
	assert.Contains(t, b.String(), `<td class="num" data-field="balance"><span class="money"><bdi dir="ltr">1,000,000</bdi> IQD</span></td>`)
}

// The language links are the page as it is, in another language.
func TestNewPage_langLinks(t *testing.T) {
	for query, want := range map[string]string{
		"":                             "?lang=ar",
		"status=approved&name=Ali+K":   "?status=approved&name=Ali+K&lang=ar",
		"cursor=a%2Fb&from=2026-01-02": "?cursor=a%2Fb&from=2026-01-02&lang=ar",
	} {
		p := NewPage("en", Who{}, "", "", "deposits", query, Failure{Code: "not_found", Message: "no such page"})
		require.Len(t, p.Langs, 3)
		assert.Equal(t, want, p.Langs[1].URL, query)
		var b bytes.Buffer
		require.NoError(t, Render(&b, "error", p))
		m := regexp.MustCompile(`<a href="([^"]*)" lang="ar"`).FindStringSubmatch(b.String())
		require.Len(t, m, 2)
		assert.Equal(t, want, html.UnescapeString(m[1]), query)
	}
}

// A callback's last answer is said once: the code and the error do not
// repeat each other, and a code is not put next to an error that was no
// answer of that code.
func TestLastAnswer(t *testing.T) {
	code := func(n int) *int { return &n }
	text := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		d    callbacks.Delivery
		want string
	}{
		{"delivered", callbacks.Delivery{Status: "delivered", LastStatusCode: code(200)}, "HTTP 200"},
		{"an HTTP error", callbacks.Delivery{Status: "pending", LastStatusCode: code(500), LastError: text("HTTP 500")}, "HTTP 500"},
		{"a redirect", callbacks.Delivery{Status: "failed", LastStatusCode: code(302), LastError: text("HTTP 302 (redirects are not followed)")},
			"HTTP 302 (redirects are not followed)"},
		{"no answer", callbacks.Delivery{Status: "pending", LastError: text("no answer within 10s")}, "no answer within 10s"},
		{"parked with a former attempt's code", callbacks.Delivery{Status: "failed", LastStatusCode: code(500),
			LastError: text("the site has no callbackUrl")}, "the site has no callbackUrl"},
		{"no attempt yet", callbacks.Delivery{Status: "pending"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, LastAnswer(tc.d))
			var b bytes.Buffer
			require.NoError(t, RenderRows(&b, "callbacks", NewPage("en", Who{}, "", "", "callbacks", "",
				CallbacksBody{Enabled: true, Items: []callbacks.Delivery{tc.d}})))
			assert.Contains(t, b.String(), "<td><bdi>"+tc.want+"</bdi></td>")
		})
	}
}

// A history shows people's names for its actors where it has them.
func TestTxDetailBody_Actor(t *testing.T) {
	b := TxDetailBody{Names: map[string]string{"op1": "Omar", "admin": "admin"}}
	assert.Equal(t, "Omar", b.Actor("op1"))
	assert.Equal(t, "merchant", b.Actor("merchant"))
}

// A proposal's reason reads the same as the API's in English, and in the
// page's language otherwise.
func TestReason(t *testing.T) {
	ts := []matching.Transfer{{Amount: 24000, Name: "Ali Kareem", Method: "QICARD", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	dep := records.OpsRecord{SiteID: "s1"}
	dep.TransactionID, dep.Type, dep.Status, dep.Amount, dep.Name, dep.Bank = "s1-1", "deposit", "expired", 25000, "Ali Kareem", "ZAINCASH"
	dep.CreatedAt = "2026-02-01T00:00:00.000Z"
	res, err := matching.Match(context.Background(), ts, []records.OpsRecord{dep})
	require.NoError(t, err)
	require.Len(t, res[0].Proposals, 1)
	p := res[0].Proposals[0]
	assert.Equal(t, p.Reason, T{"en"}.Reason(p, 24000))
	assert.Equal(t, "الاسم مطابق تماماً؛ المبلغ مختلف: استُلم 24,000 وطُلب 25,000؛ طريقة دفع أخرى (ZAINCASH)؛ التحويل أقدم من الإيداع؛ انتهت صلاحية الإيداع (ولا يزال بالإمكان قبوله)",
		T{"ar"}.Reason(p, 24000))
}

func TestFailure(t *testing.T) {
	for _, tc := range []struct {
		lang string
		f    Failure
		want string
	}{
		{"en", Failure{Code: "invalid_request", Field: "amount", Message: "must be positive"}, "Amount: must be positive"},
		{"en", Failure{Code: "invalid_request", Field: "from", Message: "from must be a date"}, "“<bdi>From</bdi>” must be a date"},
		// The form's labels, not the API's parameters: the field the
		// message starts with, and the other one of its pair; the same
		// words elsewhere are English.
		{"en", Failure{Code: "invalid_request", Field: "minAmount", Message: "minAmount must be a positive whole number of IQD"},
			"“<bdi>Amount from</bdi>” must be a positive whole number of IQD"},
		{"en", Failure{Code: "invalid_request", Field: "maxAmount", Message: "maxAmount is below minAmount"},
			"“<bdi>Amount to</bdi>” is below “<bdi>Amount from</bdi>”"},
		{"en", Failure{Code: "invalid_request", Field: "to", Message: "to must be after from"}, "“<bdi>To</bdi>” must be after “<bdi>From</bdi>”"},
		{"en", Failure{Code: "not_found", Field: "site", Message: "no such site"}, "Site: no such site"},
		{"en", Failure{Code: "invalid_request", Field: "text", Message: "no transfer lines"}, "Transfer lines: no transfer lines"},
		{"en", Failure{Code: "invalid_request", Field: "cursor", Message: "cursor is not one this listing gave"}, "cursor is not one this listing gave"},
		{"ar", Failure{Code: "invalid_request", Field: "minAmount", Message: "minAmount must be a positive whole number of IQD"},
			`الطلب غير صالح (<bdi>المبلغ من</bdi>): <bdi dir="ltr">“<bdi>المبلغ من</bdi>” must be a positive whole number of IQD</bdi>`},
		{"ckb", Failure{Code: "invalid_transition", Field: "eventId", Message: "the event's site has no callbackUrl"},
			`دۆخی ئێستا ڕێگە بەمە نادات (<bdi>ڕووداو</bdi>): <bdi dir="ltr">the event&#39;s site has no callbackUrl</bdi>`},
		{"en", Failure{Code: "internal", Message: "<b>&</b>"}, "&lt;b&gt;&amp;&lt;/b&gt;"},
		{"ar", Failure{Code: "invalid_request", Field: "amount", Message: "must be positive"},
			`الطلب غير صالح (<bdi>المبلغ</bdi>): <bdi dir="ltr">must be positive</bdi>`},
		{"ckb", Failure{Code: "invalid_transition", Message: "cannot approve a deposit that is rejected"},
			`دۆخی ئێستا ڕێگە بەمە نادات: <bdi dir="ltr">cannot approve a deposit that is rejected</bdi>`},
		{"ar", Failure{Code: "no_such_code", Message: "as it is"}, "as it is"},
		{"ar", Failure{Code: "conflict", Field: "<i>", Message: "<script>"},
			`يتعارض هذا مع ما هو موجود (<bdi>&lt;i&gt;</bdi>): <bdi dir="ltr">&lt;script&gt;</bdi>`},
	} {
		assert.Equal(t, tc.want, string(T{lang: tc.lang}.Failure(tc.f)), "%s %+v", tc.lang, tc.f)
	}
}

func TestPreferred(t *testing.T) {
	for header, want := range map[string][]string{
		"":                          {},
		"ar-IQ,ar;q=0.9,en;q=0.5":   {"ar", "ar", "en"},
		"en;q=0.2, ar;q=0.9":        {"ar", "en"},
		"ar;q=0, en":                {"en"},
		"fr, ckb;q=0.8, ku;q=0.8":   {"fr", "ckb", "ku"},
		"ar;q=x, en;q=2, ku;q=0.5":  {"ku"},
		"  EN-gb ; q=0.7 ,*;q=0.1 ": {"en", "*"},
	} {
		got := Preferred(header)
		if len(want) == 0 {
			assert.Empty(t, got, header)
			continue
		}
		assert.Equal(t, want, got, header)
	}
}
