package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPercentile checks nearest-rank percentiles on 1..1000 ms and the edges.
func TestPercentile(t *testing.T) {
	lats := make([]time.Duration, 1000)
	for i := range lats {
		lats[i] = time.Duration(i+1) * time.Millisecond
	}
	cases := []struct {
		p    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.9, 900 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {0.999, 999 * time.Millisecond}, {1, 1000 * time.Millisecond}, {0, time.Millisecond}}
	for _, c := range cases {
		if got := percentile(lats, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
	one := []time.Duration{7 * time.Millisecond}
	if percentile(one, 0.5) != 7*time.Millisecond || percentile(one, 0.999) != 7*time.Millisecond {
		t.Errorf("single value not returned")
	}
	// 4 values: nearest rank p50 is the 2nd, p90 the 4th.
	four := []time.Duration{1, 2, 3, 4}
	if percentile(four, 0.5) != 2 || percentile(four, 0.9) != 4 {
		t.Errorf("four: p50=%v p90=%v", percentile(four, 0.5), percentile(four, 0.9))
	}
}

// TestMedian covers odd, even and empty inputs and that the input is not reordered.
func TestMedian(t *testing.T) {
	xs := []float64{3, 1, 2}
	if median(xs) != 2 || xs[0] != 3 {
		t.Errorf("odd median wrong or input modified")
	}
	if median([]float64{4, 1, 3, 2}) != 2.5 {
		t.Errorf("even median")
	}
	if median(nil) != 0 {
		t.Errorf("empty median")
	}
}

// TestNewLoadReport checks throughput counts only 200s, ms rounding and ratios.
func TestNewLoadReport(t *testing.T) {
	lats := []time.Duration{1234567, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond}
	r := newLoadReport("gateway", "deposit", 4, map[int]int{200: 3, 0: 1}, lats, 2*time.Second, false)
	if r.OK != 3 || r.Throughput != 1.5 || r.Codes["neterr"] != 1 || r.Codes["200"] != 3 {
		t.Fatalf("report: %+v", r)
	}
	if r.P50Ms != 2 || r.MaxMs != 4 || ms(lats[0]) != 1.23 {
		t.Errorf("p50=%v max=%v ms(first)=%v", r.P50Ms, r.MaxMs, ms(lats[0]))
	}
	if !strings.Contains(r.Line(), "codes={200:3,neterr:1}") {
		t.Errorf("line: %s", r.Line())
	}
	ref := &LoadReport{Throughput: 3, P99Ms: 2}
	gw := &LoadReport{Throughput: 1.5, P99Ms: 4}
	if q := ratios(gw, ref); q.Throughput != 0.5 || q.P99 != 2 {
		t.Errorf("ratios %+v", q)
	}
	if q := ratios(gw, &LoadReport{}); q.Throughput != 0 || q.P99 != 0 {
		t.Errorf("zero denominator must give 0, got %+v", q)
	}
}

// TestComputeMedians checks per-figure medians and that optional figures need every run.
func TestComputeMedians(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	runs := []RunReport{
		{Gateway: &LoadReport{Throughput: 10, P99Ms: 5, P999Ms: 9, LongestGapMs: 1, RSSPeakMiB: f(100), ServerCPUus: f(120), ClientCPUus: f(50)}, Ref: &LoadReport{Throughput: 20, P99Ms: 1, ServerCPUus: f(60)}, Ratio: &Ratios{0.5, 5}, RestartToReadyS: f(1)},
		{Gateway: &LoadReport{Throughput: 30, P99Ms: 7, P999Ms: 8, LongestGapMs: 300, RSSPeakMiB: f(300), ServerCPUus: f(100), ClientCPUus: f(40)}, Ref: &LoadReport{Throughput: 20, P99Ms: 1, ServerCPUus: f(50)}, Ratio: &Ratios{1.5, 7}, RestartToReadyS: f(3)},
		{Gateway: &LoadReport{Throughput: 20, P99Ms: 6, P999Ms: 7, LongestGapMs: 2, ServerCPUus: f(140), ClientCPUus: f(45)}, Ref: &LoadReport{Throughput: 20, P99Ms: 1}, Ratio: &Ratios{1, 6}, RestartToReadyS: f(2)},
	}
	m := computeMedians(runs)
	if m.Gateway.Throughput != 20 || m.Gateway.P99Ms != 6 || m.Gateway.P999Ms != 8 || m.Gateway.LongestGapMs != 2 || m.Ratio.Throughput != 1 || m.Ratio.P99 != 6 {
		t.Errorf("medians %+v %+v", m.Gateway, m.Ratio)
	}
	if m.Gateway.RSSPeakMiB != nil {
		t.Errorf("RSS median reported although one run lacks it")
	}
	if m.Gateway.RestartToReadyS == nil || *m.Gateway.RestartToReadyS != 2 {
		t.Errorf("restart median")
	}
	if m.Gateway.ServerCPUus == nil || *m.Gateway.ServerCPUus != 120 || m.Gateway.ClientCPUus == nil || *m.Gateway.ClientCPUus != 45 {
		t.Errorf("CPU medians %v %v", m.Gateway.ServerCPUus, m.Gateway.ClientCPUus)
	}
	if m.Ref.ServerCPUus != nil {
		t.Errorf("refgw CPU median reported although one run lacks it")
	}
	if line := m.Gateway.Line("gateway"); !strings.Contains(line, " cpu_per_req=120.0us loadtest_cpu_per_req=45.0us") {
		t.Errorf("median line %q", line)
	}
}

// TestSign checks the HMAC against RFC 4231 test case 2 and base64 output.
func TestSign(t *testing.T) {
	want, _ := hex.DecodeString("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
	if got := sign("Jefe", "what do ya want for nothing?"); got != base64.StdEncoding.EncodeToString(want) {
		t.Errorf("sign = %s", got)
	}
	// A GET without query string is signed over the empty string.
	m := hmac.New(sha256.New, []byte("k"))
	if sign("k", "") != base64.StdEncoding.EncodeToString(m.Sum(nil)) {
		t.Errorf("empty payload")
	}
}

// TestVerifyHash checks the hashing of docs/merchant-api.md "Response hash": concatenation order, decimal
// amount, and rejection of wrong values and malformed text.
func TestVerifyHash(t *testing.T) {
	good := sign("sec", "tx1"+"bank1"+"25000")
	if !verifyHash("sec", "tx1", "bank1", 25000, good) {
		t.Fatal("valid hash rejected")
	}
	for name, ok := range map[string]bool{
		"wrong amount":  verifyHash("sec", "tx1", "bank1", 25001, good),
		"wrong secret":  verifyHash("other", "tx1", "bank1", 25000, good),
		"wrong bank":    verifyHash("sec", "tx1", "bank2", 25000, good),
		"swapped order": verifyHash("sec", "bank1", "tx1", 25000, good),
		"not base64":    verifyHash("sec", "tx1", "bank1", 25000, strings.Repeat("!", 44)),
		"short":         verifyHash("sec", "tx1", "bank1", 25000, good[:40]),
		"empty":         verifyHash("sec", "tx1", "bank1", 25000, ""),
		"fraction text": verifyHash("sec", "tx1", "bank1", 25000, sign("sec", "tx1bank125000.00")),
	} {
		if ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestBuildBody checks the request form: fields, amounts in range, distinct
// users, and the PHONE identifier format for withdrawals.
func TestBuildBody(t *testing.T) {
	b := buildBody("withdraw", "tg", "ltx", 1234567)
	v, err := url.ParseQuery(b)
	if err != nil {
		t.Fatal(err)
	}
	if v.Get("bankId") != "ltx" || v.Get("processId") != "tg-1234567" || v.Get("amount") != "18000" || v.Get("userId") != "u1234567" {
		t.Errorf("fields: %v", v)
	}
	if !regexp.MustCompile(`^07\d{9}$`).MatchString(v.Get("iban")) || v.Get("accountName") == "" || v.Get("name") == "" || v.Get("userName") == "" {
		t.Errorf("withdraw fields: %v", v)
	}
	d, _ := url.ParseQuery(buildBody("deposit", "tg", "ltx", 1))
	if d.Has("iban") || d.Has("accountName") {
		t.Errorf("deposit carries withdraw fields: %v", d)
	}
	if b != buildBody("withdraw", "tg", "ltx", 1234567) {
		t.Errorf("body not deterministic; the signature would not match a retry")
	}
	for i := 0; i < 100; i++ {
		if a := requestAmount(i); a < 1000 || a > 50000 || a%1000 != 0 {
			t.Errorf("amount %d out of method range", a)
		}
	}
}

// TestParseAmount distinguishes JSON integers from strings and fractions.
func TestParseAmount(t *testing.T) {
	if v, isInt, err := parseAmount([]byte("25000")); v != 25000 || !isInt || err != nil {
		t.Errorf("int: %v %v %v", v, isInt, err)
	}
	if v, isInt, err := parseAmount([]byte(`"25000"`)); v != 25000 || isInt || err != nil {
		t.Errorf("string: %v %v %v", v, isInt, err)
	}
	if _, _, err := parseAmount([]byte("25000.0")); err == nil {
		t.Errorf("fraction accepted")
	}
	if _, _, err := parseAmount(nil); err == nil {
		t.Errorf("missing accepted")
	}
}

// synthetic builds n correct records over the given sites, as a correct
// gateway would answer requests 0..n-1 with bank _id "B1".
func synthetic(n int, sites []site) []okRec {
	oks := make([]okRec, n)
	for i := range oks {
		s := i % len(sites)
		tx := "tx" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		oks[i] = okRec{txID: tx, bankID: "B1", amount: requestAmount(i), idx: uint32(i), site: uint32(s)}
		oks[i].hash, _ = decodeHash(sign(sites[s].Secret, tx+"B1"+strconv.FormatInt(requestAmount(i), 10)))
	}
	return oks
}

var testSites = []site{{ID: "s0", AppKey: "k0", Secret: "secret0"}, {ID: "s1", AppKey: "k1", Secret: "secret1"}, {ID: "s2", AppKey: "k2", Secret: "secret2"}}

// TestCheckRecordsPasses: a correct synthetic run has no failures.
func TestCheckRecordsPasses(t *testing.T) {
	f := newFailures()
	checkRecords(f, synthetic(500, testSites), testSites, "B1")
	if l := f.lines(); len(l) != 0 {
		t.Fatalf("unexpected failures: %v", l)
	}
}

// TestCheckRecordsFails: each kind of corruption is caught under its own category.
func TestCheckRecordsFails(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(oks []okRec)
		cat    string
	}{
		{"bad hash", func(o []okRec) { o[7].hash[0] ^= 1 }, catHash},
		{"undecodable hash", func(o []okRec) { o[7].flags |= flagHashBad }, catHash},
		{"hash under other site's secret", func(o []okRec) { o[7].site = (o[7].site + 1) % 3 }, catHash},
		{"duplicate transactionId", func(o []okRec) {
			o[9].txID = o[3].txID
			o[9].hash = expectedHash(testSites[o[9].site].Secret, o[9].txID, "B1", o[9].amount)
		}, catDupTx},
		{"duplicate processId", func(o []okRec) {
			o[10] = o[4]
			o[10].txID = "other"
			o[10].hash = expectedHash(testSites[o[4].site].Secret, "other", "B1", o[4].amount)
		}, catDupPID},
		{"bankId is not the _id", func(o []okRec) {
			o[2].bankID = "code"
			o[2].hash = expectedHash(testSites[o[2].site].Secret, o[2].txID, "code", o[2].amount)
		}, catBankID},
		{"amount as string", func(o []okRec) { o[1].flags |= flagAmountNotInt }, catAmountInt},
		{"amount echo", func(o []okRec) { o[1].flags |= flagAmountMismatch }, catAmount},
		{"processId echo", func(o []okRec) { o[1].flags |= flagProcessID }, catProcessID},
		{"alreadyPending", func(o []okRec) { o[1].flags |= flagAlreadyPending }, catAlready},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			oks := synthetic(60, testSites)
			c.mutate(oks)
			f := newFailures()
			checkRecords(f, oks, testSites, "B1")
			if !f.has(c.cat) {
				t.Fatalf("%s not detected; failures: %v", c.cat, f.lines())
			}
		})
	}
}

// TestCheckBalances: correct withdraw and deposit balances pass; a wrong
// pending amount, balance, available or currency fails.
func TestCheckBalances(t *testing.T) {
	oks := synthetic(90, testSites)
	want := expectedPending("withdraw", oks, 3)
	var sum int64
	for _, r := range oks {
		if r.site == 1 {
			sum += r.amount
		}
	}
	if want[1] != sum {
		t.Fatalf("expectedPending site 1 = %d, want %d", want[1], sum)
	}
	good := func() []*siteBalance {
		g := make([]*siteBalance, 3)
		for k := range g {
			g[k] = &siteBalance{Balance: 5_000_000, PendingWithdrawals: want[k], NegativeLimit: -1000, Currency: "IQD"}
			g[k].Available = g[k].Balance - g[k].PendingWithdrawals - g[k].NegativeLimit
		}
		return g
	}
	f := newFailures()
	checkBalances(f, "withdraw", 5_000_000, want, good())
	if len(f.lines()) != 0 {
		t.Fatalf("correct balances rejected: %v", f.lines())
	}
	for name, mutate := range map[string]func(g []*siteBalance){
		"pending":   func(g []*siteBalance) { g[2].PendingWithdrawals -= 1000; g[2].Available += 1000 },
		"balance":   func(g []*siteBalance) { g[0].Balance += 1; g[0].Available += 1 },
		"available": func(g []*siteBalance) { g[1].Available++ },
		"currency":  func(g []*siteBalance) { g[1].Currency = "" },
	} {
		g := good()
		mutate(g)
		f := newFailures()
		checkBalances(f, "withdraw", 5_000_000, want, g)
		if !f.has(catBalance) {
			t.Errorf("wrong %s not detected", name)
		}
	}

	dw := expectedPending("deposit", oks, 3)
	dep := []*siteBalance{{Currency: "IQD"}, {Currency: "IQD"}, {Currency: "IQD"}}
	f = newFailures()
	checkBalances(f, "deposit", 0, dw, dep)
	if len(f.lines()) != 0 {
		t.Fatalf("deposit balances rejected: %v", f.lines())
	}
	dep[0] = &siteBalance{Balance: 1000, Available: 1000, Currency: "IQD"}
	f = newFailures()
	checkBalances(f, "deposit", 0, dw, dep)
	if !f.has(catBalance) {
		t.Errorf("deposit run with non-zero balance not detected")
	}
}

// TestCheckLookup: a lookup must repeat the transactionId with a valid hash.
func TestCheckLookup(t *testing.T) {
	r := synthetic(5, testSites)[3]
	sec := testSites[r.site].Secret
	d := txData{TransactionID: r.txID, BankID: "B1", Amount: []byte("4000"), ProcessID: "tg-3", Hash: sign(sec, r.txID+"B1"+"4000")}
	f := newFailures()
	checkLookup(f, catLookup, r, "tg-3", d, sec)
	if len(f.lines()) != 0 {
		t.Fatalf("good lookup rejected: %v", f.lines())
	}
	bad := d
	bad.TransactionID = "other"
	f = newFailures()
	checkLookup(f, catLookup, r, "tg-3", bad, sec)
	if !f.has(catLookup) {
		t.Errorf("different transactionId not detected")
	}
	bad = d
	bad.Hash = sign("wrong", r.txID+"B1"+"4000")
	f = newFailures()
	checkLookup(f, catLookup, r, "tg-3", bad, sec)
	if !f.has(catLookup) {
		t.Errorf("bad lookup hash not detected")
	}
}

// TestCheckCodes: non-200 answers fail the run unless -allow-errors.
func TestCheckCodes(t *testing.T) {
	res := &loadResult{total: 10, codes: map[int]int{200: 9, 402: 1}, errSamples: map[int]string{402: "insufficient"}}
	f := newFailures()
	checkCodes(f, res, false)
	if !f.has(catStatusCodes) {
		t.Errorf("402 not reported")
	}
	f = newFailures()
	checkCodes(f, res, true)
	if len(f.lines()) != 0 {
		t.Errorf("allow-errors ignored")
	}
}

// TestSampleSize: the fraction, at least 100, never more than there are.
func TestSampleSize(t *testing.T) {
	for _, c := range []struct {
		n    int
		f    float64
		want int
	}{{1_000_000, 0.01, 10000}, {5000, 0.01, 100}, {50, 0.01, 50}, {0, 0.01, 0}, {1000, 1, 1000}, {1000, 0, 100}} {
		if got := sampleSize(c.n, c.f); got != c.want {
			t.Errorf("sampleSize(%d, %v) = %d, want %d", c.n, c.f, got, c.want)
		}
	}
}

// TestDefaultSeed: the default treasury covers every withdrawal of a site.
func TestDefaultSeed(t *testing.T) {
	for _, c := range [][2]int{{20000, 1}, {20001, 7}, {5, 1000}} {
		n, s := c[0], c[1]
		need := make([]int64, s)
		for i := 0; i < n; i++ {
			need[i%s] += requestAmount(i)
		}
		seed := defaultSeed(n, s)
		for k, v := range need {
			if v >= seed {
				t.Errorf("n=%d sites=%d: site %d needs %d, seed %d", n, s, k, v, seed)
			}
		}
	}
}

// TestParseRSS reads VmHWM and VmRSS from a /proc status excerpt.
func TestParseRSS(t *testing.T) {
	peak, cur, err := parseRSS(strings.NewReader("Name:\tgw\nVmPeak:\t 999 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"))
	if err != nil || peak != 200 || cur != 100 {
		t.Errorf("peak=%v cur=%v err=%v", peak, cur, err)
	}
	if _, _, err := parseRSS(strings.NewReader("Name: x\n")); err == nil {
		t.Errorf("missing fields accepted")
	}
}

// TestValidate rejects unusable flag combinations.
func TestValidate(t *testing.T) {
	bad := [][]string{
		{},
		{"-gateway", "x", "-url", "http://y", "-admin-token", "t"},
		{"-url", "http://y"},
		{"-url", "http://y", "-admin-token", "t", "-restart"},
		{"-ref-only"},
		{"-gateway", "x", "-kind", "refund"},
		{"-gateway", "x", "-sync", "never"},
		{"-gateway", "x", "-c", "0"},
		{"-gateway", "x", "-verify", "2"},
		{"-url", "http://a:1,http://a:1/", "-admin-token", "t"},
		{"-url", "http://a:1,", "-admin-token", "t"},
		{"-url", "ftp://a:1", "-admin-token", "t"},
		{"-url", "a:1", "-admin-token", "t"},
		{"-url", "http://a:1,http://b:2,http://c:3", "-admin-token", "t", "-c", "2"},
		{"-url", "http://a:1,http://b:2", "-admin-token", "t", "-kind", "callbacks"},
		{"-gateway", "x", "-sites", "1", "-hot", "0.5"},
		{"-gateway", "x", "-sites", "10", "-hot", "1"},
		{"-gateway", "x", "-sites", "10", "-hot", "-0.1"},
		{"-gateway", "x", "-restart", "-stop", "quit"},
		{"-gateway", "x", "-kind", "callbacks", "-ref", "r"},
		{"-url", "http://y", "-admin-token", "t", "-memory-limit", "450MiB"},
	}
	for _, a := range bad {
		if _, err := parseFlags(a); err == nil {
			t.Errorf("%v accepted", a)
		}
	}
	good := [][]string{
		{"-gateway", "x"},
		{"-url", "http://y", "-admin-token", "t", "-kind", "withdraw", "-sites", "1000"},
		{"-ref", "r", "-ref-only", "-runs", "3"},
		{"-gateway", "x", "-ref", "r", "-restart", "-sync", "interval"},
		{"-url", "http://127.0.0.1:18081, http://127.0.0.1:18082/", "-admin-token", "t", "-allow-errors"},
		{"-gateway", "x", "-sites", "1000", "-hot", "0.5"},
		{"-gateway", "x", "-kind", "callbacks", "-sites", "1000", "-restart", "-stop", "term"},
		{"-gateway", "x", "-kind", "callbacks", "-memory-limit", "450MiB"},
	}
	for _, a := range good {
		if _, err := parseFlags(a); err != nil {
			t.Errorf("%v rejected: %v", a, err)
		}
	}
}

// TestCompact keeps filled slots in order and drops the marker.
func TestCompact(t *testing.T) {
	oks := make([]okRec, 6)
	for _, i := range []int{1, 4, 5} {
		oks[i] = okRec{txID: "t" + strconv.Itoa(i), idx: uint32(i), flags: flagKept | flagAmountMismatch}
	}
	got := compact(oks)
	if len(got) != 3 || got[0].idx != 1 || got[1].idx != 4 || got[2].idx != 5 {
		t.Fatalf("compact: %+v", got)
	}
	for _, r := range got {
		if r.flags != flagAmountMismatch {
			t.Errorf("flags %b", r.flags)
		}
	}
	if len(compact(nil)) != 0 {
		t.Errorf("nil")
	}
}

// TestSplitURLs: spaces and trailing slashes go, order stays, so client k's
// gateway is the k-th listed.
func TestSplitURLs(t *testing.T) {
	got, err := splitURLs(" http://a:1/ ,https://b:2")
	if err != nil || len(got) != 2 || got[0] != "http://a:1" || got[1] != "https://b:2" {
		t.Fatalf("got %q, %v", got, err)
	}
	if got, err := splitURLs("http://a:1"); err != nil || len(got) != 1 || got[0] != "http://a:1" {
		t.Fatalf("one URL: %q, %v", got, err)
	}
}

// TestLongestGap computes the longest stretch without a 200 from synthetic
// completion offsets (in ms) of a load that lasted elapsed ms.
func TestLongestGap(t *testing.T) {
	cases := []struct {
		name         string
		okAt         []int
		elapsed      int
		length, from int
		edge         string
	}{
		{"no 200 at all", nil, 500, 500, 0, gapEdgeWhole},
		{"between two 200s", []int{10, 20, 100, 110}, 120, 80, 20, ""},
		{"unsorted input", []int{110, 10, 100, 20}, 120, 80, 20, ""},
		{"start longest", []int{50, 60, 70}, 75, 50, 0, gapEdgeStart},
		{"start only as long as an inner gap", []int{30, 40, 70}, 70, 30, 40, ""},
		{"end longest", []int{5, 10, 15}, 100, 85, 15, gapEdgeEnd},
		{"end only as long as an inner gap", []int{1, 11, 12}, 22, 10, 1, ""},
		{"single 200 early", []int{40}, 50, 40, 0, gapEdgeStart},
		{"single 200 late", []int{10}, 50, 40, 10, gapEdgeEnd},
		{"outage in the middle", []int{1, 2, 3, 4, 1004, 1005, 1006}, 1007, 1000, 4, ""},
		{"simultaneous 200s", []int{5, 5, 5}, 6, 5, 0, gapEdgeStart},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var okAt []time.Duration
			for _, v := range c.okAt {
				okAt = append(okAt, time.Duration(v)*time.Millisecond)
			}
			g := longestGap(okAt, time.Duration(c.elapsed)*time.Millisecond)
			want := gap{from: time.Duration(c.from) * time.Millisecond, length: time.Duration(c.length) * time.Millisecond, edge: c.edge}
			if g != want {
				t.Errorf("got %+v, want %+v", g, want)
			}
		})
	}
}

// TestAvailabilityReport: the error classes add up to the non-200 answers,
// and the gap is reported with where it lies.
func TestAvailabilityReport(t *testing.T) {
	codes := map[int]int{200: 90, 503: 4, 504: 2, 402: 1, 500: 1, 0: 2}
	r := newLoadReport("gateway", "deposit", 100, codes, nil, time.Second, false)
	if r.Status503 != 4 || r.Status504 != 2 || r.OtherErrors != 2 || r.TransportErrors != 2 {
		t.Fatalf("counts %+v", r)
	}
	r.setGap(gap{length: 1234567 * time.Microsecond, edge: gapEdgeStart})
	l := r.AvailabilityLine()
	for _, want := range []string{"longest_gap=1234.57ms", "from the start to the first 200", "503=4 504=2 other=2 transport=2"} {
		if !strings.Contains(l, want) {
			t.Errorf("%q lacks %q", l, want)
		}
	}
	r.setGap(gap{from: 2 * time.Second, length: time.Second})
	if l := r.AvailabilityLine(); !strings.Contains(l, "longest_gap=1000.00ms at=2.00s 503") {
		t.Errorf("inner gap: %q", l)
	}
	r.URLs = []URLStats{{URL: "http://a:1", Requests: 60, OK: 55}, {URL: "http://b:2", Requests: 40, OK: 35}}
	if l := r.URLLine(); l != "gateway urls: http://a:1 requests=60 ok=55, http://b:2 requests=40 ok=35" {
		t.Errorf("urls line: %q", l)
	}
}

// TestSiteOf: round-robin by default; with -hot the share of the first
// site is exact over any stretch of requests, and the others share the
// rest evenly.
func TestSiteOf(t *testing.T) {
	sites := make([]site, 10)
	count := func(tg loadTarget, n int) []int {
		c := make([]int, len(sites))
		for i := range n {
			c[tg.siteOf(i)]++
		}
		return c
	}
	even := count(loadTarget{sites: sites}, 1000)
	for k, c := range even {
		if c != 100 {
			t.Errorf("round-robin: site %d got %d of 1000", k, c)
		}
	}
	for _, hot := range []float64{0.5, 0.25, 0.9} {
		c := count(loadTarget{sites: sites, hot: hot}, 9000)
		if want := int(9000 * hot); c[0] != want {
			t.Errorf("hot %.2f: first site got %d of 9000, want %d", hot, c[0], want)
		}
		for k := 2; k < len(c); k++ {
			if d := c[k] - c[1]; d < -1 || d > 1 {
				t.Errorf("hot %.2f: site %d got %d, site 1 %d", hot, k, c[k], c[1])
			}
		}
	}
	one := loadTarget{sites: sites[:1], hot: 0.5}
	if one.siteOf(7) != 0 {
		t.Error("one site takes every request")
	}
}

// TestCheckBinaries: a missing or non-executable -ref or -gateway is named
// with the command that builds it.
func TestCheckBinaries(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "exe")
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		o    options
		want string
	}{
		{options{gateway: exe, ref: exe}, ""},
		{options{gateway: exe, ref: filepath.Join(dir, "refgw")}, "-ref " + filepath.Join(dir, "refgw") + ": no such file; build it with: go build -C ../shared/bench"},
		{options{gateway: plain}, "-gateway " + plain + ": not an executable file"},
		{options{gateway: dir}, "not an executable file"},
	}
	for _, c := range cases {
		err := checkBinaries(c.o)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.o, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: got %v, want %q", c.o, err, c.want)
		}
	}
}

// TestProc_lifePeak: the peak of a process's whole life is its own: a
// child that touched 64 MiB and logged its VmHWM as it stops reports at
// least that, and one that touched nothing reports little although this
// process holds 200 MiB when it starts it (the kernel's ru_maxrss would
// report those 200 MiB for the child).
func TestProc_lifePeak(t *testing.T) {
	if mib := os.Getenv("LOADTEST_TOUCH_MIB"); mib != "" {
		n, _ := strconv.Atoi(mib)
		b := make([]byte, n<<20)
		for i := range b {
			b[i] = 1
		}
		peak, _, err := readRSS(os.Getpid())
		if err != nil {
			os.Exit(3)
		}
		fmt.Printf("time=now level=INFO msg=stopped peakRSSMiB=%.1f\n", peak)
		os.Exit(int(b[len(b)-1]) - 1)
	}
	held := make([]byte, 200<<20)
	for i := range held {
		held[i] = 1
	}
	_, parent, err := readRSS(os.Getpid())
	require.NoError(t, err)
	for _, c := range []struct {
		touch int
		check func(peak float64)
	}{
		{64, func(peak float64) { assert.GreaterOrEqual(t, peak, 64.0, "touched 64 MiB") }},
		{1, func(peak float64) {
			assert.Less(t, peak, parent/2, "touched 1 MiB: the parent's %.0f MiB are not the child's", parent)
		}},
	} {
		t.Setenv("LOADTEST_TOUCH_MIB", strconv.Itoa(c.touch))
		log := filepath.Join(t.TempDir(), "toucher.log")
		// A first life in the same log, whose figure must not count.
		require.NoError(t, os.WriteFile(log, []byte("msg=stopped peakRSSMiB=999\n"), 0o644))
		p, err := startProc("toucher", os.Args[0], []string{"-test.run=^TestProc_lifePeak$"}, log)
		require.NoError(t, err)
		<-p.done
		require.NoError(t, p.waitErr)
		c.check(p.lifePeakMiB())
	}
	assert.Equal(t, byte(1), held[len(held)-1])
}

// TestFetchBalances_passesOverAGatewayThatDoesNotAnswer: the balance check
// reads through the next gateway when one does not answer at all (a
// failure test stopped it), and still counts a gateway's refusal.
func TestFetchBalances_passesOverAGatewayThatDoesNotAnswer(t *testing.T) {
	g := newFake("tok", "")
	srv := httptest.NewServer(g.handler())
	t.Cleanup(srv.Close)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // its address now refuses connections
	ctx := context.Background()
	live := newAPI(srv.URL, "tok")
	m, err := live.createMethod(ctx)
	require.NoError(t, err)
	sites, err := live.createSites(ctx, "fb", 3, m, 1000)
	require.NoError(t, err)

	f := newFailures()
	bal, err := fetchBalances(ctx, f, []*api{newAPI(dead.URL, "tok"), live}, sites)
	require.NoError(t, err)
	require.Empty(t, f.lines())
	for k := range sites {
		require.NotNil(t, bal[k], "site %d", k)
	}
	// An answer that refuses is a failure, not passed over.
	f = newFailures()
	_, err = fetchBalances(ctx, f, []*api{live, newAPI(dead.URL, "tok")}, []site{{ID: "nope", AppKey: "nope", Secret: "x"}})
	require.NoError(t, err)
	require.True(t, f.has(catBalance))
}
