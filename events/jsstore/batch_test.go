package jsstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/events/storetest"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// gather is long enough for appends started together to queue behind the
// first one, which waits this long before the batch is sent.
const gather = 200 * time.Millisecond

// batchingStore opens a store that sends appends waiting together as one
// atomic batch, on a server of its own that fsyncs every message.
func batchingStore(t *testing.T, linger time.Duration) (*jsstore.Store, *testkit.Server) {
	t.Helper()
	srv := testkit.StartServer(t, jsstore.ServerConfig{SyncAlways: true})
	return testkit.OpenStore(t, srv.Conn("batching"), jsstore.Options{BatchMin: 2, Linger: linger}), srv
}

// The store contract holds when appends may travel in batches.
func TestStore_contractBatching(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		st, _ := batchingStore(t, 0)
		return st
	})
}

// appendAll runs one append per subject at once and returns each one's
// sequence and error, by index.
func appendAll(st *jsstore.Store, subjects []string, expect []uint64, data func(i int) []byte) ([]uint64, []error) {
	seqs, errs := make([]uint64, len(subjects)), make([]error, len(subjects))
	var wg sync.WaitGroup
	for i := range subjects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs[i], errs[i] = st.Append(context.Background(), subjects[i], expect[i], data(i))
		}()
	}
	wg.Wait()
	return seqs, errs
}

// Appends of many subjects sent together are stored as one batch, each
// message at the sequence its caller was given.
func TestBatch_eachAppendAtItsSequence(t *testing.T) {
	ctx := context.Background()
	st, _ := batchingStore(t, gather)
	const n = 20
	subjects := make([]string, n)
	for i := range subjects {
		subjects[i] = siteSubject(fmt.Sprint("b", i))
	}
	for round := range 3 {
		expect := make([]uint64, n)
		for i, s := range subjects {
			last, err := st.LastFor(ctx, s)
			require.NoError(t, err)
			expect[i] = last
		}
		seqs, errs := appendAll(st, subjects, expect, func(i int) []byte { return []byte(fmt.Sprint(round, "/", i)) })
		for i := range subjects {
			require.NoError(t, errs[i], "append %d", i)
			m, err := st.Get(ctx, seqs[i])
			require.NoError(t, err)
			assert.Equal(t, subjects[i], m.Subject, "append %d's sequence holds its subject", i)
			assert.Equal(t, fmt.Sprint(round, "/", i), string(m.Data))
		}
	}
	stats := st.Batches()
	require.NotNil(t, stats)
	assert.Positive(t, stats.Stored.Load(), "appends that waited together went as a batch")
	assert.Zero(t, stats.Refused.Load())
	assert.Zero(t, stats.Unknown.Load())
	last, err := st.LastSeq(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3*n), last, "each append stored once")
}

// One stale expected sequence refuses the whole batch: nothing of it is
// stored. Sent by the batcher, the appends are then sent one by one: the
// stale one is the only conflict, and the others are stored once each.
func TestBatch_staleSequenceCommitsNothing(t *testing.T) {
	ctx := context.Background()
	st, srv := batchingStore(t, gather)
	other := srv.Store("other")
	a, b, c := siteSubject("a"), siteSubject("b"), siteSubject("c")
	for _, s := range []string{a, b, c} {
		_, err := st.Append(ctx, s, 0, []byte("first "+s))
		require.NoError(t, err)
	}
	lastB, err := st.LastFor(ctx, b)
	require.NoError(t, err)
	// Another process writes b first: our view of b is stale.
	_, err = other.Append(ctx, b, lastB, []byte("theirs"))
	require.NoError(t, err)
	before, err := st.LastSeq(ctx)
	require.NoError(t, err)

	_, notStored, err := jsstore.PublishBatch(st, []jsstore.Pending{
		{Subject: a, Expect: 1, Data: []byte("a2")},
		{Subject: b, Expect: lastB, Data: []byte("b2")},
		{Subject: c, Expect: 3, Data: []byte("c2")},
	})
	require.Error(t, err)
	assert.True(t, notStored, "a refused batch is known not stored: %v", err)
	after, err := st.LastSeq(ctx)
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing of the batch is stored")

	subjects := []string{a, b, c}
	seqs, errs := appendAll(st, subjects, []uint64{1, lastB, 3}, func(i int) []byte { return []byte(fmt.Sprint("second ", i)) })
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], events.ErrConflict, "only the stale append conflicts")
	require.NoError(t, errs[2])
	assert.Positive(t, st.Batches().Refused.Load(), "the batch was refused and its appends sent alone")
	for _, i := range []int{0, 2} {
		m, err := st.Next(ctx, subjects[i], 4)
		require.NoError(t, err)
		assert.Equal(t, seqs[i], m.Seq)
		assert.Equal(t, fmt.Sprint("second ", i), string(m.Data))
		_, err = st.Next(ctx, subjects[i], m.Seq+1)
		assert.ErrorIs(t, err, events.ErrNotFound, "stored once")
	}
	m, err := st.Next(ctx, b, lastB+1)
	require.NoError(t, err)
	assert.Equal(t, "theirs", string(m.Data), "b holds only the other process's message")
	_, err = st.Next(ctx, b, m.Seq+1)
	assert.ErrorIs(t, err, events.ErrNotFound)
}

// An append whose caller gave up while it waited is not sent.
func TestBatch_callerGoneBeforeSending(t *testing.T) {
	st, _ := batchingStore(t, gather)
	ctx, cancel := context.WithTimeout(context.Background(), gather/4)
	defer cancel()
	subj := siteSubject("gone")
	_, err := st.Append(ctx, subj, 0, []byte("x"))
	require.ErrorIs(t, err, events.ErrUnavailable)
	last, err := st.LastFor(context.Background(), subj)
	require.NoError(t, err)
	assert.Zero(t, last, "nothing stored")
}

// A stream that refuses atomic batches (its option turned off) gets every
// append alone from then on, and loses none.
func TestBatch_streamWithoutBatches(t *testing.T) {
	ctx := context.Background()
	st, srv := batchingStore(t, gather)
	js, err := jetstream.New(srv.Conn("admin"))
	require.NoError(t, err)
	s, err := js.Stream(ctx, events.StreamName)
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	for round := range 2 {
		subjects := []string{siteSubject(fmt.Sprint("x", round)), siteSubject(fmt.Sprint("y", round)), siteSubject(fmt.Sprint("z", round))}
		_, errs := appendAll(st, subjects, make([]uint64, 3), func(i int) []byte { return []byte{byte(i)} })
		for i, err := range errs {
			require.NoError(t, err, "round %d append %d", round, i)
		}
	}
	assert.Equal(t, uint64(1), st.Batches().Refused.Load(), "refused once, then never tried again")
	assert.Zero(t, st.Batches().Stored.Load())
	last, err := st.LastSeq(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(6), last)
}

// A store that does not batch has no counters.
func TestBatch_offByDefault(t *testing.T) {
	st := testkit.NewStore(t)
	assert.Nil(t, st.Batches())
}
