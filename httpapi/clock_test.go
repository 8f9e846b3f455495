package httpapi_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clock is a movable clock for a stack's ledger.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }
func (c *clock) opts() stackOptions      { return stackOptions{now: c.now} }

// TestExpiredDeposit covers pending → expired (when the user asks again
// after the expiry) and the late approval expired → approved.
func TestExpiredDeposit(t *testing.T) {
	var c clock
	e := newEnv(t)
	s := e.newStack(c.opts())
	s.seedBanks()
	st := s.newSite(map[string]any{"hostedPage": true, "depositTtlSeconds": 60}, 0)
	d1 := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "e1", "u1", 25000)))

	// Within the validity period the user's deposit is answered again.
	c.advance(59 * time.Second)
	again := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "e2", "u1", 25000)))
	require.True(t, again.AlreadyPending)
	require.Equal(t, d1.TransactionID, again.TransactionID)

	// Past it, the old one expires and a new one is created. (e2 names
	// d1 for good: a repeat of that request keeps its answer.)
	c.advance(2 * time.Second)
	n := s.eventCount(t, st.ID)
	d2 := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "e2b", "u1", 25000)))
	require.False(t, d2.AlreadyPending)
	require.NotEqual(t, d1.TransactionID, d2.TransactionID)
	items := s.history(t, st.ID)
	require.Len(t, items, n+2)
	require.Equal(t, "deposit.expired.v1", items[n].Name)
	require.Equal(t, d1.TransactionID, items[n].Data["tx"])
	require.Equal(t, "deposit.requested.v1", items[n+1].Name)

	old := rec(t, s.get(st, "/v1/transactions/"+d1.TransactionID, ""))
	require.Equal(t, "expired", old.Status)
	l := s.opsList(t, "site="+st.ID+"&status=expired", 10)
	require.Len(t, l, 1)
	require.Equal(t, d1.TransactionID, l[0].TransactionID)

	code, _, body := fetchPage(t, *d1.URL)
	require.Equal(t, 200, code)
	require.Contains(t, body, "This deposit request has expired")
	require.NotContains(t, body, `id="number"`)

	// expired is final except for a late approval.
	n = s.eventCount(t, st.ID)
	requireErr(t, s.ops("POST", "/ops/v1/deposits/"+d1.TransactionID+"/reject", map[string]any{"reason": "late"}), 409, "invalid_transition", "")
	require.Equal(t, n, s.eventCount(t, st.ID))
	a := rec(t, s.ops("POST", "/ops/v1/deposits/"+d1.TransactionID+"/approve", map[string]any{"amount": 20000}))
	require.Equal(t, "approved", a.Status)
	require.Equal(t, int64(20000), a.Amount)
	require.Equal(t, int64(25000), a.RequestedAmount)
	require.Equal(t, int64(20000), s.balanceOf(t, st).Balance)
	_, _, body = fetchPage(t, *d1.URL)
	require.Contains(t, body, "Your deposit was received and approved.")
	// The new deposit is still the user's pending one.
	require.True(t, rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "e3", "u1", 25000))).AlreadyPending)
}

// TestSecretOverlapEnds: the previous secret works until the end of the
// overlap and not after.
func TestSecretOverlapEnds(t *testing.T) {
	var c clock
	e := newEnv(t)
	s := e.newStack(c.opts())
	s.seedBanks()
	old := s.newSite(nil, 0)
	cur, until := rotate(t, s, old, map[string]any{"overlapSeconds": 3600})
	require.InDelta(t, 3600, until.Sub(c.now()).Seconds(), 5)
	c.advance(3590 * time.Second)
	requireOK(t, s.get(old, "/v1/balance", ""))
	c.advance(11 * time.Second)
	requireErr(t, s.get(old, "/v1/balance", ""), 401, "invalid_signature", "sign")
	requireErr(t, s.post(old, pathDeposit, depositForm("ZAINCASH", "late", "u1", 25000)), 401, "invalid_signature", "sign")
	requireOK(t, s.get(cur, "/v1/balance", ""))
	require.True(t, strings.HasPrefix(rec(t, s.post(cur, pathDeposit, depositForm("ZAINCASH", "late", "u1", 25000))).TransactionID, old.ID))
}
