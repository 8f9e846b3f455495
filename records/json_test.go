package records

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shapes encoding/json gives the record's parts: AppendJSON must write
// exactly what json.Marshal writes of them.
type depositJSON struct {
	Common
	DepositFields
}

type withdrawalJSON struct {
	Common
	WithdrawalFields
}

type sandboxJSON struct {
	Common
	DepositFields
	Sandbox bool `json:"sandbox,omitempty"`
}

type opsJSON struct {
	SiteID string `json:"siteId"`
	Common
	DepositFields
}

// hostileStrings are what merchants and end users may put in any field.
var hostileStrings = []string{
	"", "plain", `quote " and \ backslash`, "<script>alert(1)</script>&amp;",
	"line\nbreak\r\ttab\b\f\x00\x01\x1f\x7f", "علي حسن", "کوردی", "emoji 💸",
	"\u2028\u2029 separators", "bad utf8 \xff\xfe\xc3", "\xed\xa0\x80 surrogate", "trailing \xe2\x82",
}

func TestRecord_AppendJSON_matchesEncodingJSON(t *testing.T) {
	for _, s := range hostileStrings {
		s := s
		p := &s
		c := Common{TransactionID: s, BankID: s, Bank: s, Amount: 25000, RequestedAmount: -1, UserID: s, Name: s,
			UserName: s, ProcessID: s, Type: "deposit", ConvertedName: s, Status: s, StatusReason: p,
			IdentifierKind: s, Hash: s, CreatedAt: s, UpdatedAt: s}
		d := DepositFields{BankName: s, BankAccountName: s, BankAccountIban: s, SenderName: p, Lang: s,
			ExpiresAt: p, URL: p, AlreadyPending: true}
		w := WithdrawalFields{AccountName: s, IBAN: s}
		cases := []struct {
			name string
			got  interface{ AppendJSON([]byte) []byte }
			want any
		}{
			{"deposit", Record{Common: c, Deposit: &d}, depositJSON{c, d}},
			{"withdrawal", Record{Common: c, Withdrawal: &w}, withdrawalJSON{c, w}},
			{"common only", Record{Common: c}, c},
			{"sandbox", Record{Common: c, Deposit: &d, Sandbox: true}, sandboxJSON{c, d, true}},
			{"nulls", Record{Common: Common{Amount: 1}, Deposit: &DepositFields{}}, depositJSON{Common{Amount: 1}, DepositFields{}}},
			{"ops", OpsRecord{SiteID: "site-" + "x", Record: Record{Common: c, Deposit: &d}}, opsJSON{"site-x", c, d}},
		}
		for _, tc := range cases {
			want, err := json.Marshal(tc.want)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(tc.got.AppendJSON(nil)), "%s of %q", tc.name, s)
			// MarshalJSON is the same bytes.
			viaMarshal, err := json.Marshal(tc.got)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(viaMarshal), "%s of %q through json.Marshal", tc.name, s)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range hostileStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		got := AppendJSONString([]byte("x"), s)
		if string(got[1:]) != string(want) {
			t.Fatalf("AppendJSONString(%q) = %s, encoding/json writes %s", s, got[1:], want)
		}
	})
}
