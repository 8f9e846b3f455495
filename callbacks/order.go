package callbacks

import (
	"slices"
	"time"

	"github.com/iqdgateway/gateway/ids"
)

// order is the bookkeeping of one term's deliveries: which callback may be
// attempted now, and when a stream message may be acknowledged. Two rules
// live here and nowhere else (docs/callbacks.md "Ordering"):
//
//   - a transaction's callbacks are delivered in stream order, one at a
//     time: each waits in its transaction's chain until every earlier one
//     is settled (delivered or parked);
//   - a stream message is acknowledged only once every callback it carries
//     is settled, and exactly once.
//
// It is pure state: no goroutines, no I/O, no clock. Its methods return
// decisions (the jobs to start, the reply subject to acknowledge), and the
// term carries them out. The term calls every method under term.mu.
type order struct {
	// siteBacklog bounds one site's unsettled callbacks (Config.SiteBacklog).
	siteBacklog int
	// held are the messages not acknowledged yet, by stream sequence.
	held map[uint64]*held
	// chains are the transactions with unsettled callbacks.
	chains map[ids.TxID]*chain
	// inflight are the unsettled callbacks, by webhook id: one delivery of
	// an id at a time.
	inflight map[string]*job
	// unsettled counts each site's unsettled callbacks.
	unsettled map[ids.SiteID]int
}

// held is a message whose callbacks are not all settled yet.
type held struct {
	seq     uint64
	reply   string
	pending int
	// at is when the message was stored.
	at time.Time
}

// chain is one transaction's unsettled callbacks in stream-key order; only
// the head is delivered, so a transaction's callbacks arrive in event order.
type chain struct{ q []*job }

// jobState is where a job stands in its chain.
type jobState uint8

const (
	jobQueued  jobState = iota // behind an earlier callback of its transaction
	jobRunning                 // its goroutine prepares, attempts or waits to retry
	jobWaiting                 // head, waiting for an earlier callback that may still turn up
	jobDone
)

func newOrder(siteBacklog int) *order {
	return &order{siteBacklog: siteBacklog, held: map[uint64]*held{}, chains: map[ids.TxID]*chain{},
		inflight: map[string]*job{}, unsettled: map[ids.SiteID]int{}}
}

// inFlight returns the unsettled delivery of the callback id, nil when
// there is none.
func (o *order) inFlight(id string) *job { return o.inflight[id] }

// busy reports whether a delivery of the callback id is unsettled.
func (o *order) busy(id string) bool { return o.inflight[id] != nil }

// redelivered reports whether the message at seq is already held, and if
// so makes reply the subject it is acknowledged through: the consumer
// redelivers a message whose InProgress came late, and only the newest
// delivery's reply is sure to be honoured. Its callbacks are not added
// again: they are under way.
func (o *order) redelivered(seq uint64, reply string) bool {
	h := o.held[seq]
	if h == nil {
		return false
	}
	h.reply = reply
	return true
}

// hold takes the jobs of the message at seq, to be acknowledged through
// reply once all of them are settled, and returns those to start now. A
// job whose webhook id is busy is left out: a resend of it is already
// under way, and it settles on its own. ok is false when no job is left:
// nothing is held, and the caller acknowledges the message at once.
func (o *order) hold(seq uint64, reply string, at time.Time, jobs []*job) (start []*job, ok bool) {
	jobs = slices.DeleteFunc(slices.Clone(jobs), func(j *job) bool { return o.busy(j.id) })
	if len(jobs) == 0 {
		return nil, false
	}
	h := &held{seq: seq, reply: reply, pending: len(jobs), at: at}
	o.held[seq] = h
	for _, j := range jobs {
		j.msg = h
		if o.add(j) {
			start = append(start, j)
		}
	}
	return start, true
}

// add takes j into its transaction's chain and reports whether it starts
// now. A job whose webhook id is busy is not added (false).
func (o *order) add(j *job) (start bool) {
	if o.busy(j.id) {
		return false
	}
	o.unsettled[j.site]++
	o.inflight[j.id] = j
	if o.unsettled[j.site] > o.siteBacklog && j.msg != nil {
		// Beyond the site's backlog a stream callback is parked at once,
		// without an attempt, so it bypasses the chain: waiting there it
		// would keep its message unacknowledged and fill the consumer's
		// MaxAckPending for every other site. A resend or a resumed record
		// (no message) is delivered whatever the backlog: an operator
		// asked for it.
		j.backlog = true
		o.start(j)
		return true
	}
	c := o.chains[j.tx]
	if c == nil {
		c = &chain{}
		o.chains[j.tx] = c
	}
	pos, _ := slices.BinarySearchFunc(c.q, j.k, func(a *job, k key) int { return a.k.cmp(k) })
	if pos == 0 && len(c.q) > 0 && c.q[0].state != jobWaiting {
		// The head is being delivered and cannot be overtaken: its
		// merchant may already have it. Only a head waiting for an
		// earlier callback to turn up (yield) can.
		pos = 1
	}
	c.q = slices.Insert(c.q, pos, j)
	if pos != 0 {
		return false
	}
	if len(c.q) > 1 {
		// The overtaken head goes back to the queue; its goroutine sees
		// it at resume and ends, and it starts again once j is settled.
		c.q[1].state = jobQueued
	}
	o.start(j)
	return true
}

// start marks j running, in a new run: a goroutine of an earlier run of j
// (overtaken while it waited) tells from the generation that it is stale.
func (o *order) start(j *job) {
	j.state = jobRunning
	j.gen++
}

// settle removes j, delivered or parked. next is the job of j's
// transaction to start now: the new head, unless it is already started or
// open is false (the term is ending and starts nothing; the message is
// handed back). ack is true, once, when j's message has no unsettled
// callback left: it is to be acknowledged through reply.
func (o *order) settle(j *job, open bool) (next *job, reply string, ack bool) {
	j.state = jobDone
	if o.inflight[j.id] == j {
		delete(o.inflight, j.id)
	}
	if o.unsettled[j.site]--; o.unsettled[j.site] == 0 {
		delete(o.unsettled, j.site)
	}
	if c := o.chains[j.tx]; c != nil {
		if i := slices.Index(c.q, j); i >= 0 {
			c.q = slices.Delete(c.q, i, i+1)
		}
		if len(c.q) == 0 {
			delete(o.chains, j.tx)
		} else if head := c.q[0]; head.state == jobQueued && open {
			o.start(head)
			next = head
		}
	}
	if h := j.msg; h != nil {
		h.pending--
		if h.pending == 0 {
			delete(o.held, h.seq)
			return next, h.reply, true
		}
	}
	return next, "", false
}

// yield lets run gen of j, the head of its chain, wait for an earlier
// callback of its transaction that may still turn up (one the previous
// term held, redelivered within its window): until resume, such a
// callback, added, overtakes j. It reports false when gen is no longer
// j's running run.
func (o *order) yield(j *job, gen int) bool {
	if j.gen != gen || j.state != jobRunning {
		return false
	}
	j.state = jobWaiting
	return true
}

// resume ends run gen of j's wait (yield) and reports whether j is still
// the head to deliver. False when it was overtaken meanwhile: it is
// started again, in a new run, once the earlier callback is settled.
func (o *order) resume(j *job, gen int) bool {
	if j.gen != gen || j.state != jobWaiting {
		return false
	}
	j.state = jobRunning
	return true
}

// replies appends the reply subject of every held message to dst.
func (o *order) replies(dst []string) []string {
	for _, h := range o.held {
		dst = append(dst, h.reply)
	}
	return dst
}

// handBack returns the reply subject of every held message, for the term
// to hand them back (NAK) as it stops, and forgets everything: the next
// term gets the messages again, and the delivery state that counts is in
// the bucket.
func (o *order) handBack() []string {
	replies := o.replies(make([]string, 0, len(o.held)))
	*o = *newOrder(o.siteBacklog)
	return replies
}

// backlog returns the number of unsettled callbacks and when the oldest
// held message was stored (zero when none is held).
func (o *order) backlog() (queued int, oldest time.Time) {
	for _, h := range o.held {
		if oldest.IsZero() || h.at.Before(oldest) {
			oldest = h.at
		}
	}
	return len(o.inflight), oldest
}
