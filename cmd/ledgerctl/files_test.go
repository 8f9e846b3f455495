package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// The offline audit reads the message blocks; where they cannot be read
// (here a copy damaged halfway), the server delivers the rest, and the
// audit sees every message exactly once, in order, as the server has them.
func TestFilesFirst_serverTakesOver(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	st := srv.Store("files")
	ctx := context.Background()
	_, err := audit.Generate(ctx, st, audit.GenOptions{Events: 2000, Sites: 3, Seed: 5})
	require.NoError(t, err)
	last, err := st.LastSeq(ctx)
	require.NoError(t, err)

	copyDir := t.TempDir()
	require.NoError(t, os.CopyFS(copyDir, os.DirFS(srv.Dir())))
	blocks, err := filepath.Glob(filepath.Join(copyDir, "jetstream", "$G", "streams", events.StreamName, "msgs", "*.blk"))
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	b, err := os.ReadFile(blocks[0])
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(blocks[0], b, 0o600))

	for _, c := range []struct {
		name, dir string
		warned    bool
	}{
		{"intact files", srv.Dir(), false},
		{"damaged files", copyDir, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var warn bytes.Buffer
			src := &filesFirst{Store: st, dir: c.dir, warn: &warn}
			var seqs []uint64
			var data [][]byte
			require.NoError(t, src.Read(ctx, events.SubjectPrefix+">", 1, func(m events.Msg) error {
				seqs = append(seqs, m.Seq)
				data = append(data, m.Data)
				return nil
			}))
			require.Len(t, seqs, int(last))
			for i, seq := range seqs {
				require.Equal(t, uint64(i+1), seq)
			}
			var i int
			require.NoError(t, st.Read(ctx, events.SubjectPrefix+">", 1, func(m events.Msg) error {
				require.Equal(t, m.Data, data[i], "message %d as the server has it", m.Seq)
				i++
				return nil
			}))
			require.Equal(t, c.warned, strings.Contains(warn.String(), "reading through the server from seq"), warn.String())
		})
	}
}
