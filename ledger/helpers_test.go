package ledger_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/events/memstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// Fixture names shared by the tests.
const siteID ids.SiteID = "s1"

const (
	bankCode = "zain"
	payee    = "07701234567" // a valid PHONE identifier
)

// env is the store a test's ledgers share, and the log they write into: a
// ledger that logged an error (a broken hash chain, a message it could not
// apply) fails the test unless the test declared it (expectErrors).
//
// The store is an embedded JetStream server in a temp dir (newEnv), or the
// in-memory store (onEachStore runs a test on both): the ledger's tests
// that only need store semantics run on both, so that the fast store is
// known to be a faithful stand-in; those that stop the server or need
// JetStream's own failures run on JetStream only.
type env struct {
	t   *testing.T
	log *testkit.Log
	// srv is the embedded server; nil on the in-memory store.
	srv *testkit.Server
	mem *memstore.Store
}

// expectErrors declares ERROR log lines the test provokes: a line holding
// any of subs does not fail the test, every other ERROR line still does.
func (e *env) expectErrors(subs ...string) { e.log.ExpectErrors(subs...) }

// newEnv is an env on an embedded JetStream server.
func newEnv(t *testing.T) *env {
	t.Helper()
	// The log first: its check then runs last, after every ledger stopped.
	e := &env{t: t, log: testkit.NewLog(t, slog.LevelWarn)}
	e.srv = testkit.StartServer(t, jsstore.ServerConfig{SyncAlways: true})
	return e
}

// newMemEnv is an env on the in-memory store.
func newMemEnv(t *testing.T) *env {
	return &env{t: t, log: testkit.NewLog(t, slog.LevelWarn), mem: memstore.New()}
}

// onEachStore runs test as two subtests, on JetStream and on the in-memory
// store, each with an env of its own.
func onEachStore(t *testing.T, test func(t *testing.T, e *env)) {
	t.Run("jetstream", func(t *testing.T) { test(t, newEnv(t)) })
	t.Run("memstore", func(t *testing.T) { test(t, newMemEnv(t)) })
}

// store opens the store of one gateway process: on JetStream a store over
// an in-process connection of its own; in memory the env's one store, which
// every process shares as they share one stream.
func (e *env) store(name string) ledger.Store {
	e.t.Helper()
	if e.srv == nil {
		return e.mem
	}
	return e.srv.Store(name)
}

// ledger starts a ledger over st and waits until it has caught up with the
// stream. It is closed when the test ends.
func (e *env) ledger(st ledger.Store, cfg ledger.Config) *ledger.Ledger {
	e.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = e.log.Logger
	}
	l := ledger.New(st, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitFor)
	defer cancel()
	require.NoError(e.t, l.Start(ctx))
	require.NoError(e.t, l.WaitReady(ctx))
	e.t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Close(cctx)
	})
	return l
}

// clock is a settable clock for ledger.Config.Now.
type clock struct{ ms atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ms.Store(t.UnixMilli())
	return c
}

func (c *clock) Now() time.Time      { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *clock) Add(d time.Duration) { c.ms.Add(d.Milliseconds()) }
func (c *clock) Ahead(d time.Duration) func() time.Time {
	return func() time.Time { return c.Now().Add(d) }
}

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// setupCatalog creates the PHONE method every test uses.
func setupCatalog(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	_, err := l.ExecuteCatalog(context.Background(), aggregates.CreateBank{
		ID: "bank-zain", Code: bankCode, Name: events.LocalizedName{En: "Zain Cash", Ar: "زين كاش", Ku: "Zain Cash"},
		IdentifierKind: "PHONE", MinAmount: 1000, MaxAmount: 10_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{
			{AccountName: "Acme Trading", AccountNumber: "07700000001"},
			{AccountName: "Acme Trading 2", AccountNumber: "07700000002"},
		},
	}, "admin")
	require.NoError(t, err)
}

// createSite creates site id with the given negative limit and funds it
// with fund (when non-zero).
func createSite(t *testing.T, l *ledger.Ledger, id ids.SiteID, negativeLimit, fund int64) {
	t.Helper()
	ctx := context.Background()
	name := "Site " + string(id)
	_, err := l.Execute(ctx, id, aggregates.CreateSite{AppKey: "app-" + string(id), Secret: "secret-" + string(id),
		WebhookSecret: "whsec_" + string(id),
		Settings:      aggregates.SiteSettings{Name: &name, NegativeLimit: &negativeLimit}}, "admin")
	require.NoError(t, err)
	if fund != 0 {
		_, err = l.Execute(ctx, id, aggregates.AdjustTreasury{Amount: fund, Reason: "opening float"}, "admin")
		require.NoError(t, err)
	}
}

// setup creates the catalog and site s1 on l.
func setup(t *testing.T, l *ledger.Ledger, negativeLimit, fund int64) {
	t.Helper()
	setupCatalog(t, l)
	createSite(t, l, siteID, negativeLimit, fund)
}

// bank resolves the fixture method in l's catalog, waiting for l to have
// followed the catalog when it was created through another ledger.
func bank(t *testing.T, l *ledger.Ledger) *aggregates.Bank {
	t.Helper()
	var b *aggregates.Bank
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		var ok bool
		b, ok = l.Catalog().Resolve(bankCode)
		return ok
	}, "catalog has the method")
	return b
}

// txID is the public id of transaction i of the fixture site.
func txID(i int32) ids.TxID { return ids.NewTx(siteID, i) }

// caughtUp waits until l's follower has applied the stream as far as it
// goes now.
func caughtUp(t *testing.T, l *ledger.Ledger, st ledger.Store) {
	t.Helper()
	last, err := st.LastSeq(context.Background())
	require.NoError(t, err)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return l.Followed() >= last }, "the follower reaches %d", last)
}

// siteView is a copy of everything observable in a site's state.
type siteView struct {
	Seq       uint64
	Hash      [32]byte
	Balance   int64
	Pending   int64
	Available int64
	Cfg       aggregates.Config
	Txs       []aggregates.Tx
	Reasons   []string
	Pids      []string
	// Keyed are the answers of keyed treasury adjustments; CreatedAs the
	// settings a keyed creation answered with.
	Keyed     map[string]aggregates.AdjustmentAnswer
	CreatedAs *aggregates.Config
}

func view(t *testing.T, l *ledger.Ledger, id ids.SiteID) siteView {
	t.Helper()
	var v siteView
	require.NoError(t, l.Read(context.Background(), id, ledger.Local, func(s *aggregates.Site) error {
		v = siteView{Balance: s.Balance, Pending: s.PendingWithdrawals,
			Available: s.Available(), Cfg: *s.Cfg, Txs: append([]aggregates.Tx(nil), s.Txs...),
			Keyed: maps.Collect(s.KeyedAdjustments())}
		if c := s.CreatedAs(); c != nil {
			cc := *c
			v.CreatedAs = &cc
		}
		for i := range s.Txs {
			v.Reasons = append(v.Reasons, s.Reason(int32(i)))
			pid := s.ProcessID(int32(i))
			v.Pids = append(v.Pids, pid)
			j, ok := s.ByProcessID(pid)
			if !ok || j != int32(i) {
				return fmt.Errorf("processId %q of tx %d resolves to %d, %v", pid, i, j, ok)
			}
		}
		return nil
	}))
	pos := ledger.PositionOf(l, id)
	v.Seq, v.Hash = pos.Seq, pos.Hash
	return v
}

// messages returns the decoded messages of a site's subject, in order.
func messages(t *testing.T, st ledger.Store, id ids.SiteID) ([]uint64, [][]events.Event) {
	t.Helper()
	var seqs []uint64
	var all [][]events.Event
	require.NoError(t, st.Read(context.Background(), mustSubject(t, id), 1, func(m events.Msg) error {
		evs, err := events.Decode(m.Data)
		if err != nil {
			return err
		}
		seqs = append(seqs, m.Seq)
		all = append(all, evs)
		return nil
	}))
	return seqs, all
}

// verifyChain checks the site's hash chain over every stored event and
// returns the hash of the last one.
func verifyChain(t *testing.T, st ledger.Store, id ids.SiteID) [32]byte {
	t.Helper()
	_, msgs := messages(t, st, id)
	var prev [32]byte
	for i, evs := range msgs {
		for j, ev := range evs {
			require.Equal(t, prev, ev.Prev, "message %d event %d (%s) does not chain onto its predecessor", i, j, ev.Name)
			h, err := events.Hash(ev)
			require.NoError(t, err)
			prev = h
		}
	}
	return prev
}

// mustSubject is the site's subject.
func mustSubject(t *testing.T, id ids.SiteID) string {
	t.Helper()
	subj, err := events.SiteSubject(id)
	require.NoError(t, err)
	return subj
}
