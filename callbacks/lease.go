package callbacks

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lease makes one dispatcher at a time the active one, however many
// gateway processes (and standalone dispatchers) share a NATS cluster.
//
// The lease is a key in a KV bucket whose max age is the lease's TTL: the
// holder renews it (a compare-and-set on its revision) every TTL/4; a key
// nobody renews ages out of the bucket and the next Create wins. The holder
// counts its lease as lost TTL/5 before the server can let it expire
// (measured from before the renewal it sent), stops every attempt and pulls
// no more, so an old and a new holder never overlap.
//
// Why one active dispatcher rather than several pulling from the one durable
// consumer: JetStream gives each message to one puller at a time, which
// would stop two dispatchers from attempting the same delivery together, but
// not keep a transaction's callbacks in order (the expired callback of a
// deposit could be retrying in one process while another delivers the late
// approval). With one holder, the ordering is an in-process affair.
type lease struct {
	kv  jetstream.KeyValue
	ttl time.Duration
	id  []byte
	rev uint64
	// until is how long the lease is surely still held (Unix ns).
	until atomic.Int64
}

// remaining is how long the lease is surely still held.
func (l *lease) remaining() time.Duration { return time.Until(time.Unix(0, l.until.Load())) }

const leaseKey = "dispatcher"

// acquire blocks until this process holds the lease or ctx ends.
func (l *lease) acquire(ctx context.Context) (validUntil time.Time, err error) {
	t := time.NewTicker(l.ttl / 4)
	defer t.Stop()
	for {
		start := time.Now()
		rev, err := l.kv.Create(ctx, leaseKey, l.id)
		if err == nil {
			l.rev = rev
			until := start.Add(l.ttl - l.ttl/5)
			l.until.Store(until.UnixNano())
			return until, nil
		}
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-t.C:
		}
	}
}

// hold renews the lease until ctx ends or the lease is lost, and returns
// when either happens.
func (l *lease) hold(ctx context.Context, validUntil time.Time) error {
	t := time.NewTicker(l.ttl / 4)
	defer t.Stop()
	for {
		left := time.Until(validUntil)
		if left <= 0 {
			return errors.New("callback dispatcher lease not renewed in time")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(left):
			return errors.New("callback dispatcher lease not renewed in time")
		case <-t.C:
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, l.ttl/4)
		rev, err := l.kv.Update(rctx, leaseKey, l.id, l.rev)
		cancel()
		if err == nil {
			l.rev, validUntil = rev, start.Add(l.ttl-l.ttl/5)
			l.until.Store(validUntil.UnixNano())
			continue
		}
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// Someone else holds it (or it aged out): we are not the
			// dispatcher any more.
			return errors.New("callback dispatcher lease taken over")
		}
		// A store error: keep trying until the lease runs out.
	}
}

// release gives the lease up at once, so another process takes over
// without waiting for it to age out.
func (l *lease) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(l.rev))
}
