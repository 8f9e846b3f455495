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
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
)

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
func Run(t *testing.T, open func(t *testing.T) events.Store) {
	cases := []struct {
		name string
		run  func(t *testing.T, s events.Store)
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
func put(t *testing.T, s events.Store, subj, data string) uint64 {
	t.Helper()
	ctx := context.Background()
	last, err := s.LastFor(ctx, subj)
	require.NoError(t, err)
	seq, err := s.Append(ctx, subj, last, []byte(data))
	require.NoError(t, err)
	return seq
}

// all reads every message matching filter from sequence from.
func all(t *testing.T, s events.Store, filter string, from uint64) []events.Msg {
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
func lastSeq(t *testing.T, s events.Store) uint64 {
	t.Helper()
	seq, err := s.LastSeq(context.Background())
	require.NoError(t, err)
	return seq
}

// lastFor returns the subject's last sequence.
func lastFor(t *testing.T, s events.Store, subj string) uint64 {
	t.Helper()
	seq, err := s.LastFor(context.Background(), subj)
	require.NoError(t, err)
	return seq
}
