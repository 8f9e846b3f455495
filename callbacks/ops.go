package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

func notFound(id string) error {
	return &Error{Field: "eventId", Err: ErrEventNotFound, Msg: fmt.Sprintf("%q is not the id of a callback event", id)}
}

func noURL() error {
	return &Error{Field: "eventId", Err: ErrNoCallbackURL, Msg: "the event's site has no callbackUrl"}
}

// List returns one page of delivery records in stream order.
func (d *Dispatcher) List(ctx context.Context, f Filter) (records.Page[Delivery], error) {
	page := records.Page[Delivery]{Items: []Delivery{}}
	switch f.Status {
	case "", StatusPending, StatusDelivered, StatusFailed:
	default:
		return page, &Error{Field: "status", Err: ErrInvalidFilter, Msg: "status must be pending, delivered or failed"}
	}
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	after, err := f.after()
	if err != nil {
		return page, err
	}
	if err := d.ix.waitSynced(ctx); err != nil {
		return page, err
	}
	items := d.ix.list(f, after, f.Limit+1)
	if f.Status == "" || f.Status == StatusDelivered {
		last, err := d.cfg.Store.LastSeq(ctx)
		if err != nil {
			return page, fmt.Errorf("list callbacks: %w", err)
		}
		es, upTo, done, err := d.pages.scan(ctx, after, last, f.Limit+1, func(e pageEntry) bool {
			if f.SiteID != "" && e.site != f.SiteID {
				return false
			}
			_, own := d.ix.record(WebhookID(e.k.seq, e.k.idx))
			return !own // resent after its first delivery: listed from its record
		})
		if err != nil {
			return page, fmt.Errorf("list callbacks: %w", err)
		}
		logged := make([]listed, len(es))
		for i, e := range es {
			logged[i] = listed{k: e.k, d: firstAttempt(e.k, e.site, e.code, e.at), logged: true}
		}
		items = mergeSorted(items, logged, f.Limit+1)
		if !done {
			// The scan stopped before the end of the stream: the
			// listing ends where it stopped and continues from there.
			k := key{upTo, ids.MaxEventIndex}
			items = slices.DeleteFunc(items, func(it listed) bool { return it.k.cmp(k) > 0 })
			if len(items) <= f.Limit {
				page.NextCursor = f.cursorAt(k)
			}
		}
	}
	if len(items) > f.Limit {
		items = items[:f.Limit]
		page.NextCursor = f.cursorAt(items[len(items)-1].k)
	}
	// The log keeps no more than it must: the transaction and the type
	// are the event's, read back from the stream, once per message (a
	// group-committed message holds many callbacks).
	type msg struct {
		site ids.SiteID
		evs  []events.Event
	}
	msgs := map[uint64]msg{}
	for _, it := range items {
		if it.logged {
			m, ok := msgs[it.k.seq]
			if !ok {
				m.site, m.evs, err = d.message(ctx, it.k.seq)
				if err != nil {
					return page, fmt.Errorf("callback %s: %w", it.d.EventID, err)
				}
				msgs[it.k.seq] = m
			}
			j, err := jobAt(it.d.EventID, it.k, m.site, m.evs)
			if err != nil {
				return page, fmt.Errorf("callback %s: %w", it.d.EventID, err)
			}
			it.d.TransactionID, it.d.Type = j.tx, j.typ
		}
		page.Items = append(page.Items, it.d)
	}
	return page, nil
}

// Resend delivers the callback of event id again, with the same
// webhook-id and a fresh retry schedule, whatever its state: a parked
// delivery is tried again, a delivered one is sent once more, and one
// waiting for its next retry is tried now. actor names the operator. It
// returns the delivery's record; the attempts happen in the background.
//
// It runs in the active dispatcher: called elsewhere, it is forwarded there
// over NATS, so the same callback is never attempted by two processes at
// once.
func (d *Dispatcher) Resend(ctx context.Context, id, actor string) (Delivery, error) {
	if _, ok := keyOf(id); !ok {
		return Delivery{}, notFound(id)
	}
	if t := d.active.Load(); t != nil {
		return t.resend(ctx, id, actor)
	}
	req, _ := json.Marshal(resendRequest{EventID: id, Actor: actor})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := d.cfg.Conn.RequestWithContext(rctx, d.resendSubject(), req)
	if errors.Is(err, nats.ErrNoResponders) {
		return Delivery{}, &Error{Err: ErrNoDispatcher,
			Msg: "no callback dispatcher is running (a gateway with callbacks on, or 'gateway callbacks'); try again once one is"}
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("resend %s: %w: %v", id, ErrUnavailable, err)
	}
	var rep resendReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return Delivery{}, fmt.Errorf("resend %s: bad reply: %w", id, err)
	}
	switch rep.Error {
	case "":
		return rep.Delivery, nil
	case "not_found":
		return Delivery{}, notFound(id)
	case "no_callback_url":
		return Delivery{}, noURL()
	case "unavailable":
		return Delivery{}, fmt.Errorf("resend %s: %w: %s", id, ErrUnavailable, rep.Message)
	}
	return Delivery{}, fmt.Errorf("resend %s: %s", id, rep.Message)
}

type resendRequest struct {
	EventID string `json:"eventId"`
	Actor   string `json:"actor"`
}

type resendReply struct {
	Delivery Delivery `json:"delivery"`
	Error    string   `json:"error,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// serveResend answers resends forwarded by other processes.
func (t *term) serveResend(m *nats.Msg) {
	var req resendRequest
	var rep resendReply
	if err := json.Unmarshal(m.Data, &req); err != nil {
		rep.Error, rep.Message = "invalid", err.Error()
	} else {
		ctx, cancel := context.WithTimeout(t.ctx, 10*time.Second)
		rep.Delivery, err = t.resend(ctx, req.EventID, req.Actor)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, ErrEventNotFound):
			rep.Error = "not_found"
		case errors.Is(err, ErrNoCallbackURL):
			rep.Error = "no_callback_url"
		case errors.Is(err, ErrUnavailable), errors.Is(err, events.ErrUnavailable),
			errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			rep.Error = "unavailable"
		default:
			rep.Error = "internal"
		}
		if err != nil {
			rep.Message = err.Error()
		}
	}
	b, _ := json.Marshal(rep)
	_ = m.Respond(b)
}

// event reads the final-state event at id back from the stream.
func (d *Dispatcher) event(ctx context.Context, id string) (*job, error) {
	k, ok := keyOf(id)
	if !ok {
		return nil, notFound(id)
	}
	site, evs, err := d.message(ctx, k.seq)
	if errors.Is(err, ErrEventNotFound) {
		return nil, notFound(id) // named as asked
	}
	if err != nil {
		return nil, err
	}
	return jobAt(id, k, site, evs)
}

// message reads the site message at seq (not found: no site message).
func (d *Dispatcher) message(ctx context.Context, seq uint64) (ids.SiteID, []events.Event, error) {
	m, err := d.cfg.Store.Get(ctx, seq)
	if errors.Is(err, events.ErrNotFound) {
		return "", nil, notFound(WebhookID(seq, 0))
	}
	if err != nil {
		return "", nil, err
	}
	site, ok := events.SiteOf(m.Subject)
	if !ok {
		return "", nil, notFound(WebhookID(seq, 0))
	}
	evs, err := events.Decode(m.Data)
	if err != nil {
		return "", nil, fmt.Errorf("message %d: %w", seq, err)
	}
	return site, evs, nil
}

// jobAt is the job of the callback at k in a site message's events.
func jobAt(id string, k key, site ids.SiteID, evs []events.Event) (*job, error) {
	if k.idx >= len(evs) || callbackType(evs[k.idx]) == "" {
		return nil, notFound(id)
	}
	e := evs[k.idx]
	return &job{id: id, k: k, site: site, tx: txOf(e), typ: callbackType(e), ev: e, kick: make(chan struct{}, 1)}, nil
}

// anew is a job delivering j's callback again, as Dispatcher.event would
// make it, without reading the stream: the event is j's.
func (j *job) anew() *job {
	return &job{id: j.id, k: j.k, site: j.site, tx: j.tx, typ: j.typ, ev: j.ev, kick: make(chan struct{}, 1)}
}

// resend runs in the active dispatcher.
func (t *term) resend(ctx context.Context, id, actor string) (Delivery, error) {
	d := t.d
	j, err := d.event(ctx, id)
	if err != nil {
		return Delivery{}, err
	}
	cfg, err := d.siteConfig(ctx, j.site, j.k.seq)
	if err != nil {
		return Delivery{}, err
	}
	if cfg == nil || cfg.CallbackURL == "" {
		return Delivery{}, noURL()
	}
	t.mu.Lock()
	if cur := t.order.inFlight(id); cur != nil {
		// Being delivered: try it now rather than at its next retry,
		// and count the resend there (its goroutine owns the record).
		cur.resends++
		cur.resendBy = actor
		pending := cur.resends
		// Read before the kick: the job, once woken, writes the
		// resends into its record, and they would be counted twice.
		rec, ok := d.ix.record(id)
		select {
		case cur.kick <- struct{}{}:
		default:
		}
		t.mu.Unlock()
		d.log.Info("callback resend", "eventId", id, "siteId", j.site, "transactionId", j.tx, "actor", actor)
		if !ok {
			if logged, found, err := d.logged(ctx, j.k); err == nil && found {
				rec, ok = logged, true
			}
		}
		if !ok {
			rec = Delivery{EventID: id, SiteID: j.site, TransactionID: j.tx, Type: j.typ}
		}
		// The record as the job is writing it: one more resend, due now.
		now := records.FormatTime(time.Now().UnixMilli())
		rec.Resends += pending
		rec.LastResendBy, rec.Status, rec.NextAttemptAt, rec.UpdatedAt = actor, StatusPending, &now, now
		return rec, nil
	}
	t.mu.Unlock()
	d.log.Info("callback resend", "eventId", id, "siteId", j.site, "transactionId", j.tx, "actor", actor)
	return t.restart(ctx, j, actor, 1)
}

// restart delivers the callback of j, a job made by Dispatcher.event,
// again on a fresh schedule, counting n resends by actor. Its record is
// written pending before the job starts: should this process stop before
// delivering, the next term finds it pending and resumes it.
func (t *term) restart(ctx context.Context, j *job, actor string, n int) (Delivery, error) {
	rec, err := t.d.renew(ctx, j, actor, n)
	if err != nil {
		return Delivery{}, err
	}
	t.mu.Lock()
	if t.ctx.Err() == nil && t.order.add(j) {
		t.start(j)
	}
	t.mu.Unlock()
	return rec, nil
}

// renew writes the record of j, a job not started yet, pending on a fresh
// schedule with n more resends by actor, and returns a copy of it: once
// the job starts, its goroutine owns j.rec.
func (d *Dispatcher) renew(ctx context.Context, j *job, actor string, n int) (Delivery, error) {
	id := j.id
	old, found, err := d.load(ctx, id)
	if err != nil {
		return Delivery{}, err
	}
	if !found {
		if old, _, err = d.logged(ctx, j.k); err != nil {
			return Delivery{}, err
		}
	}
	// Due now (docs/callbacks.md "Resending"): the job starts at once.
	now := records.FormatTime(time.Now().UnixMilli())
	j.rec = Delivery{EventID: id, SiteID: j.site, TransactionID: j.tx, Type: j.typ, Status: StatusPending,
		Resends: old.Resends + n, LastResendBy: actor, LastStatusCode: old.LastStatusCode, LastError: old.LastError,
		LastAttemptAt: old.LastAttemptAt, NextAttemptAt: &now}
	if err := d.write(ctx, &j.rec); err != nil {
		return Delivery{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	j.recorded, j.fresh = true, true
	return j.rec, nil
}

// resumeOrphans restarts the pending deliveries no message stands for (a
// resend whose process stopped), once every held message of the previous
// term has been redelivered.
func (t *term) resumeOrphans() {
	ctx := t.ctx
	if err := t.d.ix.waitSynced(ctx); err != nil {
		return
	}
	if w := time.Until(t.windowEnd); w > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(w):
		}
	}
	for _, rec := range t.d.ix.pending() {
		t.mu.Lock()
		busy := t.order.busy(rec.EventID)
		t.mu.Unlock()
		if busy {
			continue
		}
		// Read it again: the copy may be older than the bucket.
		cur, found, err := t.d.load(ctx, rec.EventID)
		if err != nil {
			return
		}
		if !found || cur.Status != StatusPending {
			continue
		}
		j, err := t.d.event(ctx, rec.EventID)
		if err != nil {
			if ctx.Err() == nil {
				t.d.log.Warn("pending callback record names no event", "eventId", rec.EventID, "err", err)
			}
			continue
		}
		j.restore(cur)
		j.fresh = true
		t.mu.Lock()
		if t.order.add(j) {
			t.start(j)
		}
		t.mu.Unlock()
	}
}

// logged returns the delivery log's entry of k: a legacy batch's or its
// page's.
func (d *Dispatcher) logged(ctx context.Context, k key) (Delivery, bool, error) {
	if rec, ok := d.ix.legacy(k); ok {
		return rec, true, nil
	}
	e, ok, err := d.pages.lookup(ctx, k)
	if err != nil || !ok {
		return Delivery{}, false, err
	}
	return firstAttempt(e.k, e.site, e.code, e.at), true, nil
}
