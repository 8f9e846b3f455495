package httpapi_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/ledger"
)

// TestFlood_costsTheStoreNothing floods the unauthenticated and
// bad-credential paths (hosted pages with wrong tokens, ids the site does
// not have, made-up ids; merchant calls with unknown appKeys; operator calls
// with unknown tokens) while a merchant takes deposits, and counts the reads
// the ledger and read models make of the store. Without the flood the
// deposits read nothing; with it, every miss shares one throttled catch-up
// (one read) per ledger.MissInterval, whatever the flood's size. Counting
// reads, not timing requests, keeps the test independent of the machine.
func TestFlood_costsTheStoreNothing(t *testing.T) {
	e := newEnv(t)
	var reads atomic.Int64
	s := e.newStack(stackOptions{reads: &reads, hostedRate: -1})
	s.seedBanks()
	st := s.newSite(map[string]any{"hostedPage": true}, 0)
	target := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "flood-target", "ft", 25000)))
	require.NotNil(t, target.URL)

	deposits := func(prefix string, n int) int64 {
		before := reads.Load()
		for i := range n {
			d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", prefix+itoa(int64(i)), prefix+"-u"+itoa(int64(i)), 5000)))
			require.Equal(t, "pending", d.Status)
		}
		return reads.Load() - before
	}
	base := deposits("base-", 40)
	assert.Zero(t, base, "creating deposits reads nothing from the store")

	wrongTok := strings.Replace(*target.URL, "?t=", "?t=x", 1)
	flood := []func() (*http.Request, error){
		func() (*http.Request, error) { return http.NewRequest("GET", wrongTok, nil) },
		func() (*http.Request, error) { return http.NewRequest("GET", s.URL+"/pay/"+st.ID+"-zzzz?t=abc", nil) },
		func() (*http.Request, error) { return http.NewRequest("GET", s.URL+"/pay/*-1?t=abc", nil) },
		func() (*http.Request, error) { return http.NewRequest("GET", s.URL+"/pay/snosuchsite-1?t=abc", nil) },
		func() (*http.Request, error) {
			r, err := http.NewRequest("GET", s.URL+"/v1/balance", nil)
			if err == nil {
				r.Header.Set("appKey", "ak_unknown")
				r.Header.Set("sign", "x")
			}
			return r, err
		},
		func() (*http.Request, error) {
			r, err := http.NewRequest("GET", s.URL+"/ops/v1/sites", nil)
			if err == nil {
				r.Header.Set("Authorization", "Bearer op_unknownunknownunknownunknownunknownunk")
			}
			return r, err
		},
	}
	var sent atomic.Int64
	var statuses sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	floodStart := reads.Load()
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, err := flood[i%len(flood)]()
				if err != nil {
					t.Error(err)
					return
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
				statuses.Store(res.StatusCode, true)
				sent.Add(1)
			}
		}()
	}
	withFlood := deposits("flood-", 40)
	// Let the flood run a while longer than the deposits, so that many
	// misses fall into every interval.
	require.Eventually(t, func() bool { return sent.Load() >= 1000 }, 60*time.Second, time.Millisecond)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	floodReads := reads.Load() - floodStart

	allowance := int64(elapsed/ledger.MissInterval) + 2
	t.Logf("%d flood requests in %s: %d store reads (at most %d allowed), %d during the %d deposits",
		sent.Load(), elapsed.Round(time.Millisecond), floodReads, allowance, withFlood, 40)
	assert.LessOrEqual(t, floodReads, allowance, "misses share one throttled catch-up per interval")
	assert.Less(t, floodReads, sent.Load()/10, "the flood's requests do not turn into store reads")
	statuses.Range(func(k, _ any) bool {
		code := k.(int)
		assert.Contains(t, []int{401, 404}, code, "flood answer")
		return true
	})
	// The real page still opens.
	code, _, body := fetchPage(t, *target.URL)
	require.Equal(t, 200, code, body)
}
