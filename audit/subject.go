package audit

import (
	"fmt"
	"strings"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
)

// chain verifies one subject's hash chain: each event's Prev must be the
// chain hash (events.Hash) of the subject's previous event, all zero for the
// first. After a break it follows the stored chain again, so every break is
// reported once and the first one is named.
type chain struct {
	prev    [32]byte
	prevPos Position
	have    bool // prev is the hash of an event seen
	resync  bool // the previous message could not be decoded
	linked  uint64
	skipped uint64
	p       problems
}

// verify checks the events of one message, given their chain hashes, and
// advances the chain.
func (c *chain) verify(d *decoded) {
	for i := range d.evs {
		e := &d.evs[i]
		switch {
		case c.resync:
			c.resync = false
			c.skipped++
		case e.Prev == c.prev:
			c.linked++
		case !c.have:
			c.p.add(Problem{At: &Position{Seq: d.m.Seq, Index: i, Event: e.Name},
				Message: "the first event of the subject has a non-zero prev hash: earlier history is missing, or this event was rewritten"})
		default:
			after := c.prevPos
			c.p.add(Problem{At: &Position{Seq: d.m.Seq, Index: i, Event: e.Name}, After: &after,
				Message: fmt.Sprintf("prev hash does not match the chain hash of the preceding event %s: that event was rewritten (or this event's prev was)", after)})
		}
		c.prev, c.prevPos, c.have = d.hashes[i], Position{Seq: d.m.Seq, Index: i, Event: e.Name}, true
	}
}

// lost marks an undecodable message: the next event cannot be checked
// against it.
func (c *chain) lost() { c.resync = true }

func (c *chain) check() Check {
	d := fmt.Sprintf("%d events linked", c.linked)
	if c.skipped > 0 {
		d += fmt.Sprintf(", %d not checkable after an undecodable message", c.skipped)
	}
	if c.p.n == 0 && c.have {
		d += ", head " + fmt.Sprintf("%x", c.prev[:8])
	}
	return c.p.check(CheckChain, d)
}

// counts is what every subject auditor tracks.
type counts struct {
	msgs, evs         uint64
	firstSeq, lastSeq uint64
	decode            problems
}

func (c *counts) saw(seq uint64, n int) {
	if c.msgs == 0 {
		c.firstSeq = seq
	}
	c.msgs++
	c.evs += uint64(n)
	c.lastSeq = seq
}

// decoded is a message decoded, with the chain hash of each of its events,
// ready to be applied. Decoding and hashing are the costly part of an audit
// and need no state, so they run in parallel (see Run).
type decoded struct {
	m      events.Msg
	evs    []events.Event
	hashes [][32]byte
	err    error
}

// decode decodes d.m and hashes its events.
func (d *decoded) decode() {
	if err := safely(func() { d.evs, d.err = events.Decode(d.m.Data) }); err != nil {
		d.evs, d.err = nil, err
	}
	if d.err != nil {
		return
	}
	d.hashes = make([][32]byte, len(d.evs))
	for i := range d.evs {
		if d.hashes[i], d.err = events.Hash(d.evs[i]); d.err != nil {
			d.evs, d.hashes = nil, nil
			return
		}
	}
}

// subjectAudit audits one subject's messages in stream order.
type subjectAudit interface {
	message(d *decoded) int
}

// begin counts a message; it returns false when it could not be decoded.
func (c *counts) begin(d *decoded, ch *chain) bool {
	if d.err != nil {
		c.saw(d.m.Seq, 0)
		c.decode.addf(&Position{Seq: d.m.Seq}, "", "%v", d.err)
		ch.lost()
		return false
	}
	c.saw(d.m.Seq, len(d.evs))
	ch.verify(d)
	return true
}

// otherAudit audits the catalog and any other non-site subject: decoding and
// the hash chain, and for the catalog a replay through its aggregate.
type otherAudit struct {
	subject string
	counts
	chain   chain
	catalog *aggregates.Catalog
	replay  problems
	notSite problems
}

func newOtherAudit(subject string) *otherAudit {
	a := &otherAudit{subject: subject}
	if strings.HasPrefix(subject, events.SitePrefix) {
		// Named like a site's subject, but its last token is no site
		// id: no gateway applies it, and a read of it as a filter
		// would catch other sites' messages.
		a.notSite.addf(nil, "", "%q is not a site subject: its last token is no site id (an id with '*', '>' or '.' written around the subject check); no gateway applies its messages", subject)
	}
	if subject == events.CatalogSubject {
		a.catalog = aggregates.NewCatalog()
	}
	return a
}

func (a *otherAudit) message(d *decoded) int {
	if !a.begin(d, &a.chain) {
		return 0
	}
	if a.catalog != nil {
		for i, e := range d.evs {
			if err := safely(func() { a.catalog.Apply(e) }); err != nil {
				a.replay.addf(&Position{Seq: d.m.Seq, Index: i, Event: e.Name}, "", "catalog apply failed: %v", err)
			}
		}
	}
	return len(d.evs)
}

func (a *otherAudit) report() SubjectReport {
	r := SubjectReport{Subject: a.subject, Messages: a.msgs, Events: a.evs}
	r.Checks = append(r.Checks, a.decode.check(CheckDecode, fmt.Sprintf("%d messages", a.msgs)), a.chain.check())
	if a.notSite.n > 0 {
		r.Checks = append(r.Checks, a.notSite.check(CheckSubject, ""))
	}
	if a.catalog != nil {
		r.Banks = len(a.catalog.Banks())
		r.Checks = append(r.Checks, a.replay.check(CheckCatalog, fmt.Sprintf("%d methods", r.Banks)))
	}
	return r
}

// safely runs fn, turning a panic into an error: aggregates trust the
// stream, and a tampered history must be reported, not crash the audit.
func safely(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	fn()
	return nil
}
