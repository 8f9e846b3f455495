package jsstore

// Snapshots of derived state, kept in an object store next to the stream.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
)

const snapshotBucket = "LEDGER_SNAPSHOTS"

// maxSnapshotBytes bounds a snapshot's size as LoadSnapshot believes it
// (a site's state is about 150 bytes a transaction).
const maxSnapshotBytes = 4 << 30

// SaveSnapshot stores derived state for name at stream sequence seq,
// replacing the previous one. The data is stored S2-compressed (a site's
// state takes about a third of its size): every snapshot round rewrites
// every changed site, and the server holds each block it writes in memory
// for a while, so the bytes written are memory too (BENCHMARKS.md "A
// million transactions over 1,000 sites").
func (s *Store) SaveSnapshot(ctx context.Context, name string, seq uint64, data []byte) error {
	if s.snaps == nil {
		return fmt.Errorf("save snapshot %s: %w: opened without a snapshot bucket", name, events.ErrUnavailable)
	}
	meta := map[string]string{"seq": strconv.FormatUint(seq, 10)}
	if len(data) > 0 {
		data = s2.Encode(nil, data)
		meta[snapshotEncodingKey] = snapshotS2
	}
	_, err := s.snaps.Put(ctx, jetstream.ObjectMeta{Name: name, Metadata: meta}, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("save snapshot %s: %w", name, mapErr(err))
	}
	return nil
}

// A snapshot's metadata names its encoding; none is the raw state, as
// stored before snapshots were compressed.
const (
	snapshotEncodingKey = "enc"
	snapshotS2          = "s2"
)

// LoadSnapshot returns the latest snapshot of name and its sequence;
// events.ErrNotFound when there is none, events.ErrCorrupt when it cannot
// be decoded (the caller rebuilds the state from the stream instead).
func (s *Store) LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error) {
	if s.snaps == nil {
		return 0, nil, fmt.Errorf("snapshot %s: %w (no snapshot bucket)", name, events.ErrNotFound)
	}
	r, err := s.snaps.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return 0, nil, fmt.Errorf("snapshot %s: %w", name, events.ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w", name, mapErr(err))
	}
	defer r.Close()
	info, err := r.Info()
	if err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w", name, err)
	}
	seq, err := strconv.ParseUint(info.Metadata["seq"], 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("snapshot %s: bad seq %q", name, info.Metadata["seq"])
	}
	// Read into one buffer of the object's size: io.ReadAll would grow
	// one by doubling, and a start-up reads a snapshot per site.
	if info.Size > maxSnapshotBytes {
		return 0, nil, fmt.Errorf("load snapshot %s: %d bytes, more than any snapshot", name, info.Size)
	}
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w", name, mapErr(err))
	}
	// Reading to the end is what checks the object's digest.
	if rest, err := io.ReadAll(r); err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w", name, mapErr(err))
	} else if len(rest) != 0 {
		return 0, nil, fmt.Errorf("load snapshot %s: longer than its size %d", name, info.Size)
	}
	data, err = decodeSnapshot(info.Metadata[snapshotEncodingKey], data)
	if err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w: %v", name, events.ErrCorrupt, err)
	}
	return seq, data, nil
}

// decodeSnapshot undoes the encoding enc names.
func decodeSnapshot(enc string, data []byte) ([]byte, error) {
	switch enc {
	case "":
		return data, nil
	case snapshotS2:
		n, err := s2.DecodedLen(data)
		if err != nil {
			return nil, err
		}
		if n > maxSnapshotBytes {
			return nil, fmt.Errorf("%d bytes decoded, more than any snapshot", n)
		}
		return s2.Decode(make([]byte, n), data)
	}
	return nil, fmt.Errorf("unknown encoding %q", enc)
}

// ListSnapshots returns the names of all stored snapshots.
func (s *Store) ListSnapshots(ctx context.Context) ([]string, error) {
	if s.snaps == nil {
		return nil, nil
	}
	infos, err := s.snaps.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", mapErr(err))
	}
	out := make([]string, 0, len(infos))
	for _, i := range infos {
		if !i.Deleted {
			out = append(out, i.Name)
		}
	}
	return out, nil
}
