// Package matching proposes, for each incoming transfer an operator sees on
// a bank or wallet statement, the pending deposits it may pay for, ranked,
// each with the reason it was proposed.
//
// A transfer is matched on what a statement shows: the amount, the
// sender's name, the time and sometimes the method. The amount is the
// strongest sign, and the name decides between deposits of one amount;
// names are compared by the convertedName rules (package names), word by
// word, so that a statement's "AHMED ALI HASAN" finds "Ahmed Ali" and
// "أحمد" finds "احمد". Nothing here approves anything: an operator
// approves a proposal through the operator action, with its role checks.
//
// The rules, in the order they weigh (docs/operator-api.md "Matching
// transfers"):
//
//  1. A deposit is a candidate when its amount equals the transfer's, or
//     when their names match exactly, or in part with at least two words
//     and two thirds of the shorter name: a user who sent another amount
//     is still found by name, but one shared first name is not enough.
//  2. Score: amount equal +100; name equal +110, or in part up to +80 (the
//     share of the shorter name's words found in the other); method equal
//     +10, different −20; a transfer stamped before the deposit was
//     created −50; an expired deposit (still approvable late) −30. The
//     whole name weighs more than the amount: many users send a round
//     25,000, few share a full name, and a user who mistyped the amount
//     is approved with the amount received.
//  3. Ties go to the deposit created closest to the transfer's time, then
//     to the oldest, then by transaction id, so the ranking is stable.
//     At most MaxProposals are proposed.
package matching

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"gateway/aggregates/names"
	"gateway/records"
)

// Transfer is one incoming transfer as a statement shows it.
type Transfer struct {
	// Line is the transfer's line in the pasted text (1-based; 0 when
	// given as JSON).
	Line int `json:"line"`
	// Amount is in whole IQD.
	Amount int64 `json:"amount"`
	// Name is the sender's name as the statement spells it.
	Name string `json:"name"`
	// Time is when the transfer arrived (zero when unknown).
	Time time.Time `json:"-"`
	// Method is the method's code (a record's "bank"), when known.
	Method string `json:"method"`
	// Reference is the statement's reference, shown back as given.
	Reference string `json:"reference"`
}

// MarshalJSON writes the time as RFC 3339 in UTC, or null when unknown.
func (t Transfer) MarshalJSON() ([]byte, error) {
	type plain Transfer
	var at *string
	if !t.Time.IsZero() {
		s := t.Time.UTC().Format(time.RFC3339)
		at = &s
	}
	return json.Marshal(struct {
		plain
		At *string `json:"time"`
	}{plain(t), at})
}

// How two things compare, in a proposal.
const (
	Exact     = "exact"
	Partial   = "partial"
	Different = "different"
	Unknown   = "unknown"
)

// Proposal is one deposit a transfer may pay for.
type Proposal struct {
	Deposit records.OpsRecord `json:"deposit"`
	Score   int               `json:"score"`
	// Reason says why, in words an operator reads.
	Reason string `json:"reason"`
	// AmountMatch is exact or different; NameMatch exact, partial or
	// different; MethodMatch exact, different or unknown (the transfer
	// names none).
	AmountMatch string `json:"amountMatch"`
	NameMatch   string `json:"nameMatch"`
	MethodMatch string `json:"methodMatch"`
	// NameShare is the share of the shorter name's words found in the
	// other, in percent (100 for an exact match).
	NameShare int `json:"nameShare"`
	// TransferFirst: the transfer is stamped before the deposit was
	// created.
	TransferFirst bool `json:"transferBeforeDeposit"`

	created time.Time
	gap     time.Duration
}

// Result is a transfer and its proposals, best first.
type Result struct {
	Transfer  Transfer   `json:"transfer"`
	Proposals []Proposal `json:"proposals"`
}

// MaxProposals bounds the proposals of one transfer.
const MaxProposals = 5

// Match ranks the deposits for each transfer. deposits are the candidates
// (pending and expired deposits); the others are ignored.
func Match(transfers []Transfer, deposits []records.OpsRecord) []Result {
	cands := make([]candidate, 0, len(deposits))
	for _, d := range deposits {
		if d.Type != "deposit" || d.Status != "pending" && d.Status != "expired" {
			continue
		}
		created, _ := time.Parse(time.RFC3339Nano, d.CreatedAt)
		cands = append(cands, candidate{rec: d, created: created, names: nameSets(d)})
	}
	out := make([]Result, 0, len(transfers))
	for _, t := range transfers {
		out = append(out, Result{Transfer: t, Proposals: rank(t, cands)})
	}
	return out
}

// candidate is a deposit prepared for comparing.
type candidate struct {
	rec     records.OpsRecord
	created time.Time
	// names are the deposit's names (its name and its sender's name),
	// each as its convertedName and its converted words.
	names []name
}

type name struct {
	whole string
	words []string
}

func nameSets(d records.OpsRecord) []name {
	out := []name{newName(d.Name)}
	if d.Deposit != nil && d.Deposit.SenderName != nil {
		out = append(out, newName(*d.Deposit.SenderName))
	}
	return out
}

func newName(s string) name {
	n := name{whole: names.Convert(s)}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }) {
		if c := names.Convert(w); c != "" {
			n.words = append(n.words, c)
		}
	}
	return n
}

func rank(t Transfer, cands []candidate) []Proposal {
	tn := newName(t.Name)
	var out []Proposal
	for _, c := range cands {
		p, ok := propose(t, tn, c)
		if ok {
			out = append(out, p)
		}
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

// propose scores one deposit for one transfer (see the package rules).
func propose(t Transfer, tn name, c candidate) (Proposal, bool) {
	p := Proposal{Deposit: c.rec, created: c.created, AmountMatch: Different, NameMatch: Different, MethodMatch: Unknown}
	var why []string
	if t.Amount == c.rec.Amount {
		p.AmountMatch, p.Score = Exact, 100
		why = append(why, "amount matches exactly")
	}
	share, words, exact := 0.0, 0, false
	for _, n := range c.names {
		if tn.whole != "" && tn.whole == n.whole {
			exact = true
			break
		}
		if s, w := overlap(tn.words, n.words); s > share {
			share, words = s, w
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
	if p.AmountMatch != Exact && !exact && (share < minShare || words < 2) {
		// One shared first name is no reason to propose a deposit of
		// another amount.
		return Proposal{}, false
	}
	if p.AmountMatch != Exact {
		why = append(why, fmt.Sprintf("amount differs: %s received, %s requested", records.Group(t.Amount), records.Group(c.rec.Amount)))
	}
	if t.Method != "" {
		if strings.EqualFold(t.Method, c.rec.Bank) {
			p.MethodMatch, p.Score = Exact, p.Score+10
			why = append(why, "same method")
		} else {
			p.MethodMatch, p.Score = Different, p.Score-20
			why = append(why, "another method ("+c.rec.Bank+")")
		}
	}
	if !t.Time.IsZero() && !c.created.IsZero() {
		p.gap = t.Time.Sub(c.created)
		if p.gap < 0 {
			p.Score -= 50
			p.TransferFirst = true
			why = append(why, "the transfer is older than the deposit")
			p.gap = -p.gap
		}
	}
	if c.rec.Status == "expired" {
		p.Score -= 30
		why = append(why, "the deposit has expired (it can still be approved)")
	}
	p.Reason = strings.Join(why, "; ")
	return p, true
}

// minShare is the least share of words a name matching in part must have
// (with two words at least) to propose a deposit of another amount.
const minShare = 2.0 / 3

// overlap is the share of the shorter list's words found in the other,
// and how many were found.
func overlap(a, b []string) (float64, int) {
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
