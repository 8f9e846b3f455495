package console

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
