package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// distant is a gateway process's store (a real one underneath) whose
// appends to one subject, and reads of its messages as a catch-up makes
// them, take delay more: a process a round trip farther from the stream's
// leader than the other.
type distant struct {
	ledger.Store
	subj  string
	delay time.Duration
}

func (d *distant) wait(subject string) {
	if subject == d.subj {
		time.Sleep(d.delay)
	}
}

func (d *distant) Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	d.wait(subject)
	return d.Store.Append(ctx, subject, expectLast, data)
}

func (d *distant) Next(ctx context.Context, subject string, seq uint64) (events.Msg, error) {
	d.wait(subject)
	return d.Store.Next(ctx, subject, seq)
}

func (d *distant) LastFor(ctx context.Context, subject string) (uint64, error) {
	d.wait(subject)
	return d.Store.LastFor(ctx, subject)
}

// TestHandOver_busySiteServesBothWriters: one process keeps a site's queue
// full and appends back to back; another, farther from the stream, writes
// the same site. Without hand-over the second lost every race (its
// catch-up, decision and append never fitted between two of the first's
// appends) until its callers' deadline. With it, every command of the
// second is stored, each once, and the first goes on.
func TestHandOver_busySiteServesBothWriters(t *testing.T) {
	e := newEnv(t)
	subj := mustSubject(t, siteID)
	sa := e.store("a")
	sb := &distant{Store: e.store("b"), subj: subj, delay: 2 * time.Millisecond}
	ma, mb := &recorder{}, &recorder{}
	a := e.ledger(sa, ledger.Config{Metrics: ma, HandOver: sa.(ledger.HandOver)})
	b := e.ledger(sb, ledger.Config{Metrics: mb, HandOver: sb.Store.(ledger.HandOver)})
	setup(t, a, 0, 100_000)
	caughtUp(t, b, sb)
	bk := bank(t, a)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var byA atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				pid := fmt.Sprintf("a-%d-%d", g, i)
				if _, err := a.Execute(ctx, siteID, testkit.Deposit(bk, pid, "ua-"+pid, 5000), "merchant"); err == nil {
					byA.Add(1)
				}
			}
		}()
	}
	// a's queue is full before b writes.
	require.Eventually(t, func() bool { return byA.Load() >= 200 }, 30*time.Second, time.Millisecond)

	const n = 10
	var failed []error
	atStart := byA.Load()
	for i := range n {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := b.Execute(rctx, siteID, testkit.Deposit(bk, fmt.Sprintf("b-%d", i), fmt.Sprintf("ub-%d", i), 7000), "merchant")
		cancel()
		if err != nil {
			failed = append(failed, err)
			continue
		}
		assert.False(t, res.Decision.Repeat)
	}
	during := byA.Load() - atStart
	stop()
	wg.Wait()
	require.Empty(t, failed, "every command of the slower writer is stored (the other stored %d meanwhile)", during)
	assert.Positive(t, during, "the busy writer went on meanwhile")
	assert.Positive(t, mb.snapshot().asked, "the slower writer asked for the site")
	assert.Positive(t, ma.snapshot().held, "the busy writer held for it")

	// Every command stored once: the chain holds them all, and both
	// ledgers agree on it.
	caughtUp(t, a, sa)
	caughtUp(t, b, sb)
	va := view(t, a, siteID)
	assert.Equal(t, va, view(t, b, siteID))
	assert.Equal(t, verifyChain(t, sa, siteID), va.Hash)
	assert.Len(t, va.Txs, int(byA.Load())+n)
	seen := map[string]bool{}
	for _, p := range va.Pids {
		assert.False(t, seen[p], "processId %s stored once", p)
		seen[p] = true
	}
	for i := range n {
		assert.True(t, seen[fmt.Sprintf("b-%d", i)], "b-%d stored", i)
	}
}

// TestHandOver_threeWriters: three processes, each a little farther from
// the stream than nothing and each keeping the site's queue full. Without
// hand-over one of them kept the site and the other two stored a handful
// of commands each, the rest failing at their 2 s deadline (shorter than
// the run); with it each one stores, none fails, and every command is
// stored once.
func TestHandOver_threeWriters(t *testing.T) {
	e := newEnv(t)
	subj := mustSubject(t, siteID)
	var ls []*ledger.Ledger
	var sts []*distant
	for i := range 3 {
		st := &distant{Store: e.store(fmt.Sprint("p", i)), subj: subj, delay: time.Millisecond}
		sts = append(sts, st)
		ls = append(ls, e.ledger(st, ledger.Config{HandOver: st.Store.(ledger.HandOver)}))
	}
	setup(t, ls[0], 0, 100_000)
	for i := range ls {
		caughtUp(t, ls[i], sts[i])
	}
	bk := bank(t, ls[0])

	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	stored := make([]atomic.Int64, len(ls))
	var failed []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, l := range ls {
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					pid := fmt.Sprintf("%d-%d-%d", p, g, i)
					rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err := l.Execute(rctx, siteID, testkit.Deposit(bk, pid, "u"+pid, 5000), "merchant")
					cancel()
					if err != nil {
						mu.Lock()
						failed = append(failed, err)
						mu.Unlock()
						continue
					}
					stored[p].Add(1)
				}
			}()
		}
	}
	wg.Wait()
	require.Empty(t, failed, "no command fails")
	var total int64
	for p := range ls {
		assert.Positive(t, stored[p].Load(), "writer %d stores", p)
		total += stored[p].Load()
	}
	for i := range ls {
		caughtUp(t, ls[i], sts[i])
	}
	va := view(t, ls[0], siteID)
	for i := 1; i < len(ls); i++ {
		assert.Equal(t, va, view(t, ls[i], siteID))
	}
	assert.Equal(t, verifyChain(t, sts[0], siteID), va.Hash)
	assert.Len(t, va.Txs, int(total))
}
