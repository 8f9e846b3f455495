package callbacks

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/ids"
)

// TestOrder_rules pins the rules order keeps, one script of steps per case.
// A job is named "<tx><seq>.<idx>" (transaction, stream sequence, event
// index), with "<site>/" before it for a site other than s1, and "+" after
// it for a second job of the same callback (a resend). Every step checks
// the jobs it starts (in the order returned) and the reply it acknowledges,
// so a message acknowledged early, late or twice fails the step; every
// case ends checking what the order still holds.
func TestOrder_rules(t *testing.T) {
	var do orderSteps
	cases := []struct {
		name string
		// backlog is the site backlog (Config.SiteBacklog); 100 unless set.
		backlog int
		steps   []orderStep
		// left is what the order holds after the last step; empty unless set.
		left orderSize
	}{
		{name: "one transaction: one callback at a time, in stream order", steps: []orderStep{
			do.hold(1, "r1", "a1.0").starts("a1.0"),
			do.hold(2, "r2", "a2.0").starts(),
			do.hold(3, "r3", "a3.0").starts(),
			do.settle("a1.0").starts("a2.0").acks("r1"),
			do.settle("a2.0").starts("a3.0").acks("r2"),
			do.settle("a3.0").acks("r3"),
		}},
		{name: "two callbacks of one transaction in one message: the second waits for the first", steps: []orderStep{
			do.hold(4, "r4", "a4.0", "a4.1").starts("a4.0"),
			do.settle("a4.0").starts("a4.1"),
			do.settle("a4.1").acks("r4"),
		}},
		{name: "different transactions run in parallel", steps: []orderStep{
			do.hold(1, "r1", "a1.0").starts("a1.0"),
			do.hold(2, "r2", "b2.0").starts("b2.0"),
			do.hold(3, "r3", "c3.0", "d3.1").starts("c3.0", "d3.1"),
			do.settle("d3.1"),
			do.settle("b2.0").acks("r2"),
			do.settle("c3.0").acks("r3"),
			do.settle("a1.0").acks("r1"),
		}},
		{name: "a message with three callbacks is acknowledged once, after the third settles", steps: []orderStep{
			do.hold(5, "r5", "a5.0", "b5.1", "c5.2").starts("a5.0", "b5.1", "c5.2"),
			do.settle("b5.1"),
			do.settle("a5.0"),
			do.settle("c5.2").acks("r5"),
		}},
		{name: "a lower key overtakes a head that waits for it, which starts again after it", steps: []orderStep{
			do.hold(5, "r5", "a5.0").starts("a5.0"),
			do.yield("a5.0", true),
			do.hold(3, "r3", "a3.0").starts("a3.0"),
			do.resume("a5.0", false),
			do.hold(4, "r4", "a4.0").starts(),
			do.settle("a3.0").starts("a4.0").acks("r3"),
			do.settle("a4.0").starts("a5.0").acks("r4"),
			// The new run waits too; the run overtaken before it, waking
			// late, must not take the delivery from it.
			do.yield("a5.0", true),
			do.resumeStale("a5.0"),
			do.yieldStale("a5.0"),
			do.resume("a5.0", true),
			do.settle("a5.0").acks("r5"),
		}},
		{name: "a running head is never overtaken", steps: []orderStep{
			do.hold(5, "r5", "a5.0").starts("a5.0"),
			do.hold(3, "r3", "a3.0").starts(),
			do.settle("a5.0").starts("a3.0").acks("r5"),
			do.settle("a3.0").acks("r3"),
		}},
		{name: "a head that resumed is running again and not overtaken", steps: []orderStep{
			do.hold(5, "r5", "a5.0").starts("a5.0"),
			do.yield("a5.0", true),
			do.resume("a5.0", true),
			do.hold(3, "r3", "a3.0").starts(),
			do.settle("a5.0").starts("a3.0").acks("r5"),
			do.settle("a3.0").acks("r3"),
		}},
		{name: "lower keys queue behind a running head in key order", steps: []orderStep{
			do.hold(9, "r9", "a9.0").starts("a9.0"),
			do.hold(7, "r7", "a7.0").starts(),
			do.hold(5, "r5", "a5.0").starts(),
			do.settle("a9.0").starts("a5.0").acks("r9"),
			do.settle("a5.0").starts("a7.0").acks("r5"),
			do.settle("a7.0").acks("r7"),
		}},
		{name: "a stale run neither waits nor resumes", steps: []orderStep{
			do.hold(1, "r1", "a1.0").starts("a1.0"),
			do.yieldStale("a1.0"),
			do.yield("a1.0", true),
			do.resumeStale("a1.0"),
			do.resume("a1.0", true),
			do.resume("a1.0", false),
			do.settle("a1.0").acks("r1"),
		}},
		{name: "a redelivery of a held message changes its reply and adds nothing", steps: []orderStep{
			do.hold(7, "r7", "a7.0", "b7.1").starts("a7.0", "b7.1"),
			do.redeliver(7, "r7 again", true),
			do.redeliver(8, "r8", false),
			do.settle("a7.0"),
			do.settle("b7.1").acks("r7 again"),
		}},
		{name: "a message without a callback left to start is not held", steps: []orderStep{
			do.hold(1, "r1").none(),
		}},
		{name: "one delivery of a callback at a time", steps: []orderStep{
			do.add("a1.0").starts("a1.0"),
			do.hold(1, "r1", "a1.0+").none(),
			do.add("a1.0+").starts(),
			do.settle("a1.0"), // a resend: no message to acknowledge
		}},
		{name: "a message whose callback is being resent holds only the others", steps: []orderStep{
			do.add("b2.1").starts("b2.1"),
			do.hold(2, "r2", "a2.0", "b2.1+").starts("a2.0"),
			do.settle("a2.0").acks("r2"),
			do.settle("b2.1"),
		}},
		{name: "beyond the site's backlog a stream callback bypasses its chain; a resend and another site do not", backlog: 2, steps: []orderStep{
			do.hold(1, "r1", "a1.0", "a1.1", "a1.2").starts("a1.0", "a1.2").bypassing("a1.2"),
			do.add("b2.0").starts("b2.0"),
			do.hold(3, "r3", "s2/c3.0").starts("s2/c3.0"),
			// The site is past its backlog while a1.2 is unsettled, so a
			// callback of a new transaction bypasses too.
			do.hold(4, "r4", "d4.0").starts("d4.0").bypassing("d4.0"),
			do.settle("a1.2"),
			do.settle("d4.0").acks("r4"),
			do.settle("a1.0").starts("a1.1"),
			do.settle("a1.1").acks("r1"),
			do.settle("b2.0"),
			do.settle("s2/c3.0").acks("r3"),
			// Back below the backlog: in the chain again.
			do.hold(5, "r5", "e5.0", "e5.1").starts("e5.0"),
			do.settle("e5.0").starts("e5.1"),
			do.settle("e5.1").acks("r5"),
		}},
		{name: "only a transaction with unsettled callbacks keeps a chain, and only an unacknowledged message is held", steps: []orderStep{
			do.hold(1, "r1", "a1.0", "b1.1").starts("a1.0", "b1.1"),
			do.hold(2, "r2", "a2.0").starts(),
			do.settle("a1.0").starts("a2.0"),
			do.settle("b1.1").acks("r1"),
		}, left: orderSize{chains: 1, held: 1, inflight: 1, sites: 1}},
		{name: "handBack returns every held reply and empties the order", steps: []orderStep{
			do.hold(1, "r1", "a1.0").starts("a1.0"),
			do.hold(2, "r2", "a2.0").starts(),
			do.hold(3, "r3", "b3.0", "c3.1").starts("b3.0", "c3.1"),
			do.settle("c3.1"),
			do.add("d4.0").starts("d4.0"),
			do.handBack("r1", "r2", "r3"),
			do.handBack(),
		}},
		{name: "a term that is ending starts nothing more and still acknowledges", steps: []orderStep{
			do.hold(1, "r1", "a1.0").starts("a1.0"),
			do.hold(2, "r2", "a2.0").starts(),
			do.settleEnding("a1.0").acks("r1"),
			do.handBack("r2"),
		}},
		{name: "a resend after its settle goes behind the head that settle started", steps: []orderStep{
			do.hold(1, "r1", "a1.0").starts("a1.0"),
			do.hold(2, "r2", "a2.0").starts(),
			do.settle("a1.0").starts("a2.0").acks("r1"),
			do.add("a1.0+").starts(),
			do.settle("a2.0").starts("a1.0+").acks("r2"),
			do.settle("a1.0+"),
		}},
		{name: "a resend after its settle starts at once when its transaction has nothing else", steps: []orderStep{
			do.hold(1, "r1", "a1.0").starts("a1.0"),
			do.settle("a1.0").acks("r1"),
			do.add("a1.0+").starts("a1.0+"),
			do.hold(2, "r2", "a2.0").starts(),
			do.settle("a1.0+").starts("a2.0"),
			do.settle("a2.0").acks("r2"),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			backlog := c.backlog
			if backlog == 0 {
				backlog = 100
			}
			w := &orderWorld{o: newOrder(backlog), jobs: map[string]*job{}, gens: map[string][]int{}}
			for i, s := range c.steps {
				s.run(t, w, i)
			}
			assert.Equal(t, c.left, w.size(), "what the order holds at the end")
		})
	}
}

// orderWorld is one order under test and the jobs named in a script.
type orderWorld struct {
	o    *order
	jobs map[string]*job
	// gens are the runs each job was started in, after the one it had
	// before its first start.
	gens map[string][]int
}

// job returns the job named name, made on first use.
func (w *orderWorld) job(t *testing.T, name string) *job {
	if j := w.jobs[name]; j != nil {
		return j
	}
	site, s, ok := strings.Cut(strings.TrimSuffix(name, "+"), "/")
	if !ok {
		site, s = "s1", site
	}
	i := strings.IndexAny(s, "0123456789")
	require.Positive(t, i, "job name %q", name)
	seqS, idxS, _ := strings.Cut(s[i:], ".")
	seq, err := strconv.ParseUint(seqS, 10, 64)
	require.NoError(t, err, "job name %q", name)
	idx, err := strconv.Atoi(idxS)
	require.NoError(t, err, "job name %q", name)
	j := &job{id: WebhookID(seq, idx), k: key{seq, idx}, site: ids.SiteID(site), tx: ids.TxID(s[:i])}
	w.jobs[name] = j
	w.gens[name] = []int{j.gen}
	return j
}

func (w *orderWorld) nameOf(j *job) string {
	for n, x := range w.jobs {
		if x == j {
			return n
		}
	}
	return "?" + j.id
}

// orderSize is what an order holds.
type orderSize struct{ chains, held, inflight, sites int }

func (w *orderWorld) size() orderSize {
	return orderSize{len(w.o.chains), len(w.o.held), len(w.o.inflight), len(w.o.unsettled)}
}

type orderOp int

const (
	opHold orderOp = iota
	opAdd
	opSettle
	opSettleEnding
	opYield
	opResume
	opRedeliver
	opHandBack
)

// orderSteps makes the steps of a script: do.hold(...).starts(...).
type orderSteps struct{}

// orderStep is one call of an order's method and what it must answer.
type orderStep struct {
	op    orderOp
	seq   uint64
	reply string
	jobs  []string
	// stale calls yield or resume as the run before the job's latest
	// (the one before its first start, for a job started once).
	stale bool

	start   []string // the jobs started
	bypass  []string // of start, those that bypass their chain
	ack     string   // the reply acknowledged, "" for none
	ok      bool     // hold: held; redeliver: was held; yield, resume: the answer
	replies []string // handBack: the replies handed back
}

func (orderSteps) hold(seq uint64, reply string, jobs ...string) orderStep {
	return orderStep{op: opHold, seq: seq, reply: reply, jobs: jobs, ok: true}
}
func (orderSteps) add(job string) orderStep    { return orderStep{op: opAdd, jobs: []string{job}} }
func (orderSteps) settle(job string) orderStep { return orderStep{op: opSettle, jobs: []string{job}} }
func (orderSteps) settleEnding(job string) orderStep {
	return orderStep{op: opSettleEnding, jobs: []string{job}}
}
func (orderSteps) yield(job string, ok bool) orderStep {
	return orderStep{op: opYield, jobs: []string{job}, ok: ok}
}
func (orderSteps) resume(job string, ok bool) orderStep {
	return orderStep{op: opResume, jobs: []string{job}, ok: ok}
}
func (orderSteps) yieldStale(job string) orderStep {
	return orderStep{op: opYield, jobs: []string{job}, stale: true}
}
func (orderSteps) resumeStale(job string) orderStep {
	return orderStep{op: opResume, jobs: []string{job}, stale: true}
}
func (orderSteps) redeliver(seq uint64, reply string, held bool) orderStep {
	return orderStep{op: opRedeliver, seq: seq, reply: reply, ok: held}
}
func (orderSteps) handBack(replies ...string) orderStep {
	return orderStep{op: opHandBack, replies: replies}
}

func (s orderStep) starts(jobs ...string) orderStep    { s.start = jobs; return s }
func (s orderStep) bypassing(jobs ...string) orderStep { s.bypass = jobs; return s }
func (s orderStep) acks(reply string) orderStep        { s.ack = reply; return s }
func (s orderStep) none() orderStep                    { s.ok = false; return s }

func (s orderStep) run(t *testing.T, w *orderWorld, i int) {
	t.Helper()
	var (
		started []*job
		reply   string
		acked   bool
		ok      bool
	)
	var js []*job
	for _, n := range s.jobs {
		js = append(js, w.job(t, n))
	}
	gen := func() int {
		g := w.gens[s.jobs[0]]
		if s.stale {
			return g[len(g)-2]
		}
		return g[len(g)-1]
	}
	switch s.op {
	case opHold:
		started, ok = w.o.hold(s.seq, s.reply, time.Time{}, js)
	case opAdd:
		if w.o.add(js[0]) {
			started = js[:1]
		}
	case opSettle, opSettleEnding:
		var next *job
		next, reply, acked = w.o.settle(js[0], s.op == opSettle)
		if next != nil {
			started = []*job{next}
		}
	case opYield:
		ok = w.o.yield(js[0], gen())
	case opResume:
		ok = w.o.resume(js[0], gen())
	case opRedeliver:
		ok = w.o.redelivered(s.seq, s.reply)
	case opHandBack:
		assert.ElementsMatch(t, s.replies, w.o.handBack(), "step %d: replies handed back", i)
	}
	var names, bypass []string
	for _, j := range started {
		n := w.nameOf(j)
		names = append(names, n)
		if j.backlog {
			bypass = append(bypass, n)
		}
		assert.Equal(t, jobRunning, j.state, "step %d: %s started running", i, n)
		w.gens[n] = append(w.gens[n], j.gen)
	}
	assert.Equal(t, s.start, names, "step %d: jobs started", i)
	assert.Equal(t, s.bypass, bypass, "step %d: jobs bypassing their chain", i)
	if s.ack == "" {
		assert.False(t, acked, "step %d: nothing acknowledged (%q was)", i, reply)
	} else {
		assert.True(t, acked, "step %d: a message acknowledged", i)
		assert.Equal(t, s.ack, reply, "step %d: the reply acknowledged", i)
	}
	switch s.op {
	case opHold, opRedeliver, opYield, opResume:
		assert.Equal(t, s.ok, ok, "step %d: the answer", i)
	}
}
