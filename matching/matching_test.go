package matching

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates/names"
	"github.com/iqdgateway/gateway/records"
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
			res, err := Match(context.Background(), []Transfer{tc.transfer}, tc.deposits)
			require.NoError(t, err)
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
	res, err := Match(context.Background(), []Transfer{{Amount: 1000, Name: "Ali"}}, ds)
	require.NoError(t, err)
	require.Len(t, res[0].Proposals, MaxProposals)
	// The oldest first among equals.
	assert.Equal(t, "a", res[0].Proposals[0].Deposit.TransactionID)
}

// A done context stops Match with its error, before the first transfer
// and while one transfer is compared with many deposits.
func TestMatch_stopsWhenContextDone(t *testing.T) {
	deps := benchDeposits(20_000, []int64{25000})
	ts := []Transfer{{Amount: 25000, Name: "Ahmed Kareem"}}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Match(ctx, ts, deps)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, res)

	// A deadline that passes after Match began: the context answers its
	// first look and no other.
	res, err = Match(&expiring{Context: context.Background(), left: 1}, ts, deps)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, res)
}

// expiring is a context whose deadline passes once Err was called left
// times.
type expiring struct {
	context.Context
	left int
}

func (e *expiring) Err() error {
	if e.left == 0 {
		return context.DeadlineExceeded
	}
	e.left--
	return nil
}

// Match proposes what comparing each transfer with every deposit and
// sorting them all proposes (reference below), in the same order with the
// same reasons, on deposits and transfers drawn at random from few names,
// amounts, methods and times, so that ties, shared words, names equal
// only as a whole ("Ali-Kareem", "AliKareem") and repeated words occur.
func TestMatch_sameAsReference(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	words := []string{"Ali", "ALI", "Kareem", "Ahmed", "أحمد", "احمد", "علي", "Zainab", "Hassan", "Omar", "Sara", "Noor", "Abu", "Al-Hasan"}
	pick := func(l []string) string { return l[rnd.IntN(len(l))] }
	nameOf := func() string {
		switch rnd.IntN(10) {
		case 0:
			return ""
		case 1:
			return "Ali-Kareem"
		case 2:
			return "AliKareem"
		case 3:
			return "---"
		}
		n := pick(words)
		for range rnd.IntN(3) {
			n += pick([]string{" ", "  ", ", ", "."}) + pick(words)
		}
		return n
	}
	// Few deposits of most amounts, many of some: a transfer's proposals
	// are then of its amount, of another by name, or both.
	amount := func() int64 {
		if rnd.IntN(4) == 0 {
			return []int64{5000, 25000}[rnd.IntN(2)]
		}
		return int64(1+rnd.IntN(500)) * 1000
	}
	banks := []string{"ZAINCASH", "QICARD", "FIB"}
	var deps []records.OpsRecord
	for i := range 3000 {
		d := dep(fmt.Sprintf("s1-%05d", i), amount(), nameOf(), pick(banks), rnd.IntN(60))
		d.Status = pick([]string{"pending", "pending", "pending", "expired", "approved"})
		if rnd.IntN(20) == 0 {
			d.Type = "withdrawal"
		}
		if rnd.IntN(4) == 0 {
			s := nameOf()
			d.Deposit.SenderName = &s
		}
		if rnd.IntN(30) == 0 {
			d.CreatedAt = ""
		}
		deps = append(deps, d)
	}
	var ts []Transfer
	for i := range 400 {
		tr := Transfer{Line: i + 1, Amount: amount(), Name: nameOf()}
		if rnd.IntN(2) == 0 {
			tr.Method = pick([]string{"zaincash", "QICARD", "OTHER"})
		}
		if rnd.IntN(3) > 0 {
			tr.Time = t0.Add(time.Duration(rnd.IntN(60)) * time.Minute)
		}
		ts = append(ts, tr)
	}
	res, err := Match(context.Background(), ts, deps)
	require.NoError(t, err)
	require.Len(t, res, len(ts))
	proposed := 0
	for i, tr := range ts {
		want := referenceRank(tr, deps)
		require.Equal(t, want, res[i].Proposals, "transfer %d %+v", i, tr)
		proposed += len(want)
	}
	// The draw is one where most transfers have proposals, some fewer
	// than MaxProposals.
	require.Greater(t, proposed, len(ts)*3)
}

// referenceRank is the package rules applied as they read: every deposit
// scored for the transfer, with its reason, all of them sorted.
func referenceRank(t Transfer, deposits []records.OpsRecord) []Proposal {
	type refName struct {
		whole string
		words []string
	}
	conv := func(s string) refName {
		n := refName{whole: names.Convert(s)}
		for _, w := range strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }) {
			if c := names.Convert(w); c != "" {
				n.words = append(n.words, c)
			}
		}
		return n
	}
	overlapWords := func(a, b []string) (float64, int) {
		if len(a) == 0 || len(b) == 0 {
			return 0, 0
		}
		if len(a) > len(b) {
			a, b = b, a
		}
		found := 0
		for _, w := range a {
			if slices.Contains(b, w) {
				found++
			}
		}
		return float64(found) / float64(len(a)), found
	}
	tn := conv(t.Name)
	var out []Proposal
	for _, d := range deposits {
		if d.Type != "deposit" || d.Status != "pending" && d.Status != "expired" {
			continue
		}
		created, _ := time.Parse(time.RFC3339Nano, d.CreatedAt)
		ns := []refName{conv(d.Name)}
		if d.Deposit != nil && d.Deposit.SenderName != nil {
			ns = append(ns, conv(*d.Deposit.SenderName))
		}
		p := Proposal{Deposit: d, created: created, AmountMatch: Different, NameMatch: Different, MethodMatch: Unknown}
		var why []string
		if t.Amount == d.Amount {
			p.AmountMatch, p.Score = Exact, 100
			why = append(why, "amount matches exactly")
		}
		share, found, exact := 0.0, 0, false
		for _, n := range ns {
			if tn.whole != "" && tn.whole == n.whole {
				exact = true
				break
			}
			if s, w := overlapWords(tn.words, n.words); s > share {
				share, found = s, w
			}
		}
		switch {
		case exact:
			p.NameMatch, p.NameShare = Exact, 100
			p.Score += 110
			why = append(why, "name matches exactly")
		case share > 0:
			p.NameMatch, p.NameShare = Partial, int(100*share)
			p.Score += int(80 * share)
			why = append(why, fmt.Sprintf("name matches in part (%d%% of the words)", int(100*share)))
		}
		if p.AmountMatch != Exact && !exact && (share < 2.0/3 || found < 2) {
			continue
		}
		if p.AmountMatch != Exact {
			why = append(why, fmt.Sprintf("amount differs: %s received, %s requested", records.Group(t.Amount), records.Group(d.Amount)))
		}
		if t.Method != "" {
			if strings.EqualFold(t.Method, d.Bank) {
				p.MethodMatch, p.Score = Exact, p.Score+10
				why = append(why, "same method")
			} else {
				p.MethodMatch, p.Score = Different, p.Score-20
				why = append(why, "another method ("+d.Bank+")")
			}
		}
		if !t.Time.IsZero() && !created.IsZero() {
			p.gap = t.Time.Sub(created)
			if p.gap < 0 {
				p.Score -= 50
				p.TransferFirst = true
				why = append(why, "the transfer is older than the deposit")
				p.gap = -p.gap
			}
		}
		if d.Status == "expired" {
			p.Score -= 30
			why = append(why, "the deposit has expired (it can still be approved)")
		}
		p.Reason = strings.Join(why, "; ")
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Proposal) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.gap, b.gap),
			a.created.Compare(b.created), cmp.Compare(a.Deposit.TransactionID, b.Deposit.TransactionID))
	})
	if len(out) > MaxProposals {
		out = out[:MaxProposals]
	}
	return out
}
