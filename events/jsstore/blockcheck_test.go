package jsstore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// recordOffsets returns where each record of a block file starts.
func recordOffsets(t *testing.T, b []byte) []int {
	t.Helper()
	var offs []int
	for off := 0; off+22 <= len(b); {
		offs = append(offs, off)
		rl := int(binary.LittleEndian.Uint32(b[off:]) &^ (1 << 31))
		require.Positive(t, rl)
		off += rl
	}
	return offs
}

// A record whose sequence field is damaged would make nats-server index a
// hole up to that sequence when it loads the block, without checking the
// record first: one flipped high bit exhausts the machine's memory. The
// embedded server is not started on such files. Damage that leaves the
// sequence in line (a flipped bit in a message, a torn tail) is the
// server's and the audit's to find, and the start goes on, unless the
// message was acknowledged (at or below the durable mark; see the test
// after this one). The mark is removed here, so that only the sequence
// rule applies.
func TestRunServer_damagedSequenceFieldIsRefused(t *testing.T) {
	const n = 30
	cases := []struct {
		name    string
		record  int    // which record to damage (-1: none; n-1: the last)
		seqXor  uint64 // flipped bits of its sequence field
		dataXor byte   // flipped bits of its last message byte
		cut     int    // bytes cut off the block's end
		refused bool
	}{
		{name: "intact", record: -1},
		{name: "a sequence raised in the middle", record: 14, seqXor: 1 << 20, refused: true},
		{name: "a sequence lowered in the middle", record: 14, seqXor: 1 << 2, refused: true}, // 15 → 11
		{name: "the first sequence raised", record: 0, seqXor: 1 << 30, refused: true},
		{name: "the last sequence raised", record: n - 1, seqXor: 1 << 40, refused: true},
		{name: "the last sequence raised a little", record: n - 1, seqXor: 1 << 6},        // 30 → 94: a small hole
		{name: "the last sequence lowered", record: n - 1, seqXor: 1 << 3, refused: true}, // 30 → 22: below its predecessor
		{name: "a message damaged, its sequence intact", record: 14, dataXor: 0x01},
		{name: "the last message damaged, its sequence intact", record: n - 1, dataXor: 0x01},
		{name: "a torn tail", record: -1, cut: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, nc := syncedHistory(t, n)
			nc.Close()
			srv.Stop()
			require.NoError(t, os.Remove(filepath.Join(srv.Dir(), "durable-"+events.StreamName)))
			path := filepath.Join(msgsDir(srv), "1.blk")
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			offs := recordOffsets(t, b)
			require.Len(t, offs, n)
			at := -1
			if tc.record >= 0 {
				at = offs[tc.record]
				seq := binary.LittleEndian.Uint64(b[at+4:])
				require.Equal(t, uint64(tc.record+1), seq)
				binary.LittleEndian.PutUint64(b[at+4:], seq^tc.seqXor)
				end := len(b)
				if tc.record+1 < n {
					end = offs[tc.record+1]
				}
				b[end-9] ^= tc.dataXor // the message's last byte, before the checksum
			}
			require.NoError(t, os.WriteFile(path, b[:len(b)-tc.cut], 0o600))

			s, err := jsstore.RunServer(jsstore.ServerConfig{Dir: srv.Dir()})
			if !tc.refused {
				require.NoError(t, err)
				s.Shutdown()
				s.WaitForShutdown()
				return
			}
			require.ErrorIs(t, err, jsstore.ErrDataDir)
			assert.Contains(t, err.Error(), fmt.Sprintf("record at byte %d is damaged", at))
			assert.Contains(t, err.Error(), "checksum mismatch")
		})
	}
}

// A message acknowledged and put on disk (at or below the durable mark)
// whose record no longer passes its checksum (a flipped bit in a message)
// is a lost message: the server, its index intact, would count it and fail
// only when it is read. The start refuses it, naming it; past the mark
// (never answered) it is the server's to recover.
func TestRunServer_damagedAcknowledgedMessageIsRefused(t *testing.T) {
	const n = 30
	srv, nc := syncedHistory(t, n)
	nc.Close()
	srv.Stop()
	path := filepath.Join(msgsDir(srv), "1.blk")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	offs := recordOffsets(t, b)
	b[offs[10]-9] ^= 0x01 // the last message byte of record 10 (sequence 10)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	mark := filepath.Join(srv.Dir(), "durable-"+events.StreamName)

	_, err = jsstore.RunServer(jsstore.ServerConfig{Dir: srv.Dir()})
	require.ErrorIs(t, err, jsstore.ErrHistoryLost)
	assert.Contains(t, err.Error(), fmt.Sprintf("record at byte %d (sequence 10", offs[9]))
	// With the mark below it, it was never answered.
	require.NoError(t, os.WriteFile(mark, fmt.Appendf(nil, "%020d\n", 9), 0o600))
	s, err := jsstore.RunServer(jsstore.ServerConfig{Dir: srv.Dir()})
	require.NoError(t, err)
	s.Shutdown()
	s.WaitForShutdown()
}

// A block that passed is not read again while its size and modification
// time hold (a start reads what was written since the last one), and is
// read again once either changes.
func TestRunServer_checkedBlocksAreNotReadAgain(t *testing.T) {
	srv, nc := syncedHistory(t, 30)
	nc.Close()
	srv.Stop()
	dir := srv.Dir()
	s, err := jsstore.RunServer(jsstore.ServerConfig{Dir: dir})
	require.NoError(t, err)
	s.Shutdown()
	s.WaitForShutdown()
	list, err := os.ReadFile(filepath.Join(dir, "checked-blocks"))
	require.NoError(t, err)
	require.Contains(t, string(list), events.StreamName+"/1 ")

	path := filepath.Join(msgsDir(srv), "1.blk")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	offs := recordOffsets(t, b)
	b[offs[10]-9] ^= 0x01 // an acknowledged message damaged
	require.NoError(t, os.WriteFile(path, b, 0o600))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	// Same size and time: passed before, not read (the audit reads it).
	s, err = jsstore.RunServer(jsstore.ServerConfig{Dir: dir})
	require.NoError(t, err)
	s.Shutdown()
	s.WaitForShutdown()
	// Touched: read again, and refused.
	later := fi.ModTime().Add(time.Second)
	require.NoError(t, os.Chtimes(path, later, later))
	_, err = jsstore.RunServer(jsstore.ServerConfig{Dir: dir})
	require.ErrorIs(t, err, jsstore.ErrHistoryLost)
}

// Across block files: the last record of one block and the first of the
// next are judged by each other, also when the first block passed before
// and is not read again.
func TestRunServer_damagedSequenceAcrossBlocks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		which func(blocks []string) (path string, first bool)
		again bool // the blocks passed a start before the damage
	}{
		{"the first block's last record", func(bs []string) (string, bool) { return bs[0], false }, false},
		{"the second block's first record", func(bs []string) (string, bool) { return bs[1], true }, false},
		{"the second block's first record, the first block passed before", func(bs []string) (string, bool) { return bs[1], true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testkit.StartServer(t, jsstore.ServerConfig{})
			nc := srv.Conn("big")
			st := testkit.OpenStore(t, nc, jsstore.Options{})
			subj := siteSubject("s1")
			var last uint64
			data := make([]byte, 256<<10)
			for range 48 { // 12 MiB: more than one block
				seq, err := st.Append(context.Background(), subj, last, data)
				require.NoError(t, err)
				last = seq
			}
			nc.Close()
			srv.Stop()
			if tc.again {
				s, err := jsstore.RunServer(jsstore.ServerConfig{Dir: srv.Dir()})
				require.NoError(t, err)
				s.Shutdown()
				s.WaitForShutdown()
			}
			blocks, err := filepath.Glob(filepath.Join(msgsDir(srv), "*.blk"))
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(blocks), 2)
			slices.Sort(blocks) // 1.blk, 2.blk, … (fewer than ten here)
			path, first := tc.which(blocks)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			offs := recordOffsets(t, b)
			at := offs[len(offs)-1]
			if first {
				at = offs[0]
			}
			seq := binary.LittleEndian.Uint64(b[at+4:])
			binary.LittleEndian.PutUint64(b[at+4:], seq^1<<40)
			require.NoError(t, os.WriteFile(path, b, 0o600))

			_, err = jsstore.RunServer(jsstore.ServerConfig{Dir: srv.Dir()})
			require.ErrorIs(t, err, jsstore.ErrDataDir)
			assert.Contains(t, err.Error(), fmt.Sprintf("%s, record at byte %d is damaged", path, at))
		})
	}
}

// A durable mark that cannot be read stops the start: the checks of what
// was acknowledged would otherwise pass over a loss, as the store's open
// refuses it too.
func TestRunServer_unreadableMarkStops(t *testing.T) {
	srv, nc := syncedHistory(t, 3)
	nc.Close()
	srv.Stop()
	mark := filepath.Join(srv.Dir(), "durable-"+events.StreamName)
	require.NoError(t, os.Remove(mark))
	require.NoError(t, os.Mkdir(mark, 0o700))
	_, err := jsstore.RunServer(jsstore.ServerConfig{Dir: srv.Dir()})
	require.ErrorIs(t, err, jsstore.ErrDataDir)
	assert.Contains(t, err.Error(), "durable mark")
}
