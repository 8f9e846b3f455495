package console

import (
	"bytes"
	"html/template"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/records"
)

// Every amount carries its currency, in the page's language; a negative
// one keeps its minus in front on a right-to-left page.
func TestMoney(t *testing.T) {
	for _, tc := range []struct {
		lang string
		n    int64
		want string
	}{
		{"en", 25000, `<span class="money"><bdi dir="ltr">25,000</bdi> IQD</span>`},
		{"ar", 25000, `<span class="money"><bdi dir="ltr">25,000</bdi> د.ع</span>`},
		{"ckb", -250000, `<span class="money"><bdi dir="ltr">-250,000</bdi> د.ع</span>`},
	} {
		assert.Equal(t, template.HTML(tc.want), T{tc.lang}.Money(tc.n))
	}
	assert.Equal(t, "24,000 IQD", T{"en"}.MoneyText(24000))
}

// Every time says its zone.
func TestWhen(t *testing.T) {
	assert.Equal(t, "2026-03-01 15:04 UTC+3", When("2026-03-01T12:04:05.000Z"))
	assert.Equal(t, "not a time", When("not a time"))
	assert.Equal(t, "UTC+3", Zone)
	for off, want := range map[int]string{0: "UTC+0", 3 * 3600: "UTC+3", -5 * 3600: "UTC-5", 5*3600 + 1800: "UTC+5:30", -(3*3600 + 1800): "UTC-3:30"} {
		assert.Equal(t, want, zoneName(time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("z", off))))
	}
	assert.Equal(t, template.HTML(`<span class="nw">2026-03-01</span> <span class="nw">15:04 UTC+3</span>`), whenHTML("2026-03-01T12:04:05Z"))
}

// A history's fields are labelled and written for people: amounts grouped
// with the currency, times as dates with the zone; what matters first, the
// page's own transaction id left out. Numbers come as msgpack decodes
// them, in the smallest type that holds them.
func TestDetails(t *testing.T) {
	expires := time.Date(2026, 3, 1, 12, 34, 0, 0, time.UTC).UnixMilli()
	data := map[string]any{"tx": "s1-1", "processId": "order-1", "amount": uint16(24000), "requested": int32(25000),
		"expiresAt": expires, "hostedToken": "[redacted]", "lang": "ku", "bankId": "abc", "name": "<b>Ali</b>",
		"reason": "late transfer"}
	label := func(ds []Detail) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Label+"="+string(d.Value))
		}
		return out
	}
	assert.Equal(t, []string{
		`Amount=<span class="money"><bdi dir="ltr">24,000</bdi> IQD</span>`,
		`Requested=<span class="money"><bdi dir="ltr">25,000</bdi> IQD</span>`,
		"Reason=late transfer",
		"Process ID=order-1",
		"Name=&lt;b&gt;Ali&lt;/b&gt;",
		`Expires=<span dir="ltr">2026-03-01 15:34 UTC+3</span>`,
		"Language=کوردی",
		"Method ID=abc",
		"Payment page token=hidden",
	}, label(T{"en"}.Details(data)))
	ar := T{"ar"}.Details(map[string]any{"amount": int64(1000), "reference": "ZC-1", "accountNumber": "07701234567"})
	assert.Equal(t, []string{`المبلغ=<span class="money"><bdi dir="ltr">1,000</bdi> د.ع</span>`, "المرجع=ZC-1", "رقم الحساب=07701234567"}, label(ar))
	assert.Equal(t, "unknownKey=7", label(T{"en"}.Details(map[string]any{"unknownKey": 7}))[0])

	// On the page: a list of labels and values, no key=value.
	rec := records.OpsRecord{SiteID: "s1"}
	rec.TransactionID, rec.Status, rec.Type, rec.Amount, rec.RequestedAmount = "s1-1", "approved", "deposit", 24000, 25000
	rec.CreatedAt = "2026-03-01T12:04:05.000Z"
	body := TxDetailBody{Rec: rec, Complete: true, Items: []records.HistoryItem{
		{Name: "deposit.approved.v1", Time: "2026-03-01T12:10:00.000Z", Actor: "op1", Data: map[string]any{"tx": "s1-1", "amount": 24000, "requested": 25000}}}}
	var b bytes.Buffer
	require.NoError(t, Render(&b, "tx", NewPage("en", Who{Name: "Omar"}, "", "", "transactionId", "", body)))
	page := b.String()
	assert.Contains(t, page, `<div><dt>Amount</dt><dd data-key="amount"><bdi><span class="money"><bdi dir="ltr">24,000</bdi> IQD</span></bdi></dd></div>`)
	assert.Contains(t, page, `<span class="nw">2026-03-01</span> <span class="nw">15:10 UTC+3</span>`)
	assert.NotContains(t, page, "amount=")
	assert.NotContains(t, page, ">tx=")
	assert.NotContains(t, page, "<dt>tx</dt>")
}

// Every list writes its amounts with the currency, and its times with the
// zone; the callbacks list names each delivery's site and filters by it.
func TestRender_amountsAndTimes(t *testing.T) {
	rec := records.OpsRecord{SiteID: "s1"}
	rec.TransactionID, rec.Status, rec.Type, rec.Amount, rec.RequestedAmount = "s1-1", "approved", "deposit", 24000, 25000
	rec.CreatedAt = "2026-03-01T12:04:05.000Z"
	rec.Deposit = &records.DepositFields{}
	next := "2026-03-01T12:05:00.000Z"
	sites := []Site{{"s1", "Shop One"}, {"s2", "Shop Two"}}
	for _, lang := range Langs {
		iqd := T{lang}.Get("iqd")
		render := func(name string, body any) string {
			var b bytes.Buffer
			require.NoError(t, Render(&b, name, NewPage(lang, Who{Name: "Omar", CanAct: true, IsAdmin: true}, "", "", name, "", body)))
			return b.String()
		}
		txs := render("transactions", TxBody{Kind: "deposit", F: map[string]string{}, Rows: []records.OpsRecord{rec}, Sites: sites})
		assert.Contains(t, txs, `<bdi dir="ltr">24,000</bdi> `+iqd+`</span>`, lang)
		assert.Contains(t, txs, `<bdi dir="ltr">25,000</bdi> `+iqd+`</span>`, lang)
		assert.Contains(t, txs, `15:04 UTC+3`, lang)
		assert.Equal(t, 2, strings.Count(txs, `<small dir="ltr">UTC&#43;3</small>`), "the date filters say their zone")
		tr := render("treasuries", TreasuriesBody{Sites: []TreasuryRow{{ID: "s1", Name: "Shop", Balance: 1000, Pending: 2000, Available: -1000, NegativeLimit: -5000}}})
		for _, n := range []string{"1,000", "2,000", "-1,000", "-5,000"} {
			assert.Contains(t, tr, `<bdi dir="ltr">`+n+`</bdi> `+iqd+`</span>`, lang)
		}
		cb := render("callbacks", CallbacksBody{Enabled: true, Site: "s2", Sites: sites, Statuses: []string{""},
			Items: []callbacks.Delivery{{EventID: "7-0", SiteID: "s2", TransactionID: "s2-1", Status: "pending", NextAttemptAt: &next}}})
		assert.Contains(t, cb, `<option value="s2" selected>Shop Two</option>`, lang)
		assert.Contains(t, cb, `<td class="site"><bdi>Shop Two</bdi></td>`, lang)
		assert.Contains(t, cb, `15:05 UTC+3`, lang)
	}
}

// An amount typed grouped, or in Arabic-Indic digits, is the API's plain
// integer; anything else is left for the API to refuse.
func TestNormalizeAmount(t *testing.T) {
	for in, want := range map[string]string{"25000": "25000", "25,000": "25000", " 1,000,000 ": "1000000", "٢٥٬٠٠٠": "25000",
		"۲۵۰۰۰": "25000", "12x": "12x", "": "", "-5": "-5", "99999999999999999999": "99999999999999999999"} {
		assert.Equal(t, want, NormalizeAmount(in), in)
	}
}
