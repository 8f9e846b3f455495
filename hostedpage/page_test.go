package hostedpage

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/records"
)

func itoa(n int) string { return strconv.Itoa(n) }

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func newPage(t *testing.T) *Page {
	t.Helper()
	p, err := New()
	require.NoError(t, err, "the embedded templates and wording")
	return p
}

// deposit is a deposit of 25,000 IQD to a card, in lang, status and
// credited amount as given.
func deposit(lang, status string, amount int64) records.Record {
	var rec records.Record
	rec.TransactionID, rec.ProcessID, rec.Status, rec.Type = "s1-1", "order-1", status, "deposit"
	rec.Amount, rec.RequestedAmount, rec.IdentifierKind = amount, 25000, "CARD_NO"
	rec.Deposit = &records.DepositFields{BankName: "QiCard", BankAccountName: "Store A", BankAccountIban: "6375000012345678", Lang: lang}
	return rec
}

func render(t *testing.T, p *Page, d Deposit) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, p.Render(&b, d))
	return b.String()
}

// Every language and state renders (a key missing from the wording would
// fail it) with the page's language, direction and digits, the state said
// in the language, and the pending-only parts only while pending; an
// approval for another amount says which and why, and a sandbox site's
// page says it is a test.
func TestRender(t *testing.T) {
	p := newPage(t)
	type want struct {
		tag, dir, digits, amount, state string
	}
	langs := map[string]want{
		"en": {"en", "ltr", "latn", "25,000 IQD", ""},
		"ar": {"ar", "rtl", "arab", "٢٥٬٠٠٠ د.ع", ""},
		"ku": {"ckb", "rtl", "arab", "٢٥٬٠٠٠ د.ع", ""},
		"fr": {"en", "ltr", "latn", "25,000 IQD", ""},
	}
	states := []struct {
		status string
		amount int64
		// state is the state's text in each language.
		state map[string]string
		class string
	}{
		{"pending", 25000, map[string]string{"en": "Waiting for your transfer…", "ar": "بانتظار تحويلك…", "ku": "چاوەڕێی گواستنەوەکەتین…"}, `class="state"`},
		{"approved", 25000, map[string]string{"en": "Your deposit was received and approved.", "ar": "تم استلام إيداعك والموافقة عليه.",
			"ku": "پارەکەت گەیشت و پەسەند کرا."}, `class="state ok"`},
		{"approved", 24000, map[string]string{"en": "Approved for 24,000 IQD: the amount received (25,000 IQD was requested).",
			"ar": "تمت الموافقة على ٢٤٬٠٠٠ د.ع: المبلغ الذي استُلم (كان المطلوب ٢٥٬٠٠٠ د.ع).",
			"ku": "پەسەند کرا بە ٢٤٬٠٠٠ د.ع: ئەو بڕەی گەیشت (٢٥٬٠٠٠ د.ع داواکرابوو)."}, `class="state ok"`},
		{"rejected", 25000, map[string]string{"en": "This deposit was rejected.", "ar": "تم رفض هذا الإيداع.", "ku": "ئەم پارەدانانە ڕەتکرایەوە."}, `class="state bad"`},
		{"expired", 25000, map[string]string{"en": "This deposit request has expired. If you already paid, contact support.",
			"ar": "انتهت صلاحية طلب الإيداع هذا. إذا كنت قد دفعت بالفعل، فاتصل بالدعم.",
			"ku": "ماوەی ئەم داواکارییە بەسەرچوو. ئەگەر پارەت داوە، پەیوەندی بە پشتگیرییەوە بکە."}, `class="state bad"`},
	}
	sandbox := map[string]string{"en": "Test payment (sandbox): do not send money.", "ar": "دفعة تجريبية (بيئة اختبار): لا ترسل أي أموال.",
		"ku": "پارەدانی تاقیکاری (سەندبۆکس): هیچ پارەیەک مەنێرە."}
	for lang, w := range langs {
		text := depositLang(lang)
		for _, st := range states {
			for _, sb := range []bool{false, true} {
				name := lang + " " + st.status + " " + itoa(int(st.amount))
				html := render(t, p, Deposit{Rec: deposit(lang, st.status, st.amount), Merchant: "Shop", ReturnURL: "https://shop.example/",
					Support: "+964 770 000 0000", Sandbox: sb, StatusURL: "/pay/s1-1/status?t=tok", Nonce: "n0nce"})
				assert.Contains(t, html, `<html lang="`+w.tag+`" dir="`+w.dir+`">`, name)
				assert.Contains(t, html, `data-digits="`+w.digits+`"`, name)
				assert.Contains(t, html, `data-requested-text="`+w.amount+`"`, name)
				assert.Contains(t, html, st.class+"\n", name)
				assert.Contains(t, html, ">"+st.state[text]+"</p>", name)
				assert.Contains(t, html, `<script nonce="n0nce">`, name)
				assert.Equal(t, st.status == "pending", strings.Contains(html, `id="number"`), "%s: the number only while pending", name)
				assert.Equal(t, sb, strings.Contains(html, `<p class="test" id="test" role="note">`+sandbox[text]), "%s: a sandbox says it is a test", name)
				assert.Equal(t, sb, strings.Contains(html, "<title>TEST · "), name)
				assert.Contains(t, html, `id="return" href="https://shop.example/"`, name)
			}
		}
	}
}

// Whatever a merchant, an operator or a customer typed is text on the
// page: markup and quotes are escaped in every context they appear in (an
// element, an attribute, a link), a link that is not http(s) does not
// reach the href, and a right-to-left override stays inside its own
// isolated element.
func TestRender_escapes(t *testing.T) {
	p := newPage(t)
	const rlo = "\u202e"
	rec := deposit("ar", "pending", 25000)
	rec.ProcessID = `"><script>alert(1)</script>`
	rec.Deposit.BankName = "<i>Esc</i>"
	rec.Deposit.BankAccountName = `A&B <script>alert(2)</script>` + rlo + "evil"
	rec.Deposit.BankAccountIban = `x"y' onclick=alert(3)`
	rec.IdentifierKind = "USERNAME"
	html := render(t, p, Deposit{Rec: rec, Merchant: "Babylon <b>Games</b> & \"Co\" " + rlo + "evil",
		ReturnURL: "javascript:alert(4)", Support: "<img src=x onerror=alert(5)>", StatusURL: "/pay/s1-1/status?t=a\"b", Nonce: "n"})
	for _, raw := range []string{"<script>alert", "<i>Esc", "<b>Games", `x"y`, "<img", "javascript:alert", `t=a"b`} {
		assert.NotContains(t, html, raw)
	}
	for _, escaped := range []string{
		`id="order">&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;<`,
		`>&lt;i&gt;Esc&lt;/i&gt;<`,
		`id="name">A&amp;B &lt;script&gt;alert(2)&lt;/script&gt;` + rlo + `evil<`,
		`data-value="x&#34;y&#39; onclick=alert(3)">x&#34;y&#39; onclick=alert(3)<`,
		`id="merchant">Babylon &lt;b&gt;Games&lt;/b&gt; &amp; &#34;Co&#34; ` + rlo + `evil</b>`,
		`id="support" dir="auto">&lt;img src=x onerror=alert(5)&gt;<`,
		`href="#ZgotmplZ"`,
		`data-status-url="/pay/s1-1/status?t=a%22b"`,
	} {
		assert.Contains(t, html, escaped)
	}
	// The elements others' text is in are isolated: an override inside one
	// cannot reorder the text around it.
	assert.Contains(t, html, `.value,#merchant{font-weight:600;word-break:break-all;unicode-bidi:isolate}`)
	assert.Equal(t, 1, strings.Count(html, "<script"), "the page's own script only")
}

// The number to pay to is shown as people read it: a card number or an
// IBAN in groups of four, copied as it is; another kind, or a number
// already written otherwise, as it is.
func TestReadableNumber(t *testing.T) {
	p := newPage(t)
	tests := []struct{ kind, raw, shown string }{
		{"CARD_NO", "6375000012345678", "6375 0000 1234 5678"},
		{"IBAN", "IQ56NBIQ123456789012345", "IQ56 NBIQ 1234 5678 9012 345"},
		{"CARD_NO", "6375 0000 1234 5678", "6375 0000 1234 5678"},
		{"CARD_NO", "6375-0000", "6375-0000"},
		{"ACCOUNT_NO", "0012345678", "0012345678"},
		{"PHONE", "07801234567", "07801234567"},
		{"USERNAME", "store.wallet", "store.wallet"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.shown, readableNumber(tc.raw, tc.kind), tc.kind+" "+tc.raw)
		rec := deposit("en", "pending", 25000)
		rec.IdentifierKind, rec.Deposit.BankAccountIban = tc.kind, tc.raw
		assert.Contains(t, render(t, p, Deposit{Rec: rec}), `id="number" data-value="`+tc.raw+`">`+tc.shown+`<`, tc.kind)
	}
}

// AmountText is the amount as the deposit's page writes it, which the
// status the page polls carries.
func TestAmountText(t *testing.T) {
	p := newPage(t)
	tests := []struct {
		lang   string
		amount int64
		want   string
	}{
		{"en", 24000, "24,000 IQD"},
		{"ar", 31337, "٣١٬٣٣٧ د.ع"},
		{"ku", 1000, "١٬٠٠٠ د.ع"},
		{"fr", 999999, "999,999 IQD"},
		{"", 1234567, "1,234,567 IQD"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, p.AmountText(deposit(tc.lang, "approved", tc.amount)), tc.lang)
	}
}

// Every error page in every language: its title and text in the
// language, no script and nothing else; a status without a page is an
// error, not an empty page.
func TestRenderError(t *testing.T) {
	p := newPage(t)
	tests := []struct {
		status      int
		lang, title string
	}{
		{404, "en", "Payment page not found"},
		{404, "ar", "صفحة الدفع غير موجودة"},
		{404, "ku", "پەڕەی پارەدان نەدۆزرایەوە"},
		{429, "en", "Too many requests"},
		{429, "ar", "طلبات كثيرة جداً"},
		{429, "ku", "داواکاری زۆر"},
		{431, "en", "Link too long"},
		{431, "ar", "الرابط طويل جداً"},
		{431, "ku", "بەستەرەکە زۆر درێژە"},
		{503, "en", "Temporarily unavailable"},
		{503, "ar", "غير متاح مؤقتاً"},
		{503, "ku", "بە کاتی بەردەست نییە"},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		require.NoError(t, p.RenderError(&b, tc.status, tc.lang))
		html := b.String()
		assert.Contains(t, html, `<html lang="`+htmlLang(tc.lang)+`" dir="`+dir(tc.lang)+`">`)
		assert.Contains(t, html, "<title>"+tc.title+"</title>")
		assert.Contains(t, html, "<h1>"+tc.title+"</h1><p>"+p.texts[tc.lang]["error."+itoa(tc.status)+".text"]+"</p>")
		assert.NotContains(t, html, "<script")
	}
	var b bytes.Buffer
	require.Error(t, p.RenderError(&b, 500, "en"))
	require.Error(t, p.RenderError(&b, 404, "fr"))
	assert.Zero(t, b.Len())
}
