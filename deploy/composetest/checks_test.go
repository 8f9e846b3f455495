package composetest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// report logs what the drivers saw: answers by gateway and status, the
// longest spans without an acknowledged create, the faults' timeline.
func report(t *testing.T, all []attempt, tl *timeline, took time.Duration) {
	t.Helper()
	counts := map[string]int{}
	var acks [][]time.Duration
	for range 3 {
		acks = append(acks, nil)
	}
	n503, nNone, nActions, nActions503 := 0, 0, 0, 0
	for _, a := range all {
		key := fmt.Sprintf("%s %s %d %s", gatewayServices()[a.gw], a.kind, a.status, a.code)
		if a.status == 0 {
			key = fmt.Sprintf("%s %s no answer", gatewayServices()[a.gw], a.kind)
			nNone++
		}
		counts[key]++
		if a.status == 503 {
			n503++
		}
		if a.acked() {
			acks[a.gw] = append(acks[a.gw], a.done)
			acks[2] = append(acks[2], a.done)
		}
		for _, act := range a.actions {
			nActions++
			if act.status == 503 {
				nActions503++
			}
			counts[fmt.Sprintf("%s %s %d %s", gatewayServices()[a.gw], act.name, act.status, act.code)]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-40s %6d", k, counts[k])
	}
	t.Logf("drive: %.1fs, %d creates (%d acknowledged, %.0f/s), %d answered 503, %d unanswered; %d operator actions, %d answered 503; answers:%s",
		took.Seconds(), len(all), len(acks[2]), float64(len(acks[2]))/took.Seconds(), n503, nNone, nActions, nActions503, b.String())
	for i, name := range []string{"gateway-1", "gateway-2", "both gateways"} {
		gaps := longestGaps(acks[i], took, 3)
		var g strings.Builder
		for _, gap := range gaps {
			fmt.Fprintf(&g, " %.2fs (from %.2fs)", gap.len.Seconds(), gap.from.Seconds())
		}
		t.Logf("longest spans without an acknowledged create through %s:%s", name, g.String())
	}
	t.Logf("fault timeline (seconds since the drive began):\n  %s", strings.Join(tl.lines, "\n  "))
}

// gap is a span without an acknowledged create.
type gap struct{ from, len time.Duration }

// longestGaps are the n longest spans between consecutive acknowledged
// creates, counting from the drive's start to its end.
func longestGaps(acks []time.Duration, end time.Duration, n int) []gap {
	ts := append([]time.Duration{0}, acks...)
	ts = append(ts, end)
	slices.Sort(ts)
	var gaps []gap
	for i := 1; i < len(ts); i++ {
		gaps = append(gaps, gap{from: ts[i-1], len: ts[i] - ts[i-1]})
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i].len > gaps[j].len })
	return gaps[:min(n, len(gaps))]
}

// checkAttempts checks the stored history against what the drivers were
// told: through each gateway, every acknowledged create by processId, the
// whole listing (once per processId, nothing answered 503 or refused, and
// every acknowledged action applied), and the balances.
func checkAttempts(t *testing.T, gws []*gateway, st setup, all []attempt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	byPid := map[string]attempt{}
	for _, a := range all {
		byPid[a.pid] = a
	}

	checkReadBacks(t, gws, all)

	// Lookups by processId, through both gateways, of every acknowledged
	// create: each once, no retry (a 404 here is the finding).
	for _, g := range gws {
		bad := lookups(ctx, g, st.site, all)
		for what, pids := range bad {
			t.Errorf("%s: %d acknowledged creates looked up by processId right after the faults: %s, e.g.\n  %s",
				g.name, len(pids), what, strings.Join(pids[:min(5, len(pids))], "\n  "))
		}
	}

	var lists [][]record
	for _, g := range gws {
		recs, err := listing(ctx, g, st.site.ID)
		if err != nil {
			t.Errorf("list %s's transactions through %s: %v", st.site.ID, g.name, err)
			continue
		}
		lists = append(lists, recs)
		checkListing(t, g.name, recs, byPid)
		checkBalances(t, g, st, recs)
	}
	if len(lists) == 2 && !sameRecords(lists[0], lists[1]) {
		t.Errorf("the listings through %s (%d records) and %s (%d records) differ", gws[0].name, len(lists[0]), gws[1].name, len(lists[1]))
	}
	t.Logf("checks of the history took %.1fs", time.Since(start).Seconds())
}

// checkReadBacks checks the lookups sent through the other gateway right
// after a create was acknowledged: found, as acknowledged. A 503 or no
// answer in time is allowed during faults and counted.
func checkReadBacks(t *testing.T, gws []*gateway, all []attempt) {
	t.Helper()
	sent, found, unavailable := 0, 0, map[string]int{}
	bad := map[string][]string{}
	for _, a := range all {
		r := a.read
		if r == nil {
			continue
		}
		sent++
		switch {
		case r.status == 200 && r.txID == a.txID:
			found++
		case r.status == 0:
			unavailable["no answer within "+crossTimeout.String()]++
		case r.status == 503:
			unavailable["503"]++
		default:
			what := fmt.Sprintf("answered %d %s", r.status, r.code)
			if r.status == 200 {
				what = "found transaction " + r.txID + ", not the one acknowledged"
			}
			bad[what] = append(bad[what], fmt.Sprintf("%s (create through %s at %.2fs requestId %s, lookup through %s requestId %s)",
				a.pid, gws[a.gw].name, a.done.Seconds(), a.reqID, gws[r.gw].name, r.reqID))
		}
	}
	t.Logf("read-backs through the other gateway right after an acknowledged create: %d sent, %d found, unavailable %v", sent, found, unavailable)
	for what, ids := range bad {
		t.Errorf("read-back through the other gateway right after an acknowledged create: %d × %s, e.g.\n  %s",
			len(ids), what, strings.Join(ids[:min(5, len(ids))], "\n  "))
	}
}

// lookups looks every acknowledged create up by processId through g and
// returns the processIds whose lookup did not answer the acknowledged
// transaction, by what it answered.
func lookups(ctx context.Context, g *gateway, s site, all []attempt) map[string][]string {
	work := make(chan attempt)
	var mu sync.Mutex
	bad := map[string][]string{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				e, err := g.merchant(ctx, s, "GET", "/v1/transactions", url.Values{"processId": {a.pid}})
				var rec record
				if err == nil && e.Status == 200 {
					err = decode(e, &rec)
				}
				what := ""
				switch {
				case err != nil:
					what = "no answer"
				case e.Status != 200:
					what = fmt.Sprintf("answered %d %s", e.Status, e.Code)
				case rec.TransactionID != a.txID:
					what = "a different transaction than acknowledged"
				}
				if what != "" {
					mu.Lock()
					bad[what] = append(bad[what], fmt.Sprintf("%s (create requestId %s, lookup %s)", a.pid, a.reqID, answer(e, err)))
					mu.Unlock()
				}
			}
		}()
	}
	for _, a := range all {
		if a.acked() {
			work <- a
		}
	}
	close(work)
	wg.Wait()
	return bad
}

// listing pages through a site's transactions, after a read that makes
// the gateway catch up with the site's history (the listing itself
// covers what the process has applied).
func listing(ctx context.Context, g *gateway, siteID string) ([]record, error) {
	if e, err := g.ops(ctx, "GET", "/ops/v1/sites/"+siteID, nil, ""); err != nil || e.Status != 200 {
		return nil, fmt.Errorf("read the site: %s", answer(e, err))
	}
	var out []record
	cursor := ""
	for {
		q := url.Values{"site": {siteID}, "limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		e, err := g.ops(ctx, "GET", "/ops/v1/transactions?"+q.Encode(), nil, "")
		if err != nil || e.Status != 200 {
			return nil, fmt.Errorf("page after %q: %s", cursor, answer(e, err))
		}
		var page struct {
			Items      []record `json:"items"`
			NextCursor *string  `json:"nextCursor"`
		}
		if err := decode(e, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.NextCursor == nil {
			return out, nil
		}
		cursor = *page.NextCursor
	}
}

// checkListing checks one gateway's listing against the drivers' answers.
func checkListing(t *testing.T, gw string, recs []record, byPid map[string]attempt) {
	t.Helper()
	problems := map[string][]string{}
	add := func(what, id string) { problems[what] = append(problems[what], id) }
	seenPid := map[string]int{}
	seenTx := map[string]int{}
	unknownStored, unknownTotal := 0, 0
	for _, a := range byPid {
		if a.status == 0 {
			unknownTotal++
		}
	}
	for _, r := range recs {
		seenPid[r.ProcessID]++
		seenTx[r.TransactionID]++
		a, ok := byPid[r.ProcessID]
		switch {
		case !ok:
			add("stored but never sent", r.ProcessID)
			continue
		case a.status == 0:
			unknownStored++
		case a.status == 503:
			add("create answered 503 (not stored) but stored", a.pid+" requestId "+a.reqID)
		case !a.acked():
			add(fmt.Sprintf("create answered %d %s but stored", a.status, a.code), a.pid+" requestId "+a.reqID)
		case r.TransactionID != a.txID:
			add("stored under another transactionId than acknowledged", r.ProcessID)
		}
		if what, reqID := actionsExplain(a, r.Status); what != "" {
			add(what, a.pid+" requestId "+reqID)
		}
	}
	for pid, n := range seenPid {
		if n > 1 {
			add(fmt.Sprintf("processId has %d transactions", n), pid)
		}
	}
	for tx, n := range seenTx {
		if n > 1 {
			add(fmt.Sprintf("transactionId listed %d times", n), tx)
		}
	}
	for pid, a := range byPid {
		if a.acked() && seenPid[pid] == 0 {
			add("acknowledged but not in the listing", pid)
		}
	}
	for what, ids := range problems {
		sort.Strings(ids)
		t.Errorf("%s listing: %d × %s, e.g.\n  %s", gw, len(ids), what, strings.Join(ids[:min(5, len(ids))], "\n  "))
	}
	t.Logf("%s listing: %d transactions; of %d creates that got no answer, %d were stored", gw, len(recs), unknownTotal, unknownStored)
}

// actionsExplain says what is wrong when a transaction's stored status
// does not follow from the actions sent on it: an acknowledged action
// must be applied; one refused (503, or any other error answer) must not
// be; one without an answer may be either. It returns "" when the status
// is explained, else what is wrong and the last action's requestId.
func actionsExplain(a attempt, status string) (string, string) {
	// The status before the last action sent, and the one it would make.
	want := map[string]bool{"pending": true}
	reqID := ""
	for _, act := range a.actions {
		to := map[string]string{"approve": "approved", "process": "processing", "pay": "paid"}[act.name]
		reqID = act.reqID
		switch {
		case act.acked():
			want = map[string]bool{to: true}
		case act.status == 0:
			want[to] = true
		}
	}
	if want[status] {
		return "", ""
	}
	var sent []string
	for _, act := range a.actions {
		sent = append(sent, fmt.Sprintf("%s→%d %s", act.name, act.status, act.code))
	}
	return fmt.Sprintf("%s stored as %s after actions %v", a.kind, status, sent), reqID
}

// checkBalances compares the site's treasury, as the merchant API and the
// operator API show it through g, with the sums of the listed history.
func checkBalances(t *testing.T, g *gateway, st setup, recs []record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := treasury{Balance: float}
	for _, r := range recs {
		switch {
		case r.Type == "deposit" && r.Status == "approved":
			want.Balance += r.Amount
		case r.Type == "withdrawal" && r.Status == "paid":
			want.Balance -= r.Amount
		case r.Type == "withdrawal" && (r.Status == "pending" || r.Status == "processing"):
			want.PendingWithdrawals += r.Amount
		}
	}
	var got treasury
	e, err := g.merchant(ctx, st.site, "GET", "/v1/balance", nil)
	if err == nil && e.Status == 200 {
		err = decode(e, &got)
	}
	if err != nil || e.Status != 200 || got != want {
		t.Errorf("%s GET /v1/balance: %s %+v; the listed history gives %+v", g.name, answer(e, err), got, want)
	}
	var s struct {
		Treasury treasury `json:"treasury"`
	}
	e, err = g.ops(ctx, "GET", "/ops/v1/sites/"+st.site.ID, nil, "")
	if err == nil && e.Status == 200 {
		err = decode(e, &s)
	}
	if err != nil || e.Status != 200 || s.Treasury != want {
		t.Errorf("%s GET /ops/v1/sites/%s treasury: %s %+v; the listed history gives %+v", g.name, st.site.ID, answer(e, err), s.Treasury, want)
	}
}

// sameRecords says whether two listings hold the same transactions in
// the same states.
func sameRecords(a, b []record) bool {
	key := func(rs []record) []string {
		var ks []string
		for _, r := range rs {
			ks = append(ks, fmt.Sprintf("%s %s %s %d", r.TransactionID, r.ProcessID, r.Status, r.Amount))
		}
		slices.Sort(ks)
		return ks
	}
	return slices.Equal(key(a), key(b))
}

// checkRestarts checks that no container was restarted by its restart
// policy: only the node the test killed was stopped, and the test
// started it itself.
func (s *stack) checkRestarts() {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	states, err := s.states(ctx)
	if err != nil {
		t.Errorf("inspect: %v", err)
		return
	}
	for _, svc := range allServices() {
		if c := states[svc]; c.restarts > 0 {
			t.Errorf("%s exited and was restarted %d times during the faults (last exit status %d)", svc, c.restarts, c.exitCode)
		}
	}
}

// audit runs ledgerctl audit on the host against the published NATS ports,
// with the gateway's balances compared too.
func (s *stack) audit(g *gateway) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, "deploy", "bin", "ledgerctl"), "audit", "--nats", s.natsURLs(),
		"--gateway", g.base, "--token", g.token)
	cmd.Env = append(os.Environ(), "GATEWAY_NATS_USER="+s.settings["NATS_CLIENT_USER"],
		"GATEWAY_NATS_PASSWORD="+s.settings["NATS_CLIENT_PASSWORD"], "GATEWAY_NATS_PASSWORD_FILE=", "GATEWAY_NATS_NKEY_SEED_FILE=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("ledgerctl audit --nats %s --gateway %s: %v\n%s", s.natsURLs(), g.base, err, out)
		return
	}
	t.Logf("ledgerctl audit passed in %.1fs:\n%s", time.Since(start).Seconds(), lastLines(string(out), 30))
}

// lastLines is the end of a long output.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
