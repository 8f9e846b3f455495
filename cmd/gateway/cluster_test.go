package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/client"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// The gateway on a replicated cluster: three in-process nats-servers
// routed over loopback (testkit.StartCluster), gateway subprocesses with
// --nats and --replicas 3, as README.md "Run as a cluster" deploys them.

// clusterGateway starts a gateway subprocess on cluster c and waits until
// it is ready.
func clusterGateway(t *testing.T, c *testkit.Cluster) string {
	t.Helper()
	addr := testkit.FreeAddr(t)
	startWith(t, addr, "--nats", c.URLs(), "--replicas", "3")
	return "http://" + addr
}

// clusterPair starts a 3-node cluster that fsyncs every write, as
// production runs, two gateways on it and a site both serve.
func clusterPair(t *testing.T) (*testkit.Cluster, string, string, creds) {
	t.Helper()
	c := testkit.StartCluster(t, testkit.ClusterConfig{SyncAlways: true})
	c.WaitReady()
	a, b := clusterGateway(t, c), clusterGateway(t, c)
	return c, a, b, clusterSite(t, a, b)
}

// clusterSite creates a method and a site with a large treasury through
// gw, and waits until every gateway in others serves the site.
func clusterSite(t *testing.T, gw string, others ...string) creds {
	t.Helper()
	opsCall(t, gw, "POST", "/ops/v1/banks", map[string]any{"code": "ZAINCASH", "name": map[string]string{"en": "ZainCash"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 1_000_000, "deposit": true, "withdraw": true,
		"accounts": []map[string]string{{"accountName": "Store", "accountNumber": "07801234567"}}}, nil)
	var c creds
	opsCall(t, gw, "POST", "/ops/v1/sites", map[string]any{"name": "Clustered"}, &c)
	opsCall(t, gw, "POST", "/ops/v1/sites/"+c.ID+"/adjustments", map[string]any{"amount": 1_000_000_000, "reason": "float"}, nil)
	for _, o := range others {
		testkit.Eventually(t, testkit.WaitFor, func() bool {
			e, err := merchant(c, "GET", o, "/v1/balance", "")
			return err == nil && e.Status == 200
		}, "gateway %s serves the new site", o)
	}
	return c
}

// txForm is a signed create's body: a deposit, or a withdrawal to a phone.
func txForm(kind, pid string, amount int64) string {
	v := url.Values{"bankId": {"ZAINCASH"}, "processId": {pid}, "amount": {fmt.Sprint(amount)},
		"userId": {"u-" + pid}, "userName": {"user"}, "name": {"User"}}
	if kind == "withdraw" {
		v.Set("iban", "07712345678")
		v.Set("accountName", "User")
	}
	return v.Encode()
}

// txRecord is the part of a transaction record these tests compare.
type txRecord struct {
	TransactionID string `json:"transactionId"`
	ProcessID     string `json:"processId"`
	Amount        int64  `json:"amount"`
	Status        string `json:"status"`
}

func decodeTx(t *testing.T, e envelope) txRecord {
	t.Helper()
	var r txRecord
	require.NoError(t, json.Unmarshal(e.Data, &r))
	return r
}

// byProcessID looks a transaction up by processId through gw.
func byProcessID(c creds, gw, pid string) (envelope, error) {
	return merchant(c, "GET", gw, "/v1/transactions", url.Values{"processId": {pid}}.Encode())
}

// A transaction acknowledged by one gateway is found at once through the
// other, by processId, by id, in the operator listing and in the balance,
// while the machine is loaded (followers then lag the stream leader).
// Never 404, never 500, never an older answer.
func TestCluster_readYourWritesAcrossGateways(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and gateway subprocesses")
	}
	_, a, b, site := clusterPair(t)
	testkit.Busy(t, 2)
	wrong := map[string]int{}
	var withdrawn int64
	const n = 300
	for i := range n {
		pid := fmt.Sprint("ryw-", i)
		kind := []string{"deposit", "withdraw"}[i%2]
		w, r := a, b
		if i%4 >= 2 {
			w, r = b, a
		}
		e, err := merchant(site, "POST", w, "/v1/transactions/"+kind, txForm(kind, pid, 5000))
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, "create %s: %s", pid, e.Code)
		created := decodeTx(t, e)
		if kind == "withdraw" {
			withdrawn += 5000
		}
		// Each kind of read comes first in turn: a read that follows
		// another one on the same gateway would find it caught up.
		checks := []func(){
			func() {
				if e, err := byProcessID(site, r, pid); err != nil || e.Status != 200 || decodeTx(t, e).TransactionID != created.TransactionID {
					wrong[fmt.Sprintf("by processId: %d %s %v", e.Status, e.Code, err)]++
				}
			},
			func() {
				if e, err := merchant(site, "GET", r, "/v1/transactions/"+created.TransactionID, ""); err != nil || e.Status != 200 {
					wrong[fmt.Sprintf("by id: %d %s %v", e.Status, e.Code, err)]++
				}
			},
			func() {
				var b struct {
					PendingWithdrawals int64 `json:"pendingWithdrawals"`
				}
				e, err := merchant(site, "GET", r, "/v1/balance", "")
				if err != nil || e.Status != 200 || json.Unmarshal(e.Data, &b) != nil || b.PendingWithdrawals != withdrawn {
					wrong[fmt.Sprintf("balance: %d %s %v", e.Status, e.Code, err)]++
				}
			},
			func() {
				var page struct {
					Items []txRecord `json:"items"`
				}
				e, err := call("GET", r+"/ops/v1/transactions?limit=500&site="+site.ID, map[string]string{"Authorization": "Bearer " + testToken}, "")
				if err != nil || e.Status != 200 || json.Unmarshal(e.Data, &page) != nil || len(page.Items) != i+1 ||
					page.Items[i].TransactionID != created.TransactionID {
					wrong[fmt.Sprintf("listing: %d %s %v", e.Status, e.Code, err)]++
				}
			},
		}
		for k := range checks {
			checks[(i+k)%len(checks)]()
		}
	}
	assert.Empty(t, wrong, "lookups through the other gateway right after an acknowledged write (of %d)", n)
	aliasAndSandboxAcross(t, a, b, site)
	listingsAcross(t, a, b)
}

// listingsAcross: a site and a method created through one gateway are in
// the other's sites, methods and callbacks listings at once (they catch up
// with the stream leader first).
func listingsAcross(t *testing.T, a, b string) {
	t.Helper()
	for i := range 10 {
		w, r := a, b
		if i%2 == 1 {
			w, r = b, a
		}
		var made struct {
			ID string `json:"id"`
		}
		opsCall(t, w, "POST", "/ops/v1/sites", map[string]any{"name": fmt.Sprint("Listed ", i)}, &made)
		var bank struct {
			ID string `json:"_id"`
		}
		opsCall(t, w, "POST", "/ops/v1/banks", map[string]any{"code": fmt.Sprint("LISTED", i), "name": map[string]string{"en": "Listed"},
			"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 100_000, "deposit": false, "withdraw": true}, &bank)
		var sites, banks struct {
			Items []map[string]any `json:"items"`
		}
		opsCall(t, r, "GET", "/ops/v1/sites", nil, &sites)
		opsCall(t, r, "GET", "/ops/v1/banks", nil, &banks)
		// The callbacks listing of the site knows it (it answers 404 for
		// a site that does not exist): 200, empty.
		opsCall(t, r, "GET", "/ops/v1/callbacks?site="+made.ID, nil, nil)
		has := func(items []map[string]any, key, want string) bool {
			for _, it := range items {
				if it[key] == want {
					return true
				}
			}
			return false
		}
		assert.True(t, has(sites.Items, "id", made.ID), "site %s created through %s, listed through %s", made.ID, w, r)
		assert.True(t, has(banks.Items, "_id", bank.ID), "method %s created through %s, listed through %s", bank.ID, w, r)
	}
}

// aliasAndSandboxAcross writes through one gateway and at once through the
// other: a second deposit for a user with one pending, which names the
// pending one (deposit.alias_added), looked up by its processId; and a
// sandbox site created through a, its first deposit through b (an appKey
// b may not know yet) and approved by its merchant through a.
func aliasAndSandboxAcross(t *testing.T, a, b string, site creds) {
	t.Helper()
	form := func(pid string) string {
		return url.Values{"bankId": {"ZAINCASH"}, "processId": {pid}, "amount": {"5000"}, "userId": {"u-alias"},
			"userName": {"user"}, "name": {"User"}}.Encode()
	}
	e, err := merchant(site, "POST", a, "/v1/transactions/deposit", form("alias-1"))
	require.NoError(t, err)
	require.Equal(t, 200, e.Status, e.Code)
	pending := decodeTx(t, e).TransactionID
	e, err = merchant(site, "POST", b, "/v1/transactions/deposit", form("alias-2"))
	require.NoError(t, err)
	require.Equal(t, 200, e.Status, e.Code)
	assert.Equal(t, pending, decodeTx(t, e).TransactionID, "the user's pending deposit, through the other gateway")
	e, err = byProcessID(site, a, "alias-2")
	require.NoError(t, err)
	if assert.Equal(t, 200, e.Status, "the alias through the first gateway: %s", e.Code) {
		assert.Equal(t, pending, decodeTx(t, e).TransactionID)
	}

	var sb creds
	opsCall(t, a, "POST", "/ops/v1/sites", map[string]any{"name": "Clustered sandbox", "sandbox": true}, &sb)
	e, err = merchant(sb, "POST", b, "/v1/transactions/deposit", txForm("deposit", "sb-1", 5000))
	require.NoError(t, err)
	require.Equal(t, 200, e.Status, "a deposit through b right after the site was created through a: %s", e.Code)
	tx := decodeTx(t, e).TransactionID
	// The site's callback stream through b, open before the approval
	// through a: its position is the leader's end, and the approval,
	// stored after it, is streamed.
	sctx, cancel := context.WithTimeout(context.Background(), testkit.WaitFor)
	defer cancel()
	connected := make(chan struct{}, 1)
	got := make(chan client.StreamEvent, 4)
	bctx, stopB := context.WithCancel(sctx)
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		_ = client.New(b, sb.AppKey, sb.Secret).Callbacks(bctx, "", func(ev client.StreamEvent) error { got <- ev; return nil }, nil,
			client.OnConnect(func(string) {
				select {
				case connected <- struct{}{}:
				default:
				}
			}))
	}()
	select {
	case <-connected:
	case <-sctx.Done():
		t.Fatal("the callback stream through b did not open")
	}
	e, err = merchant(sb, "POST", a, "/v1/sandbox/deposits/"+tx+"/approve", "")
	require.NoError(t, err)
	require.Equal(t, 200, e.Status, "the sandbox approval through a: %s", e.Code)
	assert.Equal(t, "approved", decodeTx(t, e).Status)
	select {
	case ev := <-got:
		assert.Equal(t, "deposit.approved", ev.Type, "streamed through b")
	case <-sctx.Done():
		t.Fatal("the approval through a was not streamed through b")
	}
	e, err = byProcessID(sb, b, "sb-1")
	require.NoError(t, err)
	if assert.Equal(t, 200, e.Status, e.Code) {
		assert.Equal(t, "approved", decodeTx(t, e).Status, "the approval through b right after a acknowledged it")
	}

	// The other sandbox actions, each through the gateway that did not
	// store the deposit a moment ago, read back through the one that did,
	// and streamed through b; then a test callback asked through a.
	for _, act := range []struct{ pid, create, move, action, status, typ string }{
		{"sb-2", a, b, "reject", "rejected", "deposit.rejected"},
		{"sb-3", b, a, "expire", "expired", "deposit.expired"},
	} {
		e, err := merchant(sb, "POST", act.create, "/v1/transactions/deposit", txForm("deposit", act.pid, 5000))
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, e.Code)
		id := decodeTx(t, e).TransactionID
		e, err = merchant(sb, "POST", act.move, "/v1/sandbox/deposits/"+id+"/"+act.action, "")
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, "%s through the other gateway: %s", act.action, e.Code)
		assert.Equal(t, act.status, decodeTx(t, e).Status)
		e, err = byProcessID(sb, act.create, act.pid)
		require.NoError(t, err)
		if assert.Equal(t, 200, e.Status, e.Code) {
			assert.Equal(t, act.status, decodeTx(t, e).Status, "read back through the gateway that created it")
		}
		select {
		case ev := <-got:
			assert.Equal(t, act.typ, ev.Type, "streamed through b")
		case <-sctx.Done():
			t.Fatalf("the %s was not streamed through b", act.action)
		}
	}
	e, err = merchant(sb, "POST", a, "/v1/sandbox/transactions/"+tx+"/callbacks", url.Values{"type": {"deposit.rejected"}}.Encode())
	require.NoError(t, err)
	require.Equal(t, 200, e.Status, "a test callback through a: %s", e.Code)
	var last string
	select {
	case ev := <-got:
		assert.Equal(t, "deposit.rejected", ev.Type, "the test callback streamed through b")
		assert.Contains(t, string(ev.Body), `"test":true`)
		last = ev.ID
	case <-sctx.Done():
		t.Fatal("the test callback asked through a was not streamed through b")
	}

	// Resumed on the other gateway: the stream through b ends, a callback
	// is stored through b meanwhile, and a stream through a opened after
	// the last event b streamed starts with that callback: nothing before
	// it again, nothing missed.
	stopB()
	<-bDone
	e, err = merchant(sb, "POST", b, "/v1/sandbox/transactions/"+tx+"/callbacks", url.Values{"type": {"deposit.expired"}}.Encode())
	require.NoError(t, err)
	require.Equal(t, 200, e.Status, "a test callback through b: %s", e.Code)
	resumed := make(chan client.StreamEvent, 4)
	go func() {
		_ = client.New(a, sb.AppKey, sb.Secret).Callbacks(sctx, last, func(ev client.StreamEvent) error { resumed <- ev; return nil }, nil)
	}()
	select {
	case ev := <-resumed:
		assert.Equal(t, "deposit.expired", ev.Type, "the callback stored while no stream was open, first after %s", last)
		assert.NotEqual(t, last, ev.ID)
	case <-sctx.Done():
		t.Fatalf("the stream through a resumed after %s gave nothing", last)
	}
}

// result is one merchant request's answer as a driver saw it.
type result struct {
	pid    string
	status int
	code   string
	txID   string
	err    error
}

// drive sends creates with the given processIds through gw, conc at a
// time, and returns every answer.
func drive(t *testing.T, site creds, gw, kind string, pids []string, conc int) []result {
	t.Helper()
	out := make([]result, len(pids))
	var wg sync.WaitGroup
	next := make(chan int)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				e, err := merchant(site, "POST", gw, "/v1/transactions/"+kind, txForm(kind, pids[i], 5000))
				r := result{pid: pids[i], status: e.Status, code: e.Code, err: err}
				if err == nil && e.Status == 200 {
					var rec txRecord
					if json.Unmarshal(e.Data, &rec) == nil {
						r.txID = rec.TransactionID
					}
				}
				out[i] = r
			}
		}()
	}
	for i := range pids {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// target is one driver's share of a load: its gateway, what it creates and
// with which processIds.
type target struct {
	gw, kind string
	pids     []string
}

// driveBoth drives every target at once, conc requests at a time each,
// runs during (if any) meanwhile, and returns every answer.
func driveBoth(t *testing.T, site creds, targets []target, conc int, during func()) []result {
	t.Helper()
	out := make([][]result, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Go(func() { out[i] = drive(t, site, tg.gw, tg.kind, tg.pids, conc) })
	}
	if during != nil {
		during()
	}
	wg.Wait()
	var all []result
	for _, rs := range out {
		all = append(all, rs...)
	}
	return all
}

// pids returns n processIds with prefix.
func pids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// statuses counts answers by status (and error), for messages.
func statuses(rs []result) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		k := fmt.Sprint(r.status, " ", r.code)
		if r.err != nil {
			k = "error " + r.err.Error()
		}
		m[k]++
	}
	return m
}

// Two gateways writing to one site at once conflict on its subject all the
// time: a conflict is caught up from the stream and decided again, so no
// write fails for it (no 503 without a fault), and a storm of repeats of
// the same processIds through both makes one transaction each, with no 500.
func TestCluster_contentionOnOneSite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and gateway subprocesses")
	}
	_, a, b, site := clusterPair(t)

	all := driveBoth(t, site, []target{{a, "withdraw", pids("a-", 400)}, {b, "withdraw", pids("b-", 400)}}, 16, nil)
	assert.Equal(t, map[string]int{"200 ": len(all)}, statuses(all), "distinct writes from both gateways")

	// The storm: every processId sent twice through each gateway at once.
	var storm []string
	for i := range 200 {
		pid := fmt.Sprint("dup-", i)
		storm = append(storm, pid, pid)
	}
	all = driveBoth(t, site, []target{{a, "deposit", storm}, {b, "deposit", storm}}, 8, nil)
	assert.Equal(t, map[string]int{"200 ": len(all)}, statuses(all), "repeats of one processId through both gateways")
	ids := map[string]map[string]bool{}
	for _, r := range all {
		if ids[r.pid] == nil {
			ids[r.pid] = map[string]bool{}
		}
		if r.txID != "" {
			ids[r.pid][r.txID] = true
		}
	}
	for pid, txs := range ids {
		assert.Len(t, txs, 1, "processId %s answered with transactions %v", pid, txs)
	}
}

// Killing the stream leader while both gateways take writes: every write
// acknowledged (200) is stored once, and every write answered 503 is not
// stored at all (503 means "nothing was recorded", docs/merchant-api.md).
func TestCluster_streamLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and gateway subprocesses")
	}
	c, a, b, site := clusterPair(t)

	var leader *testkit.Node
	all := driveBoth(t, site, []target{{a, "withdraw", pids("ka-", 600)}, {b, "deposit", pids("kb-", 600)}}, 8, func() {
		time.Sleep(500 * time.Millisecond) // let the writes get going
		leader = c.StreamLeader()
		leader.Kill()
		t.Logf("killed the stream leader %s", leader.Name)
	})
	leader.Start()
	t.Logf("answers: %v", statuses(all))
	for _, r := range all {
		var e envelope
		var err error
		testkit.Eventually(t, testkit.WaitFor, func() bool {
			e, err = byProcessID(site, a, r.pid)
			return err == nil && (e.Status == 200 || e.Status == 404)
		}, "lookup of %s answers", r.pid)
		switch {
		case r.status == 200:
			if assert.Equal(t, 200, e.Status, "acknowledged %s is stored", r.pid) {
				assert.Equal(t, r.txID, decodeTx(t, e).TransactionID, "acknowledged %s is stored as acknowledged", r.pid)
			}
		case r.status == http.StatusServiceUnavailable:
			assert.Equal(t, 404, e.Status, "%s was answered 503 (nothing recorded) but is stored", r.pid)
		}
	}
}

// httpStatus answers the HTTP status of GET u, 0 when nothing answers.
func httpStatus(u string) int {
	res, err := http.Get(u)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// Two gateways started at the same moment on a cluster that cannot elect
// a leader yet (one node of three) wait for it, up and not ready, instead
// of exiting; both become ready once the cluster forms. A gateway that
// then loses the whole cluster answers 503 and recovers by itself when it
// is back.
func TestCluster_startupWaitsForTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and gateway subprocesses")
	}
	c := testkit.StartCluster(t, testkit.ClusterConfig{SyncAlways: true, Start: 1})
	// A gateway that exits answers nothing: every check below that
	// expects an answer catches it.
	var gws []string
	for range 2 {
		addr := testkit.FreeAddr(t)
		spawn(t, "--http", addr, "--admin-token", testToken, "--log-level", "warn", "--nats", c.URLs(), "--replicas", "3")
		gws = append(gws, "http://"+addr)
	}
	for _, gw := range gws {
		testkit.Eventually(t, testkit.WaitFor, func() bool { return httpStatus(gw+"/healthz") == 200 }, "%s is up", gw)
	}
	// Long enough for a gateway that gives up on a leaderless cluster to
	// have given up.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, gw := range gws {
			require.Equal(t, http.StatusServiceUnavailable, httpStatus(gw+"/readyz"), "%s is up and not ready without a cluster", gw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range c.Nodes {
		n.Start()
	}
	for _, gw := range gws {
		testkit.Eventually(t, 60*time.Second, func() bool { return httpStatus(gw+"/readyz") == 200 }, "%s ready once the cluster formed", gw)
	}
	site := clusterSite(t, gws[0], gws[1])
	for i, gw := range gws {
		e, err := merchant(site, "POST", gw, "/v1/transactions/deposit", txForm("deposit", fmt.Sprint("s-", i), 5000))
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, e.Code)
	}

	for _, n := range c.Nodes {
		n.Kill()
	}
	for _, gw := range gws {
		testkit.Eventually(t, testkit.WaitFor, func() bool { return httpStatus(gw+"/readyz") == http.StatusServiceUnavailable },
			"%s not ready without the cluster", gw)
		e, err := merchant(site, "POST", gw, "/v1/transactions/deposit", txForm("deposit", "lost-"+gw, 5000))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, e.Status, "a write without the cluster")
	}
	for _, n := range c.Nodes {
		n.Start()
	}
	for i, gw := range gws {
		testkit.Eventually(t, 60*time.Second, func() bool {
			e, err := merchant(site, "POST", gw, "/v1/transactions/deposit", txForm("deposit", fmt.Sprint("back-", i), 5000))
			return err == nil && e.Status == 200
		}, "%s takes writes again once the cluster is back", gw)
	}
}

// Callbacks on the replicated cluster, two gateways that may each deliver
// them, one at a time (the lease): approvals through one are delivered once
// each, the deliveries are listed through the other, a resend asked
// through either is delivered, and once the gateway delivering them is
// killed the other takes the lease over and delivers a resend asked
// through it.
func TestCluster_callbacksAcrossGateways(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and gateway subprocesses")
	}
	cmds, bases := callbackGateways(t)
	a, b := bases[0], bases[1]
	rcv := newHookReceiver(t)
	txs := siteWithHooks(t, a, rcv, 3)
	for _, tx := range txs {
		testkit.Eventually(t, testkit.WaitFor, func() bool { return rcv.count(func(h hook) bool { return h.tx == tx }) >= 1 },
			"callback of %s", tx)
	}
	items := waitDelivered(t, b, 3)
	for _, tx := range txs {
		assert.Equal(t, 1, rcv.count(func(h hook) bool { return h.tx == tx }), "%s delivered once", tx)
	}

	resend := func(base string, it deliveryItem) {
		t.Helper()
		same := func(h hook) bool { return h.id == it.EventID }
		before := rcv.count(same)
		// Until a dispatcher holds the lease a resend is 503 (no dispatcher).
		testkit.Eventually(t, testkit.WaitFor, func() bool {
			e, err := call("POST", base+"/ops/v1/callbacks/"+it.EventID+"/resend",
				map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}, "null")
			require.NoError(t, err)
			if e.Status != 200 {
				require.Equal(t, 503, e.Status, "resend through %s: %s", base, e.Code)
			}
			return e.Status == 200
		}, "resend of %s accepted through %s", it.EventID, base)
		testkit.Eventually(t, testkit.WaitFor, func() bool { return rcv.count(same) == before+1 },
			"resend of %s through %s delivered", it.EventID, base)
	}
	resend(b, items[0])
	resend(a, items[1])

	i := delivering(t, bases)
	active, other := bases[i], bases[1-i]
	require.NoError(t, cmds[i].Process.Kill())
	_ = cmds[i].Wait()
	resend(other, items[2])
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		return value(scrape(t, other+"/metrics"), "gateway_callbacks_active") == 1
	}, "the other gateway (not %s) delivers now", active)
	for _, h := range rcv.hooks() {
		assert.True(t, h.valid, "callback %s verifies", h.id)
	}
}

// TestCluster_gracefulStopHandsCallbacksOver: the gateway delivering
// callbacks is stopped with SIGTERM while a callback waits for its retry;
// the other gateway takes the lease and makes that retry, long before the
// ack wait (10m) would have brought the message back.
func TestCluster_gracefulStopHandsCallbacksOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and gateway subprocesses")
	}
	cmds, bases := callbackGateways(t, "--callback-ack-wait", "10m", "--callback-retry", "5s,5s")
	rcv := newHookReceiver(t)
	rcv.refuse.Store(true)
	txs := siteWithHooks(t, bases[0], rcv, 1)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.hooks()) >= 1 }, "the first attempt, refused")

	active := cmds[delivering(t, bases)]
	require.NoError(t, active.Process.Signal(syscall.SIGTERM))
	require.NoError(t, active.Wait(), "the delivering gateway did not stop cleanly")
	rcv.refuse.Store(false)
	before := rcv.hooks()
	require.Len(t, before, 1, "one attempt before the stop")

	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.hooks()) == 2 },
		"the retry made by the other gateway, well before the ack wait of 10m")
	got := rcv.hooks()[1]
	assert.Equal(t, before[0].id, got.id, "the same callback")
	assert.Equal(t, txs[0], got.tx)
	assert.True(t, got.valid)
}

// callbackGateways starts a replicated cluster and two gateways on it,
// each able to deliver callbacks (one at a time: the lease, of 2 s), with
// the extra flags.
func callbackGateways(t *testing.T, extra ...string) (cmds [2]*exec.Cmd, bases [2]string) {
	t.Helper()
	c := testkit.StartCluster(t, testkit.ClusterConfig{SyncAlways: true})
	c.WaitReady()
	for i := range cmds {
		addr := testkit.FreeAddr(t)
		cmds[i], _ = startWith(t, addr, append([]string{"--nats", c.URLs(), "--replicas", "3",
			"--callback-allow-private", "--callback-lease-ttl", "2s"}, extra...)...)
		bases[i] = "http://" + addr
	}
	return cmds, bases
}

// delivering waits until one of the gateways at bases holds the callbacks
// lease, which it says in gateway_callbacks_active, and returns its index.
func delivering(t *testing.T, bases [2]string) int {
	t.Helper()
	i := -1
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		for k, base := range bases {
			if value(scrape(t, base+"/metrics"), "gateway_callbacks_active") == 1 {
				i = k
				return true
			}
		}
		return false
	}, "one gateway delivers")
	return i
}

// TestCluster_resendPendingWhileTheDispatcherDies: a resend answered
// pending is followed by an attempt that starts after it, by the process
// that took it or, should it stop first, by the next (docs/callbacks.md
// "Parking and resend"): the delivering gateway is killed while the
// resent attempt is under way, and the other, taking the lease, makes it.
func TestCluster_resendPendingWhileTheDispatcherDies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and gateway subprocesses")
	}
	cmds, bases := callbackGateways(t)
	rcv := newHookReceiver(t)
	siteWithHooks(t, bases[0], rcv, 1)
	items := waitDelivered(t, bases[1], 1)
	id := items[0].EventID
	same := func(h hook) bool { return h.id == id }
	before := rcv.count(same)
	i := delivering(t, bases)
	active, other := bases[i], bases[1-i]

	hold := make(chan struct{})
	rcv.hold.Store(&hold)
	e, err := call("POST", active+"/ops/v1/callbacks/"+id+"/resend",
		map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}, "null")
	require.NoError(t, err)
	require.Equal(t, 200, e.Status, e.Code)
	var d deliveryItem
	require.NoError(t, json.Unmarshal(e.Data, &d))
	require.Equal(t, "pending", d.Status)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return rcv.count(same) == before+1 }, "the resent attempt under way")

	require.NoError(t, cmds[i].Process.Kill())
	_ = cmds[i].Wait()
	rcv.hold.Store(nil)
	close(hold)
	testkit.Eventually(t, 2*testkit.WaitFor, func() bool { return rcv.count(same) >= before+2 },
		"the other gateway (%s) makes the resent attempt again", other)
	for _, h := range rcv.hooks() {
		assert.True(t, h.valid, "callback %s verifies", h.id)
	}
}
