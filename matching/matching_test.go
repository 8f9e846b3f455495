package matching

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gateway/records"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// dep is a deposit record created at t0 plus min minutes.
func dep(id string, amount int64, name, bank string, min int, opts ...func(*records.OpsRecord)) records.OpsRecord {
	r := records.OpsRecord{SiteID: "s1"}
	r.TransactionID, r.Amount, r.RequestedAmount, r.Name, r.Bank = id, amount, amount, name, bank
	r.Type, r.Status = "deposit", "pending"
	r.CreatedAt = records.FormatTime(t0.Add(time.Duration(min) * time.Minute).UnixMilli())
	r.Deposit = &records.DepositFields{}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func sender(n string) func(*records.OpsRecord) {
	return func(r *records.OpsRecord) { r.Deposit.SenderName = &n }
}

func status(s string) func(*records.OpsRecord) { return func(r *records.OpsRecord) { r.Status = s } }

func TestMatch_ranking(t *testing.T) {
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	tests := []struct {
		name     string
		transfer Transfer
		deposits []records.OpsRecord
		want     []string // transaction ids, best first
		reasons  []string // the best one's reason, when set
		match    [3]string
	}{
		{
			name:     "exact amount and exact name first",
			transfer: Transfer{Amount: 25000, Name: "Ali Kareem"},
			deposits: []records.OpsRecord{dep("a", 25000, "Sara Ahmed", "ZAINCASH", 0), dep("b", 25000, "Ali Kareem", "ZAINCASH", 1), dep("c", 30000, "Ali Kareem", "ZAINCASH", 2)},
			want:     []string{"b", "c", "a"},
			reasons:  []string{"amount matches exactly; name matches exactly"},
			match:    [3]string{Exact, Exact, Unknown},
		},
		{
			name:     "Arabic spellings of one name",
			transfer: Transfer{Amount: 10000, Name: "احمد علي"},
			deposits: []records.OpsRecord{dep("x", 10000, "زينب حسن", "", 0), dep("y", 10000, "أَحمد عليّ", "", 1)},
			want:     []string{"y", "x"},
			match:    [3]string{Exact, Exact, Unknown},
		},
		{
			name:     "ta marbuta and alef maqsura",
			transfer: Transfer{Amount: 5000, Name: "فاطمه مصطفي"},
			deposits: []records.OpsRecord{dep("f", 5000, "فاطمة مصطفى", "", 0)},
			want:     []string{"f"},
			match:    [3]string{Exact, Exact, Unknown},
		},
		{
			name:     "one amount, two candidates: the name decides",
			transfer: Transfer{Amount: 50000, Name: "ZAID HASSAN"},
			deposits: []records.OpsRecord{dep("p", 50000, "Omar Saleh", "", 0), dep("q", 50000, "Zaid Hassan", "", 5)},
			want:     []string{"q", "p"},
		},
		{
			name:     "one amount, two candidates, neither name: the one created closest before",
			transfer: Transfer{Amount: 50000, Name: "Unknown Sender", Time: at(30)},
			deposits: []records.OpsRecord{dep("early", 50000, "Omar Saleh", "", 0), dep("late", 50000, "Huda Ali", "", 25)},
			want:     []string{"late", "early"},
			reasons:  []string{"amount matches exactly"},
			match:    [3]string{Exact, Different, Unknown},
		},
		{
			name:     "no candidate",
			transfer: Transfer{Amount: 777, Name: "Nobody Here"},
			deposits: []records.OpsRecord{dep("a", 25000, "Ali Kareem", "", 0)},
			want:     nil,
		},
		{
			name:     "a statement's longer name matches in part",
			transfer: Transfer{Amount: 25000, Name: "AHMED ALI HASAN"},
			deposits: []records.OpsRecord{dep("a", 25000, "Ahmed Ali", "", 0), dep("b", 25000, "Sara Ahmed", "", 0)},
			want:     []string{"a", "b"},
			reasons:  []string{"amount matches exactly; name matches in part (100% of the words)"},
			match:    [3]string{Exact, Partial, Unknown},
		},
		{
			name:     "another amount is found by the whole name, not by one shared first name",
			transfer: Transfer{Amount: 24000, Name: "Ali Kareem"},
			deposits: []records.OpsRecord{dep("a", 25000, "Ali Kareem", "", 0), dep("b", 25000, "Ali Hassan", "", 0)},
			want:     []string{"a"},
			reasons:  []string{"name matches exactly; amount differs: 24,000 received, 25,000 requested"},
			match:    [3]string{Different, Exact, Unknown},
		},
		{
			name:     "the sender's name counts",
			transfer: Transfer{Amount: 9000, Name: "Mustafa Jabbar"},
			deposits: []records.OpsRecord{dep("s", 9000, "Noor Jabbar", "", 0, sender("Mustafa Jabbar")), dep("t", 9000, "Someone Else", "", 0)},
			want:     []string{"s", "t"},
			match:    [3]string{Exact, Exact, Unknown},
		},
		{
			name:     "the method breaks a tie and a different one costs",
			transfer: Transfer{Amount: 9000, Name: "Ali", Method: "qicard"},
			deposits: []records.OpsRecord{dep("z", 9000, "Ali", "ZAINCASH", 0), dep("q", 9000, "Ali", "QICARD", 1)},
			want:     []string{"q", "z"},
			reasons:  []string{"amount matches exactly; name matches exactly; same method"},
			match:    [3]string{Exact, Exact, Exact},
		},
		{
			name:     "a transfer older than the deposit ranks below",
			transfer: Transfer{Amount: 9000, Name: "Ali", Time: at(10)},
			deposits: []records.OpsRecord{dep("after", 9000, "Ali", "", 20), dep("before", 9000, "Ali", "", 5)},
			want:     []string{"before", "after"},
		},
		{
			name:     "an expired deposit ranks below a pending one, and is still proposed",
			transfer: Transfer{Amount: 9000, Name: "Ali"},
			deposits: []records.OpsRecord{dep("old", 9000, "Ali", "", 0, status("expired")), dep("new", 9000, "Ali", "", 1)},
			want:     []string{"new", "old"},
		},
		{
			name:     "approved, rejected and withdrawals are never proposed",
			transfer: Transfer{Amount: 9000, Name: "Ali"},
			deposits: []records.OpsRecord{dep("a", 9000, "Ali", "", 0, status("approved")), dep("r", 9000, "Ali", "", 0, status("rejected")),
				dep("w", 9000, "Ali", "", 0, func(r *records.OpsRecord) { r.Type = "withdrawal" })},
			want: nil,
		},
		{
			name:     "a name with nothing to match on matches no name",
			transfer: Transfer{Amount: 1, Name: "---"},
			deposits: []records.OpsRecord{dep("a", 9000, "", "", 0)},
			want:     nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Match([]Transfer{tc.transfer}, tc.deposits)
			require.Len(t, res, 1)
			var got []string
			for _, p := range res[0].Proposals {
				got = append(got, p.Deposit.TransactionID)
			}
			assert.Equal(t, tc.want, got)
			if len(tc.want) == 0 {
				return
			}
			best := res[0].Proposals[0]
			if tc.reasons != nil {
				assert.Equal(t, tc.reasons[0], best.Reason)
			}
			if tc.match != [3]string{} {
				assert.Equal(t, tc.match, [3]string{best.AmountMatch, best.NameMatch, best.MethodMatch})
			}
			for i := 1; i < len(res[0].Proposals); i++ {
				assert.GreaterOrEqual(t, res[0].Proposals[i-1].Score, res[0].Proposals[i].Score)
			}
		})
	}
}

func TestMatch_atMostMaxProposals(t *testing.T) {
	var ds []records.OpsRecord
	for i := range 2 * MaxProposals {
		ds = append(ds, dep(string(rune('a'+i)), 1000, "Ali", "", i))
	}
	res := Match([]Transfer{{Amount: 1000, Name: "Ali"}}, ds)
	require.Len(t, res[0].Proposals, MaxProposals)
	// The oldest first among equals.
	assert.Equal(t, "a", res[0].Proposals[0].Deposit.TransactionID)
}
