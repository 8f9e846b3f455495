package jsstore

// Reading the stream: one message, a subject's next or last, a range in
// order, and following it as it grows.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
)

// Get reads the message at seq.
func (s *Store) Get(ctx context.Context, seq uint64) (events.Msg, error) {
	if seq == 0 {
		// JetStream calls it a bad request; no message has it.
		return events.Msg{}, fmt.Errorf("get 0: %w: sequences start at 1", events.ErrUnavailable)
	}
	if s.files != nil {
		if m, err := s.files.get(seq); err == nil {
			return s.handOut(ctx, m)
		}
	}
	cctx, cancel := call(ctx)
	defer cancel()
	m, err := s.stream.GetMsg(cctx, seq)
	if err != nil {
		return events.Msg{}, fmt.Errorf("get %d: %w", seq, mapErr(err))
	}
	return s.handOut(ctx, events.Msg{Seq: m.Sequence, Subject: m.Subject, Data: m.Data})
}

// Next reads the first message of subject at or after seq.
func (s *Store) Next(ctx context.Context, subject string, seq uint64) (events.Msg, error) {
	cctx, cancel := call(ctx)
	defer cancel()
	m, err := s.stream.GetMsg(cctx, seq, jetstream.WithGetMsgSubject(subject))
	if err != nil {
		return events.Msg{}, fmt.Errorf("next %s from %d: %w", subject, seq, mapErr(err))
	}
	return s.handOut(ctx, events.Msg{Seq: m.Sequence, Subject: m.Subject, Data: m.Data})
}

// LastSeq returns the stream's last sequence (0 when empty).
func (s *Store) LastSeq(ctx context.Context) (uint64, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", mapErr(err))
	}
	return info.State.LastSeq, nil
}

// LastFor returns the sequence of subject's last message (0 when none).
func (s *Store) LastFor(ctx context.Context, subject string) (uint64, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	m, err := s.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last for %s: %w", subject, mapErr(err))
	}
	return m.Sequence, nil
}

// Read calls fn for every message matching filter (a subject or wildcard)
// with sequence ≥ from, in stream order, until no matching message is
// pending. It is the bulk path: start-up replay, audits, rebuilds.
func (s *Store) Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	// A no-wait fetch answers at once with what is pending, so an empty
	// filter ends the read without waiting. An ordered consumer recreates
	// itself on every fetch, though, so a longer read continues on a
	// consumer that streams (one creation for the whole read).
	next, more, err := s.readFirst(ctx, filter, from, fn)
	if err != nil || !more {
		return err
	}
	return s.readRest(ctx, filter, next, fn)
}

// A read must never ask for more than the server may hold for one client:
// a server cuts a client off as a slow consumer once more than its
// max_pending (64 MiB by default) waits to be written to it, and a pull of
// 4,096 messages of a few tens of KiB each (one site's group commit) is
// already past that. So the first fetch asks for a few messages, which is
// all most reads need, and the streaming read is bounded in bytes.
const (
	// defaultReadBatch is how many messages the first fetch of Read asks
	// for: 256 of the largest group commits (about 128 KiB) stay well
	// under max_pending.
	defaultReadBatch = 256
	// defaultReadBytes bounds each pull of the streaming read and of
	// Follow. It must exceed the largest message (the stream's
	// MaxMsgSize, 8 MiB), or that message could never be delivered.
	defaultReadBytes = 16 << 20
)

func (s *Store) readBatchSize() int {
	if s.readBatch > 0 {
		return s.readBatch
	}
	return defaultReadBatch
}

func (s *Store) readBytesSize() int {
	if s.readBytes > 0 {
		return s.readBytes
	}
	return defaultReadBytes
}

// readFirst reads up to one batch of messages with one fetch. more says that
// messages were still pending after them, from sequence next.
func (s *Store) readFirst(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) (next uint64, more bool, err error) {
	cons, err := s.ordered(ctx, filter, from, readInactive)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", filter, err)
	}
	defer s.dropConsumer(cons)
	// On a replicated stream the consumer a fetch makes may not be known
	// yet to the node its pull reaches, which then has no responder: that
	// fetch read nothing and reached nobody, and is sent again.
	for attempt := 0; ; attempt++ {
		var got bool
		next, more, got, err = s.fetchFirst(ctx, cons, filter, fn)
		if got || !errors.Is(err, nats.ErrNoResponders) || attempt >= 3 {
			return next, more, err
		}
		select {
		case <-ctx.Done():
			return 0, false, err
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
}

// fetchFirst is readFirst's one fetch; got says a message was delivered.
func (s *Store) fetchFirst(ctx context.Context, cons jetstream.Consumer, filter string, fn func(events.Msg) error) (next uint64, more, got bool, err error) {
	batch, err := cons.FetchNoWait(s.readBatchSize())
	if err != nil {
		return 0, false, false, fmt.Errorf("read %s: %w", filter, mapErr(err))
	}
	for m := range batch.Messages() {
		got = true
		md, err := m.Metadata()
		if err != nil {
			return 0, false, got, fmt.Errorf("read %s: metadata: %w", filter, err)
		}
		if err := s.onDisk(ctx, md.Sequence.Stream); err != nil {
			return 0, false, got, fmt.Errorf("read %s: %w", filter, err)
		}
		if err := fn(events.Msg{Seq: md.Sequence.Stream, Subject: m.Subject(), Data: m.Data()}); err != nil {
			return 0, false, got, err
		}
		next, more = md.Sequence.Stream+1, md.NumPending > 0
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return 0, false, got, fmt.Errorf("read %s: %w", filter, mapErr(err))
	}
	return next, more, got, nil
}

// readRest streams from sequence from, which readFirst saw pending, until
// the message after which nothing matching is pending.
func (s *Store) readRest(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	cons, err := s.ordered(ctx, filter, from, readInactive)
	if err != nil {
		return fmt.Errorf("read %s: %w", filter, err)
	}
	defer s.dropConsumer(cons)
	it, err := cons.Messages(jetstream.PullMaxBytes(s.readBytesSize()))
	if err != nil {
		return fmt.Errorf("read %s: %w", filter, mapErr(err))
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("read %s: %w", filter, mapErr(err))
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("read %s: metadata: %w", filter, err)
		}
		if err := s.onDisk(ctx, md.Sequence.Stream); err != nil {
			return fmt.Errorf("read %s: %w", filter, err)
		}
		if err := fn(events.Msg{Seq: md.Sequence.Stream, Subject: m.Subject(), Data: m.Data()}); err != nil {
			return err
		}
		if md.NumPending == 0 {
			return nil
		}
	}
}

// readInactive is how long the server keeps a Read's consumer once nothing
// pulls from it (the library's default is 5 minutes): the stream holds at
// most 1,000 consumers, and reads that left theirs behind at a few hundred
// a second (callback streams, catch-ups) filled it, after which every read
// failed until they expired. A read also deletes its consumer when it ends
// (dropConsumer); this bounds what a read that could not do so leaves.
const readInactive = 5 * time.Second

// ordered makes an ordered consumer of filter starting at sequence from;
// inactive is its InactiveThreshold (0: the library's).
func (s *Store) ordered(ctx context.Context, filter string, from uint64, inactive time.Duration) (jetstream.Consumer, error) {
	if from == 0 {
		from = 1
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{filter},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		InactiveThreshold: inactive,
	}
	// A server whose JetStream is still rejoining the cluster (a node
	// back from a restart or a partition) has no API responders for a
	// moment: that request reached nobody, and is sent again.
	for attempt := 0; ; attempt++ {
		cons, err := s.stream.OrderedConsumer(ctx, cfg)
		if err == nil {
			return cons, nil
		}
		if !errors.Is(err, nats.ErrNoResponders) || attempt >= 5 {
			return nil, mapErr(err)
		}
		select {
		case <-ctx.Done():
			return nil, mapErr(err)
		case <-time.After(time.Duration(200<<attempt) * time.Millisecond):
		}
	}
}

// dropConsumer deletes a finished read's consumer, in the background (the
// read's answer does not wait for it); one that cannot be deleted now goes
// after readInactive.
func (s *Store) dropConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || info.Name == "" {
		return
	}
	go func(name string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.stream.DeleteConsumer(ctx, name)
	}(info.Name)
}

// Follow's pull requests: see Follow.
const (
	followExpiry    = 5 * time.Second
	followHeartbeat = 2 * time.Second
)

// Follow delivers every message matching filter from sequence from onwards,
// now and as they are appended, until ctx ends. fn runs on one goroutine in
// stream order; an ordered consumer recreates itself after a disconnect, so
// a follower never skips or repeats a message.
func (s *Store) Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error {
	cons, err := s.ordered(ctx, filter, from, 0)
	if err != nil {
		return fmt.Errorf("follow %s: %w", filter, err)
	}
	// Short pulls kept alive by heartbeats: a follower whose server went
	// away (a cluster node lost) notices it after two missed heartbeats,
	// not the library's ten seconds, and starts over on another.
	it, err := cons.Messages(jetstream.PullMaxBytes(s.readBytesSize()), jetstream.PullExpiry(followExpiry), jetstream.PullHeartbeat(followHeartbeat))
	if err != nil {
		return fmt.Errorf("follow %s: %w", filter, mapErr(err))
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("follow %s: %w", filter, mapErr(err))
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("follow %s: metadata: %w", filter, err)
		}
		if err := s.onDisk(ctx, md.Sequence.Stream); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("follow %s: %w", filter, err)
		}
		fn(events.Msg{Seq: md.Sequence.Stream, Subject: m.Subject(), Data: m.Data()})
	}
}
