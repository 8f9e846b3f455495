package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// The contract's snapshots, isolation of data and contexts, and concurrent appends.

func testSnapshots(t *testing.T, s events.Store) {
	ctx := context.Background()
	big := make([]byte, 300<<10) // more than one object store chunk
	for i := range big {
		big[i] = byte(i * 7)
	}
	tests := []struct {
		name string
		seq  uint64
		data []byte
	}{
		{"site-a", 41, []byte("state of a")},
		{"checkpoint", 0, []byte("seq zero is a sequence too")},
		{"site-*", 3, []byte("any name is allowed")},
		{"a b/c.d", 4, []byte("even this one")},
		{"empty", 5, nil},
		{"big", 6, big},
	}
	for _, tc := range tests {
		require.NoError(t, s.SaveSnapshot(ctx, tc.name, tc.seq, tc.data), tc.name)
	}
	for _, tc := range tests {
		seq, data, err := s.LoadSnapshot(ctx, tc.name)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.seq, seq, tc.name)
		assert.True(t, bytes.Equal(tc.data, data), "%s: data as saved", tc.name)
	}

	// The last save wins, even with an older sequence (a lagging process
	// may write one: the ledger copes, the store does not judge).
	require.NoError(t, s.SaveSnapshot(ctx, "site-a", 50, []byte("newer")))
	require.NoError(t, s.SaveSnapshot(ctx, "site-a", 45, []byte("older, saved last")))
	seq, data, err := s.LoadSnapshot(ctx, "site-a")
	require.NoError(t, err)
	assert.Equal(t, uint64(45), seq)
	assert.Equal(t, "older, saved last", string(data))

	names, err := s.ListSnapshots(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"site-a", "checkpoint", "site-*", "a b/c.d", "empty", "big"}, names, "each name once")

	assert.ErrorIs(t, s.SaveSnapshot(ctx, "", 1, []byte("x")), events.ErrUnavailable, "the empty name")
	_, _, err = s.LoadSnapshot(ctx, "site-b")
	assert.ErrorIs(t, err, events.ErrNotFound)
}

func testDataIsCopied(t *testing.T, s events.Store) {
	ctx := context.Background()
	in := []byte("original")
	seq, err := s.Append(ctx, subjA, 0, in)
	require.NoError(t, err)
	copy(in, "CHANGED!")
	m, err := s.Get(ctx, seq)
	require.NoError(t, err)
	assert.Equal(t, "original", string(m.Data), "after the caller changed its slice")
	copy(m.Data, "CHANGED!")
	for _, read := range []func() (events.Msg, error){
		func() (events.Msg, error) { return s.Get(ctx, seq) },
		func() (events.Msg, error) { return s.Next(ctx, subjA, 1) },
	} {
		m, err := read()
		require.NoError(t, err)
		assert.Equal(t, "original", string(m.Data), "after a reader changed what it got")
	}
	require.NoError(t, s.Read(ctx, subjA, 1, func(m events.Msg) error {
		assert.Equal(t, "original", string(m.Data))
		copy(m.Data, "CHANGED!")
		return nil
	}))
	assert.Equal(t, shown(msg(seq, subjA, "original")), shown(all(t, s, subjA, 1)...))

	snap := []byte("snapshot")
	require.NoError(t, s.SaveSnapshot(ctx, "site-a", seq, snap))
	copy(snap, "CHANGED!")
	_, data, err := s.LoadSnapshot(ctx, "site-a")
	require.NoError(t, err)
	assert.Equal(t, "snapshot", string(data))
	copy(data, "CHANGED!")
	_, data, err = s.LoadSnapshot(ctx, "site-a")
	require.NoError(t, err)
	assert.Equal(t, "snapshot", string(data))
}

func testEndedContext(t *testing.T, s events.Store) {
	put(t, s, subjA, "a1")
	require.NoError(t, s.SaveSnapshot(context.Background(), "site-a", 1, []byte("x")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"Append", func() error { _, err := s.Append(ctx, subjA, 1, []byte("x")); return err }},
		{"Get", func() error { _, err := s.Get(ctx, 1); return err }},
		{"Next", func() error { _, err := s.Next(ctx, subjA, 1); return err }},
		{"LastSeq", func() error { _, err := s.LastSeq(ctx); return err }},
		{"LastFor", func() error { _, err := s.LastFor(ctx, subjA); return err }},
		{"Read", func() error { return s.Read(ctx, subjA, 1, func(events.Msg) error { return nil }) }},
		{"Follow", func() error { return s.Follow(ctx, subjA, 1, func(events.Msg) {}) }},
		{"SaveSnapshot", func() error { return s.SaveSnapshot(ctx, "site-a", 2, []byte("y")) }},
		{"LoadSnapshot", func() error { _, _, err := s.LoadSnapshot(ctx, "site-a"); return err }},
		{"ListSnapshots", func() error { _, err := s.ListSnapshots(ctx); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			assert.ErrorIs(t, c.call(), events.ErrUnavailable)
		})
	}
	assert.Equal(t, uint64(1), lastSeq(t, s), "the append stored nothing")
	seq, data, err := s.LoadSnapshot(context.Background(), "site-a")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), seq, "the save stored nothing")
	assert.Equal(t, "x", string(data))
}

func testConcurrentSameExpectation(t *testing.T, s events.Store) {
	const writers, rounds = 20, 5
	var expect uint64
	for round := range rounds {
		seqs := make([]uint64, writers)
		errs := make([]error, writers)
		testkit.Together(writers, func(i int) {
			seqs[i], errs[i] = s.Append(context.Background(), subjA, expect, []byte(fmt.Sprintf("round %d writer %d", round, i)))
		})
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "round %d: writers %d and %d both won", round, winner, i)
				winner = i
				continue
			}
			assert.ErrorIs(t, err, events.ErrConflict, "round %d writer %d", round, i)
		}
		require.NotEqual(t, -1, winner, "round %d: nobody won", round)
		msgs := all(t, s, subjA, 1)
		require.Len(t, msgs, round+1, "round %d: exactly one message stored", round)
		stored := msgs[round]
		assert.Equal(t, seqs[winner], stored.Seq)
		assert.Equal(t, fmt.Sprintf("round %d writer %d", round, winner), string(stored.Data), "the winner's message")
		expect = seqs[winner]
	}
}

func testConcurrentSubjects(t *testing.T, s events.Store) {
	const writers, each = 8, 10
	seqs := make([][]uint64, writers)
	testkit.Together(writers, func(i int) {
		subj := fmt.Sprintf("%sw%d", events.SitePrefix, i)
		var last uint64
		for k := range each {
			seq, err := s.Append(context.Background(), subj, last, []byte(fmt.Sprint(i, ":", k)))
			if !assert.NoError(t, err, "writer %d append %d", i, k) {
				return
			}
			seqs[i] = append(seqs[i], seq)
			last = seq
		}
	})
	seen := map[uint64]bool{}
	for i, ss := range seqs {
		require.Len(t, ss, each, "writer %d", i)
		for k, seq := range ss {
			assert.False(t, seen[seq], "sequence %d given twice", seq)
			seen[seq] = true
			if k > 0 {
				assert.Greater(t, seq, ss[k-1], "a subject's sequences grow")
			}
		}
	}
	assert.Equal(t, uint64(writers*each), lastSeq(t, s), "no gaps")
	for seq := uint64(1); seq <= writers*each; seq++ {
		assert.True(t, seen[seq], "sequence %d", seq)
	}
}
