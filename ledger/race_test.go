package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// pair is two complete ledgers over two connections to one NATS server, as
// two gateway processes on one cluster.
type pair struct {
	e      *env
	sa, sb ledger.Store
	a, b   *ledger.Ledger
}

// newPair starts two ledgers on e, sets the fixture site up through the
// first (negative limit and funding as given) and waits until the second
// has followed it.
func newPair(t *testing.T, e *env, cfgA, cfgB ledger.Config, negativeLimit, fund int64) *pair {
	t.Helper()
	p := &pair{e: e, sa: e.store("a"), sb: e.store("b")}
	p.a = e.ledger(p.sa, cfgA)
	p.b = e.ledger(p.sb, cfgB)
	setup(t, p.a, negativeLimit, fund)
	caughtUp(t, p.b, p.sb)
	return p
}

// ledger returns the i-th command's ledger, alternating between the two.
func (p *pair) ledger(i int) *ledger.Ledger {
	if i%2 == 0 {
		return p.a
	}
	return p.b
}

// settle waits until both followers have applied the whole stream and
// checks that both ledgers hold the same state, equal to the stream's.
func (p *pair) settle(t *testing.T) siteView {
	t.Helper()
	caughtUp(t, p.a, p.sa)
	caughtUp(t, p.b, p.sb)
	va, vb := view(t, p.a, siteID), view(t, p.b, siteID)
	require.Equal(t, va, vb, "both ledgers agree once they have followed the stream")
	ctx := context.Background()
	require.NoError(t, p.a.Read(ctx, siteID, ledger.Fresh, nil))
	require.NoError(t, p.b.Read(ctx, siteID, ledger.Fresh, nil))
	require.Equal(t, va, view(t, p.a, siteID), "the follower left nothing for Sync to read")
	require.Equal(t, va, view(t, p.b, siteID))
	require.Equal(t, verifyChain(t, p.sa, siteID), va.Hash)
	return va
}

// Invariant 2: two gateway processes cannot overdraw a treasury. The site
// has room for exactly 99 withdrawals of 1,000 (100,000 with a negative
// limit of 0: the hundredth would land exactly on the limit).
func TestLedger_twoLedgers_withdrawalsNeverOverdraw(t *testing.T) {
	onEachStore(t, ledgerTwoLedgersWithdrawalsNeverOverdraw)
}

func ledgerTwoLedgersWithdrawalsNeverOverdraw(t *testing.T, e *env) {
	ctx := context.Background()
	p := newPair(t, e, ledger.Config{}, ledger.Config{}, 0, 100*1000)
	ba, bb := bank(t, p.a), bank(t, p.b)

	const n, amount, room = 200, 1000, 99
	var ok, refused atomic.Int32
	won := make([]bool, n)
	testkit.Together(n, func(i int) {
		b := ba
		if i%2 == 1 {
			b = bb
		}
		r, err := p.ledger(i).Execute(ctx, siteID, testkit.Withdrawal(b, fmt.Sprintf("wd-%03d", i), fmt.Sprintf("u-%03d", i), amount, payee), events.ActorMerchant)
		switch {
		case err == nil:
			if assert.Len(t, r.Events, 1) && assert.Equal(t, aggregates.StatusPending, r.Tx.Status) {
				ok.Add(1)
				won[i] = true
			}
		case errors.Is(err, aggregates.ErrInsufficientBalance):
			refused.Add(1)
		default:
			t.Errorf("withdrawal %d: unexpected error %v", i, err)
		}
	})
	assert.Equal(t, int32(room), ok.Load(), "exactly the room is reserved")
	assert.Equal(t, int32(n-room), refused.Load())

	v := p.settle(t)
	assert.Equal(t, int64(100*1000), v.Balance)
	assert.Equal(t, int64(ok.Load())*amount, v.Pending)
	assert.Greater(t, v.Available, int64(0), "available = balance − pending − negativeLimit stays above zero")
	assert.Equal(t, int64(amount), v.Available)
	require.Len(t, v.Txs, room)
	var sum int64
	stored := map[string]bool{}
	for i, tx := range v.Txs {
		assert.Equal(t, aggregates.KindWithdrawal, tx.Kind)
		assert.Equal(t, aggregates.StatusPending, tx.Status)
		sum += tx.Amount
		stored[v.Pids[i]] = true
	}
	assert.Equal(t, v.Pending, sum)
	for i, w := range won {
		assert.Equal(t, w, stored[fmt.Sprintf("wd-%03d", i)], "withdrawal %d answered %v", i, w)
	}

	// Neither ledger will reserve more now.
	_, err := p.a.Execute(ctx, siteID, testkit.Withdrawal(ba, "late-a", "late", amount, payee), events.ActorMerchant)
	assert.ErrorIs(t, err, aggregates.ErrInsufficientBalance)
	_, err = p.b.Execute(ctx, siteID, testkit.Withdrawal(bb, "late-b", "late", amount, payee), events.ActorMerchant)
	assert.ErrorIs(t, err, aggregates.ErrInsufficientBalance)
}

// Invariant 6 across processes: concurrent repeats of one processId create
// exactly one transaction and all of them are answered with it.
func TestLedger_twoLedgers_sameProcessIDCreatesOneTransaction(t *testing.T) {
	onEachStore(t, ledgerTwoLedgersSameProcessIDCreatesOneTransaction)
}

func ledgerTwoLedgersSameProcessIDCreatesOneTransaction(t *testing.T, e *env) {
	ctx := context.Background()
	p := newPair(t, e, ledger.Config{}, ledger.Config{}, 0, 0)
	ba, bb := bank(t, p.a), bank(t, p.b)

	const n = 50
	results := make([]ledger.Result, n)
	errs := make([]error, n)
	testkit.Together(n, func(i int) {
		b := ba
		if i%2 == 1 {
			b = bb
		}
		results[i], errs[i] = p.ledger(i).Execute(ctx, siteID, testkit.Deposit(b, "same-pid", "user-1", 25_000), events.ActorMerchant)
	})
	created, repeats := 0, 0
	for i, r := range results {
		require.NoError(t, errs[i], "request %d", i)
		assert.Equal(t, int32(0), r.Decision.Tx, "request %d names transaction %d", i, r.Decision.Tx)
		assert.Equal(t, int64(25_000), r.Tx.Amount)
		assert.Equal(t, aggregates.StatusPending, r.Tx.Status)
		if len(r.Events) > 0 {
			created++
			assert.NotZero(t, r.Seq)
		} else {
			repeats++
			assert.True(t, r.Decision.Repeat, "request %d", i)
			assert.Zero(t, r.Seq)
		}
	}
	assert.Equal(t, 1, created)
	assert.Equal(t, n-1, repeats)
	v := p.settle(t)
	require.Len(t, v.Txs, 1)
	assert.Equal(t, []string{"same-pid"}, v.Pids)
}

// The same processId with different amounts, concurrently through two
// processes: one transaction, every other request a processId conflict.
func TestLedger_twoLedgers_processIDConflict(t *testing.T) {
	onEachStore(t, ledgerTwoLedgersProcessIDConflict)
}

func ledgerTwoLedgersProcessIDConflict(t *testing.T, e *env) {
	ctx := context.Background()
	p := newPair(t, e, ledger.Config{}, ledger.Config{}, 0, 0)
	ba, bb := bank(t, p.a), bank(t, p.b)

	const n = 20
	results := make([]ledger.Result, n)
	errs := make([]error, n)
	testkit.Together(n, func(i int) {
		b := ba
		if i%2 == 1 {
			b = bb
		}
		results[i], errs[i] = p.ledger(i).Execute(ctx, siteID, testkit.Deposit(b, "contested", "user-1", int64(10_000+i*10)), events.ActorMerchant)
	})
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "requests %d and %d both succeeded", winner, i)
			winner = i
			assert.Len(t, results[i].Events, 1)
			continue
		}
		assert.ErrorIs(t, err, aggregates.ErrProcessIDConflict, "request %d", i)
	}
	require.NotEqual(t, -1, winner, "one request must create the transaction")
	v := p.settle(t)
	require.Len(t, v.Txs, 1)
	assert.Equal(t, int64(10_000+winner*10), v.Txs[0].Amount)
}

// Conflicting transitions of one transaction through two processes: exactly
// one wins, the other is refused as an invalid transition, and money moves
// once.
func TestLedger_twoLedgers_conflictingTransitions(t *testing.T) {
	onEachStore(t, ledgerTwoLedgersConflictingTransitions)
}

func ledgerTwoLedgersConflictingTransitions(t *testing.T, e *env) {
	ctx := context.Background()
	clk := newClock(epoch)
	// The second ledger's clock is past every deposit's expiry.
	p := newPair(t, e, ledger.Config{Now: clk.Now}, ledger.Config{Now: clk.Ahead(2 * time.Hour)}, 0, 1_000_000)
	ba := bank(t, p.a)

	const pairs = 20
	newDeposits := func(prefix string) []ids.TxID {
		txs := make([]ids.TxID, pairs)
		for i := range txs {
			r, err := p.a.Execute(ctx, siteID, testkit.Deposit(ba, fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("%s-u%d", prefix, i), 10_000), events.ActorMerchant)
			require.NoError(t, err)
			txs[i] = txID(r.Decision.Tx)
		}
		return txs
	}
	// race runs first(i) on ledger a and second(i) on ledger b for every i,
	// all at once, and returns the errors.
	race := func(first, second func(i int) aggregates.Command) (errA, errB []error) {
		errA, errB = make([]error, pairs), make([]error, pairs)
		testkit.Together(2*pairs, func(k int) {
			i := k / 2
			if k%2 == 0 {
				_, errA[i] = p.a.Execute(ctx, siteID, first(i), "op-a")
			} else {
				_, errB[i] = p.b.Execute(ctx, siteID, second(i), "op-b")
			}
		})
		return errA, errB
	}
	statusOf := func(v siteView, id ids.TxID) aggregates.Status {
		i, ok := id.Index()
		require.True(t, ok)
		return v.Txs[i].Status
	}

	t.Run("reject vs approve", func(t *testing.T) {
		txs := newDeposits("rva")
		before := p.settle(t).Balance
		errA, errB := race(
			func(i int) aggregates.Command { return aggregates.RejectDeposit{TxID: txs[i], Reason: "no transfer"} },
			func(i int) aggregates.Command { return aggregates.ApproveDeposit{TxID: txs[i]} })
		v := p.settle(t)
		approved := int64(0)
		for i := range txs {
			if (errA[i] == nil) == (errB[i] == nil) {
				t.Errorf("deposit %d: reject %v, approve %v: exactly one must win", i, errA[i], errB[i])
				continue
			}
			if errA[i] == nil {
				assert.ErrorIs(t, errB[i], aggregates.ErrInvalidTransition)
				assert.Equal(t, aggregates.StatusRejected, statusOf(v, txs[i]))
			} else {
				assert.ErrorIs(t, errA[i], aggregates.ErrInvalidTransition)
				assert.Equal(t, aggregates.StatusApproved, statusOf(v, txs[i]))
				approved++
			}
		}
		assert.Equal(t, before+approved*10_000, v.Balance, "only approvals credit")
	})

	t.Run("reject vs expire", func(t *testing.T) {
		txs := newDeposits("rve")
		errA, errB := race(
			func(i int) aggregates.Command { return aggregates.RejectDeposit{TxID: txs[i], Reason: "no transfer"} },
			func(i int) aggregates.Command { return aggregates.ExpireDeposit{TxID: txs[i]} })
		v := p.settle(t)
		for i := range txs {
			if (errA[i] == nil) == (errB[i] == nil) {
				t.Errorf("deposit %d: reject %v, expire %v: exactly one must win", i, errA[i], errB[i])
				continue
			}
			if errA[i] == nil {
				assert.ErrorIs(t, errB[i], aggregates.ErrInvalidTransition)
				assert.Equal(t, aggregates.StatusRejected, statusOf(v, txs[i]))
			} else {
				assert.ErrorIs(t, errA[i], aggregates.ErrInvalidTransition)
				assert.Equal(t, aggregates.StatusExpired, statusOf(v, txs[i]))
			}
		}
	})

	// An expired deposit may still be approved, so approval always wins;
	// the expiry wins only if it came first. Either way it is credited once.
	t.Run("approve vs expire", func(t *testing.T) {
		txs := newDeposits("ave")
		before := p.settle(t).Balance
		errA, errB := race(
			func(i int) aggregates.Command { return aggregates.ApproveDeposit{TxID: txs[i]} },
			func(i int) aggregates.Command { return aggregates.ExpireDeposit{TxID: txs[i]} })
		v := p.settle(t)
		for i := range txs {
			assert.NoError(t, errA[i], "deposit %d: approval", i)
			if errB[i] != nil {
				assert.ErrorIs(t, errB[i], aggregates.ErrInvalidTransition)
			}
			assert.Equal(t, aggregates.StatusApproved, statusOf(v, txs[i]))
		}
		assert.Equal(t, before+pairs*10_000, v.Balance)
	})

	t.Run("pay vs reject withdrawal", func(t *testing.T) {
		txs := make([]ids.TxID, pairs)
		for i := range txs {
			r, err := p.a.Execute(ctx, siteID, testkit.Withdrawal(ba, fmt.Sprintf("w-%d", i), fmt.Sprintf("wu-%d", i), 5_000, payee), events.ActorMerchant)
			require.NoError(t, err)
			txs[i] = txID(r.Decision.Tx)
			_, err = p.a.Execute(ctx, siteID, aggregates.ProcessWithdrawal{TxID: txs[i]}, "op-a")
			require.NoError(t, err)
		}
		before := p.settle(t)
		require.Equal(t, int64(pairs*5_000), before.Pending)
		errA, errB := race(
			func(i int) aggregates.Command { return aggregates.PayWithdrawal{TxID: txs[i]} },
			func(i int) aggregates.Command {
				return aggregates.RejectWithdrawal{TxID: txs[i], Reason: "closed account"}
			})
		v := p.settle(t)
		paid := int64(0)
		for i := range txs {
			if (errA[i] == nil) == (errB[i] == nil) {
				t.Errorf("withdrawal %d: pay %v, reject %v: exactly one must win", i, errA[i], errB[i])
				continue
			}
			if errA[i] == nil {
				assert.ErrorIs(t, errB[i], aggregates.ErrInvalidTransition)
				assert.Equal(t, aggregates.StatusPaid, statusOf(v, txs[i]))
				paid++
			} else {
				assert.ErrorIs(t, errA[i], aggregates.ErrInvalidTransition)
				assert.Equal(t, aggregates.StatusRejected, statusOf(v, txs[i]))
			}
		}
		assert.Zero(t, v.Pending, "every reservation is released exactly once")
		assert.Equal(t, before.Balance-paid*5_000, v.Balance, "only payments debit")
	})
}

// Read-your-writes across processes: right after one ledger answers a
// create, the other finds the transaction once it syncs the site, even for
// a site its follower may not have seen yet.
func TestLedger_twoLedgers_readYourWrites(t *testing.T) {
	onEachStore(t, ledgerTwoLedgersReadYourWrites)
}

func ledgerTwoLedgersReadYourWrites(t *testing.T, e *env) {
	ctx := context.Background()
	sa, sb := e.store("a"), e.store("b")
	a := e.ledger(sa, ledger.Config{})
	b := e.ledger(sb, ledger.Config{})
	setupCatalog(t, a)
	ba := bank(t, a)
	for i := 0; i < 20; i++ {
		id := ids.SiteID(fmt.Sprintf("site-%d", i))
		createSite(t, a, id, 0, 0)
		r, err := a.Execute(ctx, id, testkit.Deposit(ba, "p", "u", 5_000), events.ActorMerchant)
		require.NoError(t, err)
		require.NoError(t, b.Read(ctx, id, ledger.Fresh, nil))
		require.NoError(t, b.Read(context.Background(), id, ledger.Local, func(s *aggregates.Site) error {
			j, ok := s.ByProcessID("p")
			assert.True(t, ok)
			assert.Equal(t, r.Decision.Tx, j)
			return nil
		}))
		// A command through the other ledger sees the same state.
		rep, err := b.Execute(ctx, id, testkit.Deposit(ba, "p", "u", 5_000), events.ActorMerchant)
		require.NoError(t, err)
		assert.True(t, rep.Decision.Repeat)
	}
	// A site created through the other ledger cannot be created again.
	name := "dup"
	_, err := b.Execute(ctx, "site-0", aggregates.CreateSite{AppKey: "k", Secret: "s", WebhookSecret: "w",
		Settings: aggregates.SiteSettings{Name: &name}}, "admin")
	assert.ErrorIs(t, err, aggregates.ErrSiteExists)
	// A site that is created on b while a's follower may lag is found by
	// a command on a.
	createSite(t, b, "late", 0, 500)
	_, err = a.Execute(ctx, "late", aggregates.AdjustTreasury{Amount: 500, Reason: "top up"}, "admin")
	require.NoError(t, err)
	caughtUp(t, b, sb)
	assert.Equal(t, int64(1000), view(t, b, "late").Balance)
}

// A process whose follower lags must not answer from its stale state: a
// refusal or a repeat appends nothing, so no expected sequence proves the
// state current, and the ledger must check the stream before answering.
func TestLedger_twoLedgers_laggingFollowerDecidesOnFreshState(t *testing.T) {
	onEachStore(t, ledgerTwoLedgersLaggingFollowerDecidesOnFreshState)
}

func ledgerTwoLedgersLaggingFollowerDecidesOnFreshState(t *testing.T, e *env) {
	ctx := context.Background()
	sa := e.store("a")
	sb := &gatedStore{Store: e.store("b")}
	a := e.ledger(sa, ledger.Config{})
	b := e.ledger(sb, ledger.Config{})
	t.Cleanup(sb.resume)
	setup(t, a, 0, 10_000)
	caughtUp(t, b, sb)
	bk := bank(t, b)
	sb.pause()

	// Written through a while b's follower stalls.
	r, err := a.Execute(ctx, siteID, testkit.Deposit(bk, "dep", "u1", 5_000), events.ActorMerchant)
	require.NoError(t, err)
	_, err = a.Execute(ctx, siteID, aggregates.AdjustTreasury{Amount: 90_000, Reason: "top up"}, "admin")
	require.NoError(t, err)
	w, err := a.Execute(ctx, siteID, testkit.Withdrawal(bk, "wd", "u2", 2_000, payee), events.ActorMerchant)
	require.NoError(t, err)
	_, err = a.Execute(ctx, siteID, aggregates.RejectWithdrawal{TxID: txID(w.Decision.Tx), Reason: "closed"}, "op")
	require.NoError(t, err)

	// b's stale state knows none of it; its answers must still be right.
	rep, err := b.Execute(ctx, siteID, testkit.Deposit(bk, "dep", "u1", 5_000), events.ActorMerchant)
	require.NoError(t, err)
	assert.True(t, rep.Decision.Repeat, "a repeat, not a second transaction")
	assert.Equal(t, r.Decision.Tx, rep.Decision.Tx)
	_, err = b.Execute(ctx, siteID, testkit.Deposit(bk, "dep", "u1", 6_000), events.ActorMerchant)
	assert.ErrorIs(t, err, aggregates.ErrProcessIDConflict)
	_, err = b.Execute(ctx, siteID, aggregates.PayWithdrawal{TxID: txID(w.Decision.Tx)}, "op")
	assert.ErrorIs(t, err, aggregates.ErrInvalidTransition, "the withdrawal is rejected, not unknown")
	_, err = b.Execute(ctx, siteID, testkit.Withdrawal(bk, "big", "u3", 50_000, payee), events.ActorMerchant)
	require.NoError(t, err, "the top-up covers it")
	_, err = b.Execute(ctx, siteID, aggregates.ApproveDeposit{TxID: txID(r.Decision.Tx)}, "op")
	require.NoError(t, err, "the deposit exists")

	sb.resume()
	caughtUp(t, a, sa)
	caughtUp(t, b, sb)
	va := view(t, a, siteID)
	assert.Equal(t, va, view(t, b, siteID))
	assert.Equal(t, int64(105_000), va.Balance)
	assert.Equal(t, int64(50_000), va.Pending)
	assert.Len(t, va.Txs, 3)
}

// chasing is a gateway process's store (a real one underneath) whose
// follower holds the site's messages while the test holds hold locked
// (it hears of them only once it is let go, its own write's included:
// dropped, that message would never reach the follower, which a
// catch-up test would wait for in vain), and
// before each read of the site's next message lets another process store
// one more (onNext): a site another gateway keeps writing while this one
// catches up. Asking for the site's last message ends the other's writes:
// a catch-up that bounds itself there ends, one that chases the end does
// not.
type chasing struct {
	ledger.Store
	subj   string
	hold   sync.RWMutex
	onNext atomic.Pointer[func()]
}

func (c *chasing) Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error {
	return c.Store.Follow(ctx, filter, from, func(m events.Msg) {
		if m.Subject == c.subj {
			c.hold.RLock()
			defer c.hold.RUnlock()
		}
		fn(m)
	})
}

func (c *chasing) LastFor(ctx context.Context, subject string) (uint64, error) {
	if subject == c.subj {
		c.onNext.Store(nil)
	}
	return c.Store.LastFor(ctx, subject)
}

func (c *chasing) Next(ctx context.Context, subject string, seq uint64) (events.Msg, error) {
	if f := c.onNext.Load(); f != nil && subject == c.subj {
		(*f)()
	}
	return c.Store.Next(ctx, subject, seq)
}

// TestCatchUp_boundedWhileAnotherWrites: a write that conflicts catches up
// to the site's last message as it finds it, and then writes. A catch-up
// that chased the subject's end one message at a time never ended while
// the other process kept writing, and the write failed at its deadline.
func TestCatchUp_boundedWhileAnotherWrites(t *testing.T) {
	e := newEnv(t)
	sa := &chasing{Store: e.store("a"), subj: mustSubject(t, siteID)}
	sb := e.store("b")
	a := e.ledger(sa, ledger.Config{})
	b := e.ledger(sb, ledger.Config{})
	setup(t, a, 0, 100_000)
	caughtUp(t, b, sb)
	bk := bank(t, a)
	ctx := context.Background()

	// a no longer hears of the site's messages, and b stores one: a's
	// next write conflicts and catches up.
	sa.hold.Lock()
	release := sync.OnceFunc(sa.hold.Unlock)
	t.Cleanup(release) // a test that fails before the end lets the follower go
	_, err := b.Execute(ctx, siteID, testkit.Deposit(bk, "b-0", "ub-0", 5000), "merchant")
	require.NoError(t, err)
	var others atomic.Int64
	more := func() {
		n := others.Add(1)
		_, err := b.Execute(ctx, siteID, testkit.Deposit(bk, fmt.Sprintf("b-%d", n), fmt.Sprintf("ub-%d", n), 5000), "merchant")
		assert.NoError(t, err)
	}
	sa.onNext.Store(&more)

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := a.Execute(wctx, siteID, testkit.Deposit(bk, "a-1", "ua-1", 7000), "merchant")
	require.NoError(t, err, "after %d messages of the other process", others.Load())
	assert.False(t, res.Decision.Repeat)
	sa.onNext.Store(nil)
	release()
	// Every message of both is in the chain, and a holds what it read.
	verifyChain(t, sa, siteID)
	caughtUp(t, a, sa)
	caughtUp(t, b, sb)
	assert.Equal(t, view(t, a, siteID), view(t, b, siteID))
}
