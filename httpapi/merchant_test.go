package httpapi_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// depositKeys and withdrawalKeys are the exact field sets of the records
// (docs/merchant-api.md "Records", plus createdAt,
// updatedAt, senderName and lang).
var (
	commonKeys = []string{"transactionId", "bankId", "bank", "amount", "requestedAmount", "userId", "name", "userName",
		"processId", "type", "convertedName", "status", "statusReason", "identifierKind", "hash", "createdAt", "updatedAt"}
	depositOnly    = []string{"bankName", "bankAccountName", "bankAccountIban", "senderName", "lang", "expiresAt", "url", "alreadyPending"}
	withdrawalOnly = []string{"accountName", "iban"}
)

func requireKeys(t *testing.T, r resp, want ...[]string) {
	t.Helper()
	keys := dataKeys(t, r)
	var all []string
	for _, w := range want {
		all = append(all, w...)
	}
	got := make([]string, 0, len(keys))
	for k := range keys {
		got = append(got, k)
	}
	require.ElementsMatch(t, all, got, "record fields: %s", r.Raw)
}

func TestDepositRecordFields(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(map[string]any{"depositTtlSeconds": 600}, 0)
	accts := map[string]string{"ZAINCASH": "07801234567", "QICARD": "6375000012345678", "RAFIDAIN": "0012345678",
		"NBI": "IQ56NBIQ123456789012345", "GAMEWALLET": "store.wallet"}
	kinds := map[string]string{"ZAINCASH": "PHONE", "QICARD": "CARD_NO", "RAFIDAIN": "ACCOUNT_NO", "NBI": "IBAN", "GAMEWALLET": "USERNAME"}

	cases := []struct {
		name, code, ref, lang, wantLang string
		sender                          string
		amount                          int64
		wantAcct                        string
	}{
		{"by code en", "ZAINCASH", "ZAINCASH", "en", "en", "", 25000, "Store A"},
		{"by id ar", "QICARD", "", "ar", "ar", "Ali K.", 1000, "Store A"},
		{"by code ku", "RAFIDAIN", "RAFIDAIN", "ku", "ku", "", 1_000_000, "Store A"},
		{"by id unknown lang", "NBI", "", "fr", "en", "", 5000, "Store A"},
		{"by code no lang", "GAMEWALLET", "GAMEWALLET", "", "en", "سارة", 77777, "Store A"},
		{"upper-case lang", "ZAINCASH", "", "AR", "ar", "", 3000, "Store B"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := c.ref
			if ref == "" {
				ref = banks[c.code].ID
			}
			pid := "dep-" + c.name
			user := "u" + string(rune('a'+i))
			f := url.Values{"bankId": {ref}, "processId": {pid}, "amount": {itoa(c.amount)}, "userId": {user},
				"userName": {"ali_k"}, "name": {"  Ali   Kareem!  "}}
			if c.lang != "" {
				f.Set("lang", c.lang)
			}
			if c.sender != "" {
				f.Set("senderName", c.sender)
			}
			before := time.Now()
			r := s.post(st, pathDeposit, f)
			after := time.Now()
			d := rec(t, r)
			requireKeys(t, r, commonKeys, depositOnly)
			require.True(t, strings.HasPrefix(d.TransactionID, st.ID+"-"), d.TransactionID)
			require.Equal(t, banks[c.code].ID, d.BankID, "bankId is the _id even when the code was sent")
			require.Equal(t, c.code, d.Bank)
			require.Equal(t, c.amount, d.Amount)
			require.Equal(t, c.amount, d.RequestedAmount)
			require.Equal(t, user, d.UserID)
			require.Equal(t, "  Ali   Kareem!  ", d.Name)
			require.Equal(t, "ali_k", d.UserName)
			require.Equal(t, pid, d.ProcessID)
			require.Equal(t, "deposit", d.Type)
			require.Equal(t, "alikareem", d.ConvertedName)
			require.Equal(t, "pending", d.Status)
			require.Nil(t, d.StatusReason)
			require.Equal(t, kinds[c.code], d.IdentifierKind)
			require.Equal(t, responseHash(st.Secret, d.TransactionID, banks[c.code].ID, c.amount), d.Hash)
			require.Equal(t, c.code+" "+c.wantLang, d.BankName)
			require.Equal(t, c.wantAcct, d.BankAccountName, "accounts rotate per method")
			require.Equal(t, accts[c.code], d.BankAccountIban)
			require.Equal(t, c.wantLang, d.Lang)
			if c.sender == "" {
				require.Nil(t, d.SenderName)
			} else {
				require.NotNil(t, d.SenderName)
				require.Equal(t, c.sender, *d.SenderName)
			}
			require.Nil(t, d.URL, "no hosted page for this site")
			require.False(t, d.AlreadyPending)
			require.NotNil(t, d.ExpiresAt)
			exp := parseTime(t, *d.ExpiresAt)
			created := parseTime(t, d.CreatedAt)
			require.Equal(t, 600*time.Second, exp.Sub(created), "expiresAt = creation + depositTtlSeconds")
			require.False(t, created.Before(before.Truncate(time.Millisecond)), "createdAt %s before request", created)
			require.False(t, created.After(after), "createdAt %s after response", created)
			require.Equal(t, d.CreatedAt, d.UpdatedAt)

			// The lookups show the same record.
			for _, g := range []resp{s.get(st, "/v1/transactions/"+d.TransactionID, ""),
				s.get(st, "/v1/transactions", "processId="+url.QueryEscape(pid))} {
				d2 := rec(t, g)
				requireKeys(t, g, commonKeys, depositOnly)
				require.Equal(t, d, d2)
			}
		})
	}
}

func TestDepositDefaultTTL(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(nil, 0)
	d := rec(t, s.post(st, pathDeposit, depositForm(banks["ZAINCASH"].ID, "p1", "u1", 25000)))
	require.Equal(t, 1800*time.Second, parseTime(t, *d.ExpiresAt).Sub(parseTime(t, d.CreatedAt)))
}

func TestWithdrawalRecordFields(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(nil, 5_000_000)
	cases := []struct {
		code, kind, iban string
		byID             bool
	}{
		{"ZAINCASH", "PHONE", "07712345678", false},
		{"QICARD", "CARD_NO", "6375000012345678", true},
		{"RAFIDAIN", "ACCOUNT_NO", "123456", false},
		{"NBI", "IBAN", iraqiIBAN("NBIQ", "850123456789012"), true},
		{"GAMEWALLET", "USERNAME", "player.one_2-x", false},
	}
	for i, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			ref := c.code
			if c.byID {
				ref = banks[c.code].ID
			}
			pid := "wd-" + c.code
			amount := int64(1000 * (i + 1))
			f := withdrawForm(ref, pid, "w"+c.code, amount, c.iban)
			f.Set("name", "Sara  Ahmed")
			f.Set("accountName", "SARA AHMED")
			r := s.post(st, pathWithdraw, f)
			d := rec(t, r)
			requireKeys(t, r, commonKeys, withdrawalOnly)
			require.True(t, strings.HasPrefix(d.TransactionID, st.ID+"-"), d.TransactionID)
			require.Equal(t, banks[c.code].ID, d.BankID)
			require.Equal(t, c.code, d.Bank)
			require.Equal(t, amount, d.Amount)
			require.Equal(t, amount, d.RequestedAmount)
			require.Equal(t, "w"+c.code, d.UserID)
			require.Equal(t, "Sara  Ahmed", d.Name)
			require.Equal(t, "user_w"+c.code, d.UserName)
			require.Equal(t, pid, d.ProcessID)
			require.Equal(t, "withdrawal", d.Type)
			require.Equal(t, "saraahmed", d.ConvertedName)
			require.Equal(t, "pending", d.Status)
			require.Nil(t, d.StatusReason, "statusReason is null on creation")
			require.Equal(t, c.kind, d.IdentifierKind)
			require.Equal(t, "SARA AHMED", d.AccountName)
			require.Equal(t, c.iban, d.IBAN)
			require.Equal(t, responseHash(st.Secret, d.TransactionID, banks[c.code].ID, amount), d.Hash)
			for _, g := range []resp{s.get(st, "/v1/transactions/"+d.TransactionID, ""),
				s.get(st, "/v1/transactions", "processId="+pid)} {
				requireKeys(t, g, commonKeys, withdrawalOnly)
				require.Equal(t, d, rec(t, g))
			}
		})
	}
	b := s.balanceOf(t, st)
	require.Equal(t, balance{Balance: 5_000_000, PendingWithdrawals: 15000, NegativeLimit: 0, Available: 5_000_000 - 15000, Currency: "IQD"}, b)
}

type methodView struct {
	ID             string `json:"_id"`
	Code           string `json:"code"`
	Name           string `json:"name"`
	IdentifierKind string `json:"identifierKind"`
	MinAmount      int64  `json:"minAmount"`
	MaxAmount      int64  `json:"maxAmount"`
	Deposit        bool   `json:"deposit"`
	Withdraw       bool   `json:"withdraw"`
}

func TestListBanks(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	// A deposit-only method, a withdraw-only method (no translations) and a
	// disabled one.
	mk := func(code string, dep, wd bool, name map[string]string) bank {
		body := map[string]any{"code": code, "name": name, "identifierKind": "PHONE", "minAmount": 500,
			"maxAmount": 9000, "deposit": dep, "withdraw": wd}
		if dep {
			body["accounts"] = []map[string]string{{"accountName": "X", "accountNumber": "07700000000"}}
		}
		r := s.ops("POST", "/ops/v1/banks", body)
		requireOK(t, r)
		var b bank
		r.decode(t, &b)
		return b
	}
	depOnly := mk("DEPONLY", true, false, map[string]string{"en": "Dep", "ar": "إيداع", "ku": "پارە"})
	wdOnly := mk("WDONLY", false, true, map[string]string{"en": "Wd only"})
	off := mk("OFF", true, true, map[string]string{"en": "Off"})
	requireOK(t, s.ops("PATCH", "/ops/v1/banks/"+off.ID, map[string]any{"enabled": false}))
	st := s.newSite(nil, 0)

	seeded := []string{"ZAINCASH", "QICARD", "RAFIDAIN", "NBI", "GAMEWALLET"}
	plus := func(extra ...string) []string { return append(append([]string{}, seeded...), extra...) }
	cases := []struct {
		query     string
		wantCodes []string
	}{
		{"", plus("DEPONLY", "WDONLY")},
		{"type=deposit", plus("DEPONLY")},
		{"type=withdraw", plus("WDONLY")},
		{"type=withdrawal", plus("WDONLY")},
		{"type=deposit&lang=ar", plus("DEPONLY")},
		{"lang=ku&type=withdraw", plus("WDONLY")},
		{"lang=ku", plus("DEPONLY", "WDONLY")},
		{"lang=en", plus("DEPONLY", "WDONLY")},
		{"lang=fr", plus("DEPONLY", "WDONLY")},
		{"lang=", plus("DEPONLY", "WDONLY")},
	}
	special := map[string]map[string]string{
		"DEPONLY": {"en": "Dep", "ar": "إيداع", "ku": "پارە"},
		"WDONLY":  {"en": "Wd only", "ar": "Wd only", "ku": "Wd only"}, // missing translations fall back to en
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			r := s.get(st, "/v1/banks", c.query)
			requireOK(t, r)
			var got []methodView
			r.decode(t, &got)
			q, _ := url.ParseQuery(c.query)
			lang := q.Get("lang")
			if lang != "ar" && lang != "ku" {
				lang = "en"
			}
			var codes []string
			for _, m := range got {
				codes = append(codes, m.Code)
				want := m.Code + " " + lang
				if sp, ok := special[m.Code]; ok {
					want = sp[lang]
				}
				require.Equal(t, want, m.Name, "name of %s", m.Code)
				switch m.Code {
				case "DEPONLY":
					require.Equal(t, methodView{ID: depOnly.ID, Code: "DEPONLY", Name: m.Name, IdentifierKind: "PHONE",
						MinAmount: 500, MaxAmount: 9000, Deposit: true, Withdraw: false}, m)
				case "WDONLY":
					require.Equal(t, methodView{ID: wdOnly.ID, Code: "WDONLY", Name: m.Name, IdentifierKind: "PHONE",
						MinAmount: 500, MaxAmount: 9000, Deposit: false, Withdraw: true}, m)
				default:
					require.Equal(t, banks[m.Code].ID, m.ID)
					require.Equal(t, int64(1000), m.MinAmount)
					require.Equal(t, int64(1_000_000), m.MaxAmount)
					require.True(t, m.Deposit)
					require.True(t, m.Withdraw)
				}
			}
			require.ElementsMatch(t, c.wantCodes, codes)
			require.NotContains(t, codes, "OFF", "a disabled method is not listed")
		})
	}
	kinds := map[string]string{}
	var all []methodView
	rec := s.get(st, "/v1/banks", "")
	rec.decode(t, &all)
	for _, m := range all {
		kinds[m.Code] = m.IdentifierKind
	}
	require.Equal(t, map[string]string{"ZAINCASH": "PHONE", "QICARD": "CARD_NO", "RAFIDAIN": "ACCOUNT_NO", "NBI": "IBAN",
		"GAMEWALLET": "USERNAME", "DEPONLY": "PHONE", "WDONLY": "PHONE"}, kinds)

	for _, bad := range []string{"type=payout", "type=DEPOSIT", "type=x&type=deposit", "type=%20deposit", "type=", "type"} {
		t.Run("bad "+bad, func(t *testing.T) {
			requireErr(t, s.get(st, "/v1/banks", bad), 400, "invalid_request", "type")
		})
	}
	t.Run("malformed query", func(t *testing.T) {
		requireErr(t, s.get(st, "/v1/banks", "type=%zz"), 400, "invalid_request", "")
	})
}

func TestBalance(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(map[string]any{"negativeLimit": -50_000}, 200_000)
	r := s.get(st, "/v1/balance", "")
	requireOK(t, r)
	require.Equal(t, map[string]any{"balance": 200_000.0, "pendingWithdrawals": 0.0, "negativeLimit": -50_000.0,
		"available": 250_000.0, "currency": "IQD"}, decodeAny(t, r))
	rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "w1", "u1", 30_000, "07712345678")))
	require.Equal(t, balance{Balance: 200_000, PendingWithdrawals: 30_000, NegativeLimit: -50_000, Available: 220_000, Currency: "IQD"},
		s.balanceOf(t, st))
	// A pending deposit does not touch the treasury.
	rec(t, s.post(st, pathDeposit, depositForm(banks["QICARD"].ID, "d1", "u2", 40_000)))
	require.Equal(t, balance{Balance: 200_000, PendingWithdrawals: 30_000, NegativeLimit: -50_000, Available: 220_000, Currency: "IQD"},
		s.balanceOf(t, st))
	// Another site's treasury is its own.
	other := s.newSite(nil, 0)
	require.Equal(t, balance{Currency: "IQD"}, s.balanceOf(t, other))
}

func decodeAny(t *testing.T, r resp) map[string]any {
	t.Helper()
	var m map[string]any
	r.decode(t, &m)
	return m
}

func TestLookupNotFound(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	a := s.newSite(nil, 0)
	b := s.newSite(nil, 0)
	da := rec(t, s.post(a, pathDeposit, depositForm("ZAINCASH", "pa", "u1", 25000)))
	db := rec(t, s.post(b, pathDeposit, depositForm("ZAINCASH", "pb", "u1", 25000)))
	cases := []struct {
		name, path, query string
	}{
		{"unknown id of the site", "/v1/transactions/" + a.ID + "-zz", ""},
		{"malformed id", "/v1/transactions/nope", ""},
		{"another site's tx id", "/v1/transactions/" + db.TransactionID, ""},
		{"unknown processId", "/v1/transactions", "processId=nope"},
		{"another site's processId", "/v1/transactions", "processId=pb"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireErr(t, s.get(a, c.path, c.query), 404, "not_found", "")
		})
	}
	t.Run("processId missing", func(t *testing.T) {
		requireErr(t, s.get(a, "/v1/transactions", ""), 400, "invalid_request", "processId")
		requireErr(t, s.get(a, "/v1/transactions", "processId="), 400, "invalid_request", "processId")
	})
	t.Run("own lookups work", func(t *testing.T) {
		require.Equal(t, da.TransactionID, rec(t, s.get(a, "/v1/transactions/"+da.TransactionID, "")).TransactionID)
		require.Equal(t, db.TransactionID, rec(t, s.get(b, "/v1/transactions", "processId=pb")).TransactionID)
	})
}

func TestRoutingEnvelope(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	st := s.newSite(nil, 0)
	requireOK(t, s.send(t, "GET", "/healthz", "", nil))
	requireOK(t, s.send(t, "GET", "/readyz", "", nil))
	requireErr(t, s.send(t, "GET", "/nope", "", nil), 404, "not_found", "")
	r := s.send(t, "PUT", "/v1/balance", "", map[string]string{"appKey": st.AppKey, "sign": sign(st.Secret, nil)})
	requireErr(t, r, 405, "method_not_allowed", "")
	require.Equal(t, "GET, HEAD", r.Header.Get("Allow"))
	// The creation paths take POST only: a GET or DELETE of one is not a
	// lookup of a transaction of that name, which no id can be.
	for _, m := range []string{"GET", "DELETE"} {
		for _, path := range []string{"/v1/transactions/deposit", "/v1/transactions/withdraw"} {
			r = s.send(t, m, path, "", map[string]string{"appKey": st.AppKey, "sign": sign(st.Secret, nil)})
			requireErr(t, r, 405, "method_not_allowed", "")
			require.Equal(t, "POST", r.Header.Get("Allow"), "%s %s", m, path)
		}
	}
	// Unsigned, the credentials are checked first.
	requireErr(t, s.send(t, "GET", "/v1/transactions/deposit", "", map[string]string{"appKey": st.AppKey, "sign": sign(st.Secret, []byte("x"))}),
		401, "invalid_signature", "sign")
	r = s.send(t, "PUT", "/ops/v1/sites/"+st.ID, "", map[string]string{"Authorization": "Bearer " + adminToken})
	requireErr(t, r, 405, "method_not_allowed", "")
	require.Equal(t, "GET, HEAD, PATCH", r.Header.Get("Allow"))
	// HEAD is answered wherever GET is, without a body.
	for _, c := range []struct {
		path string
		hdr  map[string]string
	}{
		{"/healthz", nil},
		{"/v1/balance", map[string]string{"appKey": st.AppKey, "sign": sign(st.Secret, nil)}},
		{"/ops/v1/sites/" + st.ID, map[string]string{"Authorization": "Bearer " + adminToken}},
	} {
		req, err := http.NewRequest(http.MethodHead, s.URL+c.path, nil)
		require.NoError(t, err)
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 200, res.StatusCode, "HEAD %s", c.path)
		require.Empty(t, b, "HEAD %s", c.path)
	}

	// A caller's sane Request-Id is kept; an insane one is replaced.
	r = s.send(t, "GET", "/healthz", "", map[string]string{"Request-Id": "abc-123.X_y"})
	requireOK(t, r)
	require.Equal(t, "abc-123.X_y", r.RequestID)
	r = s.send(t, "GET", "/healthz", "", map[string]string{"Request-Id": "bad id/with spaces"})
	requireOK(t, r)
	require.NotEqual(t, "bad id/with spaces", r.RequestID)
}
