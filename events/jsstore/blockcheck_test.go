package jsstore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gateway/events"
	"gateway/events/jsstore"
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
// server's and the audit's to find, and the start goes on.
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
		{name: "a message damaged, its sequence intact", record: 14, dataXor: 0x01},
		{name: "a torn tail", record: -1, cut: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, nc := syncedHistory(t, n)
			nc.Close()
			srv.Stop()
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

// A message acknowledged and put on disk whose record no longer passes its
// checksum (a flipped bit in a message) is a lost message: the server, its
// index intact, would count it and fail only when it is read. The open
// with the durable mark refuses it, naming it; past the mark (never
// answered) it is the server's to recover.
func TestOpen_damagedAcknowledgedMessageIsRefused(t *testing.T) {
	ctx := context.Background()
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
	srv.Restart()
	nc = srv.Conn("after")

	_, err = jsstore.Open(ctx, nc, jsstore.Options{Files: srv.Dir(), SyncFiles: true})
	require.ErrorIs(t, err, jsstore.ErrHistoryLost)
	assert.Contains(t, err.Error(), fmt.Sprintf("record at byte %d (sequence 10", offs[9]))
	// Without the mark nothing says it was acknowledged.
	_, err = jsstore.Open(ctx, nc, jsstore.Options{})
	require.NoError(t, err)
	// With the mark below it, it was never answered.
	require.NoError(t, os.WriteFile(filepath.Join(srv.Dir(), "durable-"+events.StreamName), fmt.Appendf(nil, "%020d\n", 9), 0o600))
	_, err = jsstore.Open(ctx, nc, jsstore.Options{Files: srv.Dir(), SyncFiles: true})
	require.NoError(t, err)
}
