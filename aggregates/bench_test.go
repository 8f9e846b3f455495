package aggregates

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// BenchmarkSite_memoryPerTx measures what a site's in-memory state costs per
// transaction: the heap it holds after 200,000 deposits, each of its own end
// user, divided by the number of deposits. The events are built before the
// first reading and kept alive until the second, so only what the site
// keeps is counted. Run with -benchtime=1x: every iteration builds a site.
func BenchmarkSite_memoryPerTx(b *testing.B) {
	const n = 200_000
	cases := []struct {
		name string
		// pid and user format the processId and userId of deposit i.
		pid, user func(i int) string
		approve   bool
	}{
		{"short ids, pending", shortPID, shortUser, false},
		{"short ids, approved", shortPID, shortUser, true},
		{"uuid ids, pending", uuidPID, uuidUser, false},
		{"uuid ids, approved", uuidPID, uuidUser, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var perTx float64
			for b.Loop() {
				evs := make([]events.Event, 0, 2*n)
				for i := range n {
					evs = append(evs, events.Event{Name: events.DepositRequestedName, Time: t0.UnixMilli(), Actor: events.ActorMerchant,
						Payload: &events.DepositRequested{TxID: string(ids.NewTx(siteID, int32(i))), ProcessID: tc.pid(i), BankID: "b1",
							Amount: 10_000, UserID: tc.user(i), ExpiresAt: t0.UnixMilli() + 1_800_000}})
				}
				if tc.approve {
					for i := range n {
						evs = append(evs, events.Event{Name: events.DepositApprovedName, Time: t0.UnixMilli(), Actor: operator,
							Payload: &events.DepositApproved{TxID: string(ids.NewTx(siteID, int32(i))), Amount: 10_000, Requested: 10_000}})
					}
				}
				before := heapInUse()
				s := NewSite(siteID)
				var seq uint64
				s.Cfg = &Config{Settings: Settings{Name: "bench"}}
				// Batches of 64 events, as group commit stores them.
				for k := 0; k < len(evs); k += 64 {
					s.Begin()
					for _, e := range evs[k:min(k+64, len(evs))] {
						s.Apply(e)
					}
					seq++
					s.Commit(seq)
				}
				after := heapInUse()
				runtime.KeepAlive(evs)
				runtime.KeepAlive(s)
				perTx = float64(after-before) / n
			}
			b.ReportMetric(perTx, "B/tx")
		})
	}
}

func shortPID(i int) string  { return "tg-" + fmt.Sprint(1_000_000+i) }
func shortUser(i int) string { return "u" + fmt.Sprint(1_000_000+i) }
func uuidPID(i int) string   { return fmt.Sprintf("6f1c2a4e-8b3d-4c7a-9e21-%012d", i) }
func uuidUser(i int) string  { return fmt.Sprintf("0d9b7e55-1a2f-4e8c-b6d3-%012d", i) }

// heapInUse returns the bytes of live heap objects after a full collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkSite_decide measures the decisions of the write path on one
// site, each decided and applied as the ledger does: a deposit's creation,
// its repeat (processId idempotency), its approval, a withdrawal's
// creation (the treasury rule) and a refused one. The events are sealed
// and committed as a stored message is, which costs more than the
// decisions.
func BenchmarkSite_decide(b *testing.B) {
	f := newFixture(&testing.T{}, SiteSettings{})
	f.fund(1 << 40)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		pid, user := fmt.Sprintf("p%d", n), fmt.Sprintf("u%d", n)
		d, err := f.s.Decide(f.depReq(pid, user, 25_000), f.now, events.ActorMerchant)
		if err != nil {
			b.Fatal(err)
		}
		commitEvents(f.t, f.s, d.Events)
		if _, err := f.s.Decide(f.depReq(pid, user, 25_000), f.now, events.ActorMerchant); err != nil {
			b.Fatal(err)
		}
		a, err := f.s.Decide(ApproveDeposit{TxID: tx(d.Tx)}, f.now, operator)
		if err != nil {
			b.Fatal(err)
		}
		commitEvents(f.t, f.s, a.Events)
		w, err := f.s.Decide(f.wdReq("w"+pid, user, 1_000), f.now, events.ActorMerchant)
		if err != nil {
			b.Fatal(err)
		}
		commitEvents(f.t, f.s, w.Events)
		if _, err := f.s.Decide(f.wdReq("x"+pid, user, 1<<45), f.now, events.ActorMerchant); err == nil {
			b.Fatal("a withdrawal past the treasury was not refused")
		}
	}
}
