package projections

// Catch-up: what the stream held when the process started, applied in
// large batches before the models are served.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/iqdgateway/gateway/events"
)

// Catch-up chunks: large, since a commit's cost is mostly per batch, and
// bounded, since a chunk is held in memory (messages and Pebble's batch).
const (
	catchUpMsgs  = 4096
	catchUpBytes = 8 << 20
)

// errCaughtUp ends the read at the sequence the catch-up aimed for.
var errCaughtUp = errors.New("caught up")

// CatchUp applies every message up to the stream's last sequence as it is
// when called, in chunks of catchUpMsgs messages or catchUpBytes, and logs
// the rate at INFO. Every chunk but the last is committed without an
// fsync (pebble.NoSync) and the last with one, which puts the whole WAL,
// every earlier chunk with it, on disk. That is safe because each chunk
// commits its checkpoint in the same atomic batch as its changes: a
// machine that stops before the last fsync loses some tail of the chunks,
// each whole, and the models reopen at the checkpoint of the last chunk
// that survived, to be caught up again from there. A process that dies
// (kill -9) loses only what Pebble had not yet handed to the kernel, the
// same way. A model's Apply error or a refused write stops it, as it
// stops Follow (Err). Without models it does nothing.
func (d *DB) CatchUp(ctx context.Context, store events.Store) error {
	if len(d.models) == 0 {
		return nil
	}
	if err := d.Err(); err != nil {
		return err
	}
	last, err := store.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("projections: catch up: %w", err)
	}
	from := d.Applied() + 1
	if from > last {
		return nil
	}
	start := time.Now()
	var (
		chunk     []events.Msg
		size, evs int
		msgs      int
		applyErr  error
	)
	flush := func(sync *pebble.WriteOptions) error {
		if len(chunk) == 0 && sync == pebble.Sync {
			return d.sync()
		}
		n, err := d.apply(chunk, sync)
		if err != nil {
			applyErr = err
			return err
		}
		evs += n
		msgs += len(chunk)
		chunk, size = chunk[:0], 0
		return nil
	}
	err = store.Read(ctx, events.SubjectPrefix+">", from, func(m events.Msg) error {
		if m.Seq > last {
			return errCaughtUp
		}
		chunk = append(chunk, m)
		size += len(m.Data)
		if m.Seq == last {
			return errCaughtUp
		}
		if len(chunk) >= d.chunkMsgs || size >= catchUpBytes {
			return flush(pebble.NoSync)
		}
		return nil
	})
	if applyErr != nil {
		d.fail(applyErr)
		return applyErr
	}
	if err != nil && !errors.Is(err, errCaughtUp) {
		// The chunks committed so far stand (each with its checkpoint);
		// a next call goes on from there. They are put on disk now, so
		// that what a caller retries after is as durable as a Follow's.
		if serr := d.sync(); serr != nil {
			d.fail(serr)
			return serr
		}
		return fmt.Errorf("projections: catch up from %d: %w", d.Applied()+1, err)
	}
	if err := flush(pebble.Sync); err != nil {
		d.fail(err)
		return err
	}
	el := time.Since(start)
	d.log.Info("read models caught up", "messages", msgs, "events", evs, "lastSeq", last,
		"seconds", el.Seconds(), "eventsPerSecond", int64(float64(evs)/max(el.Seconds(), 1e-9)))
	return nil
}

// sync puts every commit made so far on disk.
func (d *DB) sync() error {
	if err := d.pdb.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("projections: sync: %w", err)
	}
	return nil
}
