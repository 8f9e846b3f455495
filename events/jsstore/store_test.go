package jsstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/events/storetest"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// The JetStream store passes the store contract, on a server of its own for
// every case.
func TestStore_contract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store { return testkit.NewStore(t) })
}

// The contract again with the server fsyncing every message (a server with
// a port for other processes, or an external one) instead of the store.
func TestStore_contractServerFsyncs(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		return testkit.StartServer(t, jsstore.ServerConfig{SyncAlways: true}).Store("test")
	})
}

func TestStore_readAndFollow(t *testing.T) {
	ctx := context.Background()
	st := testkit.NewStore(t)
	var prev uint64
	for i := 0; i < 2500; i++ {
		subj := siteSubject(fmt.Sprint("s", i%3))
		last, err := st.LastFor(ctx, subj)
		require.NoError(t, err)
		prev, err = st.Append(ctx, subj, last, []byte(fmt.Sprint(i)))
		require.NoError(t, err)
	}
	for _, batch := range []int{0, 7, 1000} { // default; crossing to the streaming read
		jsstore.SetReadBatch(st, batch)
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
	jsstore.SetReadBatch(st, 7)

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
	st := testkit.NewStore(t)
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
	srv := testkit.StartServer(t, jsstore.ServerConfig{SyncAlways: true})
	nc := srv.Conn("before")
	st := testkit.OpenStore(t, nc, jsstore.Options{})
	seq, err := st.Append(ctx, siteSubject("a"), 0, []byte("kept"))
	require.NoError(t, err)
	nc.Close()
	srv.Restart()
	st = srv.Store("after")
	m, err := st.Get(ctx, seq)
	require.NoError(t, err)
	assert.Equal(t, "kept", string(m.Data))
	_, err = st.Append(ctx, siteSubject("a"), 0, []byte("dup"))
	assert.ErrorIs(t, err, events.ErrConflict)
}

// siteSubject is a site's subject, as events.SiteSubject makes it.
func siteSubject(id string) string { return events.SitePrefix + id }

// clusterStores opens the ledger stream with three replicas on a test
// cluster, and a store on each node's connection, as gateways connected to
// different servers: the first is the one connected to the stream leader.
func clusterStores(t *testing.T) (*testkit.Cluster, []*jsstore.Store) {
	t.Helper()
	c := testkit.StartCluster(t, testkit.ClusterConfig{SyncAlways: true})
	c.WaitReady()
	testkit.OpenStore(t, c.Nodes[0].Conn("open"), jsstore.Options{Replicas: 3})
	leader := c.StreamLeader()
	stores := []*jsstore.Store{testkit.OpenStore(t, leader.Conn("leader"), jsstore.Options{Replicas: 3})}
	for _, n := range c.Nodes {
		if n != leader {
			stores = append(stores, testkit.OpenStore(t, n.Conn("follower-"+n.Name), jsstore.Options{Replicas: 3}))
		}
	}
	return c, stores
}

// A read that starts after an append was acknowledged sees it, whichever
// server the reader is connected to: replicas that have not applied the
// message yet must not answer (docs/ARCHITECTURE.md, "On a replicated
// cluster").
func TestStore_clusterReadYourWrites(t *testing.T) {
	ctx := context.Background()
	_, stores := clusterStores(t)
	writer := stores[0]
	// A loaded machine delays the followers' applying, which is when a
	// follower that answers reads gives stale answers.
	testkit.Busy(t, 4)
	var last uint64
	misses := map[string]int{}
	for i := range 500 {
		subj := siteSubject(fmt.Sprint("ryw", i%5))
		prev, err := writer.LastFor(ctx, subj)
		require.NoError(t, err)
		seq, err := writer.Append(ctx, subj, prev, []byte(fmt.Sprint(i)))
		require.NoError(t, err)
		last = seq
		for _, r := range stores[1:] {
			if got, err := r.LastFor(ctx, subj); err != nil || got != seq {
				misses["LastFor"]++
			}
			if m, err := r.Next(ctx, subj, prev+1); err != nil || m.Seq != seq {
				misses["Next"]++
			}
			if m, err := r.Get(ctx, seq); err != nil || m.Seq != seq {
				misses["Get"]++
			}
			if got, err := r.LastSeq(ctx); err != nil || got < seq {
				misses["LastSeq"]++
			}
		}
	}
	assert.Empty(t, misses, "reads through followers that missed an acknowledged append (of %d)", last)
}

// Snapshots are stored compressed; those stored raw by an older build
// still load, and one that cannot be decoded is ErrCorrupt (the ledger
// then rebuilds from the stream), never a wrong state.
func TestStore_snapshotEncoding(t *testing.T) {
	ctx := context.Background()
	st := testkit.NewStore(t)
	state := bytes.Repeat([]byte("a site's state, about a hundred bytes a transaction; "), 4000)
	require.NoError(t, st.SaveSnapshot(ctx, "site-z", 7, state))
	stored, err := jsstore.SnapshotStoredSize(ctx, st, "site-z")
	require.NoError(t, err)
	assert.Less(t, stored, uint64(len(state))/4, "stored compressed")
	seq, data, err := st.LoadSnapshot(ctx, "site-z")
	require.NoError(t, err)
	assert.Equal(t, uint64(7), seq)
	assert.Equal(t, state, data)

	require.NoError(t, jsstore.PutSnapshotObject(ctx, st, "site-raw", map[string]string{"seq": "9"}, state))
	seq, data, err = st.LoadSnapshot(ctx, "site-raw")
	require.NoError(t, err, "a raw snapshot of an older build")
	assert.Equal(t, uint64(9), seq)
	assert.Equal(t, state, data)

	for name, c := range map[string]struct {
		meta map[string]string
		data []byte
	}{
		"not s2":           {map[string]string{"seq": "3", "enc": "s2"}, state[:100]},
		"unknown encoding": {map[string]string{"seq": "3", "enc": "zstd"}, state[:100]},
		"s2 cut short":     {map[string]string{"seq": "3", "enc": "s2"}, s2Prefix(state)},
		"claims 8 GiB":     {map[string]string{"seq": "3", "enc": "s2"}, []byte{0x80, 0x80, 0x80, 0x80, 0x20, 0x00}},
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, jsstore.PutSnapshotObject(ctx, st, "site-bad", c.meta, c.data))
			_, _, err := st.LoadSnapshot(ctx, "site-bad")
			assert.ErrorIs(t, err, events.ErrCorrupt)
		})
	}
}

// s2Prefix is the first half of data's S2 encoding.
func s2Prefix(data []byte) []byte {
	enc := s2.Encode(nil, data)
	return enc[:len(enc)/2]
}

// TestOpenExisting_withoutSnapshotBucket: snapshots are derived, so a
// read-only opener (ledgerctl) reads a ledger whose bucket is gone as one
// without snapshots, rather than refusing it.
func TestOpenExisting_withoutSnapshotBucket(t *testing.T) {
	ctx := context.Background()
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	st := testkit.OpenStore(t, srv.Conn("gateway"), jsstore.Options{})
	seq, err := st.Append(ctx, "ledger.site.s1", 0, []byte("one"))
	require.NoError(t, err)
	require.NoError(t, st.SaveSnapshot(ctx, "site-s1", seq, []byte("state")))
	js, err := jetstream.New(srv.Conn("admin"))
	require.NoError(t, err)
	require.NoError(t, js.DeleteObjectStore(ctx, "LEDGER_SNAPSHOTS"))

	ro, err := jsstore.OpenExisting(ctx, srv.Conn("reader"), jsstore.Options{})
	require.NoError(t, err)
	names, err := ro.ListSnapshots(ctx)
	require.NoError(t, err)
	assert.Empty(t, names)
	_, _, err = ro.LoadSnapshot(ctx, "site-s1")
	require.ErrorIs(t, err, events.ErrNotFound)
	last, err := ro.LastSeq(ctx)
	require.NoError(t, err)
	assert.Equal(t, seq, last)
	require.ErrorIs(t, ro.SaveSnapshot(ctx, "site-s1", seq, []byte("x")), events.ErrUnavailable)
}

// TestStore_readsLeaveNoConsumers: a read's consumer goes when the read
// ends. The stream holds at most 1,000 consumers, and reads that left
// theirs for the library's five minutes filled it at a few hundred reads a
// second, after which every read failed.
func TestStore_readsLeaveNoConsumers(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	nc := srv.Conn("reads")
	st := testkit.OpenStore(t, nc, jsstore.Options{})
	ctx := context.Background()
	subj := siteSubject("s1")
	var last uint64
	for i := range 5 {
		seq, err := st.Append(ctx, subj, last, []byte(fmt.Sprint("m", i)))
		require.NoError(t, err)
		last = seq
	}
	for range 50 {
		n := 0
		require.NoError(t, st.Read(ctx, subj, 1, func(events.Msg) error { n++; return nil }))
		require.Equal(t, 5, n)
	}
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s, err := js.Stream(ctx, events.StreamName)
	require.NoError(t, err)
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.State.Consumers == 0
	}, "the reads' consumers are gone")
}
