package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/ledger"
)

// Appender is what Generate writes to: the ledger's write loop over it,
// and snapshots. *jsstore.Store implements it.
type Appender interface {
	ledger.WriteStore
	SaveSnapshot(ctx context.Context, name string, seq uint64, data []byte) error
}

// GenOptions shape a generated history.
type GenOptions struct {
	// Events is how many events to write at least (default 100,000).
	Events int
	// Sites is how many sites share them (default 10).
	Sites int
	// Batch is how many events go into one message (default 100), as
	// group commit packs them.
	Batch int
	// Seed makes the history reproducible.
	Seed uint64
	// SnapshotAt, between 0 and 1, snapshots every site (and writes a
	// checkpoint) once that fraction of the events is written, as a
	// gateway does every minute; 0 writes no snapshot.
	SnapshotAt float64
	// Start is the time of the first event (default 2026-11-01 UTC).
	Start time.Time
	// Progress, when set, is called after each message with the events
	// written so far.
	Progress func(events int)
}

// GenSite is what the generator expects of one site, from its own
// bookkeeping of the commands it issued (not from the events).
type GenSite struct {
	ID                 string
	Events             int
	Messages           int
	Balance            int64
	PendingWithdrawals int64
	Adjustments        Total
	Deposits           map[string]Total
	Withdrawals        map[string]Total
	// SnapshotSeq is the sequence of the site's snapshot (0: none).
	SnapshotSeq uint64
	// State is the generator's aggregate, decided and applied in process,
	// and Position where it stands in the stream.
	State    *aggregates.Site
	Position events.Position
}

// GenResult describes a generated history.
type GenResult struct {
	Events   int
	Messages int
	LastSeq  uint64
	Sites    []GenSite
}

// Generate writes a synthetic history: one payment method on the catalog,
// then sites whose commands (deposits, approvals, some for another amount,
// rejections, expiries, late approvals of expired deposits, withdrawals
// taken, paid and rejected, treasury adjustments, settings changes) are
// decided by the aggregates in process and appended as sealed messages of
// Batch events, round robin over the sites. It goes through no HTTP and
// keeps no ledger state, but every message goes through the ledger's write
// loop (ledger.Writer), as every append of the program does; a million
// events take seconds.
func Generate(ctx context.Context, st Appender, o GenOptions) (*GenResult, error) {
	if o.Events <= 0 {
		o.Events = 100_000
	}
	if o.Sites <= 0 {
		o.Sites = 10
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Start.IsZero() {
		o.Start = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	}
	g := &generator{o: o, st: st, rnd: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), now: o.Start}
	g.w = ledger.Writer{Store: st, Now: func() time.Time { return g.now }}
	if err := g.catalog(ctx); err != nil {
		return nil, err
	}
	width := len(fmt.Sprint(o.Sites))
	for k := 1; k <= o.Sites; k++ {
		id := fmt.Sprintf("s%0*d", width, k)
		subj, err := events.SiteSubject(ids.SiteID(id))
		if err != nil {
			return nil, err
		}
		g.sites = append(g.sites, &genSite{id: id, subj: subj, s: aggregates.NewSite(ids.SiteID(id))})
	}
	snapAt := int(o.SnapshotAt * float64(o.Events))
	snapped := o.SnapshotAt <= 0
	for k := 0; g.total < o.Events; k = (k + 1) % len(g.sites) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := g.batch(ctx, g.sites[k], min(o.Batch, o.Events-g.total)); err != nil {
			return nil, err
		}
		if !snapped && g.total >= snapAt && k == len(g.sites)-1 {
			if err := g.snapshot(ctx); err != nil {
				return nil, err
			}
			snapped = true
		}
	}
	res := &GenResult{Events: g.total, Messages: g.msgs, LastSeq: g.last}
	for _, s := range g.sites {
		res.Sites = append(res.Sites, s.result())
	}
	return res, nil
}

type generator struct {
	o     GenOptions
	st    Appender
	w     ledger.Writer
	rnd   *rand.Rand
	now   time.Time
	bank  *aggregates.Bank
	sites []*genSite
	total int
	msgs  int
	last  uint64
	users int
}

// genSite is the generator's bookkeeping of one site.
type genSite struct {
	id      string
	subj    string
	s       *aggregates.Site
	pos     events.Position
	pendDep queue
	expired []int32
	pendWd  queue
	procWd  queue
	// Per transaction, by index: what the commands made of it.
	kind      []aggregates.Kind
	status    []aggregates.Status
	amount    []int64
	requested []int64
	adj       Total
	balance   int64
	pending   int64
	events    int
	msgs      int
	snapSeq   uint64
}

// queue is a FIFO of transaction indexes: operators work oldest first.
type queue struct {
	q    []int32
	head int
}

func (q *queue) push(i int32) { q.q = append(q.q, i) }
func (q *queue) len() int     { return len(q.q) - q.head }
func (q *queue) front() int32 { return q.q[q.head] }
func (q *queue) pop() int32 {
	i := q.q[q.head]
	q.head++
	if q.head > 1024 && q.head*2 > len(q.q) {
		q.q = append([]int32(nil), q.q[q.head:]...)
		q.head = 0
	}
	return i
}

const genOperator = "op-audit-generator"

func (g *generator) catalog(ctx context.Context) error {
	c, pos := aggregates.NewCatalog(), events.Position{}
	cmd := aggregates.CreateBank{ID: "b0000000000000000000001", Code: "ZAINCASH",
		Name: events.LocalizedName{En: "ZainCash", Ar: "زين كاش", Ku: "زەین کاش"}, IdentifierKind: "PHONE",
		MinAmount: 1000, MaxAmount: 10_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{{AccountName: "Store ZC 1", AccountNumber: "07801234567"}, {AccountName: "Store ZC 2", AccountNumber: "07801234568"}}}
	err := g.write(ctx, &genWrite{subject: events.CatalogSubject, pos: &pos,
		decide: func(now time.Time) ([]events.Event, error) {
			d, err := c.Decide(cmd, now, genOperator)
			return d.Events, err
		},
		stored: func(seq uint64, evs []events.Event) error { return c.ApplyMessage(seq, evs) },
	})
	if err != nil {
		return fmt.Errorf("generate catalog: %w", err)
	}
	g.bank, _ = c.Resolve("ZAINCASH")
	return nil
}

// batch decides about n events' worth of commands for site gs and appends
// them as one message.
func (g *generator) batch(ctx context.Context, gs *genSite, n int) error {
	err := g.write(ctx, &genWrite{subject: gs.subj, pos: &gs.pos,
		decide: func(time.Time) ([]events.Event, error) { return g.decideBatch(gs, n) },
		stored: func(seq uint64, evs []events.Event) error {
			gs.s.Begin()
			for _, e := range evs {
				gs.s.Apply(e)
			}
			gs.s.Commit(seq)
			gs.events += len(evs)
			gs.msgs++
			return nil
		},
	})
	if err != nil {
		return fmt.Errorf("generate site %s: %w", gs.id, err)
	}
	return nil
}

// decideBatch decides about n events' worth of commands for site gs, each
// against the state the earlier ones leave, and returns their events with
// the site's state as it was.
func (g *generator) decideBatch(gs *genSite, n int) ([]events.Event, error) {
	s := gs.s
	s.Begin()
	defer s.Rollback()
	var evs []events.Event
	decide := func(cmd aggregates.Command, actor string) (aggregates.Decision, error) {
		d, err := s.Decide(cmd, g.now, actor)
		if err != nil {
			return d, err
		}
		for _, e := range d.Events {
			s.Apply(e)
		}
		evs = append(evs, d.Events...)
		return d, nil
	}
	if !s.Created() {
		// A short deposit validity makes expiries (and late approvals of
		// expired deposits) common in a history of a few simulated hours.
		name, limit, ttl := "Site "+gs.id, int64(-1_000_000), int64(60)
		if _, err := decide(aggregates.CreateSite{AppKey: "ak_" + gs.id, Secret: g.secret(), WebhookSecret: "whsec_" + g.secret(),
			Settings: aggregates.SiteSettings{Name: &name, NegativeLimit: &limit, DepositTTLSeconds: &ttl}}, genOperator); err != nil {
			return nil, err
		}
		if err := g.adjust(gs, decide, 1_000_000_000); err != nil {
			return nil, err
		}
	}
	for len(evs) < n {
		g.now = g.now.Add(50 * time.Millisecond)
		if err := g.step(gs, decide); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

type decideFunc func(aggregates.Command, string) (aggregates.Decision, error)

func (g *generator) secret() string {
	const abc = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 32)
	for i := range b {
		b[i] = abc[g.rnd.IntN(len(abc))]
	}
	return string(b)
}

func (g *generator) adjust(gs *genSite, decide decideFunc, amount int64) error {
	return g.adjustKeyed(gs, decide, amount, "")
}

// adjustKeyed is adjust as an operator retrying with Idempotency-Key key
// ("" for none) would write it.
func (g *generator) adjustKeyed(gs *genSite, decide decideFunc, amount int64, key string) error {
	cmd := aggregates.AdjustTreasury{Amount: amount, Reason: "generated top-up"}
	if key != "" {
		body := fmt.Sprintf(`{"amount":%d,"reason":%q}`, amount, cmd.Reason)
		sum := sha256.Sum256([]byte(body))
		cmd.IdempotencyKey, cmd.RequestHash = key, hex.EncodeToString(sum[:])
	}
	if _, err := decide(cmd, genOperator); err != nil {
		return fmt.Errorf("generate adjustment: %w", err)
	}
	gs.adj.Count++
	gs.adj.Amount += amount
	gs.balance += amount
	return nil
}

var genNames = []string{"Ali Kareem", "Zainab Hussein", "Mustafa Ahmed", "Fatima Abbas", "Omar Salih", "Noor Jabbar"}

func (g *generator) request() aggregates.Request {
	g.users++
	return aggregates.Request{ProcessID: fmt.Sprintf("p-%d", g.users), Amount: 1000 * (1 + g.rnd.Int64N(500)),
		UserID: fmt.Sprintf("u-%d", g.users), UserName: fmt.Sprintf("user_%d", g.users), Name: genNames[g.users%len(genNames)],
		Bank: g.bank, BankRef: g.bank.Code}
}

// step issues one command chosen at random among those the site's state
// allows, and books what it does.
func (g *generator) step(gs *genSite, decide decideFunc) error {
	s := gs.s
	txID := func(i int32) ids.TxID { return ids.NewTx(ids.SiteID(gs.id), i) }
	r := g.rnd.IntN(100)
	switch {
	case r < 30:
	case r < 44 && gs.pendDep.len() > 0 && s.Txs[gs.pendDep.front()].ExpiresAt > g.now.UnixMilli():
		// (An overdue one would expire as it is approved, two events:
		// the expiry case below takes it, and a late approval after.)
		i := gs.pendDep.front()
		amt := int64(0)
		if g.rnd.IntN(5) == 0 { // received another amount than asked
			amt = gs.requested[i] - 1000*g.rnd.Int64N(gs.requested[i]/1000)
			if amt <= 0 {
				amt = gs.requested[i] + 500
			}
		}
		if _, err := decide(aggregates.ApproveDeposit{TxID: txID(i), Amount: amt, AnyAmount: true}, genOperator); err != nil {
			return err
		}
		gs.pendDep.pop()
		gs.approve(i, amt)
		return nil
	case r < 49 && gs.pendDep.len() > 0:
		i := gs.pendDep.front()
		if _, err := decide(aggregates.RejectDeposit{TxID: txID(i), Reason: "no transfer found"}, genOperator); err != nil {
			return err
		}
		gs.pendDep.pop()
		gs.status[i] = aggregates.StatusRejected
		return nil
	case r < 54 && gs.pendDep.len() > 0 && s.Txs[gs.pendDep.front()].ExpiresAt <= g.now.UnixMilli():
		i := gs.pendDep.front()
		if _, err := decide(aggregates.ExpireDeposit{TxID: txID(i)}, events.ActorSystem); err != nil {
			return err
		}
		gs.pendDep.pop()
		gs.status[i] = aggregates.StatusExpired
		gs.expired = append(gs.expired, i)
		return nil
	case r < 56 && len(gs.expired) > 0:
		k := g.rnd.IntN(len(gs.expired))
		i := gs.expired[k]
		if _, err := decide(aggregates.ApproveDeposit{TxID: txID(i)}, genOperator); err != nil {
			return err
		}
		gs.expired[k] = gs.expired[len(gs.expired)-1]
		gs.expired = gs.expired[:len(gs.expired)-1]
		gs.approve(i, 0)
		return nil
	case r < 70:
		req := g.request()
		d, err := decide(aggregates.RequestWithdrawal{Request: req, AccountName: req.Name, IBAN: fmt.Sprintf("0770%07d", g.users%10_000_000)}, events.ActorMerchant)
		if errors.Is(err, aggregates.ErrInsufficientBalance) {
			return g.adjust(gs, decide, 100_000_000)
		}
		if err != nil {
			return err
		}
		gs.add(d.Tx, aggregates.KindWithdrawal, req.Amount)
		gs.pending += req.Amount
		gs.pendWd.push(d.Tx)
		return nil
	case r < 80 && gs.pendWd.len() > 0:
		i := gs.pendWd.front()
		if _, err := decide(aggregates.ProcessWithdrawal{TxID: txID(i)}, genOperator); err != nil {
			return err
		}
		gs.pendWd.pop()
		gs.status[i] = aggregates.StatusProcessing
		gs.procWd.push(i)
		return nil
	case r < 88 && gs.procWd.len() > 0:
		i := gs.procWd.front()
		if _, err := decide(aggregates.PayWithdrawal{TxID: txID(i), Reference: fmt.Sprintf("ref-%d", i)}, genOperator); err != nil {
			return err
		}
		gs.procWd.pop()
		gs.status[i] = aggregates.StatusPaid
		gs.balance -= gs.amount[i]
		gs.pending -= gs.amount[i]
		return nil
	case r < 91 && gs.pendWd.len() > 0, r < 93 && gs.procWd.len() > 0:
		q := &gs.pendWd
		if r >= 91 || q.len() == 0 {
			q = &gs.procWd
		}
		i := q.front()
		if _, err := decide(aggregates.RejectWithdrawal{TxID: txID(i), Reason: "recipient account closed"}, genOperator); err != nil {
			return err
		}
		q.pop()
		gs.status[i] = aggregates.StatusRejected
		gs.pending -= gs.amount[i]
		return nil
	case r < 97:
		amt := 1000 * (1 + g.rnd.Int64N(10_000))
		if g.rnd.IntN(4) == 0 {
			amt = -amt
		}
		// Every other one is keyed, so histories and snapshots hold
		// the answers repeats of Idempotency-Keys are given.
		key := ""
		if gs.adj.Count%2 == 0 {
			key = fmt.Sprintf("gen-%s-%d", gs.id, gs.adj.Count)
		}
		return g.adjustKeyed(gs, decide, amt, key)
	case r < 98:
		limit := -1000 * (500 + g.rnd.Int64N(1500))
		_, err := decide(aggregates.UpdateSite{Settings: aggregates.SiteSettings{NegativeLimit: &limit}}, genOperator)
		return err
	case r < 99:
		_, err := decide(aggregates.RotateSecret{Secret: g.secret(), Overlap: time.Hour}, genOperator)
		return err
	}
	req := g.request()
	d, err := decide(aggregates.RequestDeposit{Request: req, Lang: "en"}, events.ActorMerchant)
	if err != nil {
		return err
	}
	if d.AlreadyPending || len(d.Events) != 1 {
		return fmt.Errorf("deposit for a new user decided %d events (already pending %v)", len(d.Events), d.AlreadyPending)
	}
	gs.add(d.Tx, aggregates.KindDeposit, req.Amount)
	gs.pendDep.push(d.Tx)
	return nil
}

func (gs *genSite) add(i int32, k aggregates.Kind, amount int64) {
	if int(i) != len(gs.kind) {
		panic(fmt.Sprintf("generator: transaction %d created as number %d", i, len(gs.kind)))
	}
	gs.kind = append(gs.kind, k)
	gs.status = append(gs.status, aggregates.StatusPending)
	gs.amount = append(gs.amount, amount)
	gs.requested = append(gs.requested, amount)
}

// approve books an approval; amt 0 is the requested amount.
func (gs *genSite) approve(i int32, amt int64) {
	if amt == 0 {
		amt = gs.requested[i]
	}
	gs.status[i] = aggregates.StatusApproved
	gs.amount[i] = amt
	gs.balance += amt
}

// snapshot saves every site's state, as a gateway's snapshot round does,
// then a checkpoint.
func (g *generator) snapshot(ctx context.Context) error {
	for _, gs := range g.sites {
		if !gs.s.Created() {
			continue
		}
		data, err := gs.s.MarshalSnapshot(gs.pos)
		if err != nil {
			return err
		}
		if err := g.st.SaveSnapshot(ctx, SnapshotPrefix+gs.id, gs.pos.Seq, data); err != nil {
			return err
		}
		gs.snapSeq = gs.pos.Seq
	}
	return g.st.SaveSnapshot(ctx, "checkpoint", g.last, nil)
}

func (gs *genSite) result() GenSite {
	r := GenSite{ID: gs.id, Events: gs.events, Messages: gs.msgs, Balance: gs.balance, PendingWithdrawals: gs.pending,
		Adjustments: gs.adj, Deposits: map[string]Total{}, Withdrawals: map[string]Total{}, SnapshotSeq: gs.snapSeq, State: gs.s, Position: gs.pos}
	for _, st := range depositStatuses {
		r.Deposits[st] = Total{}
	}
	for _, st := range withdrawalStatuses {
		r.Withdrawals[st] = Total{}
	}
	for i := range gs.kind {
		m := r.Deposits
		if gs.kind[i] == aggregates.KindWithdrawal {
			m = r.Withdrawals
		}
		t := m[gs.status[i].String()]
		t.Count++
		t.Amount += gs.amount[i]
		t.Requested += gs.requested[i]
		m[gs.status[i].String()] = t
	}
	return r
}
