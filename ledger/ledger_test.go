package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

func TestLedger_Execute_lifecycle(t *testing.T) { onEachStore(t, ledgerExecuteLifecycle) }

func ledgerExecuteLifecycle(t *testing.T, e *env) {
	ctx := context.Background()
	st := e.store("a")
	clk := newClock(epoch)
	l := e.ledger(st, ledger.Config{Now: clk.Now})
	setup(t, l, -50_000, 100_000)
	b := bank(t, l)

	v := view(t, l, siteID)
	assert.Equal(t, int64(100_000), v.Balance)
	assert.Equal(t, int64(150_000), v.Available, "available counts the negative limit")
	siteID2, cfg, ok := l.SiteByAppKey(string("app-" + siteID))
	require.True(t, ok)
	assert.Equal(t, siteID, siteID2)
	assert.Equal(t, "secret-"+string(siteID), cfg.Secret)
	assert.Equal(t, []ids.SiteID{siteID}, l.SiteIDs())

	// A deposit request creates a pending transaction.
	r, err := l.Execute(ctx, siteID, testkit.Deposit(b, "dep-1", "u1", 25_000), events.ActorMerchant)
	require.NoError(t, err)
	require.Len(t, r.Events, 1)
	assert.Equal(t, events.DepositRequestedName, r.Events[0].Name)
	assert.NotZero(t, r.Seq)
	assert.Equal(t, int32(0), r.Decision.Tx)
	assert.False(t, r.Decision.Repeat)
	assert.Equal(t, aggregates.StatusPending, r.Tx.Status)
	assert.Equal(t, int64(25_000), r.Tx.Amount)
	assert.Equal(t, r.Seq, r.Tx.Seq, "the transaction knows the message that created it")
	last, err := st.LastSeq(ctx)
	require.NoError(t, err)

	// A repeat with the same parameters answers the stored transaction
	// and appends nothing.
	rep, err := l.Execute(ctx, siteID, testkit.Deposit(b, "dep-1", "u1", 25_000), events.ActorMerchant)
	require.NoError(t, err)
	assert.True(t, rep.Decision.Repeat)
	assert.Zero(t, rep.Seq)
	assert.Empty(t, rep.Events)
	assert.Equal(t, r.Decision.Tx, rep.Decision.Tx)
	assert.Equal(t, r.Tx, rep.Tx)
	afterRepeat, err := st.LastSeq(ctx)
	require.NoError(t, err)
	assert.Equal(t, last, afterRepeat, "a repeat appends nothing")
	// The same end user asking again under another processId is answered
	// with the deposit already pending.
	dup, err := l.Execute(ctx, siteID, testkit.Deposit(b, "dep-1b", "u1", 30_000), events.ActorMerchant)
	require.NoError(t, err)
	assert.True(t, dup.Decision.AlreadyPending)
	assert.Equal(t, int32(0), dup.Decision.Tx)
	// Its processId is recorded as another name of the pending deposit.
	require.Len(t, dup.Events, 1)
	assert.Equal(t, events.DepositAliasAddedName, dup.Events[0].Name)
	last = dup.Seq
	// The same processId with another amount is a conflict.
	_, err = l.Execute(ctx, siteID, testkit.Deposit(b, "dep-1", "u1", 26_000), events.ActorMerchant)
	assert.ErrorIs(t, err, aggregates.ErrProcessIDConflict)
	now, err := st.LastSeq(ctx)
	require.NoError(t, err)
	assert.Equal(t, last, now, "repeats and refusals append nothing")

	// An expiry before its time is refused.
	_, err = l.Execute(ctx, siteID, aggregates.ExpireDeposit{TxID: txID(0)}, events.ActorSystem)
	assert.ErrorIs(t, err, aggregates.ErrNotDue)

	// Approving credits the amount received.
	ap, err := l.Execute(ctx, siteID, aggregates.ApproveDeposit{TxID: txID(0), Amount: 24_000}, "op-1")
	require.NoError(t, err)
	assert.Equal(t, aggregates.StatusApproved, ap.Tx.Status)
	assert.Equal(t, int64(24_000), ap.Tx.Amount)
	assert.Equal(t, int64(25_000), ap.Tx.Requested)
	v = view(t, l, siteID)
	assert.Equal(t, int64(124_000), v.Balance)
	_, err = l.Execute(ctx, siteID, aggregates.ApproveDeposit{TxID: txID(0)}, "op-1")
	assert.ErrorIs(t, err, aggregates.ErrInvalidTransition, "a deposit is credited once")

	// A rejected deposit keeps its reason and moves no money.
	r2, err := l.Execute(ctx, siteID, testkit.Deposit(b, "dep-2", "u2", 5_000), events.ActorMerchant)
	require.NoError(t, err)
	rj, err := l.Execute(ctx, siteID, aggregates.RejectDeposit{TxID: txID(r2.Decision.Tx), Reason: "no transfer"}, "op-1")
	require.NoError(t, err)
	assert.Equal(t, aggregates.StatusRejected, rj.Tx.Status)
	assert.Equal(t, "no transfer", rj.Reason)

	// A pending deposit past its expiry can be expired, then approved late.
	r3, err := l.Execute(ctx, siteID, testkit.Deposit(b, "dep-3", "u3", 7_000), events.ActorMerchant)
	require.NoError(t, err)
	clk.Add(time.Hour)
	ex, err := l.Execute(ctx, siteID, aggregates.ExpireDeposit{TxID: txID(r3.Decision.Tx)}, events.ActorSystem)
	require.NoError(t, err)
	assert.Equal(t, aggregates.StatusExpired, ex.Tx.Status)
	_, err = l.Execute(ctx, siteID, aggregates.ApproveDeposit{TxID: txID(r3.Decision.Tx)}, "op-1")
	require.NoError(t, err)
	assert.Equal(t, int64(131_000), view(t, l, siteID).Balance)

	// A withdrawal reserves its amount until paid.
	w, err := l.Execute(ctx, siteID, testkit.Withdrawal(b, "wd-1", "u4", 40_000, payee), events.ActorMerchant)
	require.NoError(t, err)
	require.Len(t, w.Events, 1)
	assert.Equal(t, events.WithdrawalRequestedName, w.Events[0].Name)
	v = view(t, l, siteID)
	assert.Equal(t, int64(131_000), v.Balance)
	assert.Equal(t, int64(40_000), v.Pending)
	assert.Equal(t, int64(131_000-40_000+50_000), v.Available)
	_, err = l.Execute(ctx, siteID, aggregates.PayWithdrawal{TxID: txID(w.Decision.Tx)}, "op-1")
	assert.ErrorIs(t, err, aggregates.ErrInvalidTransition, "pay needs an operator to take it first")
	_, err = l.Execute(ctx, siteID, aggregates.ProcessWithdrawal{TxID: txID(w.Decision.Tx)}, "op-1")
	require.NoError(t, err)
	pd, err := l.Execute(ctx, siteID, aggregates.PayWithdrawal{TxID: txID(w.Decision.Tx), Reference: "ref-9"}, "op-1")
	require.NoError(t, err)
	assert.Equal(t, aggregates.StatusPaid, pd.Tx.Status)
	assert.Equal(t, "ref-9", pd.Reason)
	v = view(t, l, siteID)
	assert.Equal(t, int64(91_000), v.Balance, "paying debits the treasury")
	assert.Zero(t, v.Pending, "and releases the reservation")

	// A rejected withdrawal releases its reservation without a debit.
	w2, err := l.Execute(ctx, siteID, testkit.Withdrawal(b, "wd-2", "u4", 10_000, payee), events.ActorMerchant)
	require.NoError(t, err)
	assert.Equal(t, int64(10_000), view(t, l, siteID).Pending)
	_, err = l.Execute(ctx, siteID, aggregates.RejectWithdrawal{TxID: txID(w2.Decision.Tx), Reason: "wrong number"}, "op-1")
	require.NoError(t, err)
	v = view(t, l, siteID)
	assert.Equal(t, int64(91_000), v.Balance)
	assert.Zero(t, v.Pending)

	// The treasury rule: balance − pending − amount must stay above the
	// negative limit; landing exactly on it is refused.
	_, err = l.Execute(ctx, siteID, testkit.Withdrawal(b, "wd-3", "u5", 141_000, payee), events.ActorMerchant)
	assert.ErrorIs(t, err, aggregates.ErrInsufficientBalance)
	_, err = l.Execute(ctx, siteID, testkit.Withdrawal(b, "wd-3", "u5", 140_999, payee), events.ActorMerchant)
	require.NoError(t, err)
	assert.Equal(t, int64(1), view(t, l, siteID).Available)

	// Unknown transactions.
	_, err = l.Execute(ctx, siteID, aggregates.ApproveDeposit{TxID: txID(99)}, "op-1")
	assert.ErrorIs(t, err, aggregates.ErrNotFound)

	v = view(t, l, siteID)
	assert.Equal(t, verifyChain(t, st, siteID), v.Hash, "the state's hash is the chain's head")
	assert.Equal(t, []string{"dep-1", "dep-2", "dep-3", "wd-1", "wd-2", "wd-3"}, v.Pids)
}

func TestLedger_Execute_unknownSiteAndClosed(t *testing.T) {
	onEachStore(t, ledgerExecuteUnknownSiteAndClosed)
}

func ledgerExecuteUnknownSiteAndClosed(t *testing.T, e *env) {
	ctx := context.Background()
	st := e.store("a")
	l := e.ledger(st, ledger.Config{})
	setup(t, l, 0, 10_000)
	b := bank(t, l)

	_, err := l.Execute(ctx, "nope", testkit.Deposit(b, "p", "u", 5_000), events.ActorMerchant)
	assert.ErrorIs(t, err, aggregates.ErrSiteNotFound)
	_, err = l.Execute(ctx, "nope", aggregates.AdjustTreasury{Amount: 1, Reason: "x"}, "admin")
	assert.ErrorIs(t, err, aggregates.ErrSiteNotFound)
	assert.ErrorIs(t, l.Read(context.Background(), "nope", ledger.Local, func(*aggregates.Site) error { return nil }), aggregates.ErrSiteNotFound)
	assert.ErrorIs(t, l.Read(ctx, "nope", ledger.Fresh, nil), aggregates.ErrSiteNotFound)
	_, ok := l.SiteConfig("nope")
	assert.False(t, ok)
	assert.Equal(t, []ids.SiteID{siteID}, l.SiteIDs(), "lookups of unknown sites leave no trace")

	// Creating a site twice is refused.
	name := "again"
	_, err = l.Execute(ctx, siteID, aggregates.CreateSite{AppKey: "k2", Secret: "s", WebhookSecret: "w",
		Settings: aggregates.SiteSettings{Name: &name}}, "admin")
	assert.ErrorIs(t, err, aggregates.ErrSiteExists)

	require.NoError(t, l.Close(ctx))
	require.NoError(t, l.Close(ctx), "closing twice is harmless")
	_, err = l.Execute(ctx, siteID, testkit.Deposit(b, "p2", "u2", 5_000), events.ActorMerchant)
	assert.ErrorIs(t, err, ledger.ErrClosed)
	_, err = l.Execute(ctx, "nope", testkit.Deposit(b, "p2", "u2", 5_000), events.ActorMerchant)
	assert.ErrorIs(t, err, ledger.ErrClosed)
}

// A caller that gives up before its command is decided gets an error, and
// the command is not committed behind its back.
func TestLedger_Execute_cancelledBeforeDecision(t *testing.T) {
	onEachStore(t, ledgerExecuteCancelledBeforeDecision)
}

func ledgerExecuteCancelledBeforeDecision(t *testing.T, e *env) {
	st := e.store("a")
	l := e.ledger(st, ledger.Config{})
	setup(t, l, 0, 10_000)
	b := bank(t, l)

	hold := holdSite(t, l, siteID)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := l.Execute(ctx, siteID, testkit.Deposit(b, "gave-up", "u", 5_000), events.ActorMerchant)
		errc <- err
	}()
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		q, running := ledger.QueueState(l, siteID)
		return q == 0 && running
	}, "the command is taken by the committer")
	cancel()
	assert.ErrorIs(t, <-errc, events.ErrUnavailable)
	hold()
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		_, running := ledger.QueueState(l, siteID)
		return !running
	}, "the committer is idle")
	assert.Empty(t, view(t, l, siteID).Txs)
	_, msgs := messages(t, st, siteID)
	assert.Len(t, msgs, 2, "only the creation and the funding are stored")
}

// holdSite holds the site's state lock for reading until the returned
// function is called: the committer cannot decide (it changes the state in
// memory) until then.
func holdSite(t *testing.T, l *ledger.Ledger, id ids.SiteID) (release func()) {
	t.Helper()
	entered, held := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- l.Read(context.Background(), id, ledger.Local, func(*aggregates.Site) error {
			close(entered)
			<-held
			return nil
		})
	}()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("hold site %s: %v", id, err)
	}
	var once bool
	release = func() {
		if !once {
			once = true
			close(held)
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(release)
	return release
}

// Group commit: commands that queue up while a batch is in flight are
// decided together and stored as one message, at most MaxBatch commands per
// message. The site is held busy so that the queue is observable and the
// message sizes are exact, not a matter of timing.
func TestLedger_groupCommit_batchesQueuedCommands(t *testing.T) {
	onEachStore(t, ledgerGroupCommitBatchesQueuedCommands)
}

func ledgerGroupCommitBatchesQueuedCommands(t *testing.T, e *env) {
	ctx := context.Background()
	st := e.store("a")
	l := e.ledger(st, ledger.Config{MaxBatch: 100})
	setup(t, l, 0, 0)
	b := bank(t, l)
	seqs0, _ := messages(t, st, siteID)

	release := holdSite(t, l, siteID)
	type outcome struct {
		r   ledger.Result
		err error
	}
	first := make(chan outcome, 1)
	go func() {
		r, err := l.Execute(ctx, siteID, testkit.Deposit(b, "first", "first", 1_000), events.ActorMerchant)
		first <- outcome{r, err}
	}()
	// The committer has taken the first command and waits for the site.
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		q, running := ledger.QueueState(l, siteID)
		return q == 0 && running
	}, "the first command is in flight")

	const n = 300
	results := make([]outcome, n)
	done := make(chan struct{})
	go func() {
		testkit.Together(n, func(i int) {
			r, err := l.Execute(ctx, siteID, testkit.Deposit(b, fmt.Sprintf("p-%03d", i), fmt.Sprintf("u-%03d", i), int64(1_000+i)), events.ActorMerchant)
			results[i] = outcome{r, err}
		})
		close(done)
	}()
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		q, _ := ledger.QueueState(l, siteID)
		return q == n
	}, "all commands queue behind the in-flight one")
	release()
	<-done
	f := <-first
	require.NoError(t, f.err)

	bySeq := map[uint64]int{}
	txs := map[int32]bool{f.r.Decision.Tx: true}
	for i, o := range results {
		require.NoError(t, o.err, "command %d", i)
		require.Len(t, o.r.Events, 1)
		assert.Equal(t, int64(1_000+i), o.r.Tx.Amount)
		bySeq[o.r.Seq]++
		assert.False(t, txs[o.r.Decision.Tx], "transaction index %d handed out twice", o.r.Decision.Tx)
		txs[o.r.Decision.Tx] = true
	}
	assert.Equal(t, 3, len(bySeq), "300 queued commands are answered from 3 messages")
	for seq, k := range bySeq {
		assert.Equal(t, 100, k, "message %d holds MaxBatch commands", seq)
	}

	seqs, msgs := messages(t, st, siteID)
	var sizes []int
	for _, evs := range msgs[len(seqs0):] {
		sizes = append(sizes, len(evs))
	}
	assert.Equal(t, []int{1, 100, 100, 100}, sizes, "events per message after the setup")
	pids := map[string]bool{}
	for _, evs := range msgs[len(seqs0):] {
		for _, ev := range evs {
			p, ok := ev.Payload.(*events.DepositRequested)
			require.True(t, ok)
			assert.False(t, pids[p.ProcessID], "processId %s stored twice", p.ProcessID)
			pids[p.ProcessID] = true
		}
	}
	assert.Len(t, pids, n+1)
	assert.Equal(t, seqs[len(seqs)-1], view(t, l, siteID).Seq)
	assert.Equal(t, verifyChain(t, st, siteID), view(t, l, siteID).Hash)

	v := view(t, l, siteID)
	require.Len(t, v.Txs, n+1)
	for i, tx := range v.Txs {
		assert.Equal(t, aggregates.StatusPending, tx.Status, "tx %d", i)
	}
}

// Without holding the site, concurrent commands still all succeed, each is
// stored exactly once, and the chain stays intact whatever the batching.
func TestLedger_groupCommit_concurrentDeposits(t *testing.T) {
	onEachStore(t, ledgerGroupCommitConcurrentDeposits)
}

func ledgerGroupCommitConcurrentDeposits(t *testing.T, e *env) {
	ctx := context.Background()
	st := e.store("a")
	l := e.ledger(st, ledger.Config{})
	setup(t, l, 0, 0)
	b := bank(t, l)
	seqs0, _ := messages(t, st, siteID)

	const n = 300
	errs := make([]error, n)
	testkit.Together(n, func(i int) {
		_, errs[i] = l.Execute(ctx, siteID, testkit.Deposit(b, fmt.Sprintf("p-%03d", i), fmt.Sprintf("u-%03d", i), 1_000), events.ActorMerchant)
	})
	for i, err := range errs {
		require.NoError(t, err, "command %d", i)
	}
	seqs, msgs := messages(t, st, siteID)
	total, biggest := 0, 0
	for _, evs := range msgs[len(seqs0):] {
		total += len(evs)
		biggest = max(biggest, len(evs))
	}
	assert.Equal(t, n, total, "every command stored exactly once")
	assert.LessOrEqual(t, len(seqs)-len(seqs0), n)
	t.Logf("%d commands in %d messages (largest %d)", n, len(seqs)-len(seqs0), biggest)
	v := view(t, l, siteID)
	assert.Len(t, v.Txs, n)
	assert.Equal(t, verifyChain(t, st, siteID), v.Hash)
}

// One command after another over many sites reuses the idle committers
// instead of starting a goroutine for every site's loop.
func TestLedger_Execute_reusesCommitters(t *testing.T) {
	e := newEnv(t)
	l := e.ledger(e.store("a"), ledger.Config{})
	setup(t, l, 0, 0)
	b := bank(t, l)
	const sites = 50
	for i := range sites {
		createSite(t, l, ids.SiteID(fmt.Sprintf("many-%d", i)), 0, 0)
	}
	before := ledger.CommittersStarted(l)
	for i := range 4 * sites {
		id := ids.SiteID(fmt.Sprintf("many-%d", i%sites))
		_, err := l.Execute(context.Background(), id, testkit.Deposit(b, fmt.Sprintf("p-%d", i), fmt.Sprintf("u-%d", i), 5_000), events.ActorMerchant)
		require.NoError(t, err)
	}
	// A committer that has just answered may not be back at its select
	// when the next command comes: a few more may start, not one a site.
	assert.LessOrEqual(t, ledger.CommittersStarted(l)-before, int64(20))
}
