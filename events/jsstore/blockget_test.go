package jsstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// blockFixture stores about 20 MiB of messages of varied sizes (three 8 MiB
// blocks and the start of a fourth) over several subjects, some of them in
// an atomic batch (stored with headers), and opens a second store on them
// that reads from the block files.
func blockFixture(t *testing.T) (srv *testkit.Server, files *jsstore.Store, want []readMsg) {
	t.Helper()
	srv = testkit.StartServer(t, jsstore.ServerConfig{})
	st := testkit.OpenStore(t, srv.Conn("writer"), jsstore.Options{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	total := 0
	for i := 0; total < 20<<20; i++ {
		subj := siteSubject(fmt.Sprint("s", i%7))
		data := make([]byte, 200+rng.IntN(40<<10))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if i%50 == 49 {
			batch := []jsstore.Pending{{Subject: siteSubject(fmt.Sprint("b", i)), Data: data}, {Subject: siteSubject(fmt.Sprint("c", i)), Data: data[:100]}}
			seqs, _, err := jsstore.PublishBatch(st, batch)
			require.NoError(t, err)
			for k, p := range batch {
				want = append(want, readMsg{seqs[k], p.Subject, string(p.Data)})
			}
		} else {
			last, err := st.LastFor(ctx, subj)
			require.NoError(t, err)
			seq, err := st.Append(ctx, subj, last, data)
			require.NoError(t, err)
			want = append(want, readMsg{seq, subj, string(data)})
		}
		total += len(data)
	}
	files = testkit.OpenStore(t, srv.Conn("reader"), jsstore.Options{Files: srv.Dir()})
	return srv, files, want
}

func TestStore_getReadsSealedBlocksFromFiles(t *testing.T) {
	_, st, want := blockFixture(t)
	ctx := context.Background()
	for _, i := range rand.Perm(len(want)) {
		w := want[i]
		m, err := st.Get(ctx, w.seq)
		require.NoError(t, err)
		require.Equal(t, w, readMsg{m.Seq, m.Subject, string(m.Data)}, "sequence %d", w.seq)
	}
	blocks, broken := jsstore.FilesState(st)
	assert.False(t, broken)
	assert.GreaterOrEqual(t, blocks, 2, "the sealed blocks are indexed and read")
	_, err := st.Get(ctx, want[len(want)-1].seq+1)
	assert.Error(t, err, "past the end: the server's answer")
}

// A block that does not hold what the index says (rewritten, damaged) is
// never served from the files: the read goes to the server, and so does
// every later one.
func TestStore_getFromDamagedBlockAsksTheServer(t *testing.T) {
	srv, st, want := blockFixture(t)
	ctx := context.Background()
	m, err := st.Get(ctx, want[0].seq)
	require.NoError(t, err)
	require.Equal(t, want[0].data, string(m.Data))
	// Damage the first message's data in the first block.
	path := filepath.Join(jsstore.MsgsDir(srv.Dir(), events.StreamName), "1.blk")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("XXXXXXXXXXXXXXXX"), int64(indexOf(t, b, want[0].data[:64])+16))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	m, err = st.Get(ctx, want[0].seq)
	if err == nil {
		assert.NotContains(t, string(m.Data), "XXXXXXXXXXXXXXXX", "damaged bytes are never served")
	}
	_, broken := jsstore.FilesState(st)
	assert.True(t, broken, "the files are no longer used")
	w := want[len(want)/2]
	m, err = st.Get(ctx, w.seq)
	require.NoError(t, err)
	assert.Equal(t, w.data, string(m.Data), "the server answers")
}

// The files serve exactly what the server serves.
func TestStore_getFromFilesMatchesServer(t *testing.T) {
	_, st, want := blockFixture(t)
	ctx := context.Background()
	for _, w := range want[:200] {
		a, err := st.Get(ctx, w.seq)
		require.NoError(t, err)
		b, err := jsstore.ServerGet(ctx, st, w.seq)
		require.NoError(t, err)
		assert.Equal(t, b, a)
	}
}
