package transactions_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/memstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/projections"
	"github.com/iqdgateway/gateway/projections/transactions"
	"github.com/iqdgateway/gateway/records"
)

const publicURL = "https://pay.example"

// fixture is a generated history in memory, today's answers over it (a
// ledger and records.Reader) and the model over it in a DB on disk.
type fixture struct {
	mem    *memstore.Store
	l      *ledger.Ledger
	reader *records.Reader
	db     *projections.DB
	now    atomic.Int64
	// applied is the last sequence applied to db.
	applied uint64
}

// newFixture generates a history of about n events over sites sites,
// adds what the generator does not write (hosted pages, sandbox, aliases,
// sender names, names in Arabic script), and applies all of it to the
// model.
func newFixture(t testing.TB, n, sites int) *fixture {
	t.Helper()
	ctx := context.Background()
	fx := &fixture{mem: memstore.New()}
	_, err := audit.Generate(ctx, fx.mem, audit.GenOptions{Events: n, Sites: sites, Batch: 40, Seed: 7})
	require.NoError(t, err)
	fx.now.Store(time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC).UnixMilli())
	log := testkit.NewLog(t, slog.LevelWarn)
	fx.l = ledger.New(fx.mem, ledger.Config{Logger: log.Logger, Now: func() time.Time { return time.UnixMilli(fx.now.Load()) }})
	wctx, cancel := context.WithTimeout(ctx, testkit.WaitFor)
	defer cancel()
	require.NoError(t, fx.l.Start(wctx))
	require.NoError(t, fx.l.WaitReady(wctx))
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = fx.l.Close(cctx)
	})
	fx.reader = records.NewReader(fx.l, fx.mem, publicURL).WithScanBudget(1 << 30)
	fx.extra(t)
	fx.db, err = projections.Open(t.TempDir(), log.Logger, transactions.New())
	require.NoError(t, err)
	t.Cleanup(func() { _ = fx.db.Close() })
	fx.sync(t)
	return fx
}

func (fx *fixture) tick() { fx.now.Add(1500) }

func (fx *fixture) exec(t testing.TB, site ids.SiteID, cmd aggregates.Command, actor string) ledger.Result {
	t.Helper()
	fx.tick()
	res, err := fx.l.Execute(context.Background(), site, cmd, actor)
	require.NoError(t, err)
	return res
}

// extra writes, through the ledger, the cases the generator has none of.
func (fx *fixture) extra(t testing.TB) {
	t.Helper()
	bank, ok := fx.l.Catalog().Resolve("ZAINCASH")
	require.True(t, ok)
	yes := true
	ttl := int64(3600)
	name := "Extra site"
	for _, s := range []struct {
		id       ids.SiteID
		settings aggregates.SiteSettings
	}{
		{"xhosted", aggregates.SiteSettings{Name: &name, HostedPage: &yes, DepositTTLSeconds: &ttl}},
		{"xsandbox", aggregates.SiteSettings{Name: &name, Sandbox: &yes, DepositTTLSeconds: &ttl}},
	} {
		fx.exec(t, s.id, aggregates.CreateSite{AppKey: "ak_" + string(s.id), Secret: "secret-" + string(s.id),
			WebhookSecret: "wh-" + string(s.id), Settings: s.settings}, "op")
		fx.exec(t, s.id, aggregates.AdjustTreasury{Amount: 1_000_000_000, Reason: "top-up"}, "op")
	}
	arabic := []string{"علي كريم", "زينب حسين", "مصطفى أحمد", "فاطمة عباس"}
	for k := range 24 {
		site := ids.SiteID("xhosted")
		actor := "op"
		if k%3 == 0 {
			site, actor = "xsandbox", events.ActorMerchant
		}
		req := aggregates.Request{ProcessID: fmt.Sprintf("x-%d", k), Amount: int64(5000 + 1000*k), UserID: fmt.Sprintf("xu-%d", k%5),
			UserName: fmt.Sprintf("xuser_%d", k), Name: arabic[k%len(arabic)], Bank: bank, BankRef: bank.ID}
		if k%4 == 3 {
			res := fx.exec(t, site, aggregates.RequestWithdrawal{Request: req, AccountName: req.Name, IBAN: fmt.Sprintf("07%09d", k)}, events.ActorMerchant)
			if k%8 == 3 {
				fx.exec(t, site, aggregates.RejectWithdrawal{TxID: ids.NewTx(site, res.Decision.Tx), Reason: "closed"}, actor)
			}
			continue
		}
		sender := ""
		if k%2 == 0 {
			sender = "Omar Abd-Al Salih " + fmt.Sprint(k)
		}
		res := fx.exec(t, site, aggregates.RequestDeposit{Request: req, SenderName: sender, Lang: "ar", HostedToken: fmt.Sprintf("tok%04d", k)}, events.ActorMerchant)
		if res.Decision.AlreadyPending {
			continue // an alias of the user's pending deposit
		}
		switch k % 6 {
		case 1:
			fx.exec(t, site, aggregates.ApproveDeposit{TxID: ids.NewTx(site, res.Decision.Tx), Amount: req.Amount - 1000, AnyAmount: true}, actor)
		case 2:
			fx.exec(t, site, aggregates.RejectDeposit{TxID: ids.NewTx(site, res.Decision.Tx), Reason: "no transfer found"}, actor)
		}
	}
}

// sync applies every message stored since the last sync.
func (fx *fixture) sync(t testing.TB) {
	t.Helper()
	var msgs []events.Msg
	require.NoError(t, fx.mem.Read(context.Background(), events.SubjectPrefix+">", fx.applied+1, func(m events.Msg) error {
		msgs = append(msgs, m)
		return nil
	}))
	for len(msgs) > 0 {
		n := min(len(msgs), 500)
		require.NoError(t, fx.db.ApplyMessages(msgs[:n]))
		fx.applied = msgs[n-1].Seq
		msgs = msgs[n:]
	}
}

func (fx *fixture) view() projections.View { return fx.db.View(transactions.Name) }

// txIDs lists every transaction of every site, from the ledger's state.
func (fx *fixture) txIDs(t testing.TB) []ids.TxID {
	t.Helper()
	var out []ids.TxID
	for _, site := range fx.l.SiteIDs() {
		require.NoError(t, fx.l.Read(context.Background(), site, false, func(s *aggregates.Site) error {
			for i := range s.Txs {
				out = append(out, ids.NewTx(site, int32(i)))
			}
			return nil
		}))
	}
	return out
}

// processIDs lists every processId and alias of every site.
func (fx *fixture) processIDs(t testing.TB) map[ids.SiteID][]string {
	t.Helper()
	out := map[ids.SiteID][]string{}
	for _, site := range fx.l.SiteIDs() {
		require.NoError(t, fx.l.Read(context.Background(), site, false, func(s *aggregates.Site) error {
			for i := range s.Txs {
				out[site] = append(out[site], s.ProcessID(int32(i)))
			}
			for pid := range s.Aliases() {
				out[site] = append(out[site], pid)
			}
			return nil
		}))
	}
	return out
}

func (fx *fixture) config(site ids.SiteID) (*aggregates.Config, bool) { return fx.l.SiteConfig(site) }

// sameRecord checks a record built from the model against today's.
func sameRecord(t testing.TB, want records.Record, tx *transactions.Tx, got records.Record) {
	t.Helper()
	require.Equal(t, string(want.AppendJSON(nil)), string(got.AppendJSON(nil)), "transaction %s", tx.ID())
	// The whole value: the token, the sandbox flag, the times in ms and
	// the secret the hash was made with too.
	require.Equal(t, want, got, "transaction %s", tx.ID())
}
