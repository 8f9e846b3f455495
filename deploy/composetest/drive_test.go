package composetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"
	"time"
)

// setUp creates a method and a site with a treasury through gateway-1 and
// reads the treasury back through gateway-2 at once: a site acknowledged
// by one gateway is served by the other. The method is scoped and the
// site's methods name it (bank.scoped, site.methods_set), so the load and
// the audit run with those events on the replicated stream; the methods
// are set through gateway-2, right after the method was created through
// gateway-1, and read back through gateway-1.
func setUp(t *testing.T, gws []*gateway) setup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := gws[0]
	e, err := g.ops(ctx, "POST", "/ops/v1/banks", map[string]any{"code": "ZAINCASH", "name": map[string]string{"en": "ZainCash"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 5_000_000, "deposit": true, "withdraw": true,
		"accounts": []map[string]string{{"accountName": "Fault Test Store", "accountNumber": "07801234567"}}, "scoped": true}, "fault-bank")
	if err != nil || e.Status != 200 {
		t.Fatalf("create the method: %s", answer(e, err))
	}
	var s site
	e, err = g.ops(ctx, "POST", "/ops/v1/sites", map[string]any{"name": "Fault test"}, "fault-site")
	if err != nil || e.Status != 200 {
		t.Fatalf("create the site: %s", answer(e, err))
	}
	if err := decode(e, &s); err != nil {
		t.Fatal(err)
	}
	e, err = g.ops(ctx, "POST", "/ops/v1/sites/"+s.ID+"/adjustments", map[string]any{"amount": float, "reason": "float"}, "fault-float")
	if err != nil || e.Status != 200 {
		t.Fatalf("fund the treasury: %s", answer(e, err))
	}
	// Through the last gateway, which may not have applied the method
	// created through the first yet: the method is found by a catch-up.
	setter := gws[len(gws)-1]
	e, err = setter.ops(ctx, "PUT", "/ops/v1/sites/"+s.ID+"/methods", map[string]any{"methods": []map[string]any{{"bank": "ZAINCASH"}}}, "")
	if err != nil || e.Status != 200 {
		t.Fatalf("set the site's methods through %s: %s", setter.name, answer(e, err))
	}
	for _, other := range gws[:len(gws)-1] {
		e, err = other.merchant(ctx, s, "GET", "/v1/banks", url.Values{"type": {"deposit"}})
		var banks []struct {
			Code string `json:"code"`
		}
		if err == nil && e.Status == 200 {
			err = decode(e, &banks)
		}
		if err != nil || e.Status != 200 || len(banks) != 1 || banks[0].Code != "ZAINCASH" {
			t.Errorf("set-up: the site's methods through %s right after they were set through %s: %s, %v (want 200, [ZAINCASH])",
				other.name, setter.name, answer(e, err), banks)
		}
	}
	for _, other := range gws[1:] {
		e, err = other.merchant(ctx, s, "GET", "/v1/balance", nil)
		var tr treasury
		if err == nil && e.Status == 200 {
			err = decode(e, &tr)
		}
		if err != nil || e.Status != 200 || tr.Balance != float {
			t.Errorf("set-up: the balance through %s right after the adjustment through %s: %s, balance %d (want 200, %d)",
				other.name, g.name, answer(e, err), tr.Balance, float)
		}
	}
	return setup{site: s}
}

// attempt is one create as a driver sent it, with the operator actions
// sent on the transaction it made.
type attempt struct {
	gw     int
	kind   string // deposit or withdraw
	pid    string
	amount int64
	done   time.Duration // since the drive began
	status int           // 0: no answer
	code   string
	err    string
	reqID  string
	txID   string
	// read is the lookup through the other gateway right after the create
	// was acknowledged, when one was sent.
	read    *readBack
	actions []action
}

// readBack is a lookup by processId through the other gateway at once.
type readBack struct {
	gw     int
	status int // 0: no answer within crossTimeout
	code   string
	txID   string
	reqID  string
}

// crossTimeout bounds a read-back so that a paused or cut-off gateway
// does not hold up the driver of the other one; no answer is allowed.
const crossTimeout = 2 * time.Second

func (a attempt) acked() bool { return a.status >= 200 && a.status < 300 }

// action is one operator action on a created transaction.
type action struct {
	name   string // approve, process or pay
	status int    // 0: no answer
	code   string
	err    string
	reqID  string
}

func (a action) acked() bool { return a.status >= 200 && a.status < 300 }

// drive sends creates and actions through every gateway until stopped.
type drive struct {
	gws    []*gateway
	st     setup
	began  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	out    [][]attempt
	once   sync.Once
}

func newDrive(gws []*gateway, st setup) *drive {
	return &drive{gws: gws, st: st, out: make([][]attempt, len(gws)*workersPerGate)}
}

func (d *drive) start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.began = time.Now()
	for g := range d.gws {
		for w := range workersPerGate {
			slot := g*workersPerGate + w
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				d.worker(ctx, g, slot)
			}()
		}
	}
}

// stop ends the drive and waits for requests in flight to be answered.
func (d *drive) stop() {
	d.once.Do(func() {
		d.cancel()
		d.wg.Wait()
	})
}

func (d *drive) results() []attempt {
	d.mu.Lock()
	defer d.mu.Unlock()
	var all []attempt
	for _, w := range d.out {
		all = append(all, w...)
	}
	return all
}

// worker sends one create after another through gateway g: a deposit or
// a withdrawal with a processId never used before (a repeat would blur
// what a 503 means), and on what it made, half the time, an approval or a
// take-and-pay. Requests in flight when ctx ends are answered, not cut.
func (d *drive) worker(ctx context.Context, g, slot int) {
	gw := d.gws[g]
	rnd := rand.New(rand.NewPCG(uint64(slot), 42))
	var mine []attempt
	defer func() {
		d.mu.Lock()
		d.out[slot] = mine
		d.mu.Unlock()
	}()
	for i := 0; ctx.Err() == nil; i++ {
		a := attempt{gw: g, kind: "deposit", pid: fmt.Sprintf("w%d-%d", slot, i), amount: int64(1+rnd.IntN(50)) * 1000}
		if rnd.IntN(2) == 0 {
			a.kind = "withdraw"
		}
		form := url.Values{"bankId": {"ZAINCASH"}, "processId": {a.pid}, "amount": {fmt.Sprint(a.amount)},
			"userId": {"u-" + a.pid}, "userName": {"user"}, "name": {"Fault Test"}}
		if a.kind == "withdraw" {
			form.Set("iban", "07712345678")
			form.Set("accountName", "Fault Test")
		}
		rctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		e, err := gw.merchant(rctx, d.st.site, "POST", "/v1/transactions/"+a.kind, form)
		a.done = time.Since(d.began)
		a.status, a.code, a.reqID = e.Status, e.Code, e.RequestID
		if err != nil {
			a.status, a.err = 0, err.Error()
		}
		var rec record
		if a.acked() && decode(e, &rec) == nil {
			a.txID = rec.TransactionID
		}
		if a.txID != "" && rnd.IntN(4) == 0 {
			a.read = d.readBack((g+1)%len(d.gws), a)
		}
		if a.txID != "" && rnd.IntN(2) == 0 {
			a.actions = d.act(rctx, gw, a, rnd)
		}
		cancel()
		mine = append(mine, a)
	}
}

// readBack looks a create just acknowledged through one gateway up by
// processId through gateway g, as a merchant's status poll behind a load
// balancer may: it must find it (read-your-writes across gateways).
func (d *drive) readBack(g int, a attempt) *readBack {
	ctx, cancel := context.WithTimeout(context.Background(), crossTimeout)
	defer cancel()
	e, err := d.gws[g].merchant(ctx, d.st.site, "GET", "/v1/transactions", url.Values{"processId": {a.pid}})
	r := &readBack{gw: g, status: e.Status, code: e.Code, reqID: e.RequestID}
	var rec record
	switch {
	case err != nil:
		r.status = 0
	case e.Status == 200 && decode(e, &rec) == nil:
		r.txID = rec.TransactionID
	}
	return r
}

// act approves a deposit, or takes a withdrawal and (two times in three)
// pays it; it stops at the first action not acknowledged.
func (d *drive) act(ctx context.Context, gw *gateway, a attempt, rnd *rand.Rand) []action {
	steps := []string{"approve"}
	if a.kind == "withdraw" {
		steps = []string{"process"}
		if rnd.IntN(3) > 0 {
			steps = append(steps, "pay")
		}
	}
	var out []action
	for _, step := range steps {
		path := map[string]string{"approve": "/ops/v1/deposits/", "process": "/ops/v1/withdrawals/",
			"pay": "/ops/v1/withdrawals/"}[step] + a.txID + "/" + step
		var body any
		if step == "pay" {
			body = map[string]string{"reference": "ref-" + a.pid}
		}
		e, err := gw.ops(ctx, "POST", path, body, "")
		act := action{name: step, status: e.Status, code: e.Code, reqID: e.RequestID}
		if err != nil {
			act.status, act.err = 0, err.Error()
		}
		out = append(out, act)
		if !act.acked() {
			break
		}
	}
	return out
}
