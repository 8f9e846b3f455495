// Package storetest is the contract of the ledger's event store, written as
// one suite that every implementation runs: events/jsstore (JetStream, the
// production store) and events/memstore (memory, for fast unit tests). The
// cases were checked against a real embedded JetStream server; where its
// behaviour is surprising the suite pins it, so that a test passing on the
// memory store does not fail in production.
//
// The contract, for a store opened empty:
//
//   - Subjects. The store holds the subjects under events.SubjectPrefix
//     ("ledger.>"). Appending to a subject outside it, or to an invalid one
//     (empty, an empty token, whitespace), fails with events.ErrUnavailable
//     and stores nothing (JetStream answers "no response from stream" after
//     its retries, or refuses the subject in the client). A filter (Next,
//     LastFor, Read, Follow) may hold the wildcards "*" and ">"; a filter
//     outside the store matches nothing. Appending to a subject with
//     wildcards is outside the contract: callers build subjects with
//     events.SiteSubject (see Append below).
//   - Sequences. Every stored message gets the next stream sequence: 1, 2,
//     3, … across all subjects, without gaps (nothing is ever deleted).
//     LastSeq is the last one, 0 when the store is empty.
//   - Append(subject, expectLast, data) stores data only if the subject's
//     last message is expectLast (0: the subject has none), and returns the
//     new sequence. Otherwise it fails with events.ErrConflict and stores
//     nothing: whether expectLast is stale, ahead, or another subject's
//     sequence. The expectation is per subject: other subjects' appends
//     never make it conflict. Of concurrent appenders with the same
//     expectation exactly one succeeds. Empty data is stored as empty.
//   - Get(seq) is the message at seq; events.ErrNotFound past the end.
//     Get(0) fails with events.ErrUnavailable, not ErrNotFound: JetStream
//     calls it an "empty request".
//   - Next(filter, seq) is the first message matching filter at or after
//     seq (0 counts as 1); events.ErrNotFound when there is none.
//   - LastFor(filter) is the sequence of the last message matching filter,
//     0 (and no error) when there is none.
//   - Read(filter, from, fn) calls fn for every message matching filter
//     with sequence ≥ from (0 counts as 1), in stream order, at least up
//     to the messages stored when Read was called, then returns nil. An
//     error from fn ends the read and is returned as it is.
//   - Follow(filter, from, fn) calls fn for every matching message from
//     sequence from, first those stored and then new ones as they are
//     appended, in stream order, on one goroutine, until ctx ends; it then
//     returns nil and fn is not called again. A from past the end waits
//     for that sequence.
//   - Snapshots: SaveSnapshot(name, seq, data) replaces name's snapshot,
//     whatever the sequences (the last save wins); LoadSnapshot returns its
//     sequence and data, events.ErrNotFound for a name never saved;
//     ListSnapshots returns every saved name once, in no particular order.
//     Any non-empty name is allowed ("site-*" included); the empty name
//     fails with events.ErrUnavailable.
//   - Data is the store's own: changing a slice after Append or
//     SaveSnapshot, or one a read returned, changes nothing stored.
//   - Every call with a context that has already ended fails with
//     events.ErrUnavailable (Follow included), and Append stores nothing.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gateway/events"
)

// Store is the event store the suite checks: the method set of ledger.Store,
// declared here so that the suite does not depend on the ledger.
type Store interface {
	Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error)
	Get(ctx context.Context, seq uint64) (events.Msg, error)
	Next(ctx context.Context, subject string, seq uint64) (events.Msg, error)
	LastSeq(ctx context.Context) (uint64, error)
	LastFor(ctx context.Context, subject string) (uint64, error)
	Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error
	Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error
	SaveSnapshot(ctx context.Context, name string, seq uint64, data []byte) error
	LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error)
	ListSnapshots(ctx context.Context) ([]string, error)
}

// waitFor bounds a wait for something that must happen (a delivery, a
// follower returning); nothing asserts how fast it happens.
const waitFor = 30 * time.Second

// Subjects the cases use: two sites and a subject outside the site subtree.
var (
	subjA   = events.SitePrefix + "a"
	subjB   = events.SitePrefix + "b"
	subjCat = events.CatalogSubject
)

// Run runs the contract against stores made by open, which must return a
// new, empty store for every call (one per subtest) and release it when t
// ends.
func Run(t *testing.T, open func(t *testing.T) Store) {
	cases := []struct {
		name string
		run  func(t *testing.T, s Store)
	}{
		{"empty store", testEmpty},
		{"append at zero on an empty subject", testAppendAtZero},
		{"append with the expected sequence", testExpectedSequence},
		{"expected sequence is per subject", testPerSubject},
		{"refused subjects", testRefusedSubjects},
		{"not found", testNotFound},
		{"Next finds the first message at or after seq", testNext},
		{"LastFor with literal and wildcard filters", testLastFor},
		{"Read in stream order from a sequence", testRead},
		{"Read stops at fn's error", testReadStops},
		{"Follow delivers stored then new messages", testFollow},
		{"Follow from a sequence not yet stored", testFollowAhead},
		{"snapshots", testSnapshots},
		{"data is the store's own", testDataIsCopied},
		{"ended context", testEndedContext},
		{"concurrent appenders with one expectation", testConcurrentSameExpectation},
		{"concurrent appenders on their own subjects", testConcurrentSubjects},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, open(t))
		})
	}
}

// put appends data on subj after the subject's current last message.
func put(t *testing.T, s Store, subj, data string) uint64 {
	t.Helper()
	ctx := context.Background()
	last, err := s.LastFor(ctx, subj)
	require.NoError(t, err)
	seq, err := s.Append(ctx, subj, last, []byte(data))
	require.NoError(t, err)
	return seq
}

// all reads every message matching filter from sequence from.
func all(t *testing.T, s Store, filter string, from uint64) []events.Msg {
	t.Helper()
	var out []events.Msg
	require.NoError(t, s.Read(context.Background(), filter, from, func(m events.Msg) error {
		out = append(out, m)
		return nil
	}))
	return out
}

// msg is a stored message as the cases compare it.
func msg(seq uint64, subj, data string) events.Msg {
	return events.Msg{Seq: seq, Subject: subj, Data: []byte(data)}
}

// shown turns messages into strings, so that nil and empty data
// compare equal (stores differ there, and nothing depends on it).
func shown(ms ...events.Msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("#%d %s %q", m.Seq, m.Subject, m.Data)
	}
	return out
}

// lastSeq returns the store's last sequence.
func lastSeq(t *testing.T, s Store) uint64 {
	t.Helper()
	seq, err := s.LastSeq(context.Background())
	require.NoError(t, err)
	return seq
}

// lastFor returns the subject's last sequence.
func lastFor(t *testing.T, s Store, subj string) uint64 {
	t.Helper()
	seq, err := s.LastFor(context.Background(), subj)
	require.NoError(t, err)
	return seq
}

func testEmpty(t *testing.T, s Store) {
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

func testAppendAtZero(t *testing.T, s Store) {
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

func testExpectedSequence(t *testing.T, s Store) {
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

func testPerSubject(t *testing.T, s Store) {
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

func testRefusedSubjects(t *testing.T, s Store) {
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
	race(len(tests), func(i int) {
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

func testNotFound(t *testing.T, s Store) {
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
func stored(t *testing.T, s Store) {
	t.Helper()
	for _, m := range []struct{ subj, data string }{
		{subjA, "a1"}, {subjB, "b1"}, {subjA, "a2"}, {subjCat, "c1"}, {subjB, "b2"}, {subjA, "a3"},
	} {
		put(t, s, m.subj, m.data)
	}
}

func testNext(t *testing.T, s Store) {
	stored(t, s)
	tests := []struct {
		filter string
		from   uint64
		want   events.Msg
	}{
		{subjA, 0, msg(1, subjA, "a1")},
		{subjA, 1, msg(1, subjA, "a1")},
		{subjA, 2, msg(3, subjA, "a2")},
		{subjA, 3, msg(3, subjA, "a2")},
		{subjA, 4, msg(6, subjA, "a3")},
		{subjB, 3, msg(5, subjB, "b2")},
		{subjCat, 1, msg(4, subjCat, "c1")},
		{events.SitePrefix + "*", 4, msg(5, subjB, "b2")},
		{events.SubjectPrefix + ">", 4, msg(4, subjCat, "c1")},
		{events.SubjectPrefix + "*", 2, msg(4, subjCat, "c1")},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s from %d", tc.filter, tc.from), func(t *testing.T) {
			m, err := s.Next(context.Background(), tc.filter, tc.from)
			require.NoError(t, err)
			assert.Equal(t, shown(tc.want), shown(m))
		})
	}
	_, err := s.Next(context.Background(), subjA, 7)
	assert.ErrorIs(t, err, events.ErrNotFound)
}

func testLastFor(t *testing.T, s Store) {
	stored(t, s)
	tests := []struct {
		filter string
		want   uint64
	}{
		{subjA, 6},
		{subjB, 5},
		{subjCat, 4},
		{events.SitePrefix + "*", 6},
		{events.SitePrefix + "b", 5},
		{events.SubjectPrefix + "*", 4},
		{events.SubjectPrefix + ">", 6},
		{events.SitePrefix + "c", 0},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, lastFor(t, s, tc.filter), tc.filter)
	}
}

func testRead(t *testing.T, s Store) {
	stored(t, s)
	tests := []struct {
		filter string
		from   uint64
		want   []events.Msg
	}{
		{events.SubjectPrefix + ">", 0, []events.Msg{msg(1, subjA, "a1"), msg(2, subjB, "b1"), msg(3, subjA, "a2"),
			msg(4, subjCat, "c1"), msg(5, subjB, "b2"), msg(6, subjA, "a3")}},
		{events.SitePrefix + ">", 3, []events.Msg{msg(3, subjA, "a2"), msg(5, subjB, "b2"), msg(6, subjA, "a3")}},
		{events.SitePrefix + "*", 2, []events.Msg{msg(2, subjB, "b1"), msg(3, subjA, "a2"), msg(5, subjB, "b2"), msg(6, subjA, "a3")}},
		{subjA, 1, []events.Msg{msg(1, subjA, "a1"), msg(3, subjA, "a2"), msg(6, subjA, "a3")}},
		{subjA, 4, []events.Msg{msg(6, subjA, "a3")}},
		{events.SubjectPrefix + "*", 1, []events.Msg{msg(4, subjCat, "c1")}},
		{subjA, 7, nil},
		{events.SitePrefix + "none", 1, nil},
		{events.SitePrefix + "a.>", 1, nil},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s from %d", tc.filter, tc.from), func(t *testing.T) {
			assert.Equal(t, shown(tc.want...), shown(all(t, s, tc.filter, tc.from)...))
		})
	}
}

func testReadStops(t *testing.T, s Store) {
	stored(t, s)
	stop := errors.New("enough")
	for _, after := range []int{1, 3, 6} {
		t.Run(fmt.Sprint("after ", after), func(t *testing.T) {
			var got []uint64
			err := s.Read(context.Background(), events.SubjectPrefix+">", 1, func(m events.Msg) error {
				got = append(got, m.Seq)
				if len(got) == after {
					return stop
				}
				return nil
			})
			assert.ErrorIs(t, err, stop)
			assert.Len(t, got, after, "fn is not called after its error")
		})
	}
}

// follower runs Follow in the background and hands over what it delivers.
type follower struct {
	cancel context.CancelFunc
	got    chan events.Msg
	done   chan error
	// after counts deliveries after Follow returned (must stay 0).
	mu       sync.Mutex
	returned bool
	after    int
}

func follow(s Store, filter string, from uint64) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, got: make(chan events.Msg, 100), done: make(chan error, 1)}
	go func() {
		err := s.Follow(ctx, filter, from, func(m events.Msg) {
			f.mu.Lock()
			if f.returned {
				f.after++
			}
			f.mu.Unlock()
			f.got <- m
		})
		f.mu.Lock()
		f.returned = true
		f.mu.Unlock()
		f.done <- err
	}()
	return f
}

// next waits for the next delivery.
func (f *follower) next(t *testing.T) events.Msg {
	t.Helper()
	select {
	case m := <-f.got:
		return m
	case <-time.After(waitFor):
		t.Fatalf("Follow delivered nothing within %s", waitFor)
		return events.Msg{}
	}
}

// stop ends the follower's context and waits for Follow to return.
func (f *follower) stop(t *testing.T) error {
	t.Helper()
	f.cancel()
	select {
	case err := <-f.done:
		return err
	case <-time.After(waitFor):
		t.Fatalf("Follow did not return within %s of its context ending", waitFor)
		return nil
	}
}

func testFollow(t *testing.T, s Store) {
	stored(t, s)
	f := follow(s, events.SitePrefix+">", 2)
	var got []events.Msg
	for range 4 {
		got = append(got, f.next(t))
	}
	assert.Equal(t, shown(msg(2, subjB, "b1"), msg(3, subjA, "a2"), msg(5, subjB, "b2"), msg(6, subjA, "a3")),
		shown(got...), "the stored messages, in order")

	put(t, s, subjCat, "c2") // 7, not matching
	put(t, s, subjB, "b3")   // 8
	put(t, s, subjA, "a4")   // 9
	got = []events.Msg{f.next(t), f.next(t)}
	assert.Equal(t, shown(msg(8, subjB, "b3"), msg(9, subjA, "a4")), shown(got...), "then the new ones")

	require.NoError(t, f.stop(t), "Follow returns nil when its context ends")
	put(t, s, subjA, "a5")
	assert.Empty(t, f.got, "nothing is delivered after Follow returned")
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Zero(t, f.after)
}

func testFollowAhead(t *testing.T, s Store) {
	put(t, s, subjA, "a1")
	f := follow(s, events.SubjectPrefix+">", 3)
	t.Cleanup(func() { _ = f.stop(t) })
	put(t, s, subjB, "b1") // 2: before from
	put(t, s, subjA, "a2") // 3
	assert.Equal(t, shown(msg(3, subjA, "a2")), shown(f.next(t)))
	assert.Empty(t, f.got)
}

func testSnapshots(t *testing.T, s Store) {
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

func testDataIsCopied(t *testing.T, s Store) {
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

func testEndedContext(t *testing.T, s Store) {
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

// race runs fn(i) for i in [0, n) on n goroutines released together.
func race(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

func testConcurrentSameExpectation(t *testing.T, s Store) {
	const writers, rounds = 20, 5
	var expect uint64
	for round := range rounds {
		seqs := make([]uint64, writers)
		errs := make([]error, writers)
		race(writers, func(i int) {
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

func testConcurrentSubjects(t *testing.T, s Store) {
	const writers, each = 8, 10
	seqs := make([][]uint64, writers)
	race(writers, func(i int) {
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
