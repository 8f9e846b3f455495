package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"

	"github.com/stretchr/testify/require"
)

// TestInvalidRequest provokes every flavour of invalid_request on both
// create calls and checks nothing was written.
func TestInvalidRequest(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	dep := depositForm("ZAINCASH", "pid", "u1", 25000)
	wd := withdrawForm("ZAINCASH", "pid", "u1", 25000, "07712345678")

	type tc struct {
		name  string
		body  string
		field string
		ct    string // Content-Type; "" = form
	}
	var cases []struct {
		path string
		tc
	}
	add := func(path string, c tc) {
		cases = append(cases, struct {
			path string
			tc
		}{path, c})
	}
	for _, k := range []string{"bankId", "processId", "amount", "userId", "userName", "name"} {
		add(pathDeposit, tc{name: "deposit missing " + k, body: with(dep, k, nil).Encode(), field: k})
		if k != "bankId" { // a blank bankId names no method: unknown_bank
			add(pathDeposit, tc{name: "deposit blank " + k, body: with(dep, k, ptr("   ")).Encode(), field: k})
		}
	}
	for _, k := range []string{"bankId", "processId", "amount", "userId", "userName", "name", "accountName", "iban"} {
		add(pathWithdraw, tc{name: "withdraw missing " + k, body: with(wd, k, nil).Encode(), field: k})
	}
	for _, a := range []string{"25000.00", "-5", "0", "abc", "1e3", "", " 25000", "25000 ", "+25000", "0x10", "25,000",
		"٢٥٠٠٠", "99999999999999999999", "9223372036854775808"} {
		add(pathDeposit, tc{name: "deposit amount " + strconv.Quote(a), body: with(dep, "amount", &a).Encode(), field: "amount"})
		add(pathWithdraw, tc{name: "withdraw amount " + strconv.Quote(a), body: with(wd, "amount", &a).Encode(), field: "amount"})
	}
	for _, p := range []string{pathDeposit, pathWithdraw} {
		f := dep
		if p == pathWithdraw {
			f = wd
		}
		add(p, tc{name: p + " json body", body: `{"bankId":"ZAINCASH","processId":"pid","amount":25000,"userId":"u1","userName":"a","name":"b"}`,
			ct: "application/json"})
		add(p, tc{name: p + " form body labelled json", body: f.Encode(), ct: "application/json"})
		add(p, tc{name: p + " text/plain", body: f.Encode(), ct: "text/plain"})
		add(p, tc{name: p + " multipart", body: f.Encode(), ct: "multipart/form-data; boundary=x"})
		add(p, tc{name: p + " no content type", body: f.Encode(), ct: "-"})
		add(p, tc{name: p + " duplicate amount", body: f.Encode() + "&amount=25000", field: "amount"})
		add(p, tc{name: p + " duplicate processId", body: f.Encode() + "&processId=other", field: "processId"})
		add(p, tc{name: p + " bad percent encoding", body: f.Encode() + "&x=%zz"})
		add(p, tc{name: p + " empty body", body: "", field: "amount"})
		add(p, tc{name: p + " control char in name", body: with(f, "name", ptr("Ali\x00Kareem")).Encode(), field: "name"})
		add(p, tc{name: p + " invalid utf8 userName", body: with(f, "userName", ptr("a\xffb")).Encode(), field: "userName"})
		add(p, tc{name: p + " processId too long", body: with(f, "processId", ptr(strings.Repeat("p", 129))).Encode(), field: "processId"})
		add(p, tc{name: p + " name too long", body: with(f, "name", ptr(strings.Repeat("n", 257))).Encode(), field: "name"})
	}
	add(pathDeposit, tc{name: "deposit senderName control char", body: with(dep, "senderName", ptr("x\ny")).Encode(), field: "senderName"})

	before := s.eventCount(t, st.ID)
	bal := s.balanceOf(t, st)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{"appKey": st.AppKey, "sign": sign(st.Secret, []byte(c.body)),
				"Content-Type": "application/x-www-form-urlencoded"}
			switch c.ct {
			case "":
			case "-":
				delete(hdr, "Content-Type")
			default:
				hdr["Content-Type"] = c.ct
			}
			r := s.send(t, "POST", c.path, c.body, hdr)
			requireErr(t, r, 400, "invalid_request", c.field)
		})
	}
	s.unchanged(t, st, before, "pid")
	require.Equal(t, bal, s.balanceOf(t, st))

	// The same body, correctly encoded, is accepted (the cases above fail
	// for the reason they name, not something else).
	t.Run("controls", func(t *testing.T) {
		rec(t, s.post(st, pathDeposit, dep))
		rec(t, s.post(st, pathWithdraw, with(wd, "processId", ptr("pid-w"))))
		hdr := map[string]string{"appKey": st.AppKey, "Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
		body := with(dep, "processId", ptr("pid-charset")).Encode()
		hdr["sign"] = sign(st.Secret, []byte(body))
		// A second deposit of u1 answers the pending one: still a 200.
		rec(t, s.send(t, "POST", pathDeposit, body, hdr))
	})
}

func TestAmountOutOfRange(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(nil, 10_000_000)
	before := s.eventCount(t, st.ID)
	for _, a := range []int64{1, 999, 1_000_001, 5_000_000} {
		for _, p := range []string{pathDeposit, pathWithdraw} {
			t.Run(p+" "+itoa(a), func(t *testing.T) {
				f := depositForm(banks["QICARD"].ID, "oor", "u1", a)
				if p == pathWithdraw {
					f = withdrawForm("QICARD", "oor", "u1", a, "6375000012345678")
				}
				requireErr(t, s.post(st, p, f), 400, "amount_out_of_range", "amount")
			})
		}
	}
	s.unchanged(t, st, before, "oor")
	// The limits themselves are inside.
	rec(t, s.post(st, pathDeposit, depositForm("QICARD", "min", "u1", 1000)))
	rec(t, s.post(st, pathDeposit, depositForm("QICARD", "max", "u2", 1_000_000)))
	rec(t, s.post(st, pathWithdraw, withdrawForm("QICARD", "wmin", "u3", 1000, "6375000012345678")))
	rec(t, s.post(st, pathWithdraw, withdrawForm("QICARD", "wmax", "u3", 1_000_000, "6375000012345678")))

	// Limits changed by an operator apply at once.
	requireOK(t, s.ops("PATCH", "/ops/v1/banks/QICARD", map[string]any{"minAmount": 5000, "maxAmount": 6000}))
	requireErr(t, s.post(st, pathDeposit, depositForm("QICARD", "p2", "u9", 4999)), 400, "amount_out_of_range", "amount")
	requireErr(t, s.post(st, pathDeposit, depositForm("QICARD", "p3", "u9", 6001)), 400, "amount_out_of_range", "amount")
	rec(t, s.post(st, pathDeposit, depositForm("QICARD", "p4", "u9", 6000)))
}

func TestUnknownBank(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	mk := func(code string, dep, wd bool) bank {
		body := map[string]any{"code": code, "name": map[string]string{"en": code}, "identifierKind": "PHONE",
			"minAmount": 1000, "maxAmount": 100000, "deposit": dep, "withdraw": wd}
		if dep {
			body["accounts"] = []map[string]string{{"accountName": "Y", "accountNumber": "07711111111"}}
		}
		r := s.ops("POST", "/ops/v1/banks", body)
		requireOK(t, r)
		var b bank
		r.decode(t, &b)
		return b
	}
	depOnly := mk("DEPONLY", true, false)
	wdOnly := mk("WDONLY", false, true)
	st := s.newSite(nil, 10_000_000)

	// Disable a seeded method through the operator API.
	r := s.ops("PATCH", "/ops/v1/banks/"+banks["RAFIDAIN"].ID, map[string]any{"enabled": false})
	requireOK(t, r)
	require.Equal(t, false, decodeAny(t, r)["enabled"])

	cases := []struct {
		name, path, ref string
	}{
		{"unknown code deposit", pathDeposit, "NOPE"},
		{"unknown code withdraw", pathWithdraw, "NOPE"},
		{"unknown id deposit", pathDeposit, "0123456789abcdef01234567"},
		{"lower-case code", pathDeposit, "zaincash"},
		{"disabled by code deposit", pathDeposit, "RAFIDAIN"},
		{"disabled by id deposit", pathDeposit, banks["RAFIDAIN"].ID},
		{"disabled by code withdraw", pathWithdraw, "RAFIDAIN"},
		{"deposit-only used for withdraw (code)", pathWithdraw, "DEPONLY"},
		{"deposit-only used for withdraw (id)", pathWithdraw, depOnly.ID},
		{"withdraw-only used for deposit", pathDeposit, wdOnly.ID},
	}
	before := s.eventCount(t, st.ID)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := depositForm(c.ref, "ub", "u1", 5000)
			if c.path == pathWithdraw {
				f = withdrawForm(c.ref, "ub", "u1", 5000, "07712345678")
			}
			r := s.post(st, c.path, f)
			requireErr(t, r, 400, "unknown_bank", "bankId")
			// The answer names the methods this kind can use.
			if c.path == pathWithdraw {
				require.Contains(t, r.Message, "the enabled withdrawal methods are ZAINCASH, QICARD, NBI, GAMEWALLET, WDONLY")
			} else {
				require.Contains(t, r.Message, "the enabled deposit methods are ZAINCASH, QICARD, NBI, GAMEWALLET, DEPONLY")
			}
			_, listed, _ := strings.Cut(r.Message, "; the enabled")
			require.NotContains(t, listed, "RAFIDAIN", "disabled")
		})
	}
	s.unchanged(t, st, before, "ub")

	// The right way round, they work; re-enabled, RAFIDAIN works again.
	rec(t, s.post(st, pathDeposit, depositForm("DEPONLY", "ok1", "u1", 5000)))
	rec(t, s.post(st, pathWithdraw, withdrawForm("WDONLY", "ok2", "u1", 5000, "07712345678")))
	requireOK(t, s.ops("PATCH", "/ops/v1/banks/RAFIDAIN", map[string]any{"enabled": true}))
	rec(t, s.post(st, pathDeposit, depositForm("RAFIDAIN", "ok3", "u2", 5000)))
}

func TestInvalidIdentifier(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 100_000_000)
	validIBAN := iraqiIBAN("NBIQ", "850123456789012")
	require.Equal(t, "IQ98NBIQ850123456789012", validIBAN, "the published example IBAN")
	otherIBAN := iraqiIBAN("RAFB", "000000000000001")
	badCheck := validIBAN[:2] + "97" + validIBAN[4:]
	cases := []struct {
		bank    string
		valid   []string
		invalid []string
	}{
		{"ZAINCASH",
			[]string{"07712345678", "07000000000", "07999999999"},
			[]string{"0771234567", "077123456789", "08712345678", "7712345678", "+9647712345678", "9647712345678",
				"0771234567a", "077 1234567", "0771-234567", "٠٧٧١٢٣٤٥٦٧٨", " 07712345678", "07712345678 ", "ab"}},
		{"QICARD",
			[]string{"1234567890", "1234567890123456789", "6375000012345678"},
			[]string{"123456789", "12345678901234567890", "6375-0000-1234-5678", "6375 0000 1234 5678", "637500001234567x",
				"١٢٣٤٥٦٧٨٩٠"}},
		{"RAFIDAIN",
			[]string{"123456", "12345678901234567890", "000000"},
			[]string{"12345", "123456789012345678901", "12345a", "-123456", "123 456"}},
		{"NBI",
			[]string{validIBAN, otherIBAN},
			[]string{badCheck, strings.ToLower(validIBAN), "iq98NBIQ850123456789012", "IQ98 NBIQ 8501 2345 6789 012",
				"DE89370400440532013000", "GB82WEST12345698765432", validIBAN[:22], validIBAN + "0", "IQ98NBI1850123456789012",
				"IQ98nbiq850123456789012", "IQ98NBIQ85012345678901X"}},
		{"GAMEWALLET",
			[]string{"abc", "a.b_c-d", "Player.One_2-X", strings.Repeat("z", 64), "123"},
			[]string{"ab", strings.Repeat("z", 65), "bad name", "user@x", "üser", "a/b", "a+b", "عليعلي", "a\tb"}},
	}
	n := 0
	for _, c := range cases {
		for _, id := range c.invalid {
			t.Run(c.bank+" invalid "+strconv.Quote(id), func(t *testing.T) {
				pid := "bad-" + strconv.Itoa(n)
				n++
				before := s.eventCount(t, st.ID)
				r := s.post(st, pathWithdraw, withdrawForm(c.bank, pid, "u1", 1000, id))
				if strings.TrimSpace(id) == "" {
					requireErr(t, r, 400, "invalid_request", "iban")
					return
				}
				requireErr(t, r, 400, "invalid_identifier", "iban")
				require.Contains(t, r.Message, "must be", "message names the expected format")
				s.unchanged(t, st, before, pid)
			})
		}
		for _, id := range c.valid {
			t.Run(c.bank+" valid "+strconv.Quote(id), func(t *testing.T) {
				pid := "ok-" + strconv.Itoa(n)
				n++
				d := rec(t, s.post(st, pathWithdraw, withdrawForm(c.bank, pid, "u1", 1000, id)))
				require.Equal(t, id, d.IBAN, "the identifier is stored exactly as sent")
			})
		}
	}
	// Messages name the kind's format.
	r := s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "m1", "u1", 1000, "123"))
	requireErr(t, r, 400, "invalid_identifier", "iban")
	require.Contains(t, r.Message, "07")
	r = s.post(st, pathWithdraw, withdrawForm("QICARD", "m2", "u1", 1000, "123"))
	require.Contains(t, r.Message, "10 to 19 digits")
}

func TestInvalidSignature(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	other := s.newSite(nil, 0)
	body := depositForm("ZAINCASH", "sig", "u1", 25000).Encode()
	good := sign(st.Secret, []byte(body))
	raw, _ := base64.StdEncoding.DecodeString(good)
	flipped := append([]byte(nil), raw...)
	flipped[0] ^= 1
	random := make([]byte, 32)
	_, _ = rand.Read(random)
	form := "application/x-www-form-urlencoded"

	type req struct {
		name, method, path, body, query string
		sign                            *string // nil: header absent
	}
	cases := []req{
		{"missing sign", "POST", pathDeposit, body, "", nil},
		{"empty sign", "POST", pathDeposit, body, "", ptr("")},
		{"garbage sign", "POST", pathDeposit, body, "", ptr("!!!not base64!!!")},
		{"random sign", "POST", pathDeposit, body, "", ptr(base64.StdEncoding.EncodeToString(random))},
		{"one bit flipped", "POST", pathDeposit, body, "", ptr(base64.StdEncoding.EncodeToString(flipped))},
		{"truncated mac", "POST", pathDeposit, body, "", ptr(base64.StdEncoding.EncodeToString(raw[:31]))},
		{"hex instead of base64", "POST", pathDeposit, body, "", ptr(strings.Repeat("ab", 32))},
		{"another site's secret", "POST", pathDeposit, body, "", ptr(sign(other.Secret, []byte(body)))},
		{"appKey as secret", "POST", pathDeposit, body, "", ptr(sign(st.AppKey, []byte(body)))},
		{"body altered after signing", "POST", pathDeposit, strings.Replace(body, "25000", "26000", 1), "", ptr(good)},
		{"body extended after signing", "POST", pathDeposit, body + "&lang=ar", "", ptr(good)},
		{"signed over decoded form", "POST", pathDeposit, body + "&name2=a+b", "", ptr(sign(st.Secret, []byte(body+"&name2=a b")))},
		{"withdraw wrong sign", "POST", pathWithdraw, withdrawForm("ZAINCASH", "sig", "u1", 1000, "07712345678").Encode(), "", ptr(good)},
		{"GET query altered", "GET", "/v1/transactions", "", "processId=b", ptr(sign(st.Secret, []byte("processId=a")))},
		{"GET signed over path", "GET", "/v1/balance", "", "", ptr(sign(st.Secret, []byte("/v1/balance")))},
		{"GET signed with ? prefix", "GET", "/v1/transactions", "", "processId=a", ptr(sign(st.Secret, []byte("?processId=a")))},
		{"GET banks other secret", "GET", "/v1/banks", "", "type=deposit", ptr(sign(other.Secret, []byte("type=deposit")))},
		{"GET missing sign", "GET", "/v1/balance", "", "", nil},
	}
	before := s.eventCount(t, st.ID)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{"appKey": st.AppKey}
			if c.method == "POST" {
				hdr["Content-Type"] = form
			}
			if c.sign != nil {
				hdr["sign"] = *c.sign
			}
			p := c.path
			if c.query != "" {
				p += "?" + c.query
			}
			requireErr(t, s.send(t, c.method, p, c.body, hdr), 401, "invalid_signature", "sign")
		})
	}
	s.unchanged(t, st, before, "sig")

	// Encodings of the right MAC that the server accepts.
	for name, sg := range map[string]string{
		"std":       good,
		"raw std":   strings.TrimRight(good, "="),
		"url":       base64.URLEncoding.EncodeToString(raw),
		"raw url":   base64.RawURLEncoding.EncodeToString(raw),
		"GET empty": sign(st.Secret, nil),
	} {
		t.Run("accepted "+name, func(t *testing.T) {
			if name == "GET empty" {
				requireOK(t, s.send(t, "GET", "/v1/balance", "", map[string]string{"appKey": st.AppKey, "sign": sg}))
				return
			}
			rec(t, s.send(t, "POST", pathDeposit, body, map[string]string{"appKey": st.AppKey, "Content-Type": form, "sign": sg}))
		})
	}
}

func TestUnknownAppKey(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	body := depositForm("ZAINCASH", "ak", "u1", 25000).Encode()
	sg := sign(st.Secret, []byte(body))
	cases := []struct {
		name   string
		appKey *string
		method string
	}{
		{"missing", nil, "POST"},
		{"empty", ptr(""), "POST"},
		{"unknown", ptr("ak_doesnotexist"), "POST"},
		{"secret as appKey", ptr(st.Secret), "POST"},
		{"site id as appKey", ptr(st.ID), "POST"},
		{"case changed", ptr(strings.ToUpper(st.AppKey)), "POST"},
		{"GET missing", nil, "GET"},
		{"GET unknown", ptr("ak_nope"), "GET"},
	}
	before := s.eventCount(t, st.ID)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{"sign": sg, "Content-Type": "application/x-www-form-urlencoded"}
			if c.appKey != nil {
				hdr["appKey"] = *c.appKey
			}
			var r resp
			if c.method == "GET" {
				hdr["sign"] = sign(st.Secret, nil)
				r = s.send(t, "GET", "/v1/balance", "", hdr)
			} else {
				r = s.send(t, "POST", pathDeposit, body, hdr)
			}
			requireErr(t, r, 401, "unknown_app_key", "appKey")
		})
	}
	s.unchanged(t, st, before, "ak")
}

func TestIPAllowlist(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	blocked := s.newSite(map[string]any{"ipAllowlist": []string{"10.0.0.0/8"}}, 1_000_000)
	allowed := s.newSite(map[string]any{"ipAllowlist": []string{"192.0.2.0/24", "127.0.0.1/32"}}, 1_000_000)
	single := s.newSite(map[string]any{"ipAllowlist": []string{"127.0.0.1"}}, 1_000_000)
	// A transaction of the blocked site, created before it had a list.
	open := s.newSite(nil, 1_000_000)
	dOpen := rec(t, s.post(open, pathDeposit, depositForm("ZAINCASH", "pre", "u1", 25000)))
	requireOK(t, s.ops("PATCH", "/ops/v1/sites/"+open.ID, map[string]any{"ipAllowlist": []string{"10.0.0.0/8"}}))

	calls := []struct {
		name string
		call func(t *testing.T, st site, hdr map[string]string) resp
	}{
		{"deposit", func(t *testing.T, st site, hdr map[string]string) resp {
			return postWithHeaders(t, s, st, pathDeposit, depositForm(banks["ZAINCASH"].ID, "ip-d", "u2", 25000), hdr)
		}},
		{"withdraw", func(t *testing.T, st site, hdr map[string]string) resp {
			return postWithHeaders(t, s, st, pathWithdraw, withdrawForm("ZAINCASH", "ip-w", "u2", 25000, "07712345678"), hdr)
		}},
		{"banks", func(t *testing.T, st site, hdr map[string]string) resp {
			return getWithHeaders(t, s, st, "/v1/banks", "type=deposit", hdr)
		}},
		{"balance", func(t *testing.T, st site, hdr map[string]string) resp {
			return getWithHeaders(t, s, st, "/v1/balance", "", hdr)
		}},
		{"by processId", func(t *testing.T, st site, hdr map[string]string) resp {
			return getWithHeaders(t, s, st, "/v1/transactions", "processId=pre", hdr)
		}},
		{"by id", func(t *testing.T, st site, hdr map[string]string) resp {
			return getWithHeaders(t, s, st, "/v1/transactions/"+dOpen.TransactionID, "", hdr)
		}},
	}
	for _, st := range []site{blocked, open} {
		before := s.eventCount(t, st.ID)
		for _, c := range calls {
			t.Run("refused "+c.name, func(t *testing.T) {
				requireErr(t, c.call(t, st, nil), 403, "not_authorized", "")
			})
			t.Run("X-Forwarded-For from untrusted peer ignored "+c.name, func(t *testing.T) {
				requireErr(t, c.call(t, st, map[string]string{"X-Forwarded-For": "10.1.2.3"}), 403, "not_authorized", "")
			})
		}
		s.unchanged(t, st, before, "")
	}
	// The allowlist is checked before the signature: a caller outside it
	// learns nothing about its signing.
	r := s.send(t, "GET", "/v1/balance", "", map[string]string{"appKey": blocked.AppKey, "sign": "wrong"})
	requireErr(t, r, 403, "not_authorized", "")

	for _, st := range []site{allowed, single} {
		for _, c := range calls[:4] {
			t.Run("allowed "+c.name, func(t *testing.T) {
				requireOK(t, c.call(t, st, map[string]string{"X-Forwarded-For": "203.0.113.9"}))
			})
		}
	}

	// A stack that trusts loopback proxies believes X-Forwarded-For.
	trusted := e.newStack(stackOptions{trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	waitSite(t, trusted, blocked)
	waitSite(t, trusted, allowed)
	tcases := []struct {
		name, xff string
		ok        bool
	}{
		{"client in list", "10.1.2.3", true},
		{"client in list after a trusted hop", "10.1.2.3, 127.0.0.5", true},
		{"spoofed left-most ignored", "10.9.9.9, 203.0.113.7", false},
		{"client outside list", "192.168.1.1", false},
		{"no header: the trusted peer itself", "", false},
		{"ipv6 client", "2001:db8::1", false},
		{"ipv4-mapped ipv6 in list", "::ffff:10.1.2.3", true},
	}
	for _, c := range tcases {
		for _, call := range calls[:4] {
			t.Run("trusted proxy "+c.name+" "+call.name, func(t *testing.T) {
				hdr := map[string]string{}
				if c.xff != "" {
					hdr["X-Forwarded-For"] = c.xff
				}
				// Calls go to the trusted stack.
				r := callOn(t, trusted, call.name, blocked, banks, hdr)
				if c.ok {
					requireOK(t, r)
				} else {
					requireErr(t, r, 403, "not_authorized", "")
				}
			})
		}
	}
}

// callOn repeats the allowlist calls against another stack.
func callOn(t *testing.T, s *stack, name string, st site, banks map[string]bank, hdr map[string]string) resp {
	t.Helper()
	switch name {
	case "deposit":
		return postWithHeaders(t, s, st, pathDeposit, depositForm(banks["ZAINCASH"].ID, "tp-d", "u2", 25000), hdr)
	case "withdraw":
		return postWithHeaders(t, s, st, pathWithdraw, withdrawForm("ZAINCASH", "tp-w", "u2", 25000, "07712345678"), hdr)
	case "banks":
		return getWithHeaders(t, s, st, "/v1/banks", "type=deposit", hdr)
	default:
		return getWithHeaders(t, s, st, "/v1/balance", "", hdr)
	}
}

func postWithHeaders(t *testing.T, s *stack, st site, path string, f url.Values, extra map[string]string) resp {
	t.Helper()
	body := f.Encode()
	hdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "appKey": st.AppKey, "sign": sign(st.Secret, []byte(body))}
	for k, v := range extra {
		hdr[k] = v
	}
	return s.send(t, "POST", path, body, hdr)
}

func getWithHeaders(t *testing.T, s *stack, st site, path, query string, extra map[string]string) resp {
	t.Helper()
	hdr := map[string]string{"appKey": st.AppKey, "sign": sign(st.Secret, []byte(query))}
	for k, v := range extra {
		hdr[k] = v
	}
	p := path
	if query != "" {
		p += "?" + query
	}
	return s.send(t, "GET", p, "", hdr)
}

// waitSite waits until stack s has followed the site's creation (its
// appKey is known there) and catches its state up with the stream.
func waitSite(t testing.TB, s *stack, st site) {
	t.Helper()
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		_, _, ok := s.Ledger.SiteByAppKey(st.AppKey)
		return ok
	}, "site %s reaches the other stack", st.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Ledger.Read(ctx, ids.SiteID(st.ID), ledger.Fresh, nil))
}

func TestProcessIDConflict(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(nil, 10_000_000)
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "p1", "u1", 25000)))
	w := rec(t, s.post(st, pathWithdraw, withdrawForm("QICARD", "p2", "u7", 5000, "6375000012345678")))
	before := s.eventCount(t, st.ID)
	bal := s.balanceOf(t, st)
	cases := []struct {
		name, path string
		form       url.Values
	}{
		{"deposit different amount", pathDeposit, depositForm("ZAINCASH", "p1", "u1", 25001)},
		{"deposit different bank", pathDeposit, depositForm("QICARD", "p1", "u1", 25000)},
		{"deposit different userId", pathDeposit, depositForm("ZAINCASH", "p1", "u2", 25000)},
		{"deposit processId used as withdrawal", pathWithdraw, withdrawForm("ZAINCASH", "p1", "u1", 25000, "07712345678")},
		{"withdrawal different amount", pathWithdraw, withdrawForm("QICARD", "p2", "u7", 5001, "6375000012345678")},
		{"withdrawal different bank", pathWithdraw, withdrawForm("ZAINCASH", "p2", "u7", 5000, "07712345678")},
		{"withdrawal different userId", pathWithdraw, withdrawForm("QICARD", "p2", "u8", 5000, "6375000012345678")},
		{"withdrawal processId used as deposit", pathDeposit, depositForm("QICARD", "p2", "u7", 5000)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireErr(t, s.post(st, c.path, c.form), 409, "process_id_conflict", "processId")
		})
	}
	require.Equal(t, before, s.eventCount(t, st.ID))
	require.Equal(t, bal, s.balanceOf(t, st))

	// Not conflicts: the same method by _id instead of code, other
	// descriptive fields changed. The stored transaction is answered as is.
	t.Run("same bank by _id", func(t *testing.T) {
		d2 := rec(t, s.post(st, pathDeposit, depositForm(banks["ZAINCASH"].ID, "p1", "u1", 25000)))
		require.Equal(t, d, d2)
	})
	t.Run("different name and userName", func(t *testing.T) {
		f := depositForm("ZAINCASH", "p1", "u1", 25000)
		f.Set("name", "Somebody Else")
		f.Set("userName", "other")
		f.Set("lang", "ar")
		d2 := rec(t, s.post(st, pathDeposit, f))
		require.Equal(t, d, d2, "the stored transaction, not the new fields")
	})
	t.Run("withdrawal different iban", func(t *testing.T) {
		w2 := rec(t, s.post(st, pathWithdraw, withdrawForm("QICARD", "p2", "u7", 5000, "1111222233334444")))
		require.Equal(t, w, w2)
	})
	require.Equal(t, before, s.eventCount(t, st.ID))
	require.Equal(t, bal, s.balanceOf(t, st))
}

func TestInsufficientSiteBalance(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	// available = 50 000 − (−10 000) = 60 000; the withdrawal must leave
	// balance − pending − amount ABOVE −10 000.
	st := s.newSite(map[string]any{"negativeLimit": -10_000}, 50_000)
	before := s.eventCount(t, st.ID)
	r := s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "edge", "u1", 60_000, "07712345678"))
	requireErr(t, r, 402, "insufficient_site_balance", "amount")
	s.unchanged(t, st, before, "edge")
	require.Equal(t, balance{Balance: 50_000, NegativeLimit: -10_000, Available: 60_000, Currency: "IQD"}, s.balanceOf(t, st))

	w := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "fits", "u1", 59_999, "07712345678")))
	require.Equal(t, int64(59_999), w.Amount)
	require.Equal(t, balance{Balance: 50_000, PendingWithdrawals: 59_999, NegativeLimit: -10_000, Available: 1, Currency: "IQD"},
		s.balanceOf(t, st))

	// Pending withdrawals count: nothing more fits.
	before = s.eventCount(t, st.ID)
	requireErr(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "more", "u2", 1000, "07712345678")), 402, "insufficient_site_balance", "amount")
	s.unchanged(t, st, before, "more")

	// A repeat of the accepted one is still answered (no new reservation).
	require.Equal(t, w, rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "fits", "u1", 59_999, "07712345678"))))

	// A site with limit 0 refuses a withdrawal of its whole balance.
	zero := s.newSite(nil, 5000)
	requireErr(t, s.post(zero, pathWithdraw, withdrawForm("ZAINCASH", "all", "u1", 5000, "07712345678")), 402, "insufficient_site_balance", "amount")
	rec(t, s.post(zero, pathWithdraw, withdrawForm("ZAINCASH", "almost", "u1", 4999, "07712345678")))
	// An unfunded site refuses everything.
	empty := s.newSite(nil, 0)
	requireErr(t, s.post(empty, pathWithdraw, withdrawForm("ZAINCASH", "x", "u1", 1000, "07712345678")), 402, "insufficient_site_balance", "amount")
}

func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	// lang pads the form: a value it does not know means English.
	base := depositForm("ZAINCASH", "big", "u1", 25000).Encode() + "&lang="
	padded := func(total int) string { return base + strings.Repeat("x", total-len(base)) }
	before := s.eventCount(t, st.ID)
	for _, chunked := range []bool{false, true} {
		for _, path := range []string{pathDeposit, pathWithdraw} {
			name := path
			if chunked {
				name += " chunked"
			}
			t.Run(name, func(t *testing.T) {
				body := padded(16<<10 + 1)
				var rd io.Reader = strings.NewReader(body)
				if chunked {
					rd = io.MultiReader(rd) // unknown length: sent chunked
				}
				req, err := http.NewRequest("POST", s.URL+path, rd)
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("appKey", st.AppKey)
				req.Header.Set("sign", sign(st.Secret, []byte(body)))
				requireErr(t, do(t, req), 413, "body_too_large", "")
			})
		}
	}
	s.unchanged(t, st, before, "big")
	// Exactly 16 KiB is accepted.
	body := padded(16 << 10)
	require.Len(t, body, 16384)
	d := rec(t, s.postRaw(st, pathDeposit, body, nil))
	require.Equal(t, "big", d.ProcessID)
	// The operator API has the same limit.
	huge := `{"name":"` + strings.Repeat("n", 16<<10) + `"}`
	requireErr(t, s.send(t, "POST", "/ops/v1/sites", huge, map[string]string{"Authorization": "Bearer " + adminToken,
		"Content-Type": "application/json"}), 413, "body_too_large", "")
}

func TestRateLimited(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	// rateLimit 1 → burst 2. Requests here take milliseconds; should a
	// very slow machine spend most of a second on three of them, the
	// bucket refills and the round is repeated with a fresh site.
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 5, "could not send three requests within a second")
		st := s.newSite(map[string]any{"rateLimit": 1}, 1_000_000)
		before := s.eventCount(t, st.ID)
		// Requests refused before the limiter do not use tokens.
		for i := 0; i < 4; i++ {
			requireErr(t, s.send(t, "GET", "/v1/balance", "", map[string]string{"appKey": st.AppKey, "sign": "bad"}),
				401, "invalid_signature", "sign")
		}
		start := time.Now()
		r1 := s.get(st, "/v1/balance", "")
		r2 := s.post(st, pathDeposit, depositForm("ZAINCASH", "rl-1", "u1", 25000))
		r3 := s.post(st, pathDeposit, depositForm("ZAINCASH", "rl-2", "u2", 25000))
		if time.Since(start) > 800*time.Millisecond {
			continue
		}
		requireOK(t, r1)
		requireOK(t, r2)
		requireErr(t, r3, 429, "rate_limited", "")
		ra, err := strconv.Atoi(r3.Header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After %q", r3.Header.Get("Retry-After"))
		require.GreaterOrEqual(t, ra, 1)
		// Nothing of the refused deposit was written (checked through the
		// operator API, which the site's limit does not cover).
		require.Equal(t, before+1, s.eventCount(t, st.ID))
		r := s.opsT(t, "GET", "/ops/v1/transactions?site="+st.ID, nil)
		requireOK(t, r)
		var p page[record]
		r.decode(t, &p)
		require.Len(t, p.Items, 1)
		require.Equal(t, "rl-1", p.Items[0].ProcessID)
		// Another site is not affected.
		other := s.newSite(nil, 0)
		requireOK(t, s.get(other, "/v1/balance", ""))
		// After Retry-After the site may call again.
		time.Sleep(time.Duration(ra) * time.Second)
		requireOK(t, s.get(st, "/v1/transactions", "processId=rl-1"))
		return
	}
}

// TestUnavailable: when the event store cannot be reached, creates answer
// 503 unavailable and nothing is recorded.
func TestUnavailable(t *testing.T) {
	e := newEnv(t)
	// Every request refused while the store cannot be reached.
	e.log.ExpectErrors("status=503 code=unavailable")
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "before", "u0", 25000)))

	t.Run("store connection lost", func(t *testing.T) {
		broken := e.newStack(stackOptions{})
		waitSite(t, broken, st)
		before := s.eventCount(t, st.ID)
		broken.closeConn()
		cases := []struct {
			name, path string
			form       url.Values
		}{
			{"deposit", pathDeposit, depositForm(banks["ZAINCASH"].ID, "u-dep", "u1", 25000)},
			{"withdraw", pathWithdraw, withdrawForm("ZAINCASH", "u-wd", "u1", 25000, "07712345678")},
		}
		for _, c := range cases {
			requireErr(t, broken.postT(t, st, c.path, c.form), 503, "unavailable", "")
		}
		requireErr(t, broken.getT(t, st, "/v1/balance", ""), 503, "unavailable", "")
		requireErr(t, broken.getT(t, st, "/v1/transactions", "processId=before"), 503, "unavailable", "")
		requireErr(t, broken.send(t, "GET", "/readyz", "", nil), 503, "unavailable", "")
		// The healthy stack on the same store saw nothing.
		s.unchanged(t, st, before, "u-dep")
		s.unchanged(t, st, before, "u-wd")
		require.Equal(t, balance{Balance: 1_000_000, Available: 1_000_000, Currency: "IQD"}, s.balanceOf(t, st))
	})

	t.Run("ledger closed", func(t *testing.T) {
		before := s.eventCount(t, st.ID)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Ledger.Close(ctx))
		requireErr(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "closed", "u2", 25000)), 503, "unavailable", "")
		requireErr(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "closed-w", "u2", 25000, "07712345678")), 503, "unavailable", "")
		requireErr(t, s.ops("POST", "/ops/v1/sites/"+st.ID+"/adjustments", map[string]any{"amount": 5, "reason": "x"}), 503, "unavailable", "")
		s.unchanged(t, st, before, "closed")
		s.unchanged(t, st, before, "closed-w")
	})
}

// TestInvalidRequest_encodingAndNamelessParameters: a body in a
// Content-Encoding is refused naming the header (it would be read as the
// encoded bytes), and a parameter without a name is malformed form
// encoding, not a field of an empty name; nothing is written.
func TestInvalidRequest_encodingAndNamelessParameters(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	before := s.eventCount(t, st.ID)
	dep := depositForm("ZAINCASH", "enc-1", "u1", 25000).Encode()

	for _, ce := range []string{"gzip", "deflate", "GZIP", "br"} {
		r := s.postRaw(st, pathDeposit, dep, map[string]string{"Content-Encoding": ce})
		requireErr(t, r, 400, "invalid_request", "Content-Encoding")
	}
	requireOK(t, s.postRaw(st, pathDeposit, dep, map[string]string{"Content-Encoding": "identity"}))
	before++
	r := s.send(t, "POST", "/ops/v1/sites/"+st.ID+"/adjustments", `{"amount":5,"reason":"enc"}`,
		map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json", "Content-Encoding": "gzip"})
	requireErr(t, r, 400, "invalid_request", "Content-Encoding")

	for _, body := range []string{dep + "&=x", "=x&" + dep, dep + "&="} {
		r := s.postRaw(st, pathDeposit, body, nil)
		requireErr(t, r, 400, "invalid_request", "")
		require.Contains(t, r.Message, "without a name")
	}
	r = s.get(st, "/v1/transactions", "processId=enc-1&=x")
	requireErr(t, r, 400, "invalid_request", "")
	require.Contains(t, r.Message, "without a name")
	require.Equal(t, before, s.eventCount(t, st.ID))
}
