package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// raceResult is one concurrent call's outcome, collected without testing
// calls off the test goroutine.
type raceResult struct {
	stack int
	form  url.Values
	http  int
	env   struct {
		Data      record `json:"data"`
		Status    int    `json:"status"`
		Code      string `json:"code"`
		RequestID string `json:"requestId"`
	}
	reqIDHeader string
	err         error
}

var raceClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}}

// concurrently posts forms[i] to stacks[i%len(stacks)], all released at once.
func concurrently(stacks []*stack, st site, path string, forms []url.Values) []raceResult {
	out := make([]raceResult, len(forms))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, f := range forms {
		wg.Add(1)
		go func(i int, f url.Values) {
			defer wg.Done()
			r := &out[i]
			r.stack, r.form = i%len(stacks), f
			body := f.Encode()
			req, err := http.NewRequest("POST", stacks[r.stack].URL+path, strings.NewReader(body))
			if err != nil {
				r.err = err
				return
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("appKey", st.AppKey)
			req.Header.Set("sign", sign(st.Secret, []byte(body)))
			<-start
			res, err := raceClient.Do(req)
			if err != nil {
				r.err = err
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			if err != nil {
				r.err = err
				return
			}
			r.http, r.reqIDHeader = res.StatusCode, res.Header.Get("Request-Id")
			r.err = json.Unmarshal(b, &r.env)
		}(i, f)
	}
	close(start)
	wg.Wait()
	return out
}

// TestRaceWithdrawalsTwoStacks: two gateways on one NATS server; 200
// concurrent withdrawals of which exactly K fit the treasury.
func TestRaceWithdrawalsTwoStacks(t *testing.T) {
	e := newEnv(t)
	a := e.newStack(stackOptions{})
	b := e.newStack(stackOptions{})
	banks := a.seedBanks()
	const (
		amount = 2500
		limit  = -10_000
		k      = 40
		n      = 200
	)
	// After j accepted withdrawals the next fits iff
	// fund − j·amount − amount > limit. With fund = 92 500:
	// j+1 = 40: 92 500 − 100 000 = −7 500 > −10 000, accepted;
	// j+1 = 41: 92 500 − 102 500 = −10 000, lands on the limit: refused.
	const fund = k*amount + amount + limit // 92 500
	st := a.newSite(map[string]any{"negativeLimit": limit}, fund)
	waitSite(t, b, st)
	require.Equal(t, a.balanceOf(t, st), b.balanceOf(t, st))

	forms := make([]url.Values, n)
	for i := range forms {
		id := "race-w-" + itoa(int64(i))
		forms[i] = withdrawForm(banks["ZAINCASH"].ID, id, "user-"+itoa(int64(i)), amount, "07712345678")
	}
	res := concurrently([]*stack{a, b}, st, pathWithdraw, forms)

	accepted := map[string]record{}
	perStack := [2]int{}
	for i, r := range res {
		require.NoError(t, r.err, "request %d", i)
		require.Equal(t, r.http, r.env.Status)
		require.Equal(t, r.reqIDHeader, r.env.RequestID)
		switch r.http {
		case 200:
			d := r.env.Data
			require.Equal(t, r.form.Get("processId"), d.ProcessID)
			require.Equal(t, responseHash(st.Secret, d.TransactionID, banks["ZAINCASH"].ID, amount), d.Hash)
			_, dup := accepted[d.TransactionID]
			require.False(t, dup, "transaction id %s given twice", d.TransactionID)
			accepted[d.TransactionID] = d
			perStack[r.stack]++
		case 402:
			require.Equal(t, "insufficient_site_balance", r.env.Code)
		default:
			t.Fatalf("request %d on stack %d: HTTP %d code %q", i, r.stack, r.http, r.env.Code)
		}
	}
	require.Len(t, accepted, k, "exactly K withdrawals fit (per stack: %v)", perStack)
	t.Logf("accepted per stack: %v", perStack)

	want := balance{Balance: fund, PendingWithdrawals: k * amount, NegativeLimit: limit, Available: fund - k*amount - limit, Currency: "IQD"}
	require.Equal(t, want, a.balanceOf(t, st))
	require.Equal(t, want, b.balanceOf(t, st))

	// Both stacks list exactly the accepted ones, and the refused
	// processIds do not exist.
	for _, s := range []*stack{a, b} {
		l := s.opsList(t, "site="+st.ID, 100)
		require.Len(t, l, k)
		for _, r := range l {
			require.Contains(t, accepted, r.TransactionID)
			require.Equal(t, "pending", r.Status)
		}
	}
	for _, r := range res {
		if r.http == 402 {
			requireErr(t, b.get(st, "/v1/transactions", "processId="+r.form.Get("processId")), 404, "not_found", "")
		}
	}
	// One unbroken history: created, adjusted, then K requests.
	items := a.history(t, st.ID)
	require.Len(t, items, 2+k)
	for i := 1; i < len(items); i++ {
		require.Equal(t, items[i-1].Hash, items[i].Prev, "hash chain at %d", i)
		if i >= 2 {
			require.Equal(t, "withdrawal.requested.v1", items[i].Name)
		}
	}
	require.Equal(t, items, b.history(t, st.ID))
}

// TestRaceOneProcessIDTwoStacks: 50 concurrent identical deposits with one
// processId across two gateways create exactly one transaction.
func TestRaceOneProcessIDTwoStacks(t *testing.T) {
	e := newEnv(t)
	a := e.newStack(stackOptions{})
	b := e.newStack(stackOptions{})
	banks := a.seedBanks()
	st := a.newSite(nil, 0)
	waitSite(t, b, st)

	forms := make([]url.Values, 50)
	for i := range forms {
		forms[i] = depositForm(banks["ZAINCASH"].ID, "one-pid", "u1", 25000)
	}
	res := concurrently([]*stack{a, b}, st, pathDeposit, forms)
	var txID string
	for i, r := range res {
		require.NoError(t, r.err, "request %d", i)
		require.Equal(t, 200, r.http, "request %d on stack %d: code %q", i, r.stack, r.env.Code)
		require.False(t, r.env.Data.AlreadyPending)
		if txID == "" {
			txID = r.env.Data.TransactionID
		}
		require.Equal(t, txID, r.env.Data.TransactionID, "request %d on stack %d", i, r.stack)
		require.Equal(t, responseHash(st.Secret, txID, banks["ZAINCASH"].ID, 25000), r.env.Data.Hash)
	}
	for _, s := range []*stack{a, b} {
		s.balanceOf(t, st) // catches the stack up (the listing reads memory)
		l := s.opsList(t, "site="+st.ID, 100)
		require.Len(t, l, 1)
		require.Equal(t, txID, l[0].TransactionID)
		require.Equal(t, txID, rec(t, s.get(st, "/v1/transactions", "processId=one-pid")).TransactionID)
	}
	names := []string{}
	for _, it := range a.history(t, st.ID) {
		names = append(names, it.Name)
	}
	require.Equal(t, []string{"site.created.v2", "deposit.requested.v1"}, names)

	// Concurrent deposits of one user with different processIds: one is
	// created, every other answer is that one with alreadyPending.
	forms = make([]url.Values, 30)
	for i := range forms {
		forms[i] = depositForm("QICARD", "user-pid-"+itoa(int64(i)), "u2", 5000)
	}
	res = concurrently([]*stack{a, b}, st, pathDeposit, forms)
	created := ""
	pending := 0
	for i, r := range res {
		require.NoError(t, r.err, "request %d", i)
		require.Equal(t, 200, r.http, "request %d: code %q", i, r.env.Code)
		if r.env.Data.AlreadyPending {
			pending++
			continue
		}
		require.Empty(t, created, "two deposits created for one user")
		created = r.env.Data.TransactionID
		require.Equal(t, r.form.Get("processId"), r.env.Data.ProcessID)
	}
	require.NotEmpty(t, created)
	require.Equal(t, len(forms)-1, pending)
	for _, r := range res {
		require.Equal(t, created, r.env.Data.TransactionID)
	}
	b.balanceOf(t, st)
	require.Len(t, b.opsList(t, "site="+st.ID, 100), 2)
}
