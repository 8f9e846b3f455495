package audit

import (
	"fmt"
	"hash/maphash"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// txRec is the independent model's view of one transaction: only what the
// events say, kept apart from the aggregate so the two can be compared.
type txRec struct {
	kind      aggregates.Kind
	status    aggregates.Status
	pidOff    uint32
	pidLen    uint32
	requested int64
	amount    int64
	expiresAt int64
}

// siteAudit replays one site: through the aggregate (aggregates.NewSite +
// ApplyMessage, as the gateway does), through the snapshot-based live model
// when there is a snapshot, and through an independent model of its own that
// checks every event against the state machine.
type siteAudit struct {
	id string
	counts
	chain chain

	// agg is the full replay from sequence 1, and aggPos where it stands.
	agg    *aggregates.Site
	aggPos events.Position
	// live is the site's snapshot with the messages after it applied.
	live *liveModel
	// checkpoint is the sequence of the ledger's checkpoint (0: none).
	checkpoint uint64

	// The independent model.
	created bool
	// createdSeq is the sequence of the message holding site.created.
	createdSeq uint64
	// sandbox: the site is a sandbox (site.sandbox): its merchant moved
	// its own transactions.
	sandbox  bool
	negLimit int64
	txs      []txRec
	pids     pidSet
	// aliases are the processIds that name a pending deposit besides its
	// own (deposit.alias_added: a request answered alreadyPending).
	aliases    map[string]int32
	adjCount   int64
	adjSum     int64
	runBalance int64 // running balance, for the treasury rule
	runPending int64 // running pending withdrawals
	// adjKeys holds where each treasury adjustment's Idempotency-Key
	// was first used.
	adjKeys     map[string]Position
	createdP    problems
	txidP       problems
	transitionP problems
	treasuryP   problems
	replayP     problems
	keyP        problems
}

func newSiteAudit(id string, live *liveModel) *siteAudit {
	return &siteAudit{id: id, agg: aggregates.NewSite(ids.SiteID(id)), live: live, pids: pidSet{byHash: map[uint64]int32{}}}
}

func (a *siteAudit) message(d *decoded) int {
	if !a.begin(d, &a.chain) {
		return 0
	}
	seq, evs := d.m.Seq, d.evs
	for i := range evs {
		a.event(seq, i, &evs[i])
	}
	var applyErr error
	if err := safely(func() { applyErr = a.agg.ApplyMessage(seq, evs) }); err != nil {
		applyErr = err
	}
	if applyErr != nil {
		a.replayP.addf(&Position{Seq: seq}, "", "the aggregate could not apply the message: %v", applyErr)
	} else {
		a.aggPos = advance(a.aggPos, seq, d.hashes)
	}
	if a.live != nil {
		a.live.message(seq, evs, d.hashes)
	}
	return len(evs)
}

// event folds one event into the independent model, checking it first.
func (a *siteAudit) event(seq uint64, i int, e *events.Event) {
	w := where{seq: seq, i: i, name: e.Name}
	at := w.at
	if p, ok := e.Payload.(*events.SiteCreated); ok {
		switch {
		case a.created:
			a.createdP.addf(at(), "", "the site was already created")
		case a.msgs != 1 || i != 0:
			a.createdP.addf(at(), "", "site.created is not the site's first event")
		}
		if p.SiteID != a.id {
			a.createdP.addf(at(), "", "site.created names site %q on the subject of site %q", p.SiteID, a.id)
		}
		if k := p.IdempotencyKey; k != "" && string(ids.SiteForKey(k)) != a.id {
			a.keyP.addf(at(), "", "created with Idempotency-Key %q, which derives site %s: a repeat of the key would not find this site",
				k, ids.SiteForKey(k))
		}
		a.created, a.createdSeq, a.negLimit = true, seq, p.NegativeLimit
		return
	}
	if !a.created {
		a.createdP.addf(at(), "", "event before the site's site.created")
	}
	switch p := e.Payload.(type) {
	case *events.SiteUpdated:
		if p.NegativeLimit != nil {
			a.negLimit = *p.NegativeLimit
		}
		a.limitLeft(w, e.Name, p)
	case *events.SiteSandbox:
		// Only a creation writes it (docs/events.md "site.sandbox.v1"):
		// a later one would make a live site a sandbox, whose merchant
		// moves its own transactions.
		if !a.inCreation(seq) {
			a.createdP.addf(at(), "", "site.sandbox outside the site's creation message: it would make a live site a sandbox")
		}
		a.sandbox = p.Sandbox
	case *events.SitePageUpdated:
		// The one marked atCreation is what a repeat of a keyed creation
		// answers with (docs/events.md "site.page_updated.v1").
		if p.AtCreation && !a.inCreation(seq) {
			a.createdP.addf(at(), "", "site.page_updated marked atCreation outside the site's creation message: a repeat of the creation would answer with it")
		}
	case *events.DepositAliasAdded:
		a.alias(w, p)
	case *events.SandboxCallback:
		if !a.sandbox {
			a.transitionP.addf(at(), p.TxID, "a sandbox test callback on a site that is not a sandbox")
		}
		if a.peek(p.TxID) == nil {
			a.transitionP.addf(at(), p.TxID, "a test callback for a transaction the site does not have (%d transactions so far)", len(a.txs))
		}
	case *events.SiteMethodsSet:
		// Settings that move no money and no transaction.
	case *events.TreasuryAdjusted:
		if k := p.IdempotencyKey; k != "" {
			if first, seen := a.adjKeys[k]; seen {
				a.keyP.addf(at(), "", "Idempotency-Key %q was already used by the adjustment at %s: one request moved the treasury twice", k, first)
			} else {
				if a.adjKeys == nil {
					a.adjKeys = map[string]Position{}
				}
				a.adjKeys[k] = *at()
			}
		}
		a.belowLimit(w, e.Name, p)
		a.adjCount++
		a.adjSum += p.Amount
		a.runBalance += p.Amount
	case *events.DepositRequested:
		a.create(w, p.TxID, p.ProcessID, txRec{kind: aggregates.KindDeposit, status: aggregates.StatusPending,
			requested: p.Amount, amount: p.Amount, expiresAt: p.ExpiresAt})
	case *events.WithdrawalRequested:
		if a.runBalance-a.runPending-p.Amount <= a.negLimit {
			a.treasuryP.addf(at(), p.TxID, "withdrawal of %d reserved with balance %d, pending %d, negative limit %d: available was only %d",
				p.Amount, a.runBalance, a.runPending, a.negLimit, a.available())
		}
		a.create(w, p.TxID, p.ProcessID, txRec{kind: aggregates.KindWithdrawal, status: aggregates.StatusPending,
			requested: p.Amount, amount: p.Amount})
		a.runPending += p.Amount
	case *events.DepositApproved:
		if tx := a.move(w, p.TxID, aggregates.KindDeposit, aggregates.StatusApproved); tx != nil {
			if p.Requested != tx.requested {
				a.transitionP.addf(at(), p.TxID, "approval says %d was requested, the deposit asked for %d", p.Requested, tx.requested)
			}
			if p.Amount <= 0 {
				a.transitionP.addf(at(), p.TxID, "approved amount %d is not positive", p.Amount)
			}
			tx.amount = p.Amount
			a.runBalance += p.Amount
		}
	case *events.DepositRejected:
		a.move(w, p.TxID, aggregates.KindDeposit, aggregates.StatusRejected)
	case *events.DepositExpired:
		// A sandbox site's merchant may expire a deposit at once
		// (docs/merchant-api.md "Sandbox sites"); nobody else before
		// its expiry.
		expireNow := a.sandbox && e.Actor == events.ActorMerchant
		if tx := a.peek(p.TxID); tx != nil && tx.kind == aggregates.KindDeposit && e.Time < tx.expiresAt && !expireNow {
			a.transitionP.addf(at(), p.TxID, "expired at %s, before its expiry %s", fmtMillis(e.Time), fmtMillis(tx.expiresAt))
		}
		a.move(w, p.TxID, aggregates.KindDeposit, aggregates.StatusExpired)
	case *events.WithdrawalProcessing:
		a.move(w, p.TxID, aggregates.KindWithdrawal, aggregates.StatusProcessing)
	case *events.WithdrawalPaid:
		before := a.peek(p.TxID)
		reserved := before != nil && (before.status == aggregates.StatusPending || before.status == aggregates.StatusProcessing)
		if tx := a.move(w, p.TxID, aggregates.KindWithdrawal, aggregates.StatusPaid); tx != nil {
			a.runBalance -= tx.amount
			if reserved {
				a.runPending -= tx.amount
			}
		}
	case *events.WithdrawalRejected:
		before := a.peek(p.TxID)
		reserved := before != nil && (before.status == aggregates.StatusPending || before.status == aggregates.StatusProcessing)
		if tx := a.move(w, p.TxID, aggregates.KindWithdrawal, aggregates.StatusRejected); tx != nil && reserved {
			a.runPending -= tx.amount
		}
	case *events.SiteSecretRotated, *events.SiteWebhookSecretRotated:
	default:
		a.transitionP.addf(at(), "", "event %s does not belong on a site subject", e.Name)
	}
}

// inCreation reports whether the message at seq is the one that created
// the site.
func (a *siteAudit) inCreation(seq uint64) bool { return a.created && seq == a.createdSeq }

// belowLimit checks a treasury.adjusted.v3 debit as the aggregate decides
// it (docs/operator-api.md "Treasury adjustments"): one that takes what is
// available below zero, the treasury past its negative limit, needs
// allowBelowLimit. v1 and v2 were never checked so (docs/events.md
// "Upcasters").
func (a *siteAudit) belowLimit(w where, name string, p *events.TreasuryAdjusted) {
	if name != events.TreasuryAdjustedName || p.Amount >= 0 || p.AllowBelowLimit {
		return
	}
	available := a.available()
	if after := available + p.Amount; after < 0 {
		a.treasuryP.addf(w.at(), "", "debit of %d without allowBelowLimit takes the treasury %d below its negative limit "+
			"(balance %d, pending %d, negative limit %d: available was %d)", -p.Amount, -after, a.runBalance, a.runPending, a.negLimit, available)
	}
}

// available is what the replayed treasury has left: balance − pending
// withdrawals − negative limit.
func (a *siteAudit) available() int64 { return a.runBalance - a.runPending - a.negLimit }

// limitLeft checks what a site.updated.v2 says is left available: exactly
// what its change of the negative limit left (docs/events.md
// "site.updated.v2"), and nothing when it does not change the limit. v1
// never said.
func (a *siteAudit) limitLeft(w where, name string, p *events.SiteUpdated) {
	if name != events.SiteUpdatedName {
		return
	}
	available := a.available()
	switch {
	case p.NegativeLimit == nil && p.Available != nil:
		a.treasuryP.addf(w.at(), "", "says %d is left available without changing the negative limit", *p.Available)
	case p.NegativeLimit != nil && p.Available == nil:
		a.treasuryP.addf(w.at(), "", "changes the negative limit to %d without saying what is left available (%d)", a.negLimit, available)
	case p.NegativeLimit != nil && *p.Available != available:
		a.treasuryP.addf(w.at(), "", "says %d is left available after the negative limit became %d; balance %d, pending %d leave %d",
			*p.Available, a.negLimit, a.runBalance, a.runPending, available)
	}
}

// where is an event's position, made into a *Position only for a problem:
// most events have none, and a closure per event would allocate.
type where struct {
	seq  uint64
	i    int
	name string
}

func (w where) at() *Position { return &Position{Seq: w.seq, Index: w.i, Event: w.name} }

// create adds a transaction, checking its id and processId.
func (a *siteAudit) create(w where, txID, pid string, tx txRec) {
	if want := txIDOf(a.id, int32(len(a.txs))); txID != want {
		a.txidP.addf(w.at(), txID, "creates transaction %s where the next id of the site is %s", txID, want)
	}
	if j, dup := a.pids.add(a.txs, pid, int32(len(a.txs)), &tx); dup {
		a.txidP.addf(w.at(), txID, "processId %q is already used by %s", pid, txIDOf(a.id, j))
	} else if j, dup := a.aliases[pid]; dup {
		a.txidP.addf(w.at(), txID, "processId %q is already a name of %s (alreadyPending)", pid, txIDOf(a.id, j))
	}
	if tx.requested <= 0 {
		a.txidP.addf(w.at(), txID, "amount %d is not positive", tx.requested)
	}
	a.txs = append(a.txs, tx)
}

// alias checks a deposit.alias_added: it names a deposit of the site that
// is pending, with a processId no transaction has and no alias took.
func (a *siteAudit) alias(w where, p *events.DepositAliasAdded) {
	tx := a.peek(p.TxID)
	switch {
	case tx == nil:
		a.transitionP.addf(w.at(), p.TxID, "an alias for a transaction the site does not have (%d transactions so far)", len(a.txs))
		return
	case tx.kind != aggregates.KindDeposit:
		a.transitionP.addf(w.at(), p.TxID, "an alias (alreadyPending) for a %s", tx.kind)
	case tx.status != aggregates.StatusPending:
		a.transitionP.addf(w.at(), p.TxID, "an alias (alreadyPending) for a deposit that is %s, not pending", tx.status)
	}
	if j, dup := a.pids.find(a.txs, p.ProcessID); dup {
		a.txidP.addf(w.at(), p.TxID, "alias processId %q is already used by %s", p.ProcessID, txIDOf(a.id, j))
		return
	}
	if j, dup := a.aliases[p.ProcessID]; dup {
		a.txidP.addf(w.at(), p.TxID, "alias processId %q is already a name of %s", p.ProcessID, txIDOf(a.id, j))
		return
	}
	if a.aliases == nil {
		a.aliases = map[string]int32{}
	}
	idx, _ := ids.TxID(p.TxID).Index()
	a.aliases[p.ProcessID] = idx
}

// pidSet tells whether a site's processId was seen before. The processIds
// are kept in one byte arena (a txRec holds its offset) and indexed by a
// 64-bit hash: cheaper than a map of strings, and nothing for the garbage
// collector to scan.
type pidSet struct {
	arena   []byte
	byHash  map[uint64]int32
	collide map[string]int32 // different processIds with an equal hash
	n       int
}

var pidSeed = maphash.MakeSeed()

// is reports whether tx's processId is pid (the conversion in the
// comparison does not copy).
func (p *pidSet) is(tx *txRec, pid string) bool {
	return string(p.arena[tx.pidOff:tx.pidOff+tx.pidLen]) == pid
}

// find returns the transaction that has pid, if any.
func (p *pidSet) find(txs []txRec, pid string) (int32, bool) {
	j, taken := p.byHash[maphash.String(pidSeed, pid)]
	if !taken {
		return 0, false
	}
	if p.is(&txs[j], pid) {
		return j, true
	}
	k, ok := p.collide[pid]
	return k, ok
}

// add records pid for transaction i (whose record tx is not yet in txs)
// and returns the transaction that already had it, if any.
func (p *pidSet) add(txs []txRec, pid string, i int32, tx *txRec) (int32, bool) {
	h := maphash.String(pidSeed, pid)
	j, taken := p.byHash[h]
	if taken && p.is(&txs[j], pid) {
		return j, true
	}
	if taken {
		if k, ok := p.collide[pid]; ok {
			return k, true
		}
		if p.collide == nil {
			p.collide = map[string]int32{}
		}
		p.collide[pid] = i
	} else {
		p.byHash[h] = i
	}
	tx.pidOff, tx.pidLen = uint32(len(p.arena)), uint32(len(pid))
	p.arena = append(p.arena, pid...)
	p.n++
	return 0, false
}

// peek returns the transaction txID names, nil when it names none.
func (a *siteAudit) peek(txID string) *txRec {
	id := ids.TxID(txID)
	idx, ok := id.Index()
	if !ok || string(id.Site()) != a.id || int(idx) >= len(a.txs) {
		return nil
	}
	return &a.txs[idx]
}

// move checks one transition against the status the transaction had before
// it, reports a forbidden edge or an unknown transaction, and records the
// new status (the event is in the history either way). It returns the
// transaction, nil when the event names none.
func (a *siteAudit) move(w where, txID string, kind aggregates.Kind, to aggregates.Status) *txRec {
	tx := a.peek(txID)
	if tx == nil {
		a.transitionP.addf(w.at(), txID, "names a transaction the site does not have (%d transactions so far)", len(a.txs))
		return nil
	}
	if tx.kind != kind {
		a.transitionP.addf(w.at(), txID, "is a %s event for a %s", kind, tx.kind)
	} else if !Allowed(kind, tx.status, to) {
		a.transitionP.addf(w.at(), txID, "%s %s → %s is not an edge of the state machine", kind, tx.status, to)
	}
	tx.status = to
	return tx
}

// Allowed reports whether a transaction of kind k may move from one status
// to another: the edges of the state machine (docs/merchant-api.md "States").
func Allowed(k aggregates.Kind, from, to aggregates.Status) bool {
	const (
		pending    = aggregates.StatusPending
		processing = aggregates.StatusProcessing
		approved   = aggregates.StatusApproved
		rejected   = aggregates.StatusRejected
		expired    = aggregates.StatusExpired
		paid       = aggregates.StatusPaid
	)
	switch k {
	case aggregates.KindDeposit:
		return from == pending && (to == approved || to == rejected || to == expired) ||
			from == expired && to == approved
	case aggregates.KindWithdrawal:
		return from == pending && (to == processing || to == rejected) ||
			from == processing && (to == paid || to == rejected)
	}
	return false
}

// totals sums the independent model's transactions by kind and status.
func (a *siteAudit) totals() (dep, wd map[string]Total) {
	dep, wd = map[string]Total{}, map[string]Total{}
	for _, s := range depositStatuses {
		dep[s] = Total{}
	}
	for _, s := range withdrawalStatuses {
		wd[s] = Total{}
	}
	for i := range a.txs {
		tx := &a.txs[i]
		m := dep
		if tx.kind == aggregates.KindWithdrawal {
			m = wd
		}
		t := m[tx.status.String()]
		t.Count++
		t.Amount += tx.amount
		t.Requested += tx.requested
		m[tx.status.String()] = t
	}
	return dep, wd
}

// report compares the aggregate with the independent model and the live
// model with the full replay, and assembles the site's checks.
func (a *siteAudit) report() SiteReport {
	dep, wd := a.totals()
	r := SiteReport{ID: a.id, Sandbox: a.sandbox, Messages: a.msgs, Events: a.evs, FirstSeq: a.firstSeq, LastSeq: a.lastSeq,
		Balance: a.agg.Balance, PendingWithdrawals: a.agg.PendingWithdrawals, Transactions: len(a.agg.Txs),
		Adjustments: Total{Count: a.adjCount, Amount: a.adjSum}, Deposits: dep, Withdrawals: wd}
	if a.agg.Cfg != nil {
		r.NegativeLimit = a.agg.Cfg.NegativeLimit
	}
	if !a.created {
		a.createdP.addf(nil, "", "the site has no site.created event")
	}

	// Balance and pending, computed from the final statuses.
	approved, paid := dep["approved"].Amount, wd["paid"].Amount
	want := a.adjSum + approved - paid
	var balP, pendP problems
	if a.agg.Balance != want {
		balP.addf(nil, "", "the aggregate's balance is %d, the events say %d", a.agg.Balance, want)
	}
	wantPending := wd["pending"].Amount + wd["processing"].Amount
	if a.agg.PendingWithdrawals != wantPending {
		pendP.addf(nil, "", "the aggregate's pending withdrawals are %d, the events say %d", a.agg.PendingWithdrawals, wantPending)
	}

	// The aggregate's transactions against the independent model.
	var txP problems
	if len(a.agg.Txs) != len(a.txs) {
		txP.addf(nil, "", "the aggregate has %d transactions, the events create %d", len(a.agg.Txs), len(a.txs))
	}
	for i := 0; i < min(len(a.agg.Txs), len(a.txs)); i++ {
		g, w := &a.agg.Txs[i], &a.txs[i]
		if g.Kind != w.kind || g.Status != w.status || g.Amount != w.amount || g.Requested != w.requested {
			txP.addf(nil, txIDOf(a.id, int32(i)), "aggregate has %s %s amount %d requested %d, the events say %s %s amount %d requested %d",
				g.Kind, g.Status, g.Amount, g.Requested, w.kind, w.status, w.amount, w.requested)
		}
	}

	r.Checks = []Check{
		a.decode.check(CheckDecode, fmt.Sprintf("%d messages", a.msgs)),
		a.chain.check(),
		a.createdP.check(CheckCreated, ""),
		a.txidP.check(CheckTxIDs, fmt.Sprintf("%d transactions, %d distinct processIds", len(a.txs), a.pids.n)),
		a.transitionP.check(CheckTransitions, ""),
		a.treasuryP.check(CheckTreasury, fmt.Sprintf("%d withdrawals, %d adjustments", wd["pending"].Count+wd["processing"].Count+wd["paid"].Count+wd["rejected"].Count, a.adjCount)),
		a.replayP.check(CheckReplay, ""),
		balP.check(CheckBalance, fmt.Sprintf("%d = adjustments %d + approved deposits %d − paid withdrawals %d", want, a.adjSum, approved, paid)),
		pendP.check(CheckPending, fmt.Sprintf("%d = pending %d + processing %d", wantPending, wd["pending"].Amount, wd["processing"].Amount)),
		txP.check(CheckTransactions, fmt.Sprintf("%d transactions", len(a.txs))),
		a.keyP.check(CheckIdempotency, fmt.Sprintf("%d keyed adjustments", len(a.adjKeys))),
	}
	live := a.liveCheck()
	if a.live != nil && a.live.site != nil {
		r.SnapshotSeq = a.live.snapSeq
	}
	r.Checks = append(r.Checks, live)
	return r
}

// txIDOf is the id of site's i-th transaction, as the gateway names it.
func txIDOf[S ~string](site S, i int32) string {
	return string(ids.NewTx(ids.SiteID(site), i))
}
