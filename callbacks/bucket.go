package callbacks

// A delivery's record in the bucket, written before its message is
// acknowledged and read back by the next term, and the retries that wait
// out a store that does not answer.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/records"
)

// mustWrite stores j's record before its message may be acknowledged,
// retrying until it is stored or the term ends (then the message is
// redelivered to the next term, which tries again).
func (t *term) mustWrite(ctx context.Context, j *job) bool {
	err := retry(ctx, func() error { return t.d.write(ctx, &j.rec) })
	if err != nil {
		return false
	}
	j.recorded = true
	return true
}

// write stores a record in the bucket.
func (d *Dispatcher) write(ctx context.Context, rec *Delivery) error {
	rec.UpdatedAt = records.FormatTime(time.Now().UnixMilli())
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.kv.Put(wctx, rec.EventID, b); err != nil {
		return fmt.Errorf("record callback %s: %w", rec.EventID, err)
	}
	d.ix.put(*rec)
	return nil
}

// load reads a record from the bucket; found is false when there is none.
// Store errors are retried until ctx ends.
func (d *Dispatcher) load(ctx context.Context, id string) (rec Delivery, found bool, err error) {
	err = retry(ctx, func() error {
		e, err := d.kv.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			found = false
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		if json.Unmarshal(e.Value(), &rec) != nil {
			found = false
		}
		return nil
	})
	return rec, found, err
}

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error {
	if err == nil {
		return nil
	}
	var p *permanentError
	if errors.As(err, &p) {
		return err
	}
	return &permanentError{err}
}

// loggedRetry reports whether k is in the delivery log, reading it until
// it answers or ctx ends.
func loggedRetry(ctx context.Context, d *Dispatcher, k key) (bool, error) {
	var logged bool
	err := retry(ctx, func() error {
		var err error
		_, logged, err = d.logged(ctx, k)
		return err
	})
	return logged, err
}

// retry runs fn until it succeeds, fails permanently (not found, corrupt),
// or ctx ends; store outages are waited out with a capped backoff.
func retry(ctx context.Context, fn func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, aggregates.ErrNotFound) || errors.Is(err, aggregates.ErrSiteNotFound) ||
			errors.Is(err, events.ErrCorrupt) || errors.Is(err, events.ErrNotFound) || errors.Is(err, events.ErrUnknownEvent) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}
