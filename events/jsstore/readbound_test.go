package jsstore_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// A server cuts a client off as a slow consumer once more than its
// max_pending (64 MiB by default) waits to be written to it. Reads of large
// messages (one site's group commit can be tens of KiB) must stay under
// that however long the history: a pull counted in messages alone went past
// it, the connection was lost and the read failed. Here the server's limit
// is 1 MiB and each streaming pull a quarter of it.
func TestStore_readStaysUnderMaxPending(t *testing.T) {
	const maxPending = 1 << 20
	srv, err := server.NewServer(&server.Options{
		JetStream:  true,
		StoreDir:   t.TempDir(),
		DontListen: true,
		NoLog:      true,
		NoSigs:     true,
		MaxPending: maxPending,
	})
	require.NoError(t, err)
	go srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second))
	t.Cleanup(srv.Shutdown)
	nc, err := jsstore.ConnectInProcess(srv, "readbound")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	st := testkit.OpenStore(t, nc, jsstore.Options{})
	jsstore.SetReadBytes(st, maxPending/4)

	// 2,000 messages of 2 KiB: 4 MiB, the default first fetch (256
	// messages, 512 KiB) under the limit, the rest streamed.
	ctx := context.Background()
	const n, size = 2000, 2 << 10
	subj := siteSubject("big")
	var last uint64
	for i := range n {
		last, err = st.Append(ctx, subj, last, bytes.Repeat([]byte{byte('a' + i%26)}, size))
		require.NoError(t, err)
	}
	read := func(name string, from uint64, follow bool) {
		var got []uint64
		fn := func(m events.Msg) {
			require.Len(t, m.Data, size)
			got = append(got, m.Seq)
		}
		if follow {
			fctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- st.Follow(fctx, subj, from, func(m events.Msg) {
					fn(m)
					if m.Seq == n {
						cancel()
					}
				})
			}()
			select {
			case err := <-done:
				require.NoError(t, err, name)
			case <-time.After(30 * time.Second):
				cancel()
				t.Fatalf("%s: followed %d messages of %d", name, len(got), n)
			}
		} else {
			require.NoError(t, st.Read(ctx, events.SitePrefix+">", from, func(m events.Msg) error { fn(m); return nil }), name)
		}
		require.Len(t, got, n-int(from)+1, name)
		for i, seq := range got {
			require.Equal(t, from+uint64(i), seq, "%s: every message once, in order", name)
		}
		require.True(t, nc.IsConnected(), "%s did not cost the connection", name)
	}
	read("read", 1, false)
	read("follow", 1, true)
}
