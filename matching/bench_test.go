package matching

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/iqdgateway/gateway/records"
)

var benchFirst = []string{"Ahmed", "Ali", "Mohammed", "Hassan", "Hussein", "Zainab", "Fatima", "Omar", "Sara", "Mustafa", "Noor", "Huda", "Karrar", "Abbas", "Maryam", "Zaid", "أحمد", "علي", "محمد", "حسين"}
var benchLast = []string{"Kareem", "Jabbar", "Saleh", "Hasan", "Abdullah", "Kadhim", "Jasim", "Mahdi", "Salman", "Taha", "كاظم", "جاسم", "مهدي", "عبدالله"}

// benchDeposits are n pending deposits, their amounts from amounts, their
// names of two or three words from a small pool, as a busy site's are.
func benchDeposits(n int, amounts []int64) []records.OpsRecord {
	banks := []string{"ZAINCASH", "QICARD", "FIB", "ASIAHAWALA"}
	out := make([]records.OpsRecord, n)
	for i := range out {
		d := &out[i]
		d.Type, d.Status, d.SiteID = "deposit", "pending", "s1"
		if i%17 == 0 {
			d.Status = "expired"
		}
		d.TransactionID = fmt.Sprintf("s1-%06d", i)
		d.Amount = amounts[i%len(amounts)]
		d.RequestedAmount = d.Amount
		d.Bank = banks[i%len(banks)]
		d.Name = benchFirst[i%len(benchFirst)] + " " + benchLast[(i/len(benchFirst))%len(benchLast)]
		if i%3 == 0 {
			d.Name += " " + benchFirst[(i/7)%len(benchFirst)]
		}
		d.CreatedAt = records.FormatTime(t0.Add(time.Duration(i) * time.Second).UnixMilli())
	}
	return out
}

func benchTransfers(n int, amounts []int64) []Transfer {
	out := make([]Transfer, n)
	for i := range out {
		out[i] = Transfer{Line: i + 1, Amount: amounts[(i*7)%len(amounts)], Method: "ZAINCASH", Time: t0.Add(time.Duration(i*40) * time.Second),
			Name: benchFirst[(i*3)%len(benchFirst)] + " " + benchLast[(i*5)%len(benchLast)]}
	}
	return out
}

// BenchmarkMatch measures one request at its bounds: 50,000 candidates
// (the most one matching compares) for 100 transfers, every deposit of
// the transfers' amount ("one amount"), or of one of 40 amounts.
func BenchmarkMatch(b *testing.B) {
	one := []int64{25000}
	var many []int64
	for i := range 40 {
		many = append(many, int64(5000+i*5000))
	}
	for _, bc := range []struct {
		name    string
		amounts []int64
	}{{"one amount", one}, {"40 amounts", many}} {
		b.Run(bc.name, func(b *testing.B) {
			deps, ts := benchDeposits(50_000, bc.amounts), benchTransfers(100, bc.amounts)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Match(context.Background(), ts, deps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
