package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// expiredEvents returns the deposit.expired events stored for the site.
func expiredEvents(t *testing.T, st ledger.Store) []events.Event {
	t.Helper()
	var out []events.Event
	_, msgs := messages(t, st, siteID)
	for _, m := range msgs {
		for _, ev := range m {
			if ev.Name == events.DepositExpiredName {
				out = append(out, ev)
			}
		}
	}
	return out
}

func TestLedger_expiry_sweep(t *testing.T) { onEachStore(t, ledgerExpirySweep) }

func ledgerExpirySweep(t *testing.T, e *env) {
	ctx := context.Background()
	clk := newClock(epoch)
	st := e.store("a")
	l := e.ledger(st, ledger.Config{Now: clk.Now})
	setup(t, l, 0, 0)
	b := bank(t, l)
	for _, pid := range []string{"d0", "d1", "d2"} {
		_, err := l.Execute(ctx, siteID, testkit.Deposit(b, pid, "user-"+pid, 5_000), events.ActorMerchant)
		require.NoError(t, err)
	}
	_, err := l.Execute(ctx, siteID, aggregates.ApproveDeposit{TxID: txID(1)}, "op-1")
	require.NoError(t, err)

	// Before expiresAt nothing is due.
	clk.Add(aggregates.DefaultDepositTTLSeconds*time.Second - time.Millisecond)
	n, err := l.SweepExpired(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)

	// At expiresAt the two still pending deposits expire; the approved one
	// is left alone.
	clk.Add(time.Millisecond)
	n, err = l.SweepExpired(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	v := view(t, l, siteID)
	assert.Equal(t, aggregates.StatusExpired, v.Txs[0].Status)
	assert.Equal(t, aggregates.StatusApproved, v.Txs[1].Status)
	assert.Equal(t, aggregates.StatusExpired, v.Txs[2].Status)
	exp := expiredEvents(t, st)
	require.Len(t, exp, 2)
	for _, ev := range exp {
		assert.Equal(t, events.ActorSystem, ev.Actor)
	}

	// A second sweep finds nothing; a late transfer can still be approved.
	n, err = l.SweepExpired(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = l.Execute(ctx, siteID, aggregates.ApproveDeposit{TxID: txID(0), Amount: 4_000}, "op-1")
	require.NoError(t, err)
	assert.Equal(t, int64(5_000+4_000), view(t, l, siteID).Balance)
}

// TestLedger_expiry_afterDowntime: deposits that fell due while no gateway
// ran expire when one starts.
func TestLedger_expiry_afterDowntime(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	clk := newClock(epoch)
	st := e.store("first")
	l1 := e.ledger(st, ledger.Config{Now: clk.Now})
	setup(t, l1, 0, 0)
	b := bank(t, l1)
	_, err := l1.Execute(ctx, siteID, testkit.Deposit(b, "down", "u", 5_000), events.ActorMerchant)
	require.NoError(t, err)
	require.NoError(t, l1.Close(ctx))
	e.srv.Stop()

	clk.Add(2 * time.Hour)
	e.srv.Restart()
	st2 := e.store("second")
	l2 := e.ledger(st2, ledger.Config{Now: clk.Now})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go l2.RunExpiry(rctx, time.Hour) // the first sweep runs at once
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		return view(t, l2, siteID).Txs[0].Status == aggregates.StatusExpired
	}, "the overdue deposit expires on start-up")
	assert.Len(t, expiredEvents(t, st2), 1)
}

// TestLedger_expiry_twoProcesses: two ledgers sweeping the same site at the
// same time store exactly one deposit.expired event per deposit.
func TestLedger_expiry_twoProcesses(t *testing.T) { onEachStore(t, ledgerExpiryTwoProcesses) }

func ledgerExpiryTwoProcesses(t *testing.T, e *env) {
	ctx := context.Background()
	clk := newClock(epoch)
	sa, sb := e.store("a"), e.store("b")
	a := e.ledger(sa, ledger.Config{Now: clk.Now})
	setup(t, a, 0, 0)
	ba := bank(t, a)
	const n = 30
	for i := 0; i < n; i++ {
		_, err := a.Execute(ctx, siteID, testkit.Deposit(ba, "p"+string(rune('A'+i)), "user"+string(rune('A'+i)), 5_000), events.ActorMerchant)
		require.NoError(t, err)
	}
	b := e.ledger(sb, ledger.Config{Now: clk.Now})
	require.NoError(t, b.Read(ctx, siteID, ledger.Fresh, nil))
	clk.Add(time.Hour)

	var wg sync.WaitGroup
	counts := make([]int, 2)
	for k, l := range []*ledger.Ledger{a, b} {
		wg.Add(1)
		go func(k int, l *ledger.Ledger) {
			defer wg.Done()
			for round := 0; round < 3; round++ {
				c, err := l.SweepExpired(ctx)
				assert.NoError(t, err)
				counts[k] += c
			}
		}(k, l)
	}
	wg.Wait()
	assert.Equal(t, n, counts[0]+counts[1], "every deposit expired once, by one of the two")
	assert.Len(t, expiredEvents(t, sa), n)
	require.NoError(t, a.Read(ctx, siteID, ledger.Fresh, nil))
	require.NoError(t, b.Read(ctx, siteID, ledger.Fresh, nil))
	for _, l := range []*ledger.Ledger{a, b} {
		for i, tx := range view(t, l, siteID).Txs {
			assert.Equal(t, aggregates.StatusExpired, tx.Status, "tx %d", i)
		}
	}
}
