package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// The contract's appends: sequences, expectations, subjects, and what is not found.

func testEmpty(t *testing.T, s events.Store) {
	ctx := context.Background()
	assert.Zero(t, lastSeq(t, s))
	assert.Zero(t, lastFor(t, s, subjA))
	_, err := s.Get(ctx, 1)
	assert.ErrorIs(t, err, events.ErrNotFound)
	_, err = s.Next(ctx, subjA, 1)
	assert.ErrorIs(t, err, events.ErrNotFound)
	assert.Empty(t, all(t, s, events.SubjectPrefix+">", 1))
	names, err := s.ListSnapshots(ctx)
	require.NoError(t, err)
	assert.Empty(t, names)
	_, _, err = s.LoadSnapshot(ctx, "checkpoint")
	assert.ErrorIs(t, err, events.ErrNotFound)
}

func testAppendAtZero(t *testing.T, s events.Store) {
	ctx := context.Background()
	seq, err := s.Append(ctx, subjA, 0, []byte("a1"))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), seq)
	m, err := s.Get(ctx, seq)
	require.NoError(t, err)
	assert.Equal(t, shown(msg(1, subjA, "a1")), shown(m))
	assert.Equal(t, uint64(1), lastSeq(t, s))
	assert.Equal(t, uint64(1), lastFor(t, s, subjA))

	// Sequences count the whole stream: another subject's first message
	// takes the next one.
	seq, err = s.Append(ctx, subjB, 0, []byte("b1"))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), seq)
	// Empty data is a message too.
	seq, err = s.Append(ctx, subjCat, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), seq)
	m, err = s.Get(ctx, seq)
	require.NoError(t, err)
	assert.Empty(t, m.Data)
	assert.Equal(t, subjCat, m.Subject)
	assert.Equal(t, uint64(3), lastSeq(t, s))
}

func testExpectedSequence(t *testing.T, s events.Store) {
	ctx := context.Background()
	a1 := put(t, s, subjA, "a1") // 1
	b1 := put(t, s, subjB, "b1") // 2
	a2 := put(t, s, subjA, "a2") // 3
	require.Equal(t, []uint64{1, 2, 3}, []uint64{a1, b1, a2})

	tests := []struct {
		name   string
		expect uint64
	}{
		{"zero on a subject that has messages", 0},
		{"stale: the subject's previous message", a1},
		{"ahead of the subject's last message", a2 + 1},
		{"far ahead", 1 << 40},
		{"another subject's last message", b1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Append(ctx, subjA, tc.expect, []byte("refused"))
			assert.ErrorIs(t, err, events.ErrConflict)
			assert.Equal(t, a2, lastSeq(t, s), "nothing stored")
			assert.Equal(t, a2, lastFor(t, s, subjA))
		})
	}
	// The right expectation stores at the next stream sequence.
	a3, err := s.Append(ctx, subjA, a2, []byte("a3"))
	require.NoError(t, err)
	assert.Equal(t, a2+1, a3)
	assert.Equal(t, shown(msg(1, subjA, "a1"), msg(3, subjA, "a2"), msg(4, subjA, "a3")), shown(all(t, s, subjA, 1)...))
	// The same bytes again at the same expectation conflict, and the
	// message after the expectation is the first one: this is how a writer
	// that lost an acknowledgement finds its own message stored.
	_, err = s.Append(ctx, subjA, a2, []byte("a3"))
	assert.ErrorIs(t, err, events.ErrConflict)
	m, err := s.Next(ctx, subjA, a2+1)
	require.NoError(t, err)
	assert.Equal(t, shown(msg(a3, subjA, "a3")), shown(m))
	assert.Equal(t, a3, lastSeq(t, s))
}

func testPerSubject(t *testing.T, s events.Store) {
	ctx := context.Background()
	var lastA, lastB uint64
	for i := range 4 {
		seq, err := s.Append(ctx, subjA, lastA, []byte(fmt.Sprint("a", i)))
		require.NoError(t, err, "a %d", i)
		lastA = seq
		// b's appends move the stream, never a's expectation.
		seq, err = s.Append(ctx, subjB, lastB, []byte(fmt.Sprint("b", i)))
		require.NoError(t, err, "b %d", i)
		lastB = seq
	}
	assert.Equal(t, uint64(7), lastA)
	assert.Equal(t, uint64(8), lastB)
	assert.Equal(t, uint64(8), lastSeq(t, s))
}

func testRefusedSubjects(t *testing.T, s events.Store) {
	put(t, s, subjA, "a1")
	tests := []struct {
		name, subject string
	}{
		{"empty", ""},
		{"whitespace", events.SitePrefix + "a b"},
		{"empty token", events.SubjectPrefix + ".a"},
		{"outside the store", "other.a"},
		{"the prefix alone", "ledger"},
	}
	// JetStream answers some of them only after its publish retries
	// (seconds): they are all sent at once, then checked one by one.
	errs := make([]error, len(tests))
	testkit.Together(len(tests), func(i int) {
		_, errs[i] = s.Append(context.Background(), tests[i].subject, 0, []byte("x"))
	})
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, errs[i], events.ErrUnavailable)
		})
	}
	assert.Equal(t, uint64(1), lastSeq(t, s), "nothing stored")
	// Filters outside the store match nothing.
	ctx := context.Background()
	assert.Zero(t, lastFor(t, s, "other.a"))
	_, err := s.Next(ctx, "other.a", 1)
	assert.ErrorIs(t, err, events.ErrNotFound)
	assert.Empty(t, all(t, s, "other.>", 1))
}

func testNotFound(t *testing.T, s events.Store) {
	ctx := context.Background()
	a1 := put(t, s, subjA, "a1")
	put(t, s, subjB, "b1")
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"Get past the end", func() error { _, err := s.Get(ctx, 3); return err }, events.ErrNotFound},
		{"Get far past the end", func() error { _, err := s.Get(ctx, 1<<40); return err }, events.ErrNotFound},
		{"Get zero", func() error { _, err := s.Get(ctx, 0); return err }, events.ErrUnavailable},
		{"Next past the subject's last", func() error { _, err := s.Next(ctx, subjA, a1+1); return err }, events.ErrNotFound},
		{"Next on an empty subject", func() error { _, err := s.Next(ctx, events.SitePrefix+"none", 1); return err }, events.ErrNotFound},
		{"Next on an empty wildcard", func() error { _, err := s.Next(ctx, events.SitePrefix+"a.*", 1); return err }, events.ErrNotFound},
		{"LoadSnapshot never saved", func() error { _, _, err := s.LoadSnapshot(ctx, "site-a"); return err }, events.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
		})
	}
	// A subject without messages has no last one: 0, not an error.
	assert.Zero(t, lastFor(t, s, events.SitePrefix+"none"))
	assert.Zero(t, lastFor(t, s, events.SitePrefix+"none.>"))
}

// stored appends a1 b1 a2 cat1 b2 a3 (sequences 1 to 6).
