package events

import "context"

// Store is the event store: one stream of messages, each on a subject,
// appended only at an expected last sequence of its subject, and the
// snapshots saved beside it. events/jsstore implements it on JetStream
// and events/memstore in memory; events/storetest is the contract both
// pass. It is declared once, here, for every package that reads or writes
// the stream.
type Store interface {
	// Append stores data on subject when the subject's last message is
	// at expectLast (0: none), and returns its sequence; ErrConflict when
	// another message got there first.
	Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error)
	// Get returns the message at seq; ErrNotFound when there is none.
	Get(ctx context.Context, seq uint64) (Msg, error)
	// Next returns the first message on subject at or after seq;
	// ErrNotFound when there is none.
	Next(ctx context.Context, subject string, seq uint64) (Msg, error)
	// LastSeq returns the stream's last sequence (0 when empty).
	LastSeq(ctx context.Context) (uint64, error)
	// LastFor returns the sequence of subject's last message (0: none).
	LastFor(ctx context.Context, subject string) (uint64, error)
	// Read calls fn for every message matching filter (a subject or a
	// wildcard) at or after from, in stream order, until no matching
	// message is pending.
	Read(ctx context.Context, filter string, from uint64, fn func(Msg) error) error
	// Follow calls fn for every message matching filter at or after from,
	// in stream order, and for every one stored later, until ctx ends.
	Follow(ctx context.Context, filter string, from uint64, fn func(Msg)) error
	// SaveSnapshot saves data under name, taken at stream sequence seq.
	SaveSnapshot(ctx context.Context, name string, seq uint64, data []byte) error
	// LoadSnapshot returns the snapshot name and the sequence it was
	// taken at; ErrNotFound when there is none.
	LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error)
	// ListSnapshots returns the snapshots' names.
	ListSnapshots(ctx context.Context) ([]string, error)
}
