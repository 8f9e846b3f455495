package ledger_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// workload runs a mix of commands on the fixture site through l: deposits
// approved, rejected, expired and left pending; withdrawals paid, rejected,
// in processing and pending; settings and secret changes. tag keeps
// processIds of several rounds apart.
func workload(t *testing.T, l *ledger.Ledger, clk *clock, tag string) {
	t.Helper()
	ctx := context.Background()
	b := bank(t, l)
	exec := func(cmd aggregates.Command, actor string) ledger.Result {
		t.Helper()
		r, err := l.Execute(ctx, siteID, cmd, actor)
		require.NoError(t, err)
		return r
	}
	pid := func(s string, i int) string { return fmt.Sprintf("%s-%s-%d", tag, s, i) }
	var deps []ids.TxID
	for i := 0; i < 12; i++ {
		r := exec(testkit.Deposit(b, pid("d", i), pid("du", i), int64(1_000*(i+1))), events.ActorMerchant)
		deps = append(deps, txID(r.Decision.Tx))
	}
	for i, id := range deps {
		switch i % 4 {
		case 0:
			exec(aggregates.ApproveDeposit{TxID: id}, "op")
		case 1:
			exec(aggregates.ApproveDeposit{TxID: id, Amount: 999}, "op")
		case 2:
			exec(aggregates.RejectDeposit{TxID: id, Reason: string("reason " + id)}, "op")
		}
	}
	var wds []ids.TxID
	for i := 0; i < 8; i++ {
		r := exec(testkit.Withdrawal(b, pid("w", i), pid("wu", i), int64(1_500*(i+1)), payee), events.ActorMerchant)
		wds = append(wds, txID(r.Decision.Tx))
	}
	for i, id := range wds {
		switch i % 4 {
		case 0:
			exec(aggregates.ProcessWithdrawal{TxID: id}, "op")
			exec(aggregates.PayWithdrawal{TxID: id, Reference: "bank-ref " + string(id)}, "op")
		case 1:
			exec(aggregates.RejectWithdrawal{TxID: id, Reason: "bad account"}, "op")
		case 2:
			exec(aggregates.ProcessWithdrawal{TxID: id}, "op")
		}
	}
	limit := int64(-20_000)
	exec(aggregates.UpdateSite{Settings: aggregates.SiteSettings{NegativeLimit: &limit}}, "admin")
	exec(aggregates.RotateSecret{Secret: "secret-" + tag, Overlap: time.Hour}, "admin")
	exec(aggregates.AdjustTreasury{Amount: -3_000, Reason: "fee " + tag}, "admin")
	exec(aggregates.AdjustTreasury{Amount: 700, Reason: "keyed " + tag, IdempotencyKey: "adj-" + tag, RequestHash: "h-" + tag}, "admin")
	// A repeat moves nothing.
	r := exec(aggregates.AdjustTreasury{Amount: 700, Reason: "keyed " + tag, IdempotencyKey: "adj-" + tag, RequestHash: "h-" + tag}, "admin")
	require.True(t, r.Decision.Repeat)
	// Deposits left pending now are expired by the clock.
	clk.Add(time.Hour)
	for i, id := range deps {
		if i%4 == 3 {
			exec(aggregates.ExpireDeposit{TxID: id}, events.ActorSystem)
		}
	}
	// And a few fresh pending ones.
	for i := 100; i < 103; i++ {
		exec(testkit.Deposit(b, pid("d", i), pid("du", i), 2_000), events.ActorMerchant)
	}
}

// checkpoint returns the stored checkpoint's sequence (0 when none).
func checkpoint(t *testing.T, st ledger.Store) uint64 {
	t.Helper()
	seq, _, err := st.LoadSnapshot(context.Background(), "checkpoint")
	if err != nil {
		require.ErrorIs(t, err, events.ErrNotFound)
		return 0
	}
	return seq
}

// A ledger closed gracefully writes snapshots; a new ledger on the same
// store, and one on a restarted server, come back to exactly the same
// state, keep answering repeats with the same transactions and keep
// appending with the right expectation.
func TestLedger_restart_afterClose(t *testing.T) { onEachStore(t, ledgerRestartAfterClose) }

func ledgerRestartAfterClose(t *testing.T, e *env) {
	ctx := context.Background()
	clk := newClock(epoch)
	st := e.store("first")
	l1 := e.ledger(st, ledger.Config{Now: clk.Now})
	setup(t, l1, 0, 200_000)
	workload(t, l1, clk, "r1")
	want := view(t, l1, siteID)
	require.Len(t, want.Txs, 23)
	require.NoError(t, l1.Close(ctx))

	last, err := st.LastSeq(ctx)
	require.NoError(t, err)
	// The checkpoint is where the follower was, which may trail the
	// ledger's own last appends by a message or two; those are replayed.
	assert.NotZero(t, checkpoint(t, st))
	assert.LessOrEqual(t, checkpoint(t, st), last)
	names, err := st.ListSnapshots(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"checkpoint", string("site-" + siteID)}, names)

	// Same store, new ledger: state from the snapshot alone.
	l2 := e.ledger(st, ledger.Config{Now: clk.Now})
	got := view(t, l2, siteID)
	assert.Equal(t, want, got)
	sid, cfg, ok := l2.SiteByAppKey(string("app-" + siteID))
	require.True(t, ok)
	assert.Equal(t, siteID, sid)
	assert.Equal(t, "secret-r1", cfg.Secret)
	assert.Equal(t, "secret-"+string(siteID), cfg.PrevSecret)
	_, ok = l2.Catalog().Resolve(bankCode)
	assert.True(t, ok, "the catalog is rebuilt too")

	// A repeat is answered from the restored state with the same
	// transaction and no new message.
	b := bank(t, l2)
	r, err := l2.Execute(ctx, siteID, testkit.Deposit(b, "r1-d-5", "r1-du-5", 6_000), events.ActorMerchant)
	require.NoError(t, err)
	assert.True(t, r.Decision.Repeat)
	assert.Equal(t, txID(5), txID(r.Decision.Tx))
	assert.Equal(t, want.Txs[5], r.Tx)
	// So is a keyed adjustment's repeat, and its first answer is kept.
	require.Len(t, want.Keyed, 1)
	last, err = st.LastSeq(ctx)
	require.NoError(t, err)
	r, err = l2.Execute(ctx, siteID, aggregates.AdjustTreasury{Amount: 700, Reason: "keyed r1", IdempotencyKey: "adj-r1", RequestHash: "h-r1"}, "admin")
	require.NoError(t, err)
	assert.True(t, r.Decision.Repeat)
	after, err := st.LastSeq(ctx)
	require.NoError(t, err)
	assert.Equal(t, last, after, "a repeat appends nothing")
	_, err = l2.Execute(ctx, siteID, aggregates.AdjustTreasury{Amount: 701, Reason: "keyed r1", IdempotencyKey: "adj-r1", RequestHash: "h-other"}, "admin")
	assert.ErrorIs(t, err, aggregates.ErrIdempotencyConflict)
	// New commands append onto the restored state.
	workload(t, l2, clk, "r2")
	want2 := view(t, l2, siteID)
	assert.Equal(t, verifyChain(t, st, siteID), want2.Hash)
	require.NoError(t, l2.Close(ctx))

	// Restart the server on the same directory; a fresh connection and
	// ledger find the same state. (The in-memory store has no server to
	// restart: its run ends here.)
	if e.srv == nil {
		return
	}
	e.srv.Restart()
	st2 := e.store("after-restart")
	l3 := e.ledger(st2, ledger.Config{Now: clk.Now})
	assert.Equal(t, want2, view(t, l3, siteID))
	r, err = l3.Execute(ctx, siteID, testkit.Withdrawal(bank(t, l3), "r2-w-3", "r2-wu-3", 6_000, payee), events.ActorMerchant)
	require.NoError(t, err)
	assert.True(t, r.Decision.Repeat)
	_, err = l3.Execute(ctx, siteID, testkit.Withdrawal(bank(t, l3), "after", "someone", 1_000, payee), events.ActorMerchant)
	require.NoError(t, err)
	assert.Equal(t, verifyChain(t, st2, siteID), view(t, l3, siteID).Hash)
}

// A snapshot of an older format (version 4, before the answers of
// Idempotency-Keys were kept) is ignored: a new ledger replays the stream
// and comes back to the same state, pending deposits included.
func TestLedger_restart_oldSnapshotFormat(t *testing.T) {
	onEachStore(t, ledgerRestartOldSnapshotFormat)
}

func ledgerRestartOldSnapshotFormat(t *testing.T, e *env) {
	ctx := context.Background()
	clk := newClock(epoch)
	st := e.store("first")
	l1 := e.ledger(st, ledger.Config{Now: clk.Now})
	setup(t, l1, 0, 200_000)
	workload(t, l1, clk, "r1")
	want := view(t, l1, siteID)
	require.NoError(t, l1.Close(ctx))

	// Rewrite the site's snapshot as version 4.
	name := "site-" + string(siteID)
	seq, data, err := st.LoadSnapshot(ctx, name)
	require.NoError(t, err)
	var snap map[string]msgpack.RawMessage
	require.NoError(t, msgpack.Unmarshal(data, &snap))
	var v int
	require.NoError(t, msgpack.Unmarshal(snap["v"], &v))
	require.Equal(t, 7, v, "the format this test downgrades")
	snap["v"], err = msgpack.Marshal(4)
	require.NoError(t, err)
	old, err := msgpack.Marshal(snap)
	require.NoError(t, err)
	_, _, err = aggregates.UnmarshalSiteSnapshot(old)
	require.Error(t, err)
	require.NoError(t, st.SaveSnapshot(ctx, name, seq, old))

	l2 := e.ledger(e.store("second"), ledger.Config{Now: clk.Now})
	assert.Equal(t, want, view(t, l2, siteID))
	assert.Contains(t, e.log.String(), "ignoring unreadable snapshot")
	b := bank(t, l2)
	r, err := l2.Execute(ctx, siteID, testkit.Deposit(b, "again", "r1-du-101", 5_000), events.ActorMerchant)
	require.NoError(t, err)
	assert.True(t, r.Decision.AlreadyPending, "the replayed state knows the user's pending deposit")
	assert.Equal(t, want.Pids[r.Decision.Tx], "r1-d-101")
	r, err = l2.Execute(ctx, siteID, testkit.Deposit(b, "new", "someone-new", 5_000), events.ActorMerchant)
	require.NoError(t, err)
	assert.False(t, r.Decision.AlreadyPending)
	assert.Equal(t, verifyChain(t, st, siteID), view(t, l2, siteID).Hash)
}

// Without a final snapshot (a crash), a new ledger restores the last
// snapshot and replays what came after it; with no snapshot at all it
// replays everything. Both give the state of the ledger that wrote it.
func TestLedger_restart_withoutClose(t *testing.T) { onEachStore(t, ledgerRestartWithoutClose) }

func ledgerRestartWithoutClose(t *testing.T, e *env) {
	ctx := context.Background()
	clk := newClock(epoch)
	st := e.store("first")
	l1 := e.ledger(st, ledger.Config{Now: clk.Now})
	setup(t, l1, 0, 200_000)
	workload(t, l1, clk, "r1")

	// No snapshot yet: a second process replays the whole stream.
	full := e.ledger(e.store("full"), ledger.Config{Now: clk.Now})
	assert.Equal(t, view(t, l1, siteID), view(t, full, siteID))

	// The checkpoint is where l1's follower stands: let it get there.
	require.NoError(t, l1.CatchUp(ctx))
	require.NoError(t, l1.Snapshot(ctx))
	cp := checkpoint(t, st)
	require.NotZero(t, cp)
	workload(t, l1, clk, "r2")
	want := view(t, l1, siteID)
	last, err := st.LastSeq(ctx)
	require.NoError(t, err)
	require.Greater(t, last, cp, "messages after the checkpoint must be replayed")

	// l1 is abandoned as it is (no Close). A new process on its own
	// connection restores the snapshot and replays the rest.
	l2 := e.ledger(e.store("second"), ledger.Config{Now: clk.Now})
	assert.Equal(t, want, view(t, l2, siteID))
	// The replayed processIds are known: a repeat is not a new transaction.
	r, err := l2.Execute(ctx, siteID, testkit.Deposit(bank(t, l2), "r2-d-0", "r2-du-0", 1_000), events.ActorMerchant)
	require.NoError(t, err)
	assert.True(t, r.Decision.Repeat)

	// The whole-history ledger followed all of it too.
	caughtUp(t, full, st)
	assert.Equal(t, want, view(t, full, siteID))
}

// gatedStore is a real store whose follower deliveries can be paused, to
// make one gateway process's follower lag behind another's writes the way
// it does for a moment under load, but deterministically.
type gatedStore struct {
	ledger.Store
	gate atomic.Pointer[chan struct{}]
}

// Follow delivers as the store does, waiting while the gate is closed.
func (g *gatedStore) Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error {
	return g.Store.Follow(ctx, filter, from, func(m events.Msg) {
		if ch := g.gate.Load(); ch != nil {
			select {
			case <-*ch:
			case <-ctx.Done():
				return
			}
		}
		fn(m)
	})
}

func (g *gatedStore) pause() {
	ch := make(chan struct{})
	g.gate.Store(&ch)
}

func (g *gatedStore) resume() {
	if ch := g.gate.Swap(nil); ch != nil {
		close(*ch)
	}
}

// Snapshots live in one bucket shared by every gateway process, and a
// process writes the state it has. A process whose follower lags can
// overwrite a site's snapshot with an older state after another process
// checkpointed past it; the next start must still not lose the messages
// in between (they must be replayed, not skipped).
func TestLedger_restart_snapshotFromLaggingProcess(t *testing.T) {
	onEachStore(t, ledgerRestartSnapshotFromLaggingProcess)
}

func ledgerRestartSnapshotFromLaggingProcess(t *testing.T, e *env) {
	ctx := context.Background()
	sx := e.store("x")
	sy := &gatedStore{Store: e.store("y")}
	x := e.ledger(sx, ledger.Config{})
	y := e.ledger(sy, ledger.Config{})
	t.Cleanup(sy.resume) // before y closes: its follower must not stay blocked
	setup(t, x, 0, 100_000)
	caughtUp(t, y, sy)
	b := bank(t, x)

	// y's follower stalls; x keeps writing and snapshots.
	sy.pause()
	for i := 0; i < 5; i++ {
		_, err := x.Execute(ctx, siteID, testkit.Withdrawal(b, fmt.Sprintf("w-%d", i), "u", 10_000, payee), events.ActorMerchant)
		require.NoError(t, err)
	}
	caughtUp(t, x, sx)
	require.NoError(t, x.Snapshot(ctx))
	// y snapshots the state it has, then x's next round checkpoints again.
	require.NoError(t, y.Snapshot(ctx))
	require.NoError(t, x.Snapshot(ctx))
	sy.resume()
	want := view(t, x, siteID)

	z := e.ledger(e.store("z"), ledger.Config{})
	assert.Equal(t, want, view(t, z, siteID), "a new process must see every stored withdrawal")

	// The damage if it does not: once z follows one more message, its state
	// claims to be current, and it decides on a treasury that has forgotten
	// reservations and on processIds it does not know.
	_, err := x.Execute(ctx, siteID, aggregates.AdjustTreasury{Amount: 1, Reason: "tick"}, "admin")
	require.NoError(t, err)
	caughtUp(t, z, sx)
	r, err := z.Execute(ctx, siteID, testkit.Withdrawal(bank(t, z), "w-0", "u", 10_000, payee), events.ActorMerchant)
	require.NoError(t, err)
	assert.True(t, r.Decision.Repeat, "processId w-0 must not create a second transaction")
	_, err = z.Execute(ctx, siteID, testkit.Withdrawal(bank(t, z), "too-much", "u", 60_000, payee), events.ActorMerchant)
	assert.ErrorIs(t, err, aggregates.ErrInsufficientBalance, "50,000 of 100,001 is reserved already")
	caughtUp(t, x, sx)
	assert.Equal(t, view(t, x, siteID), view(t, z, siteID))
}

// corruptSnapshots is a store whose site snapshots cannot be decoded.
type corruptSnapshots struct{ ledger.Store }

func (c corruptSnapshots) LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error) {
	if strings.HasPrefix(name, "site-") {
		return 0, nil, fmt.Errorf("load snapshot %s: %w: s2: corrupt input", name, events.ErrCorrupt)
	}
	return c.Store.LoadSnapshot(ctx, name)
}

// snapshotted runs the workload through a first ledger and closes it,
// which snapshots every site at its last message; it returns the site as
// that ledger had it.
func snapshotted(t *testing.T, e *env, clk *clock) siteView {
	t.Helper()
	l1 := e.ledger(e.store("first"), ledger.Config{Now: clk.Now})
	setup(t, l1, 0, 200_000)
	workload(t, l1, clk, "r1")
	want := view(t, l1, siteID)
	require.NoError(t, l1.Close(context.Background()))
	return want
}

// A snapshot the store cannot decode, or never delivers while it answers
// otherwise (a lost chunk is waited for, not refused), costs a replay from
// the start, never the start-up nor a wrong state.
func TestLedger_restart_unreadableSnapshot(t *testing.T) {
	for _, c := range []struct {
		name string
		wrap func(ledger.Store) ledger.Store
		log  string
	}{
		{"corrupt", func(s ledger.Store) ledger.Store { return corruptSnapshots{s} }, "s2: corrupt input"},
		{"never delivered", func(s ledger.Store) ledger.Store { return stuckSnapshots{s} }, "not read within 100ms while the store answers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			onEachStore(t, func(t *testing.T, e *env) {
				clk := newClock(epoch)
				want := snapshotted(t, e, clk)
				l2 := e.ledger(c.wrap(e.store("second")), ledger.Config{Now: clk.Now, SnapshotLoadLimit: 100 * time.Millisecond})
				assert.Equal(t, want, view(t, l2, siteID))
				assert.Contains(t, e.log.String(), "ignoring unreadable snapshot")
				assert.Contains(t, e.log.String(), c.log)
			})
		})
	}
}

// shortStream is a store whose stream ends k messages early: they were
// lost (a truncated block the server's index no longer names).
type shortStream struct {
	ledger.Store
	k uint64
}

func (s shortStream) LastSeq(ctx context.Context) (uint64, error) {
	last, err := s.Store.LastSeq(ctx)
	return last - s.k, err
}

// Snapshots saved at a sequence beyond the stream's end were made from
// messages it no longer has: the start is refused (events.ErrHistoryLost),
// not served from the snapshots.
func TestLedger_restart_snapshotsBeyondTheStream(t *testing.T) {
	onEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		clk := newClock(epoch)
		want := snapshotted(t, e, clk)

		l2 := ledger.New(shortStream{Store: e.store("second"), k: 2}, ledger.Config{Now: clk.Now, Logger: e.log.Logger})
		err := l2.Start(ctx)
		require.ErrorIs(t, err, events.ErrHistoryLost)
		assert.Contains(t, err.Error(), "snapshots were saved at sequence")

		// Where the store may lose its last moments to a crash (--sync
		// interval), that is the mode's documented loss: the snapshots
		// are dropped and the state is the stream's, replayed.
		// (The wrapper only says the stream ends early: the follower
		// then reads on, and the replayed state reaches the whole one.)
		l3 := e.ledger(shortStream{Store: e.store("third"), k: 2}, ledger.Config{Now: clk.Now, TailMayBeLost: true})
		assert.Contains(t, e.log.String(), "the stream ends before its snapshots")
		testkit.Eventually(t, testkit.WaitFor, func() bool { return reflect.DeepEqual(want, view(t, l3, siteID)) },
			"the state replayed from the stream")
	})
}

// stuckSnapshots is a store whose site snapshots are waited for and never
// come, as a snapshot whose chunk the store lost (it waits for the chunk
// until the caller gives up); everything else answers.
type stuckSnapshots struct{ ledger.Store }

func (s stuckSnapshots) LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error) {
	if strings.HasPrefix(name, "site-") {
		<-ctx.Done()
		return 0, nil, fmt.Errorf("load snapshot %s: %w: %v", name, events.ErrUnavailable, ctx.Err())
	}
	return s.Store.LoadSnapshot(ctx, name)
}

// A paced background round writes one site's snapshot, then waits for the
// pace; Close does not wait for it, and leaves every site snapshotted at
// its latest message.
func TestLedger_snapshot_paced(t *testing.T) {
	onEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		st := e.store("a")
		l1 := e.ledger(st, ledger.Config{})
		setup(t, l1, 0, 0)
		const sites = 10
		for i := range sites {
			createSite(t, l1, ids.SiteID(fmt.Sprintf("paced-%d", i)), 0, 1_000)
		}
		require.NoError(t, l1.Close(ctx))

		// Another process changes every site, and snapshots at one byte a second.
		l2 := e.ledger(e.store("b"), ledger.Config{SnapshotEvery: 10 * time.Millisecond, SnapshotPace: 1})
		want := map[string]uint64{}
		for i := range sites {
			id := ids.SiteID(fmt.Sprintf("paced-%d", i))
			r, err := l2.Execute(ctx, id, aggregates.AdjustTreasury{Amount: 5, Reason: "x"}, "admin")
			require.NoError(t, err)
			want["site-"+string(id)] = r.Seq
		}
		snapped := func() int {
			n := 0
			for name, seq := range want {
				if got, _, err := st.LoadSnapshot(ctx, name); err == nil && got == seq {
					n++
				}
			}
			return n
		}
		testkit.Eventually(t, testkit.WaitFor, func() bool { return snapped() >= 1 }, "a round began")
		time.Sleep(200 * time.Millisecond) // what an unpaced round would need to write them all
		assert.Equal(t, 1, snapped(), "the round waits after its first site")

		cctx, cancel := context.WithTimeout(ctx, testkit.WaitFor)
		defer cancel()
		require.NoError(t, l2.Close(cctx))
		assert.Equal(t, sites, snapped(), "Close snapshots every site at once")
	})
}
