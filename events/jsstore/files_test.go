package jsstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

type readMsg struct {
	seq     uint64
	subject string
	data    string
}

// filesFixture is a ledger of n messages over three subjects, the last
// stored as a batch of several subjects, on a server of its own.
func filesFixture(t *testing.T, n int) (*testkit.Server, *jsstore.Store, []readMsg) {
	t.Helper()
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	st := srv.Store("files")
	ctx := context.Background()
	var want []readMsg
	for i := range n {
		subj := siteSubject(fmt.Sprint("s", i%3))
		last, err := st.LastFor(ctx, subj)
		require.NoError(t, err)
		data := fmt.Sprintf("message %d %s", i, string(make([]byte, i%50)))
		seq, err := st.Append(ctx, subj, last, []byte(data))
		require.NoError(t, err)
		want = append(want, readMsg{seq, subj, data})
	}
	// A batch of appends of several subjects is stored with headers.
	var batch []jsstore.Pending
	for i := range 3 {
		subj := siteSubject(fmt.Sprint("b", i))
		batch = append(batch, jsstore.Pending{Subject: subj, Data: []byte("batched " + subj)})
	}
	seqs, _, err := jsstore.PublishBatch(st, batch)
	require.NoError(t, err)
	for i, p := range batch {
		want = append(want, readMsg{seqs[i], p.Subject, string(p.Data)})
	}
	return srv, st, want
}

func readFiles(t *testing.T, st *jsstore.Store, dir string, from uint64) ([]readMsg, uint64, error) {
	t.Helper()
	var got []readMsg
	next, err := st.ReadFiles(context.Background(), dir, from, func(m events.Msg) error {
		got = append(got, readMsg{m.Seq, m.Subject, string(m.Data)})
		return nil
	})
	return got, next, err
}

// The files give exactly what the server delivers: every message, in order,
// with its subject and data, from any sequence on.
func TestStore_readFiles(t *testing.T) {
	srv, st, want := filesFixture(t, 300)
	var viaServer []readMsg
	require.NoError(t, st.Read(context.Background(), events.SubjectPrefix+">", 1, func(m events.Msg) error {
		viaServer = append(viaServer, readMsg{m.Seq, m.Subject, string(m.Data)})
		return nil
	}))
	require.Equal(t, want, viaServer)
	for _, from := range []uint64{0, 1, 2, 150, uint64(len(want)), uint64(len(want)) + 1} {
		got, next, err := readFiles(t, st, srv.Dir(), from)
		require.NoError(t, err, "from %d", from)
		require.Equal(t, uint64(len(want))+1, next)
		require.Equal(t, append([]readMsg(nil), want[min(max(from, 1)-1, uint64(len(want))):]...), got, "from %d", from)
	}
}

// copyStore copies the server's directory (the server keeps running on its
// own), so that a test can damage the copy's message blocks.
func copyStore(t *testing.T, dir string) (copyDir string, block string) {
	t.Helper()
	copyDir = t.TempDir()
	require.NoError(t, os.CopyFS(copyDir, os.DirFS(dir)))
	blocks, err := filepath.Glob(filepath.Join(jsstore.MsgsDir(copyDir, events.StreamName), "*.blk"))
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	return copyDir, blocks[0]
}

// A record that is not as written is never delivered: the read stops
// before it with ErrFilesUnusable, and says where the server must take
// over.
func TestStore_readFilesStopsAtDamage(t *testing.T) {
	srv, st, want := filesFixture(t, 100)
	for _, c := range []struct {
		name   string
		damage func(b []byte, at int) []byte
		next   uint64 // first sequence not delivered
	}{
		{"a flipped byte in message 40's data", func(b []byte, at int) []byte { b[at] ^= 0x20; return b }, 40},
		{"the files cut short in message 40", func(b []byte, at int) []byte { return b[:at] }, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, blk := copyStore(t, srv.Dir())
			b, err := os.ReadFile(blk)
			require.NoError(t, err)
			at := indexOf(t, b, want[39].data)
			require.NoError(t, os.WriteFile(blk, c.damage(b, at), 0o600))
			got, next, err := readFiles(t, st, dir, 1)
			require.ErrorIs(t, err, jsstore.ErrFilesUnusable)
			require.Equal(t, c.next, next)
			require.Equal(t, want[:c.next-1], got, "everything before the damage, checked")
		})
	}
}

func indexOf(t *testing.T, b []byte, s string) int {
	t.Helper()
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	t.Fatalf("%q not in the block", s)
	return 0
}

// Streams the files cannot be read from directly are refused before any
// message is delivered: compressed, or with a removed message.
func TestStore_readFilesRefusesOtherShapes(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	testkit.OpenStore(t, srv.Conn("ledger"), jsstore.Options{}) // the snapshot bucket
	nc := srv.Conn("shapes")
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		cfg    jetstream.StreamConfig
		delete bool
	}{
		{"compressed", jetstream.StreamConfig{Name: "S2", Subjects: []string{"s2.>"}, Compression: jetstream.S2Compression}, false},
		{"a message removed", jetstream.StreamConfig{Name: "DEL", Subjects: []string{"del.>"}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := js.CreateStream(ctx, c.cfg)
			require.NoError(t, err)
			for i := range 5 {
				_, err := js.Publish(ctx, fmt.Sprintf("%s.x", c.cfg.Subjects[0][:len(c.cfg.Subjects[0])-2]), []byte(fmt.Sprint(i)))
				require.NoError(t, err)
			}
			if c.delete {
				require.NoError(t, s.DeleteMsg(ctx, 3))
			}
			st, err := jsstore.OpenExisting(ctx, nc, jsstore.Options{Stream: c.cfg.Name})
			require.NoError(t, err)
			got, next, err := readFiles(t, st, srv.Dir(), 1)
			require.ErrorIs(t, err, jsstore.ErrFilesUnusable)
			require.Equal(t, uint64(1), next)
			require.Empty(t, got)
		})
	}
}
