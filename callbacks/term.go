package callbacks

// A term of the active dispatcher: what it holds, how it consumes the
// stream, dispatches each message into jobs and settles them. Which job
// starts when, and when a message is acknowledged, is decided by the
// term's order (order.go); the term carries the decisions out.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// term is one period as the active dispatcher. Its state starts empty: the
// consumer redelivers whatever the previous term left unacknowledged.
type term struct {
	d      *Dispatcher
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// attemptCtx carries the HTTP attempts. It outlives ctx on a graceful
	// stop, so attempts under way finish and their outcome is kept rather
	// than delivered again, and ends at once when the lease is lost.
	attemptCtx   context.Context
	stopAttempts context.CancelFunc
	lease        *lease
	// cons is the term's consumer (for Backlog).
	cons jetstream.Consumer

	// startDelivered is the consumer's last delivered stream sequence when
	// the term began; windowEnd is when every message the previous term
	// held has been redelivered (zero when it held none).
	startDelivered uint64
	windowEnd      time.Time

	mu sync.Mutex
	// maxSeq is the highest stream sequence dispatched; messages above it
	// are seen for the first time, in order.
	maxSeq uint64
	track  *tracker
	// order decides which callbacks start and which messages are
	// acknowledged; the term carries its decisions out.
	order *order
	// sems bound each site's attempts in flight.
	sems map[ids.SiteID]chan struct{}
	// logc hands first-attempt deliveries to writeLog, which runs until
	// stop closes logDrain and it has written what waits (logDone).
	logc     chan *job
	logDrain chan struct{}
	logDone  chan struct{}
	// stopLog ends writeLog early when draining takes too long.
	stopLog context.CancelFunc
}

func (t *term) goRun(fn func()) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		fn()
	}()
}

// attemptGrace bounds how long a graceful stop waits for attempts under way.
const attemptGrace = 5 * time.Second

// stop ends the term: no attempt starts any more; on a graceful stop the
// attempts under way may finish while the lease surely lasts (at most
// attemptGrace), otherwise they are cancelled at once. Deliveries made are
// logged and acknowledged, and every other held message is handed back
// (NAK) so the next term gets it without waiting for AckWait; a delivery's
// retry state survives in the bucket.
func (t *term) stop(graceful bool) {
	t.cancel()
	if graceful {
		grace := min(attemptGrace, t.lease.remaining())
		timer := time.AfterFunc(max(grace, 0), t.stopAttempts)
		defer timer.Stop()
	} else {
		t.stopAttempts()
	}
	t.wg.Wait()
	t.stopAttempts()
	// Deliveries made before the stop are logged and acknowledged, unless
	// the store does not answer in time.
	close(t.logDrain)
	select {
	case <-t.logDone:
	case <-time.After(5 * time.Second):
		t.stopLog()
		<-t.logDone
	}
	t.stopLog()
	t.mu.Lock()
	replies := t.order.handBack()
	t.mu.Unlock()
	t.handBack(replies)
}

// handBackWait bounds how long a stop waits for the server to take the
// messages it hands back.
const handBackWait = 2 * time.Second

// nakNow hands a message back for redelivery now. A NAK with a delay is
// kept with the consumer's stored state (its delivery time set back),
// where a plain NAK only queues it in the server's memory: a server that
// stops with this process (the embedded one) would otherwise redeliver it
// at its next start only after AckWait from the last InProgress.
const nakNow = `-NAK {"delay":1000000}`

// handBack NAKs the messages at replies and waits, at most handBackWait,
// until the server has taken each (it answers a NAK sent with a reply
// subject once it has processed it), so that a server stopped right after
// has them in its state.
func (t *term) handBack(replies []string) {
	if len(replies) == 0 {
		return
	}
	nc := t.d.cfg.Conn
	inbox := nc.NewInbox()
	taken := make(chan *nats.Msg, len(replies))
	sub, err := nc.ChanSubscribe(inbox, taken)
	if err != nil {
		t.d.log.Warn("callbacks handed back without waiting for the server", "messages", len(replies), "err", err)
		for _, r := range replies {
			_ = nc.Publish(r, []byte(nakNow))
		}
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	for _, r := range replies {
		_ = nc.PublishRequest(r, inbox, []byte(nakNow))
	}
	timer := time.NewTimer(handBackWait)
	defer timer.Stop()
	for n := 0; n < len(replies); n++ {
		select {
		case <-taken:
		case <-timer.C:
			t.d.log.Warn("callbacks handed back, not all confirmed: the others come back after the ack wait",
				"messages", len(replies), "confirmed", n)
			return
		}
	}
}

// consume pulls the stream's site messages and dispatches them in order.
// A pull request waits at most pullExpiry and is kept alive by the server's
// heartbeats every pullHeartbeat: a request left with a consumer leader
// that died (a cluster node lost) is noticed after two missed heartbeats
// and asked again of the new leader. With the library's defaults (30 s
// and 15 s) deliveries stopped for 30 s after a node was lost.
const (
	pullExpiry    = 5 * time.Second
	pullHeartbeat = 2 * time.Second
)

func (t *term) consume(ctx context.Context, cons jetstream.Consumer) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(512), jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			if errors.Is(err, nats.ErrConnectionClosed) {
				return fmt.Errorf("consume: %w", err)
			}
			// Missed heartbeats and the like: the iterator carries on,
			// with a new pull request. Missed heartbeats mean deliveries
			// stalled (a cluster node lost, or its leadership moving).
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				t.d.log.Warn("callback consumer: no heartbeat from the server; pulling again", "err", err)
			} else {
				t.d.log.Debug("callback consumer", "err", err)
			}
			continue
		}
		t.dispatch(m)
	}
}

// progress extends the ack wait of every held message.
func (t *term) progress() {
	tick := time.NewTicker(t.d.cfg.AckWait / 3)
	defer tick.Stop()
	var replies []string
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		replies = replies[:0]
		t.mu.Lock()
		replies = t.order.replies(replies)
		t.mu.Unlock()
		for _, r := range replies {
			_ = t.d.cfg.Conn.Publish(r, []byte("+WPI"))
		}
	}
}

func (t *term) ack(reply string) { _ = t.d.cfg.Conn.Publish(reply, []byte("+ACK")) }

// dispatch turns one site message into jobs, one per final-state event, and
// queues them. A message without callbacks to make is acknowledged at once.
func (t *term) dispatch(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		t.d.log.Error("callback consumer: message without metadata", "subject", m.Subject(), "err", err)
		return
	}
	seq, reply := md.Sequence.Stream, m.Reply()
	site, ok := events.SiteOf(m.Subject())
	if !ok {
		// Only a writer that went around events.SiteSubject can have
		// stored it: no site of ours, no callbackUrl to call.
		t.d.log.Error("callback consumer: message on a subject that is no site's skipped", "seq", seq, "subject", m.Subject())
		t.ack(reply)
		return
	}
	t.mu.Lock()
	if t.order.redelivered(seq, reply) {
		t.mu.Unlock()
		return
	}
	fresh := seq > t.maxSeq
	// Creations are most messages, and only a site's first one in the
	// term is read (by the tracker): the others are not decoded.
	var skip func(string) bool
	if !fresh || t.track.covers(site) {
		skip = isCreation
	}
	t.mu.Unlock()

	evs, err := events.DecodeExcept(m.Data(), skip)
	if err != nil {
		// Nothing can be delivered from it, and it would come back for
		// ever: the audit reports corrupt messages.
		t.d.log.Error("callback consumer: undecodable ledger message skipped", "seq", seq, "subject", m.Subject(), "err", err)
		t.ack(reply)
		return
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	var jobs []*job
	for i, e := range evs {
		prev := ""
		if fresh {
			prev = t.track.observe(site, e)
		}
		typ := callbackType(e)
		if typ == "" {
			continue
		}
		jobs = append(jobs, &job{id: WebhookID(seq, i), k: key{seq, i}, site: site, tx: txOf(e), typ: typ, ev: e, prev: prev,
			fresh: fresh, kick: make(chan struct{}, 1)})
	}
	if fresh {
		t.maxSeq = seq
	}
	if len(jobs) > 0 && !t.d.noCallbackURL(site, seq) {
		if start, ok := t.order.hold(seq, reply, md.Timestamp, jobs); ok {
			t.start(start...)
			return
		}
	}
	t.ack(reply)
}

// noCallbackURL reports whether the site certainly has no callbackUrl as
// of seq: the ledger has applied the stream up to it.
func (d *Dispatcher) noCallbackURL(site ids.SiteID, seq uint64) bool {
	cfg, ok := d.cfg.Ledger.SiteConfig(site)
	return ok && cfg.CallbackURL == "" && d.cfg.Ledger.Followed() >= seq
}

// siteSem returns the semaphore bounding the site's attempts in flight
// (t.mu held).
func (t *term) siteSem(id ids.SiteID) chan struct{} {
	sem := t.sems[id]
	if sem == nil {
		sem = make(chan struct{}, t.d.cfg.SiteConcurrency)
		t.sems[id] = sem
	}
	return sem
}

// start runs each of jobs, as t.order decided, in a goroutine of the term
// (t.mu held: the run's generation is read under it).
func (t *term) start(jobs ...*job) {
	for _, j := range jobs {
		gen := j.gen
		t.goRun(func() { t.run(j, gen) })
	}
}

// settle removes a finished job: the next callback of its transaction
// starts, and its message is acknowledged once all its callbacks are
// settled. Resends counted on the job while it was under way were each
// answered "pending, due now": they start the callback again, on a fresh
// schedule, rather than end with it.
func (t *term) settle(j *job) {
	t.mu.Lock()
	n, by := j.resends, j.resendBy
	j.resends = 0
	if n == 0 {
		t.settleLocked(j)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	// The resend is recorded pending before the message is acknowledged:
	// a process stopping between the two leaves the message to the next
	// term, which finds the record pending and delivers it, rather than a
	// resend that lived only in memory. Recorded even when the term is
	// ending: the next term resumes a pending record no message stands for.
	again := j.anew()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 5*time.Second)
	_, err := t.d.renew(ctx, again, by, n)
	cancel()
	t.mu.Lock()
	// Resends asked for meanwhile were counted on j, still in flight:
	// again takes them before its first attempt.
	again.resends, again.resendBy = j.resends, j.resendBy
	j.resends = 0
	t.settleLocked(j)
	if err == nil && t.ctx.Err() == nil && t.order.add(again) {
		t.start(again)
	}
	t.mu.Unlock()
	if err != nil {
		t.d.log.Error("callback resent during an attempt not started again", "eventId", j.id, "err", err)
		return
	}
	t.d.log.Info("callback resent during an attempt started again", "eventId", j.id, "resends", n)
}

// settleLocked settles j in t.order and carries out its decisions: the
// next callback of j's transaction starts unless the term is ending, and
// j's message is acknowledged once all its callbacks are settled (t.mu
// held).
func (t *term) settleLocked(j *job) {
	next, reply, ack := t.order.settle(j, t.ctx.Err() == nil)
	if next != nil {
		t.start(next)
	}
	if ack {
		t.ack(reply)
	}
}
