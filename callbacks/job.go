package callbacks

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// clockSkew is how far apart two gateway processes' clocks may be when one
// decides an expiry and the other an approval.
const clockSkew = 2 * time.Minute

// job is the delivery of one callback.
type job struct {
	id   string
	k    key
	site ids.SiteID
	tx   ids.TxID
	typ  string
	ev   events.Event
	// prev is the previous status ("" until known).
	prev string
	// pred is an earlier callback of the transaction found in the stream.
	pred key
	// msg is the message it came in (nil for resends and resumed records).
	msg *held
	// fresh: the message was seen for the first time, so no record of the
	// delivery can exist yet.
	fresh bool
	// backlog: parked at once, the site's backlog being full.
	backlog bool
	kick    chan struct{}

	// Guarded by term.mu, kept by term.order: where the job stands in its
	// chain, and its run (a new one each time it is started).
	state jobState
	gen   int
	// resends counts the operator resends asked for while the job was
	// under way, not yet in rec; resendBy is the last one's operator.
	resends  int
	resendBy string

	// Owned by the job's goroutine.
	prepared bool
	body     []byte
	// secret is the site secret body's hash is made with.
	secret   string
	attempts int
	next     time.Time
	rec      Delivery
	recorded bool
	// code and at are the delivering attempt's, for the delivery log.
	code int
	at   int64
}

// run drives j from its start (run gen) to settled, or until the term ends.
func (t *term) run(j *job, gen int) {
	ctx := t.ctx
	if j.backlog {
		t.park(ctx, j, fmt.Sprintf("not attempted: the site has %d callbacks awaiting delivery; resend once its endpoint has recovered",
			t.d.cfg.SiteBacklog))
		return
	}
	if !j.prepared {
		done, err := t.prepare(ctx, j, gen)
		if err != nil {
			t.unbuildable(ctx, j, err)
			return
		}
		if done || !j.prepared {
			return
		}
	}
	t.deliver(ctx, j)
}

// prepare loads what the job needs: its earlier retry state, the site's
// settings, the record as of the event, its previous status. done means
// the job was settled (or handed back) without an attempt.
func (t *term) prepare(ctx context.Context, j *job, gen int) (done bool, err error) {
	d := t.d
	if j.rec.EventID == "" {
		j.rec = Delivery{EventID: j.id, SiteID: j.site, TransactionID: j.tx, Type: j.typ}
	}
	if !j.fresh && !j.recorded {
		// Redelivered: an earlier term may have tried it already.
		rec, found, err := d.load(ctx, j.id)
		if err != nil {
			return true, nil // only when ctx ended
		}
		if found {
			switch rec.Status {
			case StatusDelivered, StatusFailed:
				t.settle(j)
				return true, nil
			}
			j.restore(rec)
		} else if d.ix.waitSynced(ctx) != nil {
			return true, nil
		} else if logged, err := loggedRetry(ctx, d, j.k); err != nil {
			return true, nil // only when ctx ended
		} else if logged {
			// Delivered and logged before the stop that kept its
			// message from being acknowledged.
			t.settle(j)
			return true, nil
		}
	}
	cfg, err := d.siteConfig(ctx, j.site, j.k.seq)
	if err != nil {
		return true, nil
	}
	if cfg == nil || cfg.CallbackURL == "" {
		// No deliveries for a site without callbackUrl. A record from
		// an earlier attempt is closed, so it does not stay pending.
		if j.recorded {
			t.park(ctx, j, "the site has no callbackUrl")
		} else {
			t.settle(j)
		}
		return true, nil
	}
	rec, err := t.record(ctx, j)
	if err != nil {
		return true, permanent(err)
	}
	if j.prev == "" {
		if err := t.resolve(ctx, j, rec); err != nil {
			return true, permanent(err)
		}
	}
	if !j.pred.isZero() && j.pred.seq <= t.startDelivered && time.Now().Before(t.windowEnd) {
		// The earlier callback of this transaction was in a message the
		// previous term held: it is redelivered before windowEnd, and this
		// one must not overtake it.
		if !t.waitWindow(ctx, j, gen) {
			return true, nil
		}
	}
	if err := j.render(rec, cfg); err != nil {
		return true, err
	}
	j.prepared = true
	return false, nil
}

// record reads j's transaction record, retrying while the store does not
// answer.
func (t *term) record(ctx context.Context, j *job) (records.Record, error) {
	var rec records.Record
	err := retry(ctx, func() error {
		var err error
		rec, err = t.d.cfg.Records.ByIDLocal(ctx, j.site, j.tx)
		return err
	})
	return rec, err
}

// render builds j's body from its transaction's record as of the event,
// the record's hash made with the secret hashSecret picks in cfg.
func (j *job) render(rec records.Record, cfg *aggregates.Config) error {
	secret := hashSecret(cfg, time.Now().UnixMilli())
	b, err := body(j.typ, j.ev, asOf(rec, j.ev, secret), j.prev)
	if err != nil {
		return err
	}
	j.body, j.secret = b, secret
	return nil
}

// renderAgain builds j's body again when its hash was made with another
// secret than hashSecret now picks: a retry after a rotation's overlap
// carries the hash made with the new secret (docs/callbacks.md
// "Payload"). It reports whether j can be attempted; otherwise j is
// parked, or the term ends.
func (t *term) renderAgain(ctx context.Context, j *job, cfg *aggregates.Config) bool {
	if hashSecret(cfg, time.Now().UnixMilli()) == j.secret {
		return true
	}
	rec, err := t.record(ctx, j)
	if err == nil {
		err = j.render(rec, cfg)
	}
	if err != nil {
		t.unbuildable(ctx, j, err)
		return false
	}
	return true
}

// unbuildable parks j, whose body could not be built for err, unless the
// term is ending (which is what usually ends such a build).
func (t *term) unbuildable(ctx context.Context, j *job, err error) {
	if ctx.Err() != nil {
		return
	}
	t.d.log.Error("callback cannot be built; parked", "eventId", j.id, "siteId", j.site, "transactionId", j.tx, "err", err)
	t.park(ctx, j, err.Error())
}

// waitWindow waits, overtakable, until the redelivery window ends. It
// reports whether j is still the head to deliver afterwards.
func (t *term) waitWindow(ctx context.Context, j *job, gen int) bool {
	t.mu.Lock()
	waiting := t.order.yield(j, gen)
	t.mu.Unlock()
	if !waiting {
		return false
	}
	timer := time.NewTimer(time.Until(t.windowEnd))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// False when overtaken by the earlier callback: started again when it
	// is settled.
	return t.order.resume(j, gen)
}

// resolve finds j's previous status (and any earlier callback of its
// transaction) when the tracker could not tell.
func (t *term) resolve(ctx context.Context, j *job, rec records.Record) error {
	if _, ok := j.ev.Payload.(*events.DepositApproved); ok && j.ev.Time < rec.ExpiresAtMs()-clockSkew.Milliseconds() {
		// An expiry is decided at or after expiresAt; an approval before
		// it cannot follow one.
		j.prev = aggregates.StatusPending.String()
		return nil
	}
	var from uint64
	err := t.d.cfg.Ledger.Read(ctx, j.site, local, func(s *aggregates.Site) error {
		i, ok := s.Lookup(j.tx)
		if !ok {
			return fmt.Errorf("transaction %s: %w", j.tx, aggregates.ErrNotFound)
		}
		from = s.Txs[i].Seq
		return nil
	})
	if err != nil {
		return err
	}
	h, err := scanHistory(ctx, t.d.cfg.Store, j.site, j.tx, from, j.k)
	if err != nil {
		return err
	}
	j.prev, j.pred = h.prev, h.pred
	return nil
}

func (k key) isZero() bool { return k.seq == 0 }

// restore resumes a delivery from its record.
func (j *job) restore(rec Delivery) {
	j.rec, j.recorded, j.attempts = rec, true, rec.Attempts
	if rec.NextAttemptAt != nil {
		if at, err := time.Parse(time.RFC3339, *rec.NextAttemptAt); err == nil {
			j.next = at
		}
	}
}

// deliver attempts until the callback is delivered or parked.
func (t *term) deliver(ctx context.Context, j *job) {
	d := t.d
	for {
		if wait := time.Until(j.next); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-j.kick:
			case <-timer.C:
			}
			timer.Stop()
		}
		t.takeResends(ctx, j)
		cfg, ok := d.cfg.Ledger.SiteConfig(j.site)
		if !ok || cfg.CallbackURL == "" {
			t.park(ctx, j, "the site has no callbackUrl")
			return
		}
		if !t.renderAgain(ctx, j, cfg) {
			return
		}
		o, ok := t.attempt(ctx, j, cfg)
		if !ok {
			return
		}
		if d.cfg.afterAttempt != nil {
			d.cfg.afterAttempt(j.id, o)
		}
		now := time.Now()
		j.attempts++
		at := records.FormatTime(now.UnixMilli())
		j.rec.Attempts, j.rec.LastAttemptAt, j.rec.NextAttemptAt = j.attempts, &at, nil
		j.rec.LastStatusCode = nil
		if o.code != 0 {
			c := o.code
			j.rec.LastStatusCode = &c
		}
		if (o.ok || !d.more(j.attempts)) && t.resentMeanwhile(j) {
			// An operator resent it while this attempt was under way,
			// and was answered pending: it goes again at once, on a
			// fresh schedule, its record pending (takeResends) before
			// its message can be acknowledged.
			if o.ok {
				j.rec.Status, j.rec.LastError = StatusPending, nil
			} else {
				msg := o.err
				j.rec.LastError = &msg
			}
			j.attempts, j.next = 0, now
			select {
			case <-j.kick:
			default:
			}
			if ctx.Err() != nil {
				// The term is ending and starts no attempt: the resend
				// is recorded, and the next term, which gets the message
				// again, delivers it.
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				t.takeResends(wctx, j)
				cancel()
				return
			}
			continue
		}
		if o.ok {
			if !j.recorded {
				j.code, j.at = o.code, now.UnixMilli()
				t.logDelivered(j)
				return
			}
			j.rec.Status, j.rec.LastError = StatusDelivered, nil
			// Recorded even when the term is ending, within bounds, so
			// that it is not delivered again.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			stored := t.mustWrite(wctx, j)
			cancel()
			if stored {
				t.settle(j)
			}
			return
		}
		msg := o.err
		j.rec.LastError = &msg
		wait, more := d.delay(j.attempts)
		if !more {
			t.park(ctx, j, "")
			return
		}
		// A Retry-After may only lengthen the wait: taken as it is, a 0
		// or a date in the past would spend every attempt in moments
		// (docs/callbacks.md "Retries").
		wait = max(wait, o.retryAfter)
		j.next = now.Add(wait)
		next := records.FormatTime(j.next.UnixMilli())
		j.rec.Status, j.rec.NextAttemptAt = StatusPending, &next
		d.log.Debug("callback attempt failed", "eventId", j.id, "siteId", j.site, "transactionId", j.tx,
			"attempt", j.attempts, "status", o.code, "err", o.err, "retryIn", wait)
		// The record of a retry is for the operator and for a later term
		// to resume the schedule; losing one costs at most an early retry.
		if err := d.write(ctx, &j.rec); err == nil {
			j.recorded = true
		} else if ctx.Err() == nil {
			d.log.Warn("callback state not recorded", "eventId", j.id, "err", err)
		}
	}
}

// resentMeanwhile reports whether resends were asked for j since they were
// last taken.
func (t *term) resentMeanwhile(j *job) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return j.resends > 0
}

// takeResends records, before the next attempt, the resends asked for
// while j waited for it: who and how many, and that it is due now.
func (t *term) takeResends(ctx context.Context, j *job) {
	t.mu.Lock()
	n, by := j.resends, j.resendBy
	j.resends = 0
	t.mu.Unlock()
	if n == 0 {
		return
	}
	j.rec.Resends += n
	j.rec.LastResendBy = by
	now := records.FormatTime(time.Now().UnixMilli())
	j.rec.Status, j.rec.NextAttemptAt = StatusPending, &now
	if err := t.d.write(ctx, &j.rec); err == nil {
		j.recorded = true
	} else if ctx.Err() == nil {
		t.d.log.Warn("callback resend not recorded", "eventId", j.id, "err", err)
	}
}

// attempt makes one POST within the site's and the dispatcher's
// concurrency bounds. ok is false when the term ended first.
func (t *term) attempt(ctx context.Context, j *job, cfg *aggregates.Config) (outcome, bool) {
	t.mu.Lock()
	sem := t.siteSem(j.site)
	t.mu.Unlock()
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return outcome{}, false
	}
	defer func() { <-sem }()
	select {
	case t.d.global <- struct{}{}:
	case <-ctx.Done():
		return outcome{}, false
	}
	defer func() { <-t.d.global }()
	now := time.Now()
	ts := now.Unix()
	hdr := http.Header{
		"Content-Type":      {"application/json"},
		"User-Agent":        {"gateway-callbacks/1"},
		"webhook-id":        {j.id},
		"webhook-timestamp": {strconv.FormatInt(ts, 10)},
		"webhook-signature": {signatures(cfg, j.id, ts, j.body, now.UnixMilli())},
	}
	o := post(t.attemptCtx, t.d.client, cfg.CallbackURL, hdr, j.body, t.d.cfg.Timeout, now)
	// A delivery made while the term was ending counts; a failure then is
	// likely the stop's own doing and is not recorded.
	if !o.ok && (ctx.Err() != nil || t.attemptCtx.Err() != nil) {
		return o, false
	}
	t.d.cfg.Metrics.CallbackAttempted(o.ok, time.Since(now), time.Since(time.UnixMilli(j.ev.Time)))
	return o, true
}

// park settles j as failed, recording why; an operator can resend it.
func (t *term) park(ctx context.Context, j *job, why string) {
	if j.rec.EventID == "" {
		j.rec = Delivery{EventID: j.id, SiteID: j.site, TransactionID: j.tx, Type: j.typ}
	}
	j.rec.Status, j.rec.NextAttemptAt = StatusFailed, nil
	if why != "" {
		j.rec.LastError = &why
	}
	if !t.mustWrite(ctx, j) {
		return
	}
	t.d.cfg.Metrics.CallbackGivenUp()
	t.d.log.Warn("callback parked as failed", "eventId", j.id, "siteId", j.site, "transactionId", j.tx,
		"type", j.typ, "attempts", j.rec.Attempts, "lastError", deref(j.rec.LastError))
	t.settle(j)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
