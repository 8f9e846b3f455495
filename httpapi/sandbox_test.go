package httpapi_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/internal/testkit"
)

// TestSandbox: a sandbox site's merchant moves its own transactions
// through signed calls; everything of it is marked sandbox; a live site's
// merchant cannot use those calls, and a sandbox merchant cannot reach a
// live site's transactions.
func TestSandbox(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 200)
	sb := s.newSite(map[string]any{"name": "Sandbox Shop", "sandbox": true, "callbackUrl": rcv.url()}, 1_000_000)
	live := s.newSite(nil, 1_000_000)
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")

	require.Equal(t, true, decodeAny(t, s.ops("GET", "/ops/v1/sites/"+sb.ID, nil))["sandbox"])
	require.Equal(t, false, decodeAny(t, s.ops("GET", "/ops/v1/sites/"+live.ID, nil))["sandbox"])
	requireErr(t, s.ops("PATCH", "/ops/v1/sites/"+live.ID, map[string]any{"sandbox": true}), 400, "invalid_request", "sandbox")
	requireErr(t, s.ops("PATCH", "/ops/v1/sites/"+sb.ID, map[string]any{"sandbox": false}), 400, "invalid_request", "sandbox")

	// Every record of the sandbox says so; a live one has no such field.
	r := s.post(sb, pathDeposit, depositForm("ZAINCASH", "sb-1", "u1", 25000))
	require.Contains(t, string(r.Raw), `"sandbox":true}`)
	d1 := rec(t, r)
	require.NotContains(t, string(s.post(live, pathDeposit, depositForm("ZAINCASH", "lv-1", "u1", 25000)).Raw), "sandbox")
	liveDep := rec(t, s.get(live, "/v1/transactions", "processId=lv-1"))

	act := func(st site, path string, form url.Values) resp {
		if form == nil {
			form = url.Values{}
		}
		return s.post(st, "/v1/sandbox/"+path, form)
	}
	got := rec(t, act(sb, "deposits/"+d1.TransactionID+"/approve", url.Values{"amount": {"24000"}}))
	require.Equal(t, "approved", got.Status)
	require.Equal(t, int64(24000), got.Amount)
	items := s.history(t, sb.ID)
	require.Equal(t, "deposit.approved.v1", items[len(items)-1].Name)
	require.Equal(t, "merchant", items[len(items)-1].Actor)
	// Its callback says sandbox too.
	calls := rcv.waitCalls(t, d1.TransactionID, 1)
	require.Contains(t, string(calls[0].Body), `"sandbox":true`)

	d2 := rec(t, s.post(sb, pathDeposit, depositForm("ZAINCASH", "sb-2", "u2", 5000)))
	require.Equal(t, "rejected", rec(t, act(sb, "deposits/"+d2.TransactionID+"/reject", url.Values{"reason": {"wrong amount"}})).Status)
	d3 := rec(t, s.post(sb, pathDeposit, depositForm("ZAINCASH", "sb-3", "u3", 5000)))
	require.Equal(t, "expired", rec(t, act(sb, "deposits/"+d3.TransactionID+"/expire", nil)).Status, "expired now, before its expiresAt")
	w1 := rec(t, s.post(sb, pathWithdraw, withdrawForm("ZAINCASH", "sbw-1", "u4", 10000, "07712345678")))
	require.Equal(t, "processing", rec(t, act(sb, "withdrawals/"+w1.TransactionID+"/process", nil)).Status)
	require.Equal(t, "paid", rec(t, act(sb, "withdrawals/"+w1.TransactionID+"/pay", url.Values{"reference": {"T-1"}})).Status)
	w2 := rec(t, s.post(sb, pathWithdraw, withdrawForm("ZAINCASH", "sbw-2", "u5", 10000, "07712345678")))
	require.Equal(t, "rejected", rec(t, act(sb, "withdrawals/"+w2.TransactionID+"/reject", nil)).Status)
	require.Equal(t, int64(1_000_000+24000-10000), s.balanceOf(t, sb).Balance)

	// The state machine holds in the sandbox too.
	requireErr(t, act(sb, "deposits/"+d1.TransactionID+"/reject", nil), 409, "invalid_transition", "")
	requireErr(t, act(sb, "withdrawals/"+w1.TransactionID+"/pay", nil), 409, "invalid_transition", "")
	requireErr(t, act(sb, "deposits/"+d1.TransactionID+"/approve", url.Values{"amount": {"-5"}}), 400, "invalid_request", "amount")
	for _, amt := range []string{"", "+5", " 5", "0x10", "1_000", "5.0", "00000000000000000005"} {
		requireErr(t, act(sb, "deposits/"+d1.TransactionID+"/approve", url.Values{"amount": {amt}}), 400, "invalid_request", "amount")
	}
	requireErr(t, act(sb, "deposits/"+d1.TransactionID+"/approve", url.Values{"currency": {"IQD"}}), 400, "invalid_request", "currency")
	requireErr(t, act(sb, "deposits/"+sb.ID+"-999/approve", nil), 404, "not_found", "")

	// A live site's merchant is refused; a sandbox merchant cannot reach
	// a live site's transaction; nothing changes.
	before := s.eventCount(t, live.ID)
	for _, path := range []string{"deposits/" + liveDep.TransactionID + "/approve", "deposits/" + liveDep.TransactionID + "/expire",
		"withdrawals/" + liveDep.TransactionID + "/process"} {
		r := act(live, path, nil)
		requireErr(t, r, 403, "forbidden", "")
		require.True(t, strings.Contains(r.Message, "not a sandbox site"))
		requireErr(t, act(sb, path, nil), 404, "not_found", "")
	}
	require.Equal(t, before, s.eventCount(t, live.ID))
	require.Equal(t, "pending", rec(t, s.get(live, "/v1/transactions/"+liveDep.TransactionID, "")).Status)

	// No operator moves a sandbox transaction: paying a test withdrawal
	// would send real money.
	d4 := rec(t, s.post(sb, pathDeposit, depositForm("ZAINCASH", "sb-4", "u6", 5000)))
	w3 := rec(t, s.post(sb, pathWithdraw, withdrawForm("ZAINCASH", "sbw-3", "u7", 10000, "07712345678")))
	before = s.eventCount(t, sb.ID)
	for _, path := range []string{"deposits/" + d4.TransactionID + "/approve", "deposits/" + d4.TransactionID + "/reject",
		"withdrawals/" + w3.TransactionID + "/process", "withdrawals/" + w3.TransactionID + "/reject"} {
		r := s.ops("POST", "/ops/v1/"+path, map[string]any{})
		requireErr(t, r, 409, "invalid_transition", "")
		require.Contains(t, r.Message, "sandbox")
	}
	require.Equal(t, before, s.eventCount(t, sb.ID))

	// The operator API shows them as sandbox.
	l := s.opsList(t, "site="+sb.ID, 100)
	require.NotEmpty(t, l)
	raw := s.ops("GET", "/ops/v1/transactions/"+d1.TransactionID, nil)
	require.Contains(t, string(raw.Raw), `"sandbox":true`)
}

// TestSandbox_actionTexts: a rejection's reason and a payment's reference
// are texts like any other, from a sandbox merchant's form or an
// operator's body: one with a NUL, an escape sequence or bytes that are
// not UTF-8 is refused naming the field, and nothing is recorded.
func TestSandbox_actionTexts(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	sb := s.newSite(map[string]any{"sandbox": true}, 1_000_000)
	d := rec(t, s.post(sb, pathDeposit, depositForm("ZAINCASH", "at-1", "u1", 25000)))
	w := rec(t, s.post(sb, pathWithdraw, withdrawForm("ZAINCASH", "at-2", "u2", 10000, "07712345678")))
	require.Equal(t, "processing", rec(t, s.post(sb, "/v1/sandbox/withdrawals/"+w.TransactionID+"/process", url.Values{})).Status)
	before := s.eventCount(t, sb.ID)
	for _, v := range []string{"a\x00b", "a\x1b[2Jb", "a\xffb", "two\nlines"} {
		requireErr(t, s.post(sb, "/v1/sandbox/deposits/"+d.TransactionID+"/reject", url.Values{"reason": {v}}), 400, "invalid_request", "reason")
		requireErr(t, s.post(sb, "/v1/sandbox/withdrawals/"+w.TransactionID+"/reject", url.Values{"reason": {v}}), 400, "invalid_request", "reason")
		requireErr(t, s.post(sb, "/v1/sandbox/withdrawals/"+w.TransactionID+"/pay", url.Values{"reference": {v}}), 400, "invalid_request", "reference")
	}
	require.Equal(t, before, s.eventCount(t, sb.ID))
	// The same texts from an operator, on a live site's transactions.
	live := s.newSite(nil, 1_000_000)
	ld := rec(t, s.post(live, pathDeposit, depositForm("ZAINCASH", "at-3", "u3", 25000)))
	lw := rec(t, s.post(live, pathWithdraw, withdrawForm("ZAINCASH", "at-4", "u4", 10000, "07712345678")))
	requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+lw.TransactionID+"/process", map[string]any{}))
	liveBefore := s.eventCount(t, live.ID)
	for _, c := range []struct{ path, body, field string }{
		{"/ops/v1/deposits/" + ld.TransactionID + "/reject", `{"reason":"a\u0000b"}`, "reason"},
		{"/ops/v1/withdrawals/" + lw.TransactionID + "/reject", `{"reason":"\u001b[2J"}`, "reason"},
		{"/ops/v1/withdrawals/" + lw.TransactionID + "/pay", `{"reference":"R\u0007"}`, "reference"},
	} {
		r := s.send(t, "POST", c.path, c.body, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
		requireErr(t, r, 400, "invalid_request", c.field)
	}
	require.Equal(t, liveBefore, s.eventCount(t, live.ID))
	require.Equal(t, "pending", rec(t, s.get(sb, "/v1/transactions/"+d.TransactionID, "")).Status)
	require.Equal(t, "processing", rec(t, s.get(sb, "/v1/transactions/"+w.TransactionID, "")).Status)

	// A blank reason (it is optional here) is the default one, and a
	// blank reference none: both show nothing, and count as not given.
	r := rec(t, s.post(sb, "/v1/sandbox/deposits/"+d.TransactionID+"/reject", url.Values{"reason": {"  \u200b "}}))
	require.Equal(t, "rejected", r.Status)
	require.Equal(t, "rejected in the sandbox", deref(r.StatusReason))
	p := rec(t, s.post(sb, "/v1/sandbox/withdrawals/"+w.TransactionID+"/pay", url.Values{"reference": {"   "}}))
	require.Equal(t, "paid", p.Status)
	require.Nil(t, p.StatusReason)
}

// TestSandbox_testCallback: a sandbox site asks for a test callback of any
// type about one of its transactions; it is delivered like the real ones,
// marked test, and changes nothing.
func TestSandbox_testCallback(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 200)
	sb := s.newSite(map[string]any{"sandbox": true, "callbackUrl": rcv.url()}, 100_000)
	live := s.newSite(nil, 0)
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")
	d := rec(t, s.post(sb, pathDeposit, depositForm("ZAINCASH", "tc-1", "u1", 25000)))

	got := rec(t, s.post(sb, "/v1/sandbox/transactions/"+d.TransactionID+"/callbacks", url.Values{"type": {"deposit.rejected"}}))
	require.Equal(t, "pending", got.Status, "a test changes nothing")
	calls := rcv.waitCalls(t, d.TransactionID, 1)
	body := string(calls[0].Body)
	require.Contains(t, body, `"type":"deposit.rejected"`)
	require.Contains(t, body, `"status":"rejected"`)
	require.Contains(t, body, `"previousStatus":"pending"`)
	require.Contains(t, body, `"test":true`)
	requireSigned(t, calls[0], sb.WebhookSecret)
	require.Equal(t, "pending", rec(t, s.get(sb, "/v1/transactions/"+d.TransactionID, "")).Status)

	// Whatever the transaction's status, a test is shaped like a real
	// callback of its type: an approved deposit's test "expired" leaves
	// pending (never approved, which nothing leaves), with the requested
	// amount and no reason; a test "approved" has no reason either; a
	// pending withdrawal's test "paid" leaves processing.
	require.Equal(t, "approved", rec(t, s.post(sb, "/v1/sandbox/deposits/"+d.TransactionID+"/approve", url.Values{"amount": {"24000"}})).Status)
	require.Contains(t, string(rcv.waitCalls(t, d.TransactionID, 2)[1].Body), `"previousStatus":"pending"`, "the real approval's callback")
	w := rec(t, s.post(sb, pathWithdraw, withdrawForm("ZAINCASH", "tc-w", "u2", 10000, "07712345678")))
	for i, c := range []struct {
		tx, typ, status, prev string
		amount                int64
		reason                any
	}{
		{d.TransactionID, "deposit.expired", "expired", "pending", 25000, nil},
		{d.TransactionID, "deposit.approved", "approved", "pending", 24000, nil},
		{d.TransactionID, "deposit.rejected", "rejected", "pending", 25000, "sandbox test callback"},
		{w.TransactionID, "withdrawal.paid", "paid", "processing", 10000, "sandbox test callback"},
		{w.TransactionID, "withdrawal.rejected", "rejected", "pending", 10000, "sandbox test callback"},
	} {
		n := len(rcv.calls(c.tx)) + 1
		rec(t, s.post(sb, "/v1/sandbox/transactions/"+c.tx+"/callbacks", url.Values{"type": {c.typ}}))
		calls := rcv.waitCalls(t, c.tx, n)
		var got struct {
			Type string         `json:"type"`
			Test bool           `json:"test"`
			Data map[string]any `json:"data"`
		}
		require.NoError(t, json.Unmarshal(calls[n-1].Body, &got), "case %d", i)
		require.Equal(t, c.typ, got.Type, "case %d", i)
		require.True(t, got.Test, "case %d", i)
		require.Equal(t, c.status, got.Data["status"], "case %d", i)
		require.Equal(t, c.prev, got.Data["previousStatus"], "case %d", i)
		require.Equal(t, float64(c.amount), got.Data["amount"], "case %d", i)
		require.Equal(t, c.reason, got.Data["statusReason"], "case %d", i)
	}
	require.Equal(t, "approved", rec(t, s.get(sb, "/v1/transactions/"+d.TransactionID, "")).Status)
	require.Equal(t, "pending", rec(t, s.get(sb, "/v1/transactions/"+w.TransactionID, "")).Status)

	for _, c := range []struct{ typ, field string }{{"withdrawal.paid", "type"}, {"deposit.refunded", "type"}, {"", "type"}} {
		requireErr(t, s.post(sb, "/v1/sandbox/transactions/"+d.TransactionID+"/callbacks", url.Values{"type": {c.typ}}), 400, "invalid_request", c.field)
	}
	ld := rec(t, s.post(live, pathDeposit, depositForm("ZAINCASH", "tc-2", "u1", 25000)))
	requireErr(t, s.post(live, "/v1/sandbox/transactions/"+ld.TransactionID+"/callbacks", url.Values{"type": {"deposit.approved"}}), 403, "forbidden", "")
}

// TestAlreadyPending_alias: the processId of a request answered with the
// user's pending deposit finds that deposit afterwards, with
// alreadyPending true; a repeat gets the same answer; the processId is
// taken for anything else.
func TestAlreadyPending_alias(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 100_000)
	first := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "order-1", "u1", 25000)))
	second := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "order-2", "u1", 30000)))
	require.True(t, second.AlreadyPending)
	require.Equal(t, first.TransactionID, second.TransactionID)
	require.Equal(t, "order-1", second.ProcessID, "the record is the pending deposit's")

	byAlias := rec(t, s.get(st, "/v1/transactions", "processId=order-2"))
	require.Equal(t, first.TransactionID, byAlias.TransactionID)
	require.True(t, byAlias.AlreadyPending)
	require.False(t, rec(t, s.get(st, "/v1/transactions", "processId=order-1")).AlreadyPending)

	n := s.eventCount(t, st.ID)
	again := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "order-2", "u1", 30000)))
	require.Equal(t, first.TransactionID, again.TransactionID)
	require.True(t, again.AlreadyPending)
	require.Equal(t, n, s.eventCount(t, st.ID), "a repeat writes nothing")
	requireErr(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "order-2", "u1", 99000)), 409, "process_id_conflict", "processId")
	requireErr(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "order-2", "u1", 1000, "07712345678")), 409, "process_id_conflict", "processId")
	// The operator's search finds it by either name.
	require.Equal(t, []string{first.TransactionID}, txIDs(s.opsList(t, "processId=order-2", 10)...))
	// Once the deposit is settled, the alias still names it.
	requireOK(t, s.ops("POST", "/ops/v1/deposits/"+first.TransactionID+"/approve", nil))
	require.Equal(t, "approved", rec(t, s.get(st, "/v1/transactions", "processId=order-2")).Status)
}

// TestSiteMethods: a site offers exactly the methods set for it, with its
// own limits and accounts, in /v1/banks, deposits and withdrawals; a site
// without a setting offers every enabled method, as before.
func TestSiteMethods(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	own := s.newSite(nil, 1_000_000)
	plain := s.newSite(nil, 1_000_000)
	put := func(body map[string]any) resp { return s.ops("PUT", "/ops/v1/sites/"+own.ID+"/methods", body) }
	r := put(map[string]any{"methods": []map[string]any{{"bank": "ZAINCASH", "minAmount": 2000, "maxAmount": 50000,
		"accounts": []map[string]string{{"accountName": "Own Shop", "accountNumber": "07809999999"}}}}})
	requireOK(t, r)
	methods := decodeAny(t, r)["methods"].([]any)
	require.Len(t, methods, 1)

	var banks []map[string]any
	s.get(own, "/v1/banks", "type=deposit").decode(t, &banks)
	require.Len(t, banks, 1)
	require.Equal(t, "ZAINCASH", banks[0]["code"])
	require.Equal(t, 2000.0, banks[0]["minAmount"])
	require.Equal(t, 50000.0, banks[0]["maxAmount"])
	var all []map[string]any
	s.get(plain, "/v1/banks", "type=deposit").decode(t, &all)
	require.Len(t, all, 5, "a site without a setting keeps every method")

	d := rec(t, s.post(own, pathDeposit, depositForm("ZAINCASH", "m-1", "u1", 25000)))
	require.Equal(t, "Own Shop", d.BankAccountName)
	require.Equal(t, "07809999999", d.BankAccountIban)
	for _, c := range []struct {
		path string
		form url.Values
		code string
	}{
		{pathDeposit, depositForm("QICARD", "m-2", "u2", 25000), "unknown_bank"},
		{pathDeposit, depositForm("ZAINCASH", "m-3", "u3", 1500), "amount_out_of_range"},
		{pathDeposit, depositForm("ZAINCASH", "m-4", "u4", 60000), "amount_out_of_range"},
		{pathWithdraw, withdrawForm("QICARD", "m-5", "u5", 5000, "6375000012345678"), "unknown_bank"},
	} {
		r := s.post(own, c.path, c.form)
		field := "bankId"
		if c.code == "amount_out_of_range" {
			field = "amount"
		}
		requireErr(t, r, 400, c.code, field)
		if c.code == "unknown_bank" {
			require.Contains(t, r.Message, "not a")
			require.Contains(t, r.Message, "methods are ZAINCASH (GET")
		}
	}
	requireOK(t, s.post(plain, pathDeposit, depositForm("QICARD", "p-1", "u1", 25000)))

	for _, c := range []struct {
		body  map[string]any
		code  string
		field string
	}{
		{map[string]any{"all": true, "methods": []map[string]any{{"bank": "ZAINCASH"}}}, "invalid_request", "methods"},
		{map[string]any{"methods": []map[string]any{}}, "invalid_request", "methods"},
		{map[string]any{"methods": []map[string]any{{"bank": "ZAINCASH"}, {"bank": "ZAINCASH"}}}, "invalid_request", "methods[1].bank"},
		{map[string]any{"methods": []map[string]any{{"bank": "ZAINCASH", "minAmount": 5000, "maxAmount": 100}}}, "invalid_request", "methods[0].minAmount"},
		{map[string]any{"methods": []map[string]any{{"bank": "NOPE"}}}, "unknown_bank", "methods[0].bank"},
		{map[string]any{"methods": []map[string]any{{"bank": "ZAINCASH", "accounts": []map[string]string{{"accountName": "x"}}}}}, "invalid_request", "methods[0].accounts"},
		{map[string]any{"methods": []map[string]any{{"bank": "ZAINCASH", "accounts": []map[string]string{{"accountName": "x", "accountNumber": "0780\n1"}}}}},
			"invalid_request", "methods[0].accounts"},
	} {
		requireErr(t, put(c.body), 400, c.code, c.field)
	}
	// Back to every method.
	r = put(map[string]any{"all": true})
	requireOK(t, r)
	require.Nil(t, decodeAny(t, r)["methods"])
	requireOK(t, s.post(own, pathDeposit, depositForm("QICARD", "m-6", "u6", 25000)))

	// A scoped method is offered only by the sites that list it.
	r = s.ops("POST", "/ops/v1/banks", map[string]any{"code": "PILOT", "name": map[string]string{"en": "Pilot"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 100000, "deposit": true, "withdraw": true, "scoped": true,
		"accounts": []map[string]string{{"accountName": "Pilot", "accountNumber": "07700000001"}}})
	requireOK(t, r)
	pilot := decodeAny(t, r)
	require.Equal(t, true, pilot["scoped"])
	codes := func(site site) []string {
		var banks []map[string]any
		s.get(site, "/v1/banks", "type=deposit").decode(t, &banks)
		var out []string
		for _, b := range banks {
			out = append(out, b["code"].(string))
		}
		return out
	}
	require.NotContains(t, codes(plain), "PILOT", "a site offering every method does not see a scoped one")
	r = s.post(plain, pathDeposit, depositForm("PILOT", "p-2", "u2", 25000))
	requireErr(t, r, 400, "unknown_bank", "bankId")
	require.Contains(t, r.Message, "methods are ")
	require.NotContains(t, r.Message[strings.Index(r.Message, "methods are "):], "PILOT", "the listing leaves it out")
	requireOK(t, put(map[string]any{"methods": []map[string]any{{"bank": "PILOT"}, {"bank": "ZAINCASH"}}}))
	require.Equal(t, []string{"ZAINCASH", "PILOT"}, codes(own))
	requireOK(t, s.post(own, pathDeposit, depositForm("PILOT", "m-7", "u7", 25000)))

	var listed map[string][]map[string]any
	r = s.ops("GET", "/ops/v1/banks", nil)
	requireOK(t, r)
	r.decode(t, &listed)
	for _, b := range listed["items"] {
		require.Equal(t, b["code"] == "PILOT", b["scoped"], "scoped of %v", b["code"])
	}
	r = s.ops("PATCH", "/ops/v1/banks/"+pilot["_id"].(string), map[string]any{"scoped": false})
	requireOK(t, r)
	require.Equal(t, false, decodeAny(t, r)["scoped"])
	require.Contains(t, codes(plain), "PILOT", "unscoped, every site offers it again")
	requireOK(t, s.post(plain, pathDeposit, depositForm("PILOT", "p-3", "u3", 25000)))
}

// TestSiteMethods_acrossStacks: a method created through one gateway
// process can be put on a site through another whose follower has not yet
// delivered it, and that process's merchants can then use it.
func TestSiteMethods_acrossStacks(t *testing.T) {
	e := newEnv(t)
	// b starts on the empty stream (so it is ready) and then lags.
	b := e.newLaggingStack(300 * time.Millisecond)
	a := e.newStack(stackOptions{})
	a.seedBanks()
	st := a.newSite(nil, 1_000_000)
	r := a.ops("POST", "/ops/v1/banks", map[string]any{"code": "PILOT", "name": map[string]string{"en": "Pilot"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 100000, "deposit": true, "withdraw": true, "scoped": true,
		"accounts": []map[string]string{{"accountName": "Pilot", "accountNumber": "07700000001"}}})
	requireOK(t, r)
	pilot := decodeAny(t, r)["_id"]

	r = b.ops("PUT", "/ops/v1/sites/"+st.ID+"/methods", map[string]any{"methods": []map[string]any{{"bank": "PILOT"}}})
	requireOK(t, r)
	require.Equal(t, pilot, decodeAny(t, r)["methods"].([]any)[0].(map[string]any)["bankId"])
	d := rec(t, b.post(st, pathDeposit, depositForm("PILOT", "x-1", "u1", 25000)))
	require.Equal(t, "07700000001", d.BankAccountIban)
	r = b.ops("PUT", "/ops/v1/sites/"+st.ID+"/methods", map[string]any{"methods": []map[string]any{{"bank": "NOSUCH"}}})
	requireErr(t, r, 400, "unknown_bank", "methods[0].bank")

	// Set through one process, listed at once by the other.
	requireOK(t, a.ops("PUT", "/ops/v1/sites/"+st.ID+"/methods", map[string]any{"methods": []map[string]any{{"bank": "ZAINCASH"}}}))
	var banks []map[string]any
	b.get(st, "/v1/banks", "type=deposit").decode(t, &banks)
	require.Len(t, banks, 1)
	require.Equal(t, "ZAINCASH", banks[0]["code"])
}

// TestSandbox_testCallbackOneBodyOnBothPaths: a test callback, and a real
// one, reach a site's callbackUrl and its callback stream with the same
// body: a test "approved" about a rejected deposit leaves "pending" on
// both, as docs/callbacks.md says, not the deposit's own "rejected".
func TestSandbox_testCallbackOneBodyOnBothPaths(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 200)
	sb := s.newSite(map[string]any{"sandbox": true, "callbackUrl": rcv.url()}, 100_000)
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")
	d := rec(t, s.post(sb, pathDeposit, depositForm("ZAINCASH", "tc-both", "u1", 25000)))
	ss := s.openStream(t, sb, "", nil)
	ss.next() // its position

	require.Equal(t, "rejected", rec(t, s.post(sb, "/v1/sandbox/deposits/"+d.TransactionID+"/reject", url.Values{"reason": {"no transfer"}})).Status)
	rec(t, s.post(sb, "/v1/sandbox/transactions/"+d.TransactionID+"/callbacks", url.Values{"type": {"deposit.approved"}}))
	calls := rcv.waitCalls(t, d.TransactionID, 2)
	for i, want := range []struct{ typ, prev string }{{"deposit.rejected", "pending"}, {"deposit.approved", "pending"}} {
		ev := ss.next()
		require.Equal(t, "callback", ev.Event)
		var se struct {
			ID   string          `json:"id"`
			Type string          `json:"type"`
			Body json.RawMessage `json:"body"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &se))
		require.Equal(t, calls[i].ID, se.ID, "callback %d: the same event", i)
		require.Equal(t, want.typ, se.Type)
		assert.JSONEq(t, string(calls[i].Body), string(se.Body), "callback %d: the delivery's body and the stream's", i)
		var b struct {
			Data struct {
				PreviousStatus string `json:"previousStatus"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(se.Body, &b))
		assert.Equal(t, want.prev, b.Data.PreviousStatus, "callback %d", i)
	}
}
