package httpapi_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOperatorsRaceOnOneTransaction: two operators act on the same deposit
// at once through two gateway stacks (approve on one, reject on the other):
// exactly one wins, the other is told invalid_transition, and the money
// moves only if the approval won.
func TestOperatorsRaceOnOneTransaction(t *testing.T) {
	e := newEnv(t)
	a := e.newStack(stackOptions{})
	b := e.newStack(stackOptions{})
	a.seedBanks()
	st := a.newSite(nil, 0)
	approvals := 0
	for round := 0; round < 10; round++ {
		id := rec(t, a.post(st, pathDeposit, depositForm("ZAINCASH", "race-"+string(rune('a'+round)), "u"+string(rune('a'+round)), 5000))).TransactionID
		// b must know the deposit before it can act on it.
		require.Equal(t, 200, b.ops("GET", "/ops/v1/transactions/"+id, nil).HTTP)
		var wg sync.WaitGroup
		res := make([]resp, 2)
		start := make(chan struct{})
		for k, call := range []func() resp{
			func() resp { return a.ops("POST", "/ops/v1/deposits/"+id+"/approve", nil) },
			func() resp {
				return b.ops("POST", "/ops/v1/deposits/"+id+"/reject", map[string]any{"reason": "no transfer"})
			},
		} {
			wg.Add(1)
			go func(k int, call func() resp) {
				defer wg.Done()
				<-start
				res[k] = call()
			}(k, call)
		}
		close(start)
		wg.Wait()
		ok := 0
		for _, r := range res {
			switch r.HTTP {
			case 200:
				ok++
			case 409:
				assert.Equal(t, "invalid_transition", r.Code)
			default:
				t.Fatalf("unexpected answer %d: %s", r.HTTP, r.Raw)
			}
		}
		require.Equal(t, 1, ok, "exactly one operator wins")
		final := rec(t, a.get(st, "/v1/transactions/"+id, "")).Status
		if res[0].HTTP == 200 {
			approvals++
			assert.Equal(t, "approved", final)
		} else {
			assert.Equal(t, "rejected", final)
		}
	}
	assert.Equal(t, int64(approvals*5000), a.balanceOf(t, st).Balance)
}

// TestOpsListings_readTheirWrites: a site and a method created through one
// gateway process are listed by another whose follower lags behind: the
// listing waits until its state covers the stream (docs/ARCHITECTURE.md
// "Read-your-writes") rather than answer from what it had.
func TestOpsListings_readTheirWrites(t *testing.T) {
	e := newEnv(t)
	a := e.newStack(stackOptions{})
	var gate sync.RWMutex
	b := e.newStack(stackOptions{followGate: &gate})
	a.seedBanks()
	require.Equal(t, 200, b.ops("GET", "/ops/v1/banks", nil).HTTP)
	gate.Lock()
	st := a.newSite(map[string]any{"name": "Made Elsewhere"}, 0)
	r := a.ops("POST", "/ops/v1/banks", map[string]any{
		"code": "LATEBANK", "name": map[string]string{"en": "Late"}, "identifierKind": "PHONE", "minAmount": 1000,
		"maxAmount": 1_000_000, "deposit": true, "withdraw": true,
		"accounts": []map[string]string{{"accountName": "Store", "accountNumber": "07801234567"}}})
	require.Equal(t, 200, r.HTTP, "%s", r.Raw)
	got := make(chan resp, 2)
	for _, path := range []string{"/ops/v1/sites", "/ops/v1/banks"} {
		go func() { got <- b.ops("GET", path, nil) }()
	}
	// Time for a listing that does not wait to answer from the lagging
	// state (the one that waits answers only after the release).
	time.Sleep(200 * time.Millisecond)
	gate.Unlock()
	for range 2 {
		r := <-got
		require.Equal(t, 200, r.HTTP, "%s", r.Raw)
		switch {
		case strings.Contains(string(r.Raw), `"code":"ZAINCASH"`):
			assert.Contains(t, string(r.Raw), `"code":"LATEBANK"`, "the method created through the other process")
		default:
			assert.Contains(t, string(r.Raw), `"id":"`+st.ID+`"`, "the site created through the other process")
		}
	}
}
