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
//     created −50; an expired deposit (still approvable late) −30; a
//     sandbox site's deposit −300, below every live one. The
//     whole name weighs more than the amount: many users send a round
//     25,000, few share a full name, and a user who mistyped the amount
//     is approved with the amount received.
//  3. Ties go to the deposit created closest to the transfer's time, then
//     to the oldest, then by transaction id, so the ranking is stable.
//     At most MaxProposals are proposed.
package matching

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/iqdgateway/gateway/aggregates/names"
	"github.com/iqdgateway/gateway/records"
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
// (pending and expired deposits); the others are ignored. Once ctx is done
// it stops and returns ctx's error: a request's deadline bounds it.
func Match(ctx context.Context, transfers []Transfer, deposits []records.OpsRecord) ([]Result, error) {
	m := newMatcher(deposits)
	out := make([]Result, 0, len(transfers))
	for _, t := range transfers {
		ps, err := m.rank(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("matching stopped after %d of %d transfers: %w", len(out), len(transfers), err)
		}
		out = append(out, Result{Transfer: t, Proposals: ps})
	}
	return out, nil
}

// candidate is a deposit prepared for comparing.
type candidate struct {
	rec     *records.OpsRecord
	created time.Time
	// names are the deposit's names (its name and its sender's name),
	// each as its convertedName and its converted words.
	names []name
}

// name is a name's convertedName and its words, each converted and
// numbered by the matcher (see matcher.words).
type name struct {
	whole string
	words []int32
}

// noWord numbers a transfer's word that no deposit has.
const noWord = -1

// checkEvery is how many deposits are compared between two looks at the
// context: often enough to stop within a fraction of a second, rarely
// enough to cost nothing.
const checkEvery = 1024

// matcher holds the candidates indexed by what rule 1 proposes them on:
// a deposit of another amount can only be proposed when a converted word
// or the whole convertedName of one of its names is the transfer's, so a
// transfer is compared with the deposits of its amount and those sharing
// a word or the whole name, not with every deposit.
type matcher struct {
	cands []candidate
	// words numbers each converted word of the candidates' names.
	words    map[string]int32
	byAmount map[int64][]int32
	byWhole  map[string][]int32
	// byWord lists, by word number, the candidates with that word in one
	// of their names.
	byWord [][]int32
	// seen[i] == stamp when candidate i was compared for this transfer.
	seen  []uint32
	stamp uint32
	// compared counts comparisons, for checkEvery.
	compared int
}

func newMatcher(deposits []records.OpsRecord) *matcher {
	m := &matcher{words: map[string]int32{}, byAmount: map[int64][]int32{}, byWhole: map[string][]int32{}}
	for i := range deposits {
		d := &deposits[i]
		if d.Type != "deposit" || d.Status != "pending" && d.Status != "expired" {
			continue
		}
		created, _ := time.Parse(time.RFC3339Nano, d.CreatedAt)
		ci := int32(len(m.cands))
		c := candidate{rec: d, created: created, names: m.nameSets(d)}
		m.cands = append(m.cands, c)
		m.byAmount[d.Amount] = append(m.byAmount[d.Amount], ci)
		for j, n := range c.names {
			if n.whole != "" && !slices.ContainsFunc(c.names[:j], func(o name) bool { return o.whole == n.whole }) {
				m.byWhole[n.whole] = append(m.byWhole[n.whole], ci)
			}
			for _, w := range n.words {
				if l := m.byWord[w]; len(l) == 0 || l[len(l)-1] != ci {
					m.byWord[w] = append(l, ci)
				}
			}
		}
	}
	m.seen = make([]uint32, len(m.cands))
	return m
}

func (m *matcher) nameSets(d *records.OpsRecord) []name {
	out := []name{m.newName(d.Name, true)}
	if d.Deposit != nil && d.Deposit.SenderName != nil {
		out = append(out, m.newName(*d.Deposit.SenderName, true))
	}
	return out
}

// newName converts s; a deposit's words are numbered (add), a transfer's
// are looked up, noWord when no deposit has them.
func (m *matcher) newName(s string, add bool) name {
	n := name{whole: names.Convert(s)}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }) {
		c := names.Convert(w)
		if c == "" {
			continue
		}
		id, ok := m.words[c]
		switch {
		case ok:
		case add:
			id = int32(len(m.byWord))
			m.words[c] = id
			m.byWord = append(m.byWord, nil)
		default:
			id = noWord
		}
		n.words = append(n.words, id)
	}
	return n
}

// rank proposes the best MaxProposals deposits for t.
func (m *matcher) rank(ctx context.Context, t Transfer) ([]Proposal, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.stamp++
	tn := m.newName(t.Name, false)
	var top best
	lists := [][]int32{m.byAmount[t.Amount]}
	if tn.whole != "" {
		lists = append(lists, m.byWhole[tn.whole])
	}
	for _, w := range tn.words {
		if w != noWord {
			lists = append(lists, m.byWord[w])
		}
	}
	for _, l := range lists {
		for _, ci := range l {
			if m.seen[ci] == m.stamp {
				continue
			}
			m.seen[ci] = m.stamp
			if m.compared++; m.compared%checkEvery == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			if s, ok := score(t, tn, &m.cands[ci]); ok {
				s.ci = ci
				top.add(s, m.cands)
			}
		}
	}
	if top.n == 0 {
		return nil, nil
	}
	out := make([]Proposal, top.n)
	for i, s := range top.s[:top.n] {
		out[i] = proposal(t, &m.cands[s.ci], s)
	}
	return out, nil
}

// scored is a deposit's score for a transfer, what its proposal is made
// of once it is among the best.
type scored struct {
	ci          int32
	score       int
	amountExact bool
	nameExact   bool
	// share is the share of the shorter name's words found in the other.
	share         float64
	gap           time.Duration
	transferFirst bool
}

// best keeps the MaxProposals best scores, best first.
type best struct {
	s [MaxProposals]scored
	n int
}

func (b *best) add(s scored, cands []candidate) {
	if b.n == MaxProposals && !before(s, b.s[b.n-1], cands) {
		return
	}
	i := min(b.n, MaxProposals-1)
	for ; i > 0 && before(s, b.s[i-1], cands); i-- {
		b.s[i] = b.s[i-1]
	}
	b.s[i] = s
	b.n = min(b.n+1, MaxProposals)
}

// before is the ranking's order (package rule 3); the deposits' order in
// the list decides between two of one transaction id.
func before(a, b scored, cands []candidate) bool {
	ca, cb := &cands[a.ci], &cands[b.ci]
	return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.gap, b.gap), ca.created.Compare(cb.created),
		cmp.Compare(ca.rec.TransactionID, cb.rec.TransactionID), cmp.Compare(a.ci, b.ci)) < 0
}

// score scores one deposit for one transfer (see the package rules).
func score(t Transfer, tn name, c *candidate) (scored, bool) {
	var s scored
	if t.Amount == c.rec.Amount {
		s.amountExact, s.score = true, 100
	}
	words := 0
	for _, n := range c.names {
		if tn.whole != "" && tn.whole == n.whole {
			s.nameExact = true
			break
		}
		if sh, w := overlap(tn.words, n.words); sh > s.share {
			s.share, words = sh, w
		}
	}
	switch {
	case s.nameExact:
		s.score += 110
	case s.share > 0:
		s.score += int(80 * s.share)
	}
	if !s.amountExact && !s.nameExact && (s.share < minShare || words < 2) {
		// One shared first name is no reason to propose a deposit of
		// another amount.
		return scored{}, false
	}
	if t.Method != "" {
		if strings.EqualFold(t.Method, c.rec.Bank) {
			s.score += 10
		} else {
			s.score -= 20
		}
	}
	if !t.Time.IsZero() && !c.created.IsZero() {
		s.gap = t.Time.Sub(c.created)
		if s.gap < 0 {
			s.score -= 50
			s.transferFirst = true
			s.gap = -s.gap
		}
	}
	if c.rec.Status == "expired" {
		s.score -= 30
	}
	if c.rec.Sandbox {
		s.score -= sandboxPenalty
	}
	return s, true
}

// sandboxPenalty puts a sandbox site's deposit below every live one (whose
// score is at least −50): no real transfer pays a test, and an operator
// cannot approve it; it is still proposed, last, so that a real payment
// made for a test deposit (a merchant who shipped its sandbox keys) is
// seen.
const sandboxPenalty = 300

// proposal is the proposal of a scored deposit, with its reason.
func proposal(t Transfer, c *candidate, s scored) Proposal {
	p := Proposal{Deposit: *c.rec, Score: s.score, created: c.created, gap: s.gap, TransferFirst: s.transferFirst,
		AmountMatch: Different, NameMatch: Different, MethodMatch: Unknown}
	var why []string
	if s.amountExact {
		p.AmountMatch = Exact
		why = append(why, "amount matches exactly")
	}
	switch {
	case s.nameExact:
		p.NameMatch, p.NameShare = Exact, 100
		why = append(why, "name matches exactly")
	case s.share > 0:
		p.NameMatch, p.NameShare = Partial, int(100*s.share)
		why = append(why, fmt.Sprintf("name matches in part (%d%% of the words)", int(100*s.share)))
	}
	if !s.amountExact {
		why = append(why, fmt.Sprintf("amount differs: %s received, %s requested", records.Group(t.Amount), records.Group(c.rec.Amount)))
	}
	if t.Method != "" {
		if strings.EqualFold(t.Method, c.rec.Bank) {
			p.MethodMatch = Exact
			why = append(why, "same method")
		} else {
			p.MethodMatch = Different
			why = append(why, "another method ("+c.rec.Bank+")")
		}
	}
	if s.transferFirst {
		why = append(why, "the transfer is older than the deposit")
	}
	if c.rec.Status == "expired" {
		why = append(why, "the deposit has expired (it can still be approved)")
	}
	if c.rec.Sandbox {
		why = append(why, "a sandbox site's test deposit (only its merchant moves it)")
	}
	p.Reason = strings.Join(why, "; ")
	return p
}

// minShare is the least share of words a name matching in part must have
// (with two words at least) to propose a deposit of another amount.
const minShare = 2.0 / 3

// overlap is the share of the shorter list's words found in the other,
// and how many were found.
func overlap(a, b []int32) (float64, int) {
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
