package projections

// The projector: the stream followed while the process runs, its messages
// committed in groups, and the waits of readers on it.

import (
	"context"
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/iqdgateway/gateway/events"
)

// Group commit bounds: the committer takes every message queued while the
// previous commit ran, up to these. A commit of one message costs an
// fsync; under load the queue fills during that fsync, and the next
// commit takes the lot, so the number of fsyncs follows the load rather
// than the number of messages, with no timer to guess.
const (
	// followQueue is how many messages the stream's callback may hand
	// over before it waits for the committer: it bounds the memory of a
	// projector that falls behind.
	followQueue = 4096
	// commitMsgs and commitBytes bound one commit.
	commitMsgs  = 4096
	commitBytes = 4 << 20
)

// followRetry is the pause before following again after a store error.
const followRetry = 500 * time.Millisecond

// Err returns the fault that stopped the projector (a model's Apply
// failing, the store's disk refusing a write), nil while it runs. Every
// model then stays at its last checkpoint, and what reads the models must
// not pretend they are current (the gateway answers 503); a restart
// resumes from the checkpoints.
func (d *DB) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// fail records the fault that stops the projector, and wakes its waiters.
func (d *DB) fail(err error) {
	var me *ModelError
	if errors.As(err, &me) {
		d.log.Error("read model failed to apply a message; the read models stop at their checkpoints until a restart",
			"model", me.Model, "seq", me.Seq, "err", me.Err)
	} else {
		// A write the store's disk refused (full, failing), or a
		// message that does not decode.
		d.log.Error("read models stopped at their checkpoints until a restart", "err", err)
	}
	d.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.broadcastLocked()
	d.mu.Unlock()
}

// WaitFor returns once every model has applied the stream up to seq, the
// projector's fault if it stopped before, or ctx's error. It waits on each
// commit's broadcast, not by polling.
func (d *DB) WaitFor(ctx context.Context, seq uint64) error {
	for {
		d.mu.Lock()
		done := len(d.models) == 0 || d.appliedLocked() >= seq
		err, changed := d.err, d.changed
		d.mu.Unlock()
		switch {
		case done:
			return nil
		case err != nil:
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Follow applies every message of the stream after Applied(), and every
// one stored later, until ctx ends (it then returns nil) or a model or the
// store's disk fails (it then returns that fault, which Err keeps). The
// stream's callback hands the messages to one committer through a bounded
// queue; the committer commits everything queued, up to commitMsgs or
// commitBytes, as one ApplyMessages, so a busy stream costs one fsync per
// group. After a store error it logs a warning and follows again from
// the first message it has not queued, as the ledger's follower does.
// Without models it only waits for ctx.
func (d *DB) Follow(ctx context.Context, store events.Store) error {
	if len(d.models) == 0 {
		<-ctx.Done()
		return nil
	}
	if err := d.Err(); err != nil {
		return err
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	queue := make(chan events.Msg, followQueue)
	committed := make(chan error, 1)
	go func() {
		err := d.commitLoop(fctx, queue)
		if err != nil {
			d.fail(err)
		}
		stop()
		committed <- err
	}()
	next := d.Applied() + 1
	for fctx.Err() == nil {
		err := store.Follow(fctx, events.SubjectPrefix+">", next, func(m events.Msg) {
			if m.Seq < next {
				return // queued before a restart
			}
			select {
			case queue <- m:
				next = m.Seq + 1
			case <-fctx.Done():
			}
		})
		if fctx.Err() != nil {
			break
		}
		d.log.Warn("read models' follower stopped; restarting", "from", next, "err", err)
		select {
		case <-fctx.Done():
		case <-time.After(followRetry):
		}
	}
	stop()
	if err := <-committed; err != nil {
		return err
	}
	return nil
}

// commitLoop commits the queued messages in groups until ctx ends or a
// commit fails.
func (d *DB) commitLoop(ctx context.Context, queue <-chan events.Msg) error {
	var group []events.Msg
	for {
		group = group[:0]
		select {
		case <-ctx.Done():
			return nil
		case m := <-queue:
			group = append(group, m)
		}
		size := len(group[0].Data)
	take:
		for len(group) < commitMsgs && size < commitBytes {
			select {
			case m := <-queue:
				group = append(group, m)
				size += len(m.Data)
			default:
				break take
			}
		}
		if _, err := d.apply(group, pebble.Sync); err != nil {
			return err
		}
	}
}
