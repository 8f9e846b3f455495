package jsstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
)

// SetReadBatch makes Read pull n messages at a time (0: the default), so a
// test can cross from the first fetch to the streaming read with few
// messages.
func SetReadBatch(s *Store, n int) { s.readBatch = n }

// SetReadBytes bounds each streaming pull of Read and Follow to n bytes (0:
// the default), so a test can read under a small server's max_pending.
func SetReadBytes(s *Store, n int) { s.readBytes = n }

// Pending is one append handed to PublishBatch.
type Pending struct {
	Subject string
	Expect  uint64
	Data    []byte
}

// PublishBatch sends ps as one atomic batch, as the batcher does, and
// reports whether a failure was a certain "nothing stored".
func PublishBatch(s *Store, ps []Pending) (seqs []uint64, notStored bool, err error) {
	batch := make([]*pending, len(ps))
	for i, p := range ps {
		batch[i] = &pending{subject: p.Subject, expect: p.Expect, data: p.Data}
	}
	seqs, err = s.publishBatch(batch)
	return seqs, errors.Is(err, errBatchNotStored), err
}

// FilesState reports how many sealed blocks the block file index holds and
// whether it stopped using the files (false, false: no index).
func FilesState(s *Store) (blocks int, broken bool) {
	if s.files == nil {
		return 0, false
	}
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	return len(s.files.blocks), s.files.broken
}

// ServerGet reads seq through the server only.
func ServerGet(ctx context.Context, s *Store, seq uint64) (events.Msg, error) {
	files := s.files
	defer func() { s.files = files }()
	s.files = nil
	return s.Get(ctx, seq)
}

// WatchFsync makes every fsync of the store's own (Options.SyncFiles) call
// fn with the path first; an error from fn is the fsync's.
func WatchFsync(s *Store, fn func(path string) error) {
	s.fsync.sync = func(f *os.File) error {
		if err := fn(f.Name()); err != nil {
			return err
		}
		return f.Sync()
	}
}

// FsyncNextWaiters is how many wait for the store's next fsync round.
func FsyncNextWaiters(s *Store) int {
	s.fsync.mu.Lock()
	defer s.fsync.mu.Unlock()
	if s.fsync.next == nil {
		return 0
	}
	return s.fsync.next.waiters
}

// SetGatherFor bounds how long a due fsync round gathers appends in flight.
func SetGatherFor(s *Store, d time.Duration) { s.fsync.gatherFor = d }

// HoldSend counts an append as sent to the server without sending one, as
// if its answer were on its way; release settles it.
func HoldSend(s *Store) (release func()) {
	s.fsync.sending()
	return s.fsync.unsent
}

// SetSendHook makes fn run before every append is sent.
func SetSendHook(s *Store, fn func()) { s.sendHook = fn }

// FsyncGathering reports whether the next fsync round is gathering.
func FsyncGathering(s *Store) bool {
	s.fsync.mu.Lock()
	defer s.fsync.mu.Unlock()
	return s.fsync.gathering
}

// FsyncInFlight is how many appends were sent and are not settled.
func FsyncInFlight(s *Store) uint64 { return s.fsync.sent.Load() - s.fsync.settled.Load() }

// MsgsDir is where the embedded server under dir keeps a stream's blocks.
var MsgsDir = msgsDir

// PutSnapshotObject stores data under a snapshot name with the metadata
// given, around SaveSnapshot: a snapshot as an older build or a damaged
// one left it.
func PutSnapshotObject(ctx context.Context, s *Store, name string, meta map[string]string, data []byte) error {
	_, err := s.snaps.PutBytes(ctx, name, nil)
	if err != nil {
		return err
	}
	_, err = s.snaps.Put(ctx, jetstream.ObjectMeta{Name: name, Metadata: meta}, bytes.NewReader(data))
	return err
}

// SnapshotStoredSize is the size of name's snapshot as stored.
func SnapshotStoredSize(ctx context.Context, s *Store, name string) (uint64, error) {
	info, err := s.snaps.GetInfo(ctx, name)
	if err != nil {
		return 0, err
	}
	return info.Size, nil
}
