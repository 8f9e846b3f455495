package jsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gateway/events"
)

func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	srv, err := RunServer(ServerConfig{Dir: dir, SyncAlways: true})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := ConnectInProcess(srv, "test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	st, err := Open(context.Background(), nc, Options{})
	require.NoError(t, err)
	return st, dir
}

func TestStore_appendExpectedSequence(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	subj := siteSubject("a")

	s1, err := st.Append(ctx, subj, 0, []byte("one"))
	require.NoError(t, err)
	_, err = st.Append(ctx, subj, 0, []byte("again at zero"))
	assert.ErrorIs(t, err, events.ErrConflict, "subject is no longer empty")

	// Another subject's messages do not disturb this one's expectation.
	_, err = st.Append(ctx, siteSubject("b"), 0, []byte("other"))
	require.NoError(t, err)
	s2, err := st.Append(ctx, subj, s1, []byte("two"))
	require.NoError(t, err)
	assert.Greater(t, s2, s1)
	_, err = st.Append(ctx, subj, s1, []byte("stale"))
	assert.ErrorIs(t, err, events.ErrConflict)

	last, err := st.LastFor(ctx, subj)
	require.NoError(t, err)
	assert.Equal(t, s2, last)
	none, err := st.LastFor(ctx, siteSubject("nobody"))
	require.NoError(t, err)
	assert.Zero(t, none)

	m, err := st.Get(ctx, s2)
	require.NoError(t, err)
	assert.Equal(t, "two", string(m.Data))
	n, err := st.Next(ctx, subj, s1+1)
	require.NoError(t, err)
	assert.Equal(t, s2, n.Seq)
	_, err = st.Next(ctx, subj, s2+1)
	assert.ErrorIs(t, err, events.ErrNotFound)
	_, err = st.Get(ctx, 999)
	assert.ErrorIs(t, err, events.ErrNotFound)
}

func TestStore_concurrentAppendsOneWinner(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	subj := siteSubject("race")
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := st.Append(ctx, subj, 0, []byte(fmt.Sprint(i)))
			if err == nil {
				wins.Add(1)
			} else {
				assert.ErrorIs(t, err, events.ErrConflict)
			}
		}(i)
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load())
}

func TestStore_readAndFollow(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	var prev uint64
	for i := 0; i < 2500; i++ {
		subj := siteSubject(fmt.Sprint("s", i%3))
		last, err := st.LastFor(ctx, subj)
		require.NoError(t, err)
		prev, err = st.Append(ctx, subj, last, []byte(fmt.Sprint(i)))
		require.NoError(t, err)
	}
	for _, batch := range []int{0, 7, 1000} { // default; crossing to the streaming read
		st.readBatch = batch
		var got []uint64
		require.NoError(t, st.Read(ctx, events.SitePrefix+">", 1, func(m events.Msg) error {
			got = append(got, m.Seq)
			return nil
		}))
		require.Len(t, got, 2500, "batch %d", batch)
		for i, seq := range got {
			require.Equal(t, uint64(i+1), seq, "batch %d: every message once, in order", batch)
		}
	}
	st.readBatch = 7

	var one int
	require.NoError(t, st.Read(ctx, siteSubject("s1"), 100, func(m events.Msg) error {
		assert.Equal(t, siteSubject("s1"), m.Subject)
		one++
		return nil
	}))
	want := 0
	for i := 0; i < 2500; i++ {
		if i%3 == 1 && uint64(i+1) >= 100 { // seq i+1 on an empty stream
			want++
		}
	}
	assert.Equal(t, want, one)

	// A callback's error ends the read, on the streaming read too.
	stopErr := errors.New("stop")
	var n int
	err := st.Read(ctx, events.SitePrefix+">", 1, func(events.Msg) error {
		if n++; n == 20 {
			return stopErr
		}
		return nil
	})
	require.ErrorIs(t, err, stopErr)
	assert.Equal(t, 20, n)

	var empty int
	require.NoError(t, st.Read(ctx, siteSubject("none"), 1, func(events.Msg) error { empty++; return nil }))
	assert.Zero(t, empty)

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(chan uint64, 10)
	go func() {
		_ = st.Follow(fctx, events.SubjectPrefix+">", prev, func(m events.Msg) { seen <- m.Seq })
	}()
	assert.Equal(t, prev, <-seen)
	next, err := st.Append(ctx, events.CatalogSubject, 0, []byte("x"))
	require.NoError(t, err)
	select {
	case s := <-seen:
		assert.Equal(t, next, s)
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not deliver the new message")
	}
}

func TestStore_snapshots(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	_, _, err := st.LoadSnapshot(ctx, "site-a")
	assert.ErrorIs(t, err, events.ErrNotFound)

	big := make([]byte, 3<<20) // larger than one chunk and one message
	for i := range big {
		big[i] = byte(i)
	}
	require.NoError(t, st.SaveSnapshot(ctx, "site-a", 41, []byte("old")))
	require.NoError(t, st.SaveSnapshot(ctx, "site-a", 42, big))
	seq, data, err := st.LoadSnapshot(ctx, "site-a")
	require.NoError(t, err)
	assert.Equal(t, uint64(42), seq)
	assert.Equal(t, big, data)
	names, err := st.ListSnapshots(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"site-a"}, names)
}

func TestStore_survivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() (*Store, func()) {
		srv, err := RunServer(ServerConfig{Dir: dir, SyncAlways: true})
		require.NoError(t, err)
		nc, err := ConnectInProcess(srv, "test")
		require.NoError(t, err)
		st, err := Open(ctx, nc, Options{})
		require.NoError(t, err)
		return st, func() { nc.Close(); srv.Shutdown(); srv.WaitForShutdown() }
	}
	st, stop := open()
	seq, err := st.Append(ctx, siteSubject("a"), 0, []byte("kept"))
	require.NoError(t, err)
	stop()
	st, stop = open()
	defer stop()
	m, err := st.Get(ctx, seq)
	require.NoError(t, err)
	assert.Equal(t, "kept", string(m.Data))
	_, err = st.Append(ctx, siteSubject("a"), 0, []byte("dup"))
	assert.ErrorIs(t, err, events.ErrConflict)
}

// TestRetriedAppendConflictsWithItself shows what a writer sees when an
// append it did not hear back from was stored: appending the same bytes at
// the same expected sequence again is a conflict, and the message at the
// next sequence is its own (the ledger settles unknown outcomes this way).
func TestRetriedAppendConflictsWithItself(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	subj := siteSubject("settle")
	s1, err := st.Append(ctx, subj, 0, []byte("once"))
	require.NoError(t, err)
	_, err = st.Append(ctx, subj, 0, []byte("once"))
	require.ErrorIs(t, err, events.ErrConflict)
	m, err := st.Next(ctx, subj, 1)
	require.NoError(t, err)
	assert.Equal(t, s1, m.Seq)
	assert.Equal(t, "once", string(m.Data))
}

// siteSubject is a site's subject, as events.SiteSubject makes it.
func siteSubject(id string) string { return events.SitePrefix + id }
