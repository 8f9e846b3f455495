package jsstore

// The durable mark: the highest sequence the gateway's own fsync rounds
// have put on disk, kept in a small file beside the server's, so that a
// history shorter than what was once on disk is noticed at the next open
// rather than served (docs/ARCHITECTURE.md "One fsync for many sites").

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
)

// ErrHistoryLost is an open that found the ledger stream ending before a
// sequence that was on disk, or missing messages before its end: block
// files were damaged, truncated or removed, and the server dropped what it
// could not read. Nothing is served from such a history; the data
// directory is restored from a backup. It is events.ErrHistoryLost.
var ErrHistoryLost = events.ErrHistoryLost

// ErrDataDir is a file of the data directory that the store cannot use
// (the durable mark unreadable, or not a file): waiting does not mend it.
var ErrDataDir = errors.New("a file of the data directory cannot be used")

// markLen is the mark's fixed size: 20 digits and a newline, rewritten in
// place.
const markLen = 21

// markPath is the mark of stream in the server's store directory dir.
func markPath(dir, stream string) string {
	return filepath.Join(dir, "durable-"+stream)
}

// openMark opens (creating) the mark of stream under dir and returns it with
// the sequence it holds (0 when new).
func openMark(dir, stream string) (*os.File, uint64, error) {
	f, err := os.OpenFile(markPath(dir, stream), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: durable mark: %w", ErrDataDir, err)
	}
	b := make([]byte, markLen)
	n, _ := f.ReadAt(b, 0) // short (new, or torn) is told by n
	return f, parseMark(b[:n]), nil
}

// parseMark reads a mark's bytes; one new, torn or foreign proves nothing
// (0), and the next round rewrites it.
func parseMark(b []byte) uint64 {
	seq, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if len(b) != markLen || err != nil {
		return 0
	}
	return seq
}

// CheckDurableMark is Open's check for a reader of an offline data
// directory dir (ledgerctl): ErrHistoryLost when stream's last sequence is
// below the durable mark the gateway left there. A directory without a
// mark passes.
func CheckDurableMark(dir, stream string, last uint64) error {
	mark, err := readMark(dir, stream)
	if err != nil {
		return err
	}
	return checkMark(stream, last, mark)
}

// readMark is the durable mark of stream under dir, read without opening
// it for writing (0 for none).
func readMark(dir, stream string) (uint64, error) {
	b, err := os.ReadFile(markPath(dir, stream))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("durable mark: %w", err)
	}
	return parseMark(b), nil
}

// checkMark refuses a stream whose last sequence is below the mark.
func checkMark(stream string, last, mark uint64) error {
	if last < mark {
		return fmt.Errorf("%w: stream %s ends at sequence %d, but %d was on disk (messages %d to %d are gone: damaged or removed block files); restore the data directory from a backup",
			ErrHistoryLost, stream, last, mark, last+1, mark)
	}
	return nil
}

// checkWhole refuses a stream that misses messages before its last: it
// refuses deletes and purges, so every sequence from 1 to its last holds
// one unless the server dropped it (a damaged record, a truncated or
// removed block file, whose index may still name the old last sequence).
//
// With the durable mark (mark > 0) a gap entirely above it is not refused:
// messages past the mark were never answered (their fsync round had not
// ended), and a power loss may keep a later block of them but not an
// earlier block's tail. Nothing acknowledged was lost there; the site
// whose chain the gap breaks is then not served, and says so.
func checkWhole(ctx context.Context, st jetstream.Stream, stream string, mark uint64) error {
	state := st.CachedInfo().State
	if state.LastSeq == 0 || state.FirstSeq == 1 && state.Msgs == state.LastSeq {
		return nil
	}
	first := uint64(1)
	if state.FirstSeq <= 1 {
		info, err := st.Info(ctx, jetstream.WithDeletedDetails(true))
		if err != nil {
			return fmt.Errorf("stream %s: %w", stream, mapErr(err))
		}
		if len(info.State.Deleted) > 0 {
			first = slices.Min(info.State.Deleted)
		}
	}
	if mark > 0 && first > mark {
		return nil
	}
	return fmt.Errorf("%w: stream %s holds %d messages of the sequences 1 to %d, the first missing at %d: %d are gone (damaged or removed block files); restore the data directory from a backup",
		ErrHistoryLost, stream, state.Msgs, state.LastSeq, first, state.LastSeq-min(state.Msgs, state.LastSeq))
}

// writeMark records seq as on disk. It is written after the fsync that put
// seq there and is not fsynced itself: after a power loss it may hold an
// older sequence, never a later one, so it can only fail to notice a loss,
// never invent one.
func writeMark(f *os.File, seq uint64) error {
	_, err := f.WriteAt(fmt.Appendf(nil, "%020d\n", seq), 0)
	return err
}
