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
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// batchingStore is a gateway process's store whose appends of different
// sites, waiting at one moment, travel as one atomic batch; linger gathers
// them (docs/ARCHITECTURE.md, "Group commit across sites").
func (e *env) batchingStore(name string, linger time.Duration) *jsstore.Store {
	e.t.Helper()
	return testkit.OpenStore(e.t, e.srv.Conn(name), jsstore.Options{BatchMin: 2, Linger: linger})
}

func siteIDs(n int) []ids.SiteID {
	out := make([]ids.SiteID, n)
	for i := range out {
		out[i] = ids.SiteID(fmt.Sprintf("b%d", i))
	}
	return out
}

// A batch across sites where one site's state is stale (another process
// wrote it first) stores nothing; the fresh sites' messages are then
// stored alone, and the stale site's command is decided again against the
// other process's write. Every command is answered once, as stored.
func TestLedger_crossSiteBatch_staleSiteDecidedAgain(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	raw := e.batchingStore("a", 200*time.Millisecond)
	sa := &gatedStore{Store: raw}
	sb := e.store("b")
	a := e.ledger(sa, ledger.Config{})
	b := e.ledger(sb, ledger.Config{})
	t.Cleanup(sa.resume)
	setupCatalog(t, a)
	sites := siteIDs(6)
	for _, id := range sites {
		createSite(t, a, id, 0, 0)
	}
	caughtUp(t, b, sb)
	bk := bank(t, a)
	refusedBefore := raw.Batches().Refused.Load()

	// b writes site 3 while a's follower stalls: a's view of it is stale.
	sa.pause()
	stale := sites[3]
	_, err := b.Execute(ctx, stale, testkit.Deposit(bank(t, b), "theirs", "u-theirs", 7_000), events.ActorMerchant)
	require.NoError(t, err)

	results := make([]ledger.Result, len(sites))
	errs := make([]error, len(sites))
	var wg sync.WaitGroup
	for i, id := range sites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = a.Execute(ctx, id, testkit.Deposit(bk, "ours", "u-ours", 5_000), events.ActorMerchant)
		}()
	}
	wg.Wait()
	for i := range sites {
		require.NoError(t, errs[i], "site %s", sites[i])
		assert.Len(t, results[i].Events, 1, "site %s: a new deposit", sites[i])
		assert.Equal(t, aggregates.StatusPending, results[i].Tx.Status)
	}
	assert.Greater(t, raw.Batches().Refused.Load(), refusedBefore, "the batch holding the stale site was refused")
	assert.Equal(t, int32(1), results[3].Decision.Tx, "decided again after the other process's deposit")

	sa.resume()
	caughtUp(t, a, sa)
	caughtUp(t, b, sb)
	for i, id := range sites {
		va := view(t, a, id)
		assert.Equal(t, va, view(t, b, id), "site %s: both processes agree", id)
		want := []string{"ours"}
		if i == 3 {
			want = []string{"theirs", "ours"}
		}
		assert.Equal(t, want, va.Pids, "site %s: each command stored once", id)
		assert.Equal(t, verifyChain(t, sa, id), va.Hash)
	}
}

// Two processes whose batches span the same sites never overdraw a
// treasury and never store a processId twice: each site has room for
// exactly 19 withdrawals, and each processId is sent through both.
func TestLedger_crossSiteBatches_twoProcessesRacing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	sa, sb := e.batchingStore("a", time.Millisecond), e.batchingStore("b", time.Millisecond)
	a := e.ledger(sa, ledger.Config{})
	b := e.ledger(sb, ledger.Config{})
	setupCatalog(t, a)
	sites := siteIDs(8)
	const amount, room, perSite = 1_000, 19, 30
	for _, id := range sites {
		createSite(t, a, id, 0, room*amount+amount/2)
	}
	caughtUp(t, b, sb)
	banks := []*aggregates.Bank{bank(t, a), bank(t, b)}
	procs := []*ledger.Ledger{a, b}

	type key struct {
		site ids.SiteID
		pid  string
	}
	var mu sync.Mutex
	answered := map[key]int32{} // the transaction each accepted processId was answered with
	var refused, unexpected atomic.Int32
	var wg sync.WaitGroup
	for k := range perSite {
		for _, id := range sites {
			pid := fmt.Sprintf("wd-%02d", k)
			for p := range procs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := procs[p].Execute(ctx, id, testkit.Withdrawal(banks[p], pid, "u-"+pid, amount, payee), events.ActorMerchant)
					switch {
					case err == nil:
						mu.Lock()
						defer mu.Unlock()
						if prev, ok := answered[key{id, pid}]; ok {
							assert.Equal(t, prev, r.Decision.Tx, "%s %s answered with two transactions", id, pid)
						}
						answered[key{id, pid}] = r.Decision.Tx
					case errors.Is(err, aggregates.ErrInsufficientBalance):
						refused.Add(1)
					default:
						unexpected.Add(1)
						t.Errorf("%s %s: %v", id, pid, err)
					}
				}()
			}
		}
	}
	wg.Wait()
	require.Zero(t, unexpected.Load())
	assert.Positive(t, sa.Batches().Stored.Load()+sb.Batches().Stored.Load(), "appends travelled in batches")

	caughtUp(t, a, sa)
	caughtUp(t, b, sb)
	for _, id := range sites {
		v := view(t, a, id)
		assert.Equal(t, v, view(t, b, id))
		assert.Len(t, v.Txs, room, "site %s: exactly the room is reserved", id)
		assert.Equal(t, int64(room*amount), v.Pending)
		assert.GreaterOrEqual(t, v.Available, int64(0), "site %s overdrawn", id)
		seen := map[string]bool{}
		for i, pid := range v.Pids {
			assert.False(t, seen[pid], "site %s: %s stored twice", id, pid)
			seen[pid] = true
			tx, ok := answered[key{id, pid}]
			assert.True(t, ok, "site %s: %s stored but never answered 200", id, pid)
			assert.Equal(t, int32(i), tx)
		}
		for k, tx := range answered {
			if k.site == id {
				assert.True(t, seen[k.pid], "site %s: %s answered (tx %d) but not stored", id, k.pid, tx)
			}
		}
		assert.Equal(t, verifyChain(t, sa, id), v.Hash)
	}
}
