package jsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
)

// OpenExisting binds to an existing ledger stream and snapshot bucket without
// creating or updating either, for read-only tools (ledgerctl): Open would
// rewrite the stream's configuration, e.g. scale a replicated stream down to
// the Replicas it was given. A missing stream or bucket is events.ErrNotFound.
func OpenExisting(ctx context.Context, nc *nats.Conn, o Options) (*Store, error) {
	if o.Stream == "" {
		o.Stream = events.StreamName
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	st, err := js.Stream(ctx, o.Stream)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("stream %s: %w", o.Stream, events.ErrNotFound)
		}
		return nil, fmt.Errorf("stream %s: %w", o.Stream, mapErr(err))
	}
	// Snapshots are derived: a ledger whose bucket is gone reads as one
	// without snapshots (none listed, none found), and the audit replays
	// it whole.
	snaps, err := js.ObjectStore(ctx, snapshotBucket)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("snapshot bucket %s: %w", snapshotBucket, mapErr(err))
	}
	return &Store{nc: nc, stream: st, snaps: snaps, name: o.Stream, self: newWriterID()}, nil
}
