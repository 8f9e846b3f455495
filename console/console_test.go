package console

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gateway/matching"
	"gateway/records"
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
	assert.Equal(t, "2026-03-01 15:04", When("2026-03-01T12:04:05.000Z"))
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
		"error":        "oops",
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
	assert.Error(t, RenderRows(&b, "login", NewPage("en", Who{}, "", "", "deposits", "", nil)))
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
