// Package memstore is an event store in memory with the contract of the
// JetStream store (events/storetest pins it; both pass the same suite). It
// exists for fast unit tests of code that only needs store semantics:
// appends checked against the subject's last sequence, reads, following,
// snapshots. It is safe for concurrent use; several ledgers sharing one
// Store behave as several gateway processes sharing one stream.
//
// It is stricter than JetStream in one place, outside the contract: an
// append to a subject holding a wildcard token ("*" or ">") is refused,
// where JetStream stores the message under that literal subject after
// checking the expectation against the last message matching the wildcard.
// A test on this store thus fails on a caller that builds subjects without
// events.SiteSubject.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/iqdgateway/gateway/events"
)

// Store is an in-memory event store holding the subjects under
// events.SubjectPrefix, as the JetStream ledger stream does.
type Store struct {
	mu sync.RWMutex
	// msgs holds message seq at index seq-1. It only ever grows and its
	// elements never change, so a reader may keep a copy of the slice
	// header and read it without the lock.
	msgs []events.Msg
	// bySubject lists each subject's sequences in order.
	bySubject map[string][]uint64
	snaps     map[string]snapshot
	// grew is closed (and replaced) at every append, waking followers.
	grew chan struct{}
}

type snapshot struct {
	seq  uint64
	data []byte
}

// New returns an empty store.
func New() *Store {
	return &Store{bySubject: map[string][]uint64{}, snaps: map[string]snapshot{}, grew: make(chan struct{})}
}

// unavailable is the error of a call whose context has ended, wrapped as
// the JetStream store wraps it.
func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %v", op, events.ErrUnavailable, err)
}

// errWildcard refuses appends to subjects with wildcards (see the package
// comment). It wraps no sentinel on purpose: nothing should retry it.
var errWildcard = errors.New("memstore: a subject with wildcards cannot be appended to")

// checkSubject reports whether subject can be appended to: a valid literal
// subject under events.SubjectPrefix.
func checkSubject(subject string) error {
	if subject == "" || strings.ContainsAny(subject, " \t\r\n") {
		return fmt.Errorf("%w: invalid subject %q", events.ErrUnavailable, subject)
	}
	for tok := range strings.SplitSeq(subject, ".") {
		switch tok {
		case "":
			return fmt.Errorf("%w: invalid subject %q", events.ErrUnavailable, subject)
		case "*", ">":
			return fmt.Errorf("%w: %q", errWildcard, subject)
		}
	}
	if !strings.HasPrefix(subject, events.SubjectPrefix) {
		return fmt.Errorf("%w: no stream holds subject %q", events.ErrUnavailable, subject)
	}
	return nil
}

// Append stores data on subject if the subject's last message is still
// expectLast (0: none), and returns its sequence; events.ErrConflict
// otherwise.
func (s *Store) Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, unavailable("append "+subject, err)
	}
	if err := checkSubject(subject); err != nil {
		return 0, fmt.Errorf("append: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seqs := s.bySubject[subject]
	var last uint64
	if len(seqs) > 0 {
		last = seqs[len(seqs)-1]
	}
	if last != expectLast {
		return 0, fmt.Errorf("append %s at %d: %w", subject, expectLast, events.ErrConflict)
	}
	seq := uint64(len(s.msgs)) + 1
	s.msgs = append(s.msgs, events.Msg{Seq: seq, Subject: subject, Data: slices.Clone(data)})
	s.bySubject[subject] = append(seqs, seq)
	close(s.grew)
	s.grew = make(chan struct{})
	return seq, nil
}

// stored returns the messages stored so far and the channel closed at the
// next append.
func (s *Store) stored() ([]events.Msg, chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.msgs, s.grew
}

// copyOf returns m with data of its own, so no caller can change what is
// stored.
func copyOf(m events.Msg) events.Msg {
	m.Data = slices.Clone(m.Data)
	return m
}

// Get returns the message at seq.
func (s *Store) Get(ctx context.Context, seq uint64) (events.Msg, error) {
	if err := ctx.Err(); err != nil {
		return events.Msg{}, unavailable(fmt.Sprint("get ", seq), err)
	}
	if seq == 0 {
		// As JetStream answers it: a request for no message.
		return events.Msg{}, fmt.Errorf("get 0: %w: empty request", events.ErrUnavailable)
	}
	msgs, _ := s.stored()
	if seq > uint64(len(msgs)) {
		return events.Msg{}, fmt.Errorf("get %d: %w", seq, events.ErrNotFound)
	}
	return copyOf(msgs[seq-1]), nil
}

// Next returns the first message matching filter at or after seq.
func (s *Store) Next(ctx context.Context, filter string, seq uint64) (events.Msg, error) {
	if err := ctx.Err(); err != nil {
		return events.Msg{}, unavailable(fmt.Sprintf("next %s from %d", filter, seq), err)
	}
	seq = max(seq, 1)
	if literal(filter) {
		s.mu.RLock()
		seqs := s.bySubject[filter]
		i := sort.Search(len(seqs), func(i int) bool { return seqs[i] >= seq })
		var m events.Msg
		if i < len(seqs) {
			m = copyOf(s.msgs[seqs[i]-1])
		}
		s.mu.RUnlock()
		if i == len(seqs) {
			return events.Msg{}, fmt.Errorf("next %s from %d: %w", filter, seq, events.ErrNotFound)
		}
		return m, nil
	}
	msgs, _ := s.stored()
	for i := seq - 1; i < uint64(len(msgs)); i++ {
		if match(filter, msgs[i].Subject) {
			return copyOf(msgs[i]), nil
		}
	}
	return events.Msg{}, fmt.Errorf("next %s from %d: %w", filter, seq, events.ErrNotFound)
}

// LastSeq returns the last sequence (0 when empty).
func (s *Store) LastSeq(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, unavailable("last sequence", err)
	}
	msgs, _ := s.stored()
	return uint64(len(msgs)), nil
}

// LastFor returns the sequence of the last message matching filter (0 when
// none).
func (s *Store) LastFor(ctx context.Context, filter string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, unavailable("last for "+filter, err)
	}
	if literal(filter) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		seqs := s.bySubject[filter]
		if len(seqs) == 0 {
			return 0, nil
		}
		return seqs[len(seqs)-1], nil
	}
	msgs, _ := s.stored()
	for i := len(msgs) - 1; i >= 0; i-- {
		if match(filter, msgs[i].Subject) {
			return msgs[i].Seq, nil
		}
	}
	return 0, nil
}

// Read calls fn for every message matching filter with sequence ≥ from, in
// order, up to the last message stored when it was called.
func (s *Store) Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	if err := ctx.Err(); err != nil {
		return unavailable("read "+filter, err)
	}
	msgs, _ := s.stored()
	return deliver(ctx, msgs, filter, max(from, 1), fn)
}

// deliver calls fn for the messages of msgs matching filter from sequence
// from on, stopping at fn's error or when ctx ends.
func deliver(ctx context.Context, msgs []events.Msg, filter string, from uint64, fn func(events.Msg) error) error {
	for i := from - 1; i < uint64(len(msgs)); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if match(filter, msgs[i].Subject) {
			if err := fn(copyOf(msgs[i])); err != nil {
				return err
			}
		}
	}
	return nil
}

// Follow calls fn for every message matching filter from sequence from on,
// stored and new, in order on the calling goroutine, until ctx ends; it
// then returns nil.
func (s *Store) Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error {
	if err := ctx.Err(); err != nil {
		return unavailable("follow "+filter, err)
	}
	next := max(from, 1)
	for {
		msgs, grew := s.stored()
		err := deliver(ctx, msgs, filter, next, func(m events.Msg) error { fn(m); return nil })
		if err != nil {
			return nil // ctx ended
		}
		next = max(next, uint64(len(msgs))+1)
		select {
		case <-ctx.Done():
			return nil
		case <-grew:
		}
	}
}

// SaveSnapshot stores data as name's snapshot at sequence seq, replacing
// the previous one.
func (s *Store) SaveSnapshot(ctx context.Context, name string, seq uint64, data []byte) error {
	if err := ctx.Err(); err != nil {
		return unavailable("save snapshot "+name, err)
	}
	if name == "" {
		// JetStream's object store refuses it as invalid meta information.
		return fmt.Errorf("save snapshot: %w: empty name", events.ErrUnavailable)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[name] = snapshot{seq: seq, data: slices.Clone(data)}
	return nil
}

// LoadSnapshot returns name's snapshot and its sequence; events.ErrNotFound
// when there is none.
func (s *Store) LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, unavailable("load snapshot "+name, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sn, ok := s.snaps[name]
	if !ok {
		return 0, nil, fmt.Errorf("snapshot %s: %w", name, events.ErrNotFound)
	}
	return sn.seq, slices.Clone(sn.data), nil
}

// ListSnapshots returns the names of all snapshots, sorted.
func (s *Store) ListSnapshots(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, unavailable("list snapshots", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for name := range s.snaps {
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

// literal reports whether filter has no wildcard token.
func literal(filter string) bool {
	for tok := range strings.SplitSeq(filter, ".") {
		if tok == "*" || tok == ">" {
			return false
		}
	}
	return true
}

// match reports whether subject (literal) matches filter, where a "*" token
// matches one token and a final ">" one or more.
func match(filter, subject string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		if ft == ">" {
			return subject != ""
		}
		st, srest, smore := strings.Cut(subject, ".")
		if subject == "" || (ft != "*" && ft != st) {
			return false
		}
		if !fmore || !smore {
			return fmore == smore
		}
		filter, subject = frest, srest
	}
}

var _ events.Store = (*Store)(nil)
