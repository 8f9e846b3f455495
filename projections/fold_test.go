package projections

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// fold is a toy model that depends on every message and on their order:
// per subject, the number of messages and a running hash of (seq,
// subject); per event name, the number of events. A message skipped,
// applied twice or out of order shows in its keys.
type fold struct {
	// failAt, when set, makes Apply fail for that sequence.
	failAt uint64
}

func (fold) Name() string    { return "fold" }
func (fold) Version() uint32 { return 1 }

func (f fold) Apply(b *Batch, m events.Msg, evs []events.Event) error {
	if f.failAt != 0 && m.Seq == f.failAt {
		return fmt.Errorf("refused on purpose")
	}
	key := []byte("s\x00" + m.Subject)
	v, _, err := b.Get(key)
	if err != nil {
		return err
	}
	var n uint64
	var h [32]byte
	if len(v) == 40 {
		n = binary.BigEndian.Uint64(v)
		copy(h[:], v[8:])
	}
	h = sha256.Sum256(binary.BigEndian.AppendUint64(append(h[:], m.Subject...), m.Seq))
	if err := b.Set(key, append(binary.BigEndian.AppendUint64(nil, n+1), h[:]...)); err != nil {
		return err
	}
	for _, e := range evs {
		key := []byte("e\x00" + e.Name)
		v, _, err := b.Get(key)
		if err != nil {
			return err
		}
		var c uint64
		if len(v) == 8 {
			c = binary.BigEndian.Uint64(v)
		}
		if err := b.Set(key, binary.BigEndian.AppendUint64(nil, c+1)); err != nil {
			return err
		}
	}
	return nil
}

// history writes a generated history of about n events, one a message,
// into st and returns its messages in stream order.
func history(t testing.TB, st *jsstore.Store, n int) []events.Msg {
	t.Helper()
	ctx := context.Background()
	_, err := audit.Generate(ctx, st, audit.GenOptions{Events: n, Sites: 5, Batch: 1, Seed: 7})
	require.NoError(t, err)
	return readAll(t, st, 1)
}

func readAll(t testing.TB, st events.Store, from uint64) []events.Msg {
	t.Helper()
	var msgs []events.Msg
	require.NoError(t, st.Read(context.Background(), events.SubjectPrefix+">", from, func(m events.Msg) error {
		msgs = append(msgs, m)
		return nil
	}))
	for i, m := range msgs {
		require.Equal(t, from+uint64(i), m.Seq, "the stream's sequences follow one another")
	}
	return msgs
}

// dump is every key of model name, with its value.
func dump(t testing.TB, d *DB, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, d.View(name).Scan(nil, nil, false, func(k, v []byte) bool {
		out[string(k)] = string(v)
		return true
	}))
	return out
}

// replay is the fold model of a fresh DB that applied exactly msgs.
func replay(t testing.TB, msgs []events.Msg) map[string]string {
	t.Helper()
	d, err := Open(t.TempDir(), slog.Default(), fold{})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.ApplyMessages(msgs))
	return dump(t, d, "fold")
}

// newStore is an embedded server's ledger store that a child process can
// reach over TCP too.
func newStore(t testing.TB) (*jsstore.Store, *testkit.Server) {
	t.Helper()
	srv := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1"})
	return testkit.OpenStore(t, srv.Conn("test"), jsstore.Options{}), srv
}
