package httpapi_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIdempotentRepeat(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(nil, 1_000_000)
	cases := []struct {
		name, path string
		form       url.Values
	}{
		{"deposit", pathDeposit, depositForm("ZAINCASH", "rep-d", "u1", 25000)},
		{"deposit by id", pathDeposit, depositForm(banks["NBI"].ID, "rep-d2", "u2", 7000)},
		{"withdrawal", pathWithdraw, withdrawForm("QICARD", "rep-w", "u3", 30000, "6375000012345678")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first := rec(t, s.post(st, c.path, c.form))
			n := s.eventCount(t, st.ID)
			bal := s.balanceOf(t, st)
			for i := 0; i < 3; i++ {
				again := rec(t, s.post(st, c.path, c.form))
				require.Equal(t, first.TransactionID, again.TransactionID)
				require.Equal(t, first.Hash, again.Hash)
				require.Equal(t, first, again)
				require.False(t, again.AlreadyPending, "a repeat is not an alreadyPending answer")
			}
			require.Equal(t, n, s.eventCount(t, st.ID), "a repeat writes no event")
			require.Equal(t, bal, s.balanceOf(t, st), "a repeated withdrawal reserves nothing more")
		})
	}
	require.Equal(t, int64(30000), s.balanceOf(t, st).PendingWithdrawals)

	// A repeat answers the transaction as it is now.
	w := rec(t, s.post(st, pathWithdraw, cases[2].form))
	requireOK(t, s.ops("POST", "/ops/v1/withdrawals/"+w.TransactionID+"/reject", map[string]any{"reason": "wallet closed"}))
	again := rec(t, s.post(st, pathWithdraw, cases[2].form))
	require.Equal(t, w.TransactionID, again.TransactionID)
	require.Equal(t, "rejected", again.Status)
	require.Equal(t, "wallet closed", *again.StatusReason)
	require.Equal(t, int64(0), s.balanceOf(t, st).PendingWithdrawals, "a repeat of a rejected withdrawal reserves nothing")
}

func TestAlreadyPending(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	first := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "ap-1", "u1", 25000)))
	require.False(t, first.AlreadyPending)
	n := s.eventCount(t, st.ID)

	// Another processId of the same user, even with other parameters.
	cases := []url.Values{
		depositForm("ZAINCASH", "ap-2", "u1", 25000),
		depositForm("QICARD", "ap-3", "u1", 9000),
	}
	for _, f := range cases {
		d := rec(t, s.post(st, pathDeposit, f))
		require.True(t, d.AlreadyPending)
		want := first
		want.AlreadyPending = true
		require.Equal(t, want, d, "the existing deposit is answered")
		// The new processId now names it (TestAlreadyPending_alias).
		require.Equal(t, want, rec(t, s.get(st, "/v1/transactions", "processId="+f.Get("processId"))))
	}
	items := s.history(t, st.ID)
	require.Equal(t, n+len(cases), len(items), "no new request is created, only its processId recorded")
	require.Equal(t, "deposit.alias_added.v1", items[len(items)-1].Name)
	// The pending deposit's own lookup does not say alreadyPending.
	require.False(t, rec(t, s.get(st, "/v1/transactions/"+first.TransactionID, "")).AlreadyPending)
	// Withdrawals and other users are not affected.
	other := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "ap-4", "u2", 25000)))
	require.False(t, other.AlreadyPending)
	require.NotEqual(t, first.TransactionID, other.TransactionID)

	// Once the pending deposit is final the user may ask again.
	requireOK(t, s.ops("POST", "/ops/v1/deposits/"+first.TransactionID+"/reject", map[string]any{"reason": "no transfer"}))
	next := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "ap-6", "u1", 25000)))
	require.False(t, next.AlreadyPending)
	require.NotEqual(t, first.TransactionID, next.TransactionID)
	require.Equal(t, "ap-6", next.ProcessID)
	// ap-2 still names the first deposit: its request keeps its answer.
	require.Equal(t, first.TransactionID, rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "ap-2", "u1", 25000))).TransactionID)
	requireOK(t, s.ops("POST", "/ops/v1/deposits/"+next.TransactionID+"/approve", nil))
	third := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "ap-5", "u1", 25000)))
	require.False(t, third.AlreadyPending)
	require.Equal(t, "ap-5", third.ProcessID)
}

func TestAccountRotation(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	// Two accounts with different numbers, to see both fields rotate.
	r := s.ops("POST", "/ops/v1/banks", map[string]any{"code": "ASIA", "name": map[string]string{"en": "Asia"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 100000, "deposit": true, "withdraw": false,
		"accounts": []map[string]string{{"accountName": "One", "accountNumber": "07700000001"},
			{"accountName": "Two", "accountNumber": "07700000002"}}})
	requireOK(t, r)
	st := s.newSite(nil, 0)
	other := s.newSite(nil, 0)
	steps := []struct {
		site      site
		bank, pid string
		user      string
		wantName  string
		wantNum   string
		pending   bool
	}{
		{st, "ASIA", "r1", "u1", "One", "07700000001", false},
		{st, "ASIA", "r2", "u2", "Two", "07700000002", false},
		{st, "ASIA", "r3", "u3", "One", "07700000001", false},
		{st, "ASIA", "r4", "u1", "One", "07700000001", true}, // u1's pending deposit: no rotation
		{st, "ASIA", "r5", "u5", "Two", "07700000002", false},
		{st, "ZAINCASH", "r6", "u6", "Store A", "07801234567", false}, // rotation is per method
		{other, "ASIA", "r1", "u1", "One", "07700000001", false},      // and per site
		{st, "ASIA", "r1", "u1", "One", "07700000001", false},         // a repeat keeps its account
		{st, "ASIA", "r7", "u7", "One", "07700000001", false},
	}
	for _, c := range steps {
		d := rec(t, s.post(c.site, pathDeposit, depositForm(c.bank, c.pid, c.user, 5000)))
		require.Equal(t, c.wantName, d.BankAccountName, "deposit %s", c.pid)
		require.Equal(t, c.wantNum, d.BankAccountIban, "deposit %s", c.pid)
		require.Equal(t, c.pending, d.AlreadyPending, "deposit %s", c.pid)
	}
}
