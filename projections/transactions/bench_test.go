package transactions_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/memstore"
	"github.com/iqdgateway/gateway/projections"
	"github.com/iqdgateway/gateway/projections/transactions"
	"github.com/iqdgateway/gateway/records"
)

// generated is a history of n events over sites sites, read back.
func generated(b *testing.B, n, sites int) []events.Msg {
	b.Helper()
	mem := memstore.New()
	_, err := audit.Generate(context.Background(), mem, audit.GenOptions{Events: n, Sites: sites, Batch: 100, Seed: 11})
	require.NoError(b, err)
	var msgs []events.Msg
	require.NoError(b, mem.Read(context.Background(), events.SubjectPrefix+">", 1, func(m events.Msg) error {
		msgs = append(msgs, m)
		return nil
	}))
	return msgs
}

func applyAll(b *testing.B, db *projections.DB, msgs []events.Msg) {
	for len(msgs) > 0 {
		k := min(len(msgs), 50)
		require.NoError(b, db.ApplyMessages(msgs[:k]))
		msgs = msgs[k:]
	}
}

// BenchmarkApply: events folded a second, in commits of 50 messages of
// 100 events (about a group commit each), into a fresh DB.
func BenchmarkApply(b *testing.B) {
	const n = 200_000
	msgs := generated(b, n, 20)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		db, err := projections.Open(b.TempDir(), slog.New(slog.DiscardHandler), transactions.New())
		require.NoError(b, err)
		b.StartTimer()
		applyAll(b, db, msgs)
		b.StopTimer()
		require.NoError(b, db.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSearch: p50 and p99 of one page (100) per filter, over a
// history of about 200k transactions (500k events).
func BenchmarkSearch(b *testing.B) {
	msgs := generated(b, 500_000, 50)
	db, err := projections.Open(b.TempDir(), slog.New(slog.DiscardHandler), transactions.New())
	require.NoError(b, err)
	defer db.Close()
	applyAll(b, db, msgs)
	v := db.View(transactions.Name)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	filters := []struct {
		name string
		f    records.Filter
	}{
		{"all", records.Filter{}},
		{"site", records.Filter{SiteID: "s17"}},
		{"status", records.Filter{Status: aggregates.StatusRejected}},
		{"site_status", records.Filter{SiteID: "s03", Status: aggregates.StatusPending}},
		{"user", records.Filter{UserID: "u-4242"}},
		{"method", records.Filter{Method: "ZAINCASH"}},
		{"site_amount", records.Filter{SiteID: "s08", MinAmount: 100_000, MaxAmount: 110_000}},
		{"name", records.Filter{Name: "zainab"}},
		{"time_window", records.Filter{From: start.Add(10 * time.Minute), To: start.Add(11 * time.Minute)}},
		{"site_kind_status_newest", records.Filter{SiteID: "s30", Kind: aggregates.KindWithdrawal, Status: aggregates.StatusPaid, Order: records.Newest}},
		{"process_id", records.Filter{ProcessID: "p-1000"}},
	}
	for _, fc := range filters {
		b.Run(fc.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				res, err := transactions.Find(v, fc.f)
				took = append(took, time.Since(t0))
				if err != nil || len(res.Txs) == 0 {
					b.Fatalf("%s: %d found, %v", fc.name, len(res.Txs), err)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}
