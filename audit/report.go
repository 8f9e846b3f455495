package audit

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/records"
)

// Check outcomes.
const (
	Pass    = "pass"
	Fail    = "fail"
	Skipped = "skipped"
)

// Check names, one per invariant.
const (
	// CheckDecode: every message of the subject decodes.
	CheckDecode = "decode"
	// CheckChain: every event's Prev is the chain hash of the event before
	// it on its subject (zero for the first).
	CheckChain = "hash-chain"
	// CheckCreated: site.created is the site's first event, once, for
	// this site id.
	CheckCreated = "site-created"
	// CheckTxIDs: every creation event carries the next transaction id of
	// the site, and processIds are unique within the site.
	CheckTxIDs = "transaction-ids"
	// CheckTransitions: every transition event names a known transaction
	// of the right kind and moves it along an edge of the state machine.
	CheckTransitions = "transitions"
	// CheckTreasury: balance − pending − amount > negativeLimit held when
	// each withdrawal was requested, and a treasury.adjusted.v3 debit
	// without allowBelowLimit left balance − pending ≥ negativeLimit.
	CheckTreasury = "treasury-rule"
	// CheckReplay: the aggregate applied every message without failing.
	CheckReplay = "replay"
	// CheckBalance: the aggregate's balance equals adjustments + approved
	// deposits − paid withdrawals, computed from the events.
	CheckBalance = "balance"
	// CheckPending: the aggregate's pending withdrawals equal the sum of
	// withdrawals still pending or processing.
	CheckPending = "pending-withdrawals"
	// CheckTransactions: the aggregate's transactions (kind, status,
	// amounts) equal the independent model's.
	CheckTransactions = "transactions"
	// CheckIdempotency: a site created with an Idempotency-Key lives at
	// the id the key derives, and each key of the site's treasury
	// adjustments appears once (a second would have moved money twice).
	CheckIdempotency = "idempotency-keys"
	// CheckLiveModel: the site's snapshot plus the messages after it (what
	// a gateway starts from) equals the full replay.
	CheckLiveModel = "live-model"
	// CheckGateway: the running gateway's operator API shows the replayed
	// balance and pending withdrawals.
	CheckGateway = "gateway"
	// CheckSnapshots: every site snapshot belongs to a site of the stream.
	CheckSnapshots = "snapshots"
	// CheckSubject fails for a subject named like a site's whose last
	// token is no site id.
	CheckSubject = "subject"
	// CheckCatalog: the catalog aggregate applied every message.
	CheckCatalog = "catalog-replay"
	// CheckRead: the stream was read to its last sequence.
	CheckRead = "read"
	// CheckReadModels: every read model equals its own replay of the
	// stream up to its checkpoint (projections.Verify); added by
	// ledgerctl audit when it is given the read models' store.
	CheckReadModels = "read-models"
)

// maxProblems bounds the problems listed per check; all are counted.
const maxProblems = 20

// Position names one event: the stream sequence of its message, its index
// within the message and its name.
type Position struct {
	Seq   uint64 `json:"seq"`
	Index int    `json:"index"`
	Event string `json:"event,omitempty"`
}

func (p Position) String() string {
	if p.Event == "" {
		return fmt.Sprintf("#%d.%d", p.Seq, p.Index)
	}
	return fmt.Sprintf("#%d.%d %s", p.Seq, p.Index, p.Event)
}

// Problem is one disagreement found by a check.
type Problem struct {
	// At is the event concerned, when there is one.
	At *Position `json:"at,omitempty"`
	// Tx is the transaction concerned, when there is one.
	Tx string `json:"tx,omitempty"`
	// After is, for a broken hash chain, the preceding event whose hash
	// the link does not match: that event was rewritten (or this one's
	// Prev was).
	After *Position `json:"after,omitempty"`
	// Message says what disagrees.
	Message string `json:"message"`
}

func (p Problem) String() string {
	var b strings.Builder
	if p.At != nil {
		b.WriteString(p.At.String())
		b.WriteString(": ")
	}
	if p.Tx != "" {
		b.WriteString(p.Tx)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Check is the outcome of one invariant.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Detail says what was compared, or why the check was skipped.
	Detail string `json:"detail,omitempty"`
	// Count is the number of problems found; Problems lists the first.
	Count    int       `json:"problems,omitempty"`
	Problems []Problem `json:"list,omitempty"`
}

// problems collects a check's problems, keeping the first maxProblems.
type problems struct {
	list []Problem
	n    int
}

func (p *problems) add(x Problem) {
	p.n++
	if len(p.list) < maxProblems {
		p.list = append(p.list, x)
	}
}

func (p *problems) addf(at *Position, tx, format string, args ...any) {
	p.add(Problem{At: at, Tx: tx, Message: fmt.Sprintf(format, args...)})
}

// check turns the collected problems into a Check.
func (p *problems) check(name, detail string) Check {
	c := Check{Name: name, Status: Pass, Detail: detail, Count: p.n, Problems: p.list}
	if p.n > 0 {
		c.Status = Fail
	}
	return c
}

// Total is a number of transactions and the sum of their amounts.
type Total struct {
	Count int64 `json:"count"`
	// Amount is the sum of current amounts (an approved deposit's
	// approved amount).
	Amount int64 `json:"amount"`
	// Requested is the sum of the amounts the merchants asked for.
	Requested int64 `json:"requested"`
}

// SiteReport is the audit of one site.
type SiteReport struct {
	ID string `json:"id"`
	// Sandbox marks a sandbox site, whose money is not real.
	Sandbox  bool   `json:"sandbox,omitempty"`
	OK       bool   `json:"ok"`
	Messages uint64 `json:"messages"`
	Events   uint64 `json:"events"`
	FirstSeq uint64 `json:"firstSeq"`
	LastSeq  uint64 `json:"lastSeq"`
	// Checkpoint is the sequence of the ledger's checkpoint (0: none).
	Checkpoint uint64 `json:"checkpoint,omitempty"`
	// Balance, PendingWithdrawals and NegativeLimit are the replayed
	// aggregate's.
	Balance            int64 `json:"balance"`
	PendingWithdrawals int64 `json:"pendingWithdrawals"`
	NegativeLimit      int64 `json:"negativeLimit"`
	Transactions       int   `json:"transactions"`
	// Adjustments counts treasury adjustments; Amount is their sum.
	Adjustments Total `json:"adjustments"`
	// Deposits and Withdrawals total the transactions by status,
	// computed from the events independently of the aggregate.
	Deposits    map[string]Total `json:"deposits"`
	Withdrawals map[string]Total `json:"withdrawals"`
	// SnapshotSeq is the sequence of the site's snapshot (0: none used).
	SnapshotSeq uint64  `json:"snapshotSeq,omitempty"`
	Checks      []Check `json:"checks"`
}

// SubjectReport is the audit of a subject that is not a site's: the catalog
// and anything else under ledger.>.
type SubjectReport struct {
	Subject  string  `json:"subject"`
	OK       bool    `json:"ok"`
	Messages uint64  `json:"messages"`
	Events   uint64  `json:"events"`
	Banks    int     `json:"banks,omitempty"`
	Checks   []Check `json:"checks"`
}

// Report is the outcome of an audit.
type Report struct {
	OK     bool   `json:"ok"`
	Filter string `json:"filter"`
	// LastSeq is the stream's last sequence when the audit started; the
	// audit covers messages 1..LastSeq.
	LastSeq uint64 `json:"lastSeq"`
	// Checkpoint is the sequence of the ledger's checkpoint (0: none).
	Checkpoint uint64 `json:"checkpoint,omitempty"`
	Messages   uint64 `json:"messages"`
	Events     uint64 `json:"events"`
	// Elapsed is the whole audit; EventsPerSecond is Events / Elapsed.
	Elapsed         time.Duration   `json:"-"`
	ElapsedMillis   int64           `json:"elapsedMs"`
	EventsPerSecond float64         `json:"eventsPerSecond"`
	Checks          []Check         `json:"checks,omitempty"`
	Subjects        []SubjectReport `json:"subjects"`
	Sites           []SiteReport    `json:"sites"`
	// FailedChecks counts failed checks over the whole report.
	FailedChecks int `json:"failedChecks"`
}

// Site returns the report of site id.
func (r *Report) Site(id string) (*SiteReport, bool) {
	for i := range r.Sites {
		if r.Sites[i].ID == id {
			return &r.Sites[i], true
		}
	}
	return nil, false
}

// Check returns the named check of the site.
func (s *SiteReport) Check(name string) (Check, bool) {
	for _, c := range s.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// Check returns the named check of the subject.
func (s *SubjectReport) Check(name string) (Check, bool) {
	for _, c := range s.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// AddCheck adds a check of the whole ledger made outside Run (the read
// models'), counted in the report's result.
func (r *Report) AddCheck(c Check) {
	r.Checks = append(r.Checks, c)
	r.finish()
}

// finish sets the OK flags and failure counts.
func (r *Report) finish() {
	r.FailedChecks = 0
	count := func(cs []Check) bool {
		ok := true
		for _, c := range cs {
			if c.Status == Fail {
				ok = false
				r.FailedChecks++
			}
		}
		return ok
	}
	count(r.Checks)
	for i := range r.Subjects {
		r.Subjects[i].OK = count(r.Subjects[i].Checks)
	}
	for i := range r.Sites {
		r.Sites[i].OK = count(r.Sites[i].Checks)
	}
	r.OK = r.FailedChecks == 0
	r.ElapsedMillis = r.Elapsed.Milliseconds()
	if s := r.Elapsed.Seconds(); s > 0 {
		r.EventsPerSecond = float64(r.Events) / s
	}
}

var (
	depositStatuses    = []string{"pending", "approved", "rejected", "expired"}
	withdrawalStatuses = []string{"pending", "processing", "paid", "rejected"}
)

// WriteText prints the report for people: per subject and site its numbers
// and every check with pass or fail, then the verdict.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("ledger audit of %s: messages 1..%d, %d messages, %d events in %s (%s events/s)\n",
		r.Filter, r.LastSeq, r.Messages, r.Events, r.Elapsed.Round(time.Millisecond), records.Group(int64(r.EventsPerSecond)))
	if r.Checkpoint > 0 {
		ew.printf("checkpoint at seq %d\n", r.Checkpoint)
	}
	writeChecks(ew, r.Checks)
	for _, s := range r.Subjects {
		ew.printf("\nsubject %s: %d messages, %d events", s.Subject, s.Messages, s.Events)
		if s.Banks > 0 {
			ew.printf(", %d methods", s.Banks)
		}
		ew.printf("\n")
		writeChecks(ew, s.Checks)
	}
	for _, s := range r.Sites {
		mark := ""
		if s.Sandbox {
			mark = " (sandbox: test money)"
		}
		ew.printf("\nsite %s%s: %d messages, %d events (seq %d..%d), %d transactions\n",
			s.ID, mark, s.Messages, s.Events, s.FirstSeq, s.LastSeq, s.Transactions)
		ew.printf("  balance %s, pending withdrawals %s, negative limit %s, available %s\n",
			records.Group(s.Balance), records.Group(s.PendingWithdrawals), records.Group(s.NegativeLimit),
			records.Group(s.Balance-s.PendingWithdrawals-s.NegativeLimit))
		ew.printf("  adjustments  %d totalling %s\n", s.Adjustments.Count, records.Group(s.Adjustments.Amount))
		writeTotals(ew, "deposits   ", depositStatuses, s.Deposits)
		writeTotals(ew, "withdrawals", withdrawalStatuses, s.Withdrawals)
		if s.SnapshotSeq > 0 {
			ew.printf("  snapshot at seq %d\n", s.SnapshotSeq)
		}
		writeChecks(ew, s.Checks)
	}
	failedSites := 0
	for _, s := range r.Sites {
		if !s.OK {
			failedSites++
		}
	}
	if r.OK {
		ew.printf("\nRESULT: PASS (%d sites and %d other subjects; every check passed)\n", len(r.Sites), len(r.Subjects))
	} else {
		ew.printf("\nRESULT: FAIL (%d checks failed; %d of %d sites failed)\n", r.FailedChecks, failedSites, len(r.Sites))
	}
	return ew.err
}

func writeTotals(ew *errWriter, label string, statuses []string, m map[string]Total) {
	ew.printf("  %s", label)
	for _, st := range statuses {
		t := m[st]
		ew.printf("  %s %d (%s)", st, t.Count, records.Group(t.Amount))
	}
	ew.printf("\n")
}

func writeChecks(ew *errWriter, cs []Check) {
	for _, c := range cs {
		tag := map[string]string{Pass: "pass", Fail: "FAIL", Skipped: "skip"}[c.Status]
		ew.printf("  [%s] %s", tag, c.Name)
		if c.Detail != "" {
			ew.printf(": %s", c.Detail)
		}
		ew.printf("\n")
		for _, p := range c.Problems {
			ew.printf("         %s\n", p)
		}
		if c.Count > len(c.Problems) {
			ew.printf("         … and %d more\n", c.Count-len(c.Problems))
		}
	}
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// fmtMillis formats Unix milliseconds as the API does.
func fmtMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// sortReports orders sites and subjects by name.
func (r *Report) sortReports() {
	sort.Slice(r.Sites, func(i, j int) bool { return r.Sites[i].ID < r.Sites[j].ID })
	sort.Slice(r.Subjects, func(i, j int) bool { return r.Subjects[i].Subject < r.Subjects[j].Subject })
}
