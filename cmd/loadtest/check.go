package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
)

// failures collects invariant violations by category, keeping a count and a
// few examples of each, so a run with a million bad hashes still prints a
// short, readable verdict.
type failures struct {
	mu    sync.Mutex
	order []string
	count map[string]int
	examp map[string][]string
}

// newFailures returns an empty collector.
func newFailures() *failures {
	return &failures{count: map[string]int{}, examp: map[string][]string{}}
}

// add records one violation of category cat; it is safe for concurrent use
// because the HTTP checks run on several workers.
func (f *failures) add(cat, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.count[cat]; !ok {
		f.order = append(f.order, cat)
	}
	f.count[cat]++
	if len(f.examp[cat]) < 3 {
		f.examp[cat] = append(f.examp[cat], fmt.Sprintf(format, args...))
	}
}

// has reports whether category cat has at least one violation (for tests).
func (f *failures) has(cat string) bool { return f.count[cat] > 0 }

// lines renders one line per category: count and examples.
func (f *failures) lines() []string {
	out := make([]string, 0, len(f.order))
	for _, c := range f.order {
		out = append(out, fmt.Sprintf("%s: %d failure(s), e.g. %s", c, f.count[c], strings.Join(f.examp[c], "; ")))
	}
	return out
}

// Failure categories; tests match on them.
const (
	catHash        = "hash"
	catBankID      = "bankId"
	catAmountInt   = "amount-not-integer"
	catAmount      = "amount-echo"
	catProcessID   = "processId-echo"
	catAlready     = "alreadyPending"
	catTxID        = "transactionId-missing"
	catDupTx       = "transactionId-duplicate"
	catDupPID      = "processId-duplicate"
	catBalance     = "balance"
	catLookup      = "lookup"
	catStatusCodes = "non-200"
	catStored503   = "503-stored"
)

// lookupCat is the failure category of lookups through gateway k of the
// -url list: the first keeps the plain category, every other one gets its
// own, so a gateway that cannot read another's writes shows up by name.
func lookupCat(cat string, k int, a *api) string {
	if k == 0 {
		return cat
	}
	return cat + " via " + a.base
}

// checkRecords verifies invariants 1 and 2 on the kept 200 answers: every
// hash matches docs/merchant-api.md "Response hash" under its site's secret, every bankId is the method's
// _id, echoes match the request, transactionIds are unique overall and
// processIds unique per site. Uniqueness is found by sorting index slices
// rather than building maps, so a million records need only a few MB extra.
func checkRecords(f *failures, oks []okRec, sites []site, bankID string) {
	for _, r := range oks {
		sec := sites[r.site].Secret
		switch {
		case r.flags&flagHashBad != 0:
			f.add(catHash, "request %d: data.hash is not base64 HMAC-SHA256", r.idx)
		case expectedHash(sec, r.txID, r.bankID, r.amount) != r.hash:
			f.add(catHash, "request %d: hash mismatch for transactionId=%q bankId=%q amount=%d", r.idx, r.txID, r.bankID, r.amount)
		}
		if bankID != "" && r.bankID != bankID {
			f.add(catBankID, "request %d: data.bankId=%q, method _id is %q", r.idx, r.bankID, bankID)
		}
		if r.flags&flagAmountNotInt != 0 {
			f.add(catAmountInt, "request %d: data.amount is not a JSON integer", r.idx)
		}
		if r.flags&flagAmountMismatch != 0 {
			f.add(catAmount, "request %d: data.amount=%d, sent %d", r.idx, r.amount, requestAmount(int(r.idx)))
		}
		if r.flags&flagProcessID != 0 {
			f.add(catProcessID, "request %d: data.processId differs from the one sent", r.idx)
		}
		if r.flags&flagAlreadyPending != 0 {
			f.add(catAlready, "request %d: alreadyPending=true for a user with no earlier deposit", r.idx)
		}
		if r.flags&flagNoTxID != 0 {
			f.add(catTxID, "request %d: no data.transactionId", r.idx)
		}
	}

	order := make([]int32, len(oks))
	for k := range order {
		order[k] = int32(k)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(oks[a].txID, oks[b].txID) })
	for k := 1; k < len(order); k++ {
		a, b := oks[order[k-1]], oks[order[k]]
		if a.txID != "" && a.txID == b.txID {
			f.add(catDupTx, "transactionId %q answered to requests %d and %d", a.txID, a.idx, b.idx)
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		return cmp.Or(cmp.Compare(oks[a].site, oks[b].site), cmp.Compare(oks[a].idx, oks[b].idx))
	})
	for k := 1; k < len(order); k++ {
		a, b := oks[order[k-1]], oks[order[k]]
		if a.site == b.site && a.idx == b.idx {
			f.add(catDupPID, "site %d: processId index %d accepted twice", a.site, a.idx)
		}
	}
}

// checkCodes fails the run when not every request got a 200, unless the
// caller allows errors: with valid requests and enough treasury every answer
// should be a success, so errors are a finding, not noise.
func checkCodes(f *failures, res *loadResult, allowErrors bool) {
	if allowErrors {
		return
	}
	if bad := res.total - res.codes[200]; bad > 0 {
		keys := make([]int, 0, len(res.errSamples))
		for c := range res.errSamples {
			keys = append(keys, c)
		}
		sort.Ints(keys)
		for _, c := range keys {
			f.add(catStatusCodes, "%d x %s (first: %s)", res.codes[c], codeLabel(c), res.errSamples[c])
		}
	}
}

// siteBalance is the data of GET /v1/balance (docs/merchant-api.md "Balance").
type siteBalance struct {
	Balance            int64  `json:"balance"`
	PendingWithdrawals int64  `json:"pendingWithdrawals"`
	NegativeLimit      int64  `json:"negativeLimit"`
	Available          int64  `json:"available"`
	Currency           string `json:"currency"`
}

// expectedPending sums the amounts of accepted withdrawals per site: all
// created withdrawals are still pending, so this is what the treasury must
// have reserved. Deposit runs expect zero everywhere.
func expectedPending(kind string, oks []okRec, nSites int) []int64 {
	want := make([]int64, nSites)
	if kind != "withdraw" {
		return want
	}
	for _, r := range oks {
		want[r.site] += r.amount
	}
	return want
}

// checkBalances verifies invariant 3 on fetched balances: withdraw runs have
// exactly the accepted amounts pending and the seed as balance; deposit runs
// (nothing approved yet) have neither; available always follows its formula.
func checkBalances(f *failures, kind string, seed int64, want []int64, got []*siteBalance) {
	for k, b := range got {
		if b == nil {
			continue // the fetch failed and is already recorded as a failure
		}
		wantBal := int64(0)
		if kind == "withdraw" {
			wantBal = seed
		}
		if b.PendingWithdrawals != want[k] {
			f.add(catBalance, "site %d: pendingWithdrawals=%d, want %d", k, b.PendingWithdrawals, want[k])
		}
		if b.Balance != wantBal {
			f.add(catBalance, "site %d: balance=%d, want %d", k, b.Balance, wantBal)
		}
		if b.Available != b.Balance-b.PendingWithdrawals-b.NegativeLimit {
			f.add(catBalance, "site %d: available=%d, want balance-pendingWithdrawals-negativeLimit = %d-%d-(%d) = %d",
				k, b.Available, b.Balance, b.PendingWithdrawals, b.NegativeLimit, b.Balance-b.PendingWithdrawals-b.NegativeLimit)
		}
		if b.Currency != "IQD" {
			f.add(catBalance, "site %d: currency=%q, want IQD", k, b.Currency)
		}
	}
}

// parallel runs fn(k) for k in [0,n) on 16 workers and returns the first
// error; the HTTP checks touch every site and 1,000 sites in series is slow.
func parallel(ctx context.Context, n int, fn func(k int) error) error {
	errs := make([]error, n)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Go(func() {
			for k := range jobs {
				errs[k] = fn(k)
			}
		})
	}
	for k := 0; k < n && ctx.Err() == nil; k++ {
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(errs...)
}

// fetchBalances reads GET /v1/balance for every site (signed over the empty
// query string). A site whose balance cannot be read is a failure of
// invariant 3, not an abort, so one report shows everything that is wrong;
// its entry stays nil. Only cancellation is returned as an error.
// A gateway that does not answer at all (one a failure test stopped) is
// passed over for the next of as: only an answer counts against the
// invariant.
func fetchBalances(ctx context.Context, f *failures, as []*api, sites []site) ([]*siteBalance, error) {
	out := make([]*siteBalance, len(sites))
	err := parallel(ctx, len(sites), func(k int) error {
		var b siteBalance
		var err error
		for _, a := range as {
			var ae *apiError
			if err = a.merchantGet(ctx, sites[k], "/v1/balance", "", &b); err == nil || errors.As(err, &ae) {
				break
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				f.add(catBalance, "site %d: %v", k, err)
			}
			return nil
		}
		out[k] = &b
		return nil
	})
	return out, err
}

// lookupByProcessID fetches GET /v1/transactions?processId=… for one request,
// signed over the raw query string. found is false on a 404 not_found.
func lookupByProcessID(ctx context.Context, a *api, s site, pid string) (d txData, found bool, err error) {
	err = a.merchantGet(ctx, s, "/v1/transactions", "processId="+url.QueryEscape(pid), &d)
	var ae *apiError
	if errors.As(err, &ae) && ae.HTTPStatus == 404 {
		return d, false, nil
	}
	return d, err == nil, err
}

// resolveUnknown adds to want the amounts of withdrawals whose request got no
// definite answer (network error, 5xx) but that the gateway did record, found
// by looking each one up; without this a single client timeout would make
// the balance check fail although the gateway behaved correctly.
func resolveUnknown(ctx context.Context, a *api, t loadTarget, tag string, unknown []uint32, want []int64) (int, error) {
	if t.kind != "withdraw" || len(unknown) == 0 {
		return 0, nil
	}
	var mu sync.Mutex
	found := 0
	err := parallel(ctx, len(unknown), func(k int) error {
		i := int(unknown[k])
		d, ok, err := lookupByProcessID(ctx, a, t.sites[t.siteOf(i)], processID(tag, i))
		if err != nil || !ok {
			return err
		}
		amt, _, err := parseAmount(d.Amount)
		if err != nil {
			return fmt.Errorf("lookup %s: amount: %v", processID(tag, i), err)
		}
		mu.Lock()
		want[t.siteOf(i)] += amt
		found++
		mu.Unlock()
		return nil
	})
	return found, err
}

// sampleSize is how many records invariant 4 looks up: the -verify fraction,
// but at least 100, and all of them when there are fewer.
func sampleSize(nOK int, frac float64) int {
	k := int(math.Ceil(frac * float64(nOK)))
	k = max(k, 100)
	return min(k, nOK)
}

// checkLookup compares one status lookup with the answer kept at creation:
// same transactionId and processId, integer amount and a valid hash.
// Violations go to category cat, which names the gateway asked.
func checkLookup(f *failures, cat string, r okRec, pid string, d txData, secret string) {
	if d.TransactionID != r.txID {
		f.add(cat, "processId %s: lookup gives transactionId %q, creation gave %q", pid, d.TransactionID, r.txID)
	}
	if d.ProcessID != pid {
		f.add(cat, "processId %s: lookup gives processId %q", pid, d.ProcessID)
	}
	amt, isInt, err := parseAmount(d.Amount)
	if err != nil || !isInt {
		f.add(cat, "processId %s: lookup amount %s is not a JSON integer", pid, string(d.Amount))
		return
	}
	if !verifyHash(secret, d.TransactionID, d.BankID, amt, d.Hash) {
		f.add(cat, "processId %s: lookup hash invalid (transactionId=%q bankId=%q amount=%d)", pid, d.TransactionID, d.BankID, amt)
	}
}

// checkSample performs invariant 4: a random sample of accepted requests is
// looked up by processId and must match what creation returned. The same
// sample is looked up through every gateway in as: with several gateways a
// write acknowledged by one must be found through all (read-your-writes
// across gateways), whichever one took it. It returns the number of
// lookups made.
func checkSample(ctx context.Context, f *failures, as []*api, sites []site, tag string, oks []okRec, frac float64) (int, error) {
	k := sampleSize(len(oks), frac)
	pick := rand.Perm(len(oks))[:k]
	err := parallel(ctx, k*len(as), func(j int) error {
		g := j / k
		a, cat := as[g], lookupCat(catLookup, g, as[g])
		r := oks[pick[j%k]]
		pid := processID(tag, int(r.idx))
		d, found, err := lookupByProcessID(ctx, a, sites[r.site], pid)
		if err != nil {
			// A failing lookup is a violation of invariant 4, not an abort.
			if ctx.Err() == nil {
				f.add(cat, "processId %s: %v", pid, err)
			}
			return nil
		}
		if !found {
			f.add(cat, "processId %s: lookup answers 404 although creation answered 200", pid)
			return nil
		}
		checkLookup(f, cat, r, pid, d, sites[r.site].Secret)
		return nil
	})
	return k * len(as), err
}

// checkRefused verifies what a 503 promises (docs/merchant-api.md "Errors":
// nothing was recorded): every request answered 503 is looked up by its
// processId through every gateway and must be 404. The answers do not say
// what was stored, so one lookup per 503 is the cheapest exact check; a
// lookup that fails counts as a failure too, since then the promise is
// unverified. It returns the number of lookups made.
func checkRefused(ctx context.Context, f *failures, as []*api, t loadTarget, tag string, refused []uint32) (int, error) {
	n := len(refused)
	err := parallel(ctx, n*len(as), func(j int) error {
		g := j / n
		a, cat := as[g], lookupCat(catStored503, g, as[g])
		i := int(refused[j%n])
		pid := processID(tag, i)
		d, found, err := lookupByProcessID(ctx, a, t.sites[t.siteOf(i)], pid)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				f.add(cat, "processId %s (answered 503): lookup failed, cannot tell whether it was stored: %v", pid, err)
			}
		case found:
			f.add(cat, "processId %s was answered 503 but is stored as transactionId %q", pid, d.TransactionID)
		}
		return nil
	})
	return n * len(as), err
}
