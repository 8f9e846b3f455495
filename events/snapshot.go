package events

import (
	"context"
	"fmt"
	"time"
)

// SnapshotSource is what LoadSnapshotWithin reads: a store's snapshots and
// its stream's last sequence.
type SnapshotSource interface {
	LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error)
	LastSeq(ctx context.Context) (uint64, error)
}

// LoadSnapshotWithin loads snapshot name within limit. A snapshot the store
// holds only in part (a chunk lost to a damaged block) is never refused,
// only waited for: one not loaded in time while the store answers another
// read at once is ErrCorrupt, for the caller to do without it (replay the
// stream, report it). A store that does not answer either is unavailable,
// the caller's to wait for.
func LoadSnapshotWithin(ctx context.Context, src SnapshotSource, name string, limit time.Duration) (uint64, []byte, error) {
	lctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	seq, data, err := src.LoadSnapshot(lctx, name)
	if err == nil || ctx.Err() != nil || lctx.Err() == nil {
		return seq, data, err
	}
	if _, lerr := src.LastSeq(ctx); lerr != nil {
		return seq, data, err
	}
	return 0, nil, fmt.Errorf("snapshot %s: %w: not read within %s while the store answers: %v", name, ErrCorrupt, limit, err)
}
