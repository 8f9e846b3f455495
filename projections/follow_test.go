package projections

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// appendMore stores n messages on a new subject of their own, as another
// gateway's writes would reach the projector while it follows.
func appendMore(t testing.TB, st events.Store, n int) uint64 {
	t.Helper()
	subject, err := events.SiteSubject(ids.NewSite())
	require.NoError(t, err)
	var last, seq uint64
	for i := range n {
		data, _, err := events.Seal([32]byte{byte(i)}, []events.Event{{Name: events.SiteSandboxName, Time: 1, Actor: "admin",
			Payload: &events.SiteSandbox{Sandbox: i%2 == 0}}})
		require.NoError(t, err)
		seq, err = st.Append(context.Background(), subject, last, data)
		require.NoError(t, err)
		last = seq
	}
	return seq
}

// follow runs d.Follow until the test ends, and returns its result.
func follow(t *testing.T, d *DB, st events.Store) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Follow(ctx, st) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return done
}

// TestDB_follow: the projector applies the history and every message
// stored later, and WaitFor returns once a sequence is applied; the model
// equals a replay of the same messages in one batch. After a restart of
// the store's server (a store error) it follows again without losing or
// repeating a message.
func TestDB_follow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		// flaky: the store's follow fails once, after some messages.
		flaky bool
	}{
		{"running store", false, false},
		{"store restarted while following", true, false},
		{"store error while following", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := testkit.NewLog(t, slog.LevelInfo)
			srv := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1"})
			nc, err := jsstore.Connect(srv.URL(), "projections")
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			st := testkit.OpenStore(t, nc, jsstore.Options{})
			msgs := history(t, st, 300)
			d, err := Open(t.TempDir(), log.Logger, fold{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Close() })
			var fst events.Store = st
			if tc.flaky {
				fst = &flaky{Store: st, failAfter: 100}
			}
			follow(t, d, fst)
			ctx := context.Background()
			require.NoError(t, d.WaitFor(ctx, msgs[len(msgs)-1].Seq))
			assert.Equal(t, replay(t, msgs), dump(t, d, "fold"))

			if tc.restart {
				srv.Restart()
				testkit.Eventually(t, testkit.WaitFor, func() bool {
					_, err := st.LastSeq(ctx)
					return err == nil
				}, "the store answers after the restart")
			}
			last := appendMore(t, st, 40)
			require.NoError(t, d.WaitFor(ctx, last))
			assert.Equal(t, last, d.Checkpoint("fold"))
			assert.Equal(t, replay(t, readAll(t, st, 1)), dump(t, d, "fold"))
			assert.NoError(t, d.Err())
			if tc.flaky {
				assert.Contains(t, log.String(), "read models' follower stopped; restarting")
			}
		})
	}
}

// TestDB_fault: a model that fails on a message stops the projector,
// whether it catches up or follows: Err and WaitFor say so, the model stays
// at a checkpoint below the message with exactly the messages before it,
// the failure is logged naming model and sequence, and a process that
// starts again resumes from the checkpoint and loses nothing.
func TestDB_fault(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, d *DB, st events.Store) error
	}{
		{"catch-up", func(ctx context.Context, d *DB, st events.Store) error { return d.CatchUp(ctx, st) }},
		{"follow", func(ctx context.Context, d *DB, st events.Store) error { return d.Follow(ctx, st) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := testkit.NewLog(t, slog.LevelInfo)
			log.ExpectErrors("model=fold seq=150")
			st, _ := newStore(t)
			msgs := history(t, st, 300)
			dir := t.TempDir()
			d, err := Open(dir, log.Logger, fold{failAt: 150})
			require.NoError(t, err)
			d.chunkMsgs = 16
			ctx := context.Background()
			err = tc.run(ctx, d, st)
			var me *ModelError
			require.ErrorAs(t, err, &me)
			assert.Equal(t, "fold", me.Model)
			assert.Equal(t, uint64(150), me.Seq)
			assert.ErrorIs(t, d.Err(), err)
			assert.Error(t, d.WaitFor(ctx, msgs[len(msgs)-1].Seq), "a wait does not outlast the fault")
			cp := d.Checkpoint("fold")
			assert.Less(t, cp, uint64(150))
			assert.Equal(t, replay(t, msgs[:cp]), dump(t, d, "fold"))
			assert.Contains(t, log.String(), "model=fold seq=150")
			require.NoError(t, d.Close())

			d, err = Open(dir, log.Logger, fold{})
			require.NoError(t, err)
			defer d.Close()
			assert.Equal(t, cp, d.Checkpoint("fold"))
			require.NoError(t, d.CatchUp(ctx, st))
			assert.Equal(t, replay(t, msgs), dump(t, d, "fold"))
		})
	}
}

// TestDB_catchUp: catch-up in chunks of any size ends at the stream's last
// sequence with the model a replay of the whole history makes, and a second
// catch-up has nothing to do.
func TestDB_catchUp(t *testing.T) {
	st, _ := newStore(t)
	msgs := history(t, st, 500)
	want := replay(t, msgs)
	for _, chunk := range []int{catchUpMsgs, 1, 7, 64, -1} {
		d, err := Open(t.TempDir(), slog.Default(), fold{})
		require.NoError(t, err)
		d.chunkMsgs = chunk
		if chunk == -1 {
			// Chunks of every message, each committed in batches of
			// one message: the batch's writes pass the bound at once.
			d.chunkMsgs, d.batchBytes = catchUpMsgs, 1
		}
		require.NoError(t, d.CatchUp(context.Background(), st))
		assert.Equal(t, msgs[len(msgs)-1].Seq, d.Applied(), "chunk %d", chunk)
		assert.Equal(t, want, dump(t, d, "fold"), "chunk %d", chunk)
		require.NoError(t, d.CatchUp(context.Background(), st))
		assert.Equal(t, want, dump(t, d, "fold"), "chunk %d", chunk)
		require.NoError(t, d.Close())
	}
}

// TestDB_noModels: without models the DB neither reads nor follows the
// stream, and every wait is over at once.
func TestDB_noModels(t *testing.T) {
	d, err := Open(t.TempDir(), slog.Default())
	require.NoError(t, err)
	defer d.Close()
	// A store that must not be asked anything.
	var st events.Store = refusing{}
	require.NoError(t, d.CatchUp(context.Background(), st))
	require.NoError(t, d.WaitFor(context.Background(), 1<<40))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, d.Follow(ctx, st))
}

// refusing is a store that fails every call.
type refusing struct{ events.Store }

func (refusing) LastSeq(context.Context) (uint64, error) { return 0, errors.New("asked") }
func (refusing) Read(context.Context, string, uint64, func(events.Msg) error) error {
	return errors.New("asked")
}
func (refusing) Follow(context.Context, string, uint64, func(events.Msg)) error {
	return errors.New("asked")
}

// flaky is a store whose first Follow fails after failAfter messages, as a
// lost connection does.
type flaky struct {
	events.Store
	failAfter int
	failed    atomic.Bool
}

func (f *flaky) Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error {
	if f.failed.Load() {
		return f.Store.Follow(ctx, filter, from, fn)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := 0
	err := f.Store.Follow(fctx, filter, from, func(m events.Msg) {
		if n == f.failAfter {
			cancel()
			return
		}
		n++
		fn(m)
	})
	if ctx.Err() != nil {
		return err
	}
	f.failed.Store(true)
	return errors.New("connection lost")
}
