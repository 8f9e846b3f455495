// Package jsstore is the JetStream adapter of the ledger: it appends sealed
// messages with an expected per-subject sequence, reads them back, follows
// the stream for the read side, and keeps snapshots in an object store. It maps
// JetStream's conflict codes to events.ErrConflict.
package jsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gateway/events"
)

// Options configure the streams.
type Options struct {
	// Replicas is the stream replication factor (1 embedded, 3 in a cluster).
	Replicas int
	// Stream overrides the ledger stream name (tests).
	Stream string
	// BatchMin is the fewest appends, waiting at one moment, that are sent
	// as one atomic batch (see batch.go); 0 sends every append alone.
	// Worth it where a batch costs less than its messages alone: on a
	// single file store that fsyncs every message a batch costs about as
	// much as fifteen fsyncs; on a replicated stream Raft already packs
	// the proposals in flight together (docs/ARCHITECTURE.md, "Group
	// commit across sites").
	BatchMin int
	// Linger holds the first append that finds the batcher idle this long
	// before sending, so that others join it (tests gather a batch so;
	// the gateway sends at once).
	Linger time.Duration
	// Files is the store directory of the embedded server the connection
	// goes to: Get then reads messages of the blocks the server has sealed
	// from the block files, without making the server load whole blocks
	// into memory (see blockget.go). Empty: every read asks the server.
	Files string
	// SyncFiles says the embedded server under Files does not fsync: the
	// store then fsyncs the stream's block files itself, once for every
	// group of appends acknowledged meanwhile, before it answers them, and
	// hands out no message that is not on disk yet (see filesync.go). Only
	// for a server this process alone writes to, with one replica.
	SyncFiles bool
}

// Store is the ledger's JetStream event store.
type Store struct {
	nc     *nats.Conn
	stream jetstream.Stream
	snaps  jetstream.ObjectStore
	name   string
	// batch groups appends across subjects; nil: every append alone.
	batch *batcher
	// files reads sealed messages from the block files; nil: none.
	files *blockIndex
	// fsync makes acknowledged appends durable (Options.SyncFiles); nil:
	// the server does.
	fsync *fileSync
	// readBatch and readBytes override defaultReadBatch and
	// defaultReadBytes (tests use small ones to cross from the first fetch
	// to the streaming read, and to stay under a small server's limit).
	readBatch, readBytes int
}

const snapshotBucket = "LEDGER_SNAPSHOTS"

// maxSnapshotBytes bounds a snapshot's size as LoadSnapshot believes it
// (a site's state is about 150 bytes a transaction).
const maxSnapshotBytes = 4 << 30

// Open creates (or updates) the ledger stream and the snapshot bucket.
func Open(ctx context.Context, nc *nats.Conn, o Options) (*Store, error) {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Stream == "" {
		o.Stream = events.StreamName
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        o.Stream,
		Description: "payment gateway ledger: one subject per site, the only write",
		Subjects:    []string{events.SubjectPrefix + ">"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxAge:      0,
		DenyDelete:  true,
		DenyPurge:   true,
		// Direct gets on a replicated stream may be answered by a replica
		// that has not applied the latest acknowledged message: a lookup
		// right after a write through another gateway would miss it. So
		// there every read goes to the stream leader, which acknowledges
		// only what it has applied (docs/ARCHITECTURE.md,
		// "On a replicated cluster"); a single replica is its own leader, and
		// its direct gets skip the API's JSON.
		AllowDirect: o.Replicas == 1,
		// Appends carry no message ids (the expected sequence is what
		// makes them safe), so the duplicate window holds nothing.
		Duplicates: time.Minute,
		Replicas:   o.Replicas,
		MaxMsgSize: 8 << 20,
		// Appends of many sites may share one write (see batch.go).
		AllowAtomicPublish: true,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", o.Stream, mapErr(err))
	}
	snaps, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      snapshotBucket,
		Description: "derived site state at a known ledger sequence; rebuildable from the ledger",
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("create snapshot bucket: %w", mapErr(err))
	}
	s := &Store{nc: nc, stream: st, snaps: snaps, name: o.Stream}
	// A server that does not know atomic batches leaves the option out of
	// the configuration it answers with; it would store the staged
	// messages one by one.
	if o.BatchMin > 0 && st.CachedInfo().Config.AllowAtomicPublish {
		s.batch = &batcher{s: s, min: max(o.BatchMin, 2), linger: o.Linger}
	}
	if o.Files != "" && o.Replicas == 1 && st.CachedInfo().Config.Compression == jetstream.NoCompression {
		s.files = newBlockIndex(o.Files, o.Stream)
	}
	if o.SyncFiles {
		if o.Files == "" || o.Replicas != 1 {
			return nil, fmt.Errorf("open %s: the store can fsync the block files of an embedded server with one replica only (files %q, replicas %d)", o.Stream, o.Files, o.Replicas)
		}
		s.fsync = newFileSync(o.Files, o.Stream)
	}
	return s, nil
}

// Append stores data on subject only if the subject's last message is still
// expectLast (0: the subject must be empty). It returns the new message's
// stream sequence. It tells three failures apart: events.ErrConflict (the
// stream refused it: the subject moved on, or another append on it is in
// flight), events.ErrUnavailable (it was never delivered to the stream, or
// the stream refused it for another reason: not stored), and
// events.ErrOutcomeUnknown (sent, and not answered: maybe stored). Only
// deliveries that certainly did not happen are retried here; an unknown
// outcome is the caller's to settle, because a retry that conflicts could
// be conflicting with the first attempt itself (JetStream checks the
// expected sequence before message-id deduplication, so ids would not
// settle it either).
//
// Appends that wait at the same moment may travel together as one atomic
// batch (see batch.go); each still gets exactly one of these answers.
//
// With Options.SyncFiles an append is answered once it is on disk.
func (s *Store) Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	if s.fsync != nil {
		if err := s.fsync.usable(); err != nil {
			return 0, fmt.Errorf("append %s: %w: %v", subject, events.ErrUnavailable, err)
		}
		s.fsync.sending()
	}
	var seq uint64
	var err error
	if b := s.batch; b != nil && !b.off.Load() {
		seq, err = b.append(ctx, subject, expectLast, data)
	} else {
		seq, err = s.appendOne(ctx, subject, expectLast, data)
	}
	if s.fsync == nil {
		return seq, err
	}
	if err != nil {
		s.fsync.unsent()
		return seq, err
	}
	if err := s.fsync.stored(ctx, seq); err != nil {
		return 0, fmt.Errorf("append %s at %d: %w", subject, expectLast, err)
	}
	return seq, nil
}

// Fsyncs returns the counters of the store's own fsyncs (nil when the
// server fsyncs: no Options.SyncFiles).
func (s *Store) Fsyncs() *FsyncStats {
	if s.fsync == nil {
		return nil
	}
	return &s.fsync.stats
}

// handOut returns m once it is on disk (see onDisk).
func (s *Store) handOut(ctx context.Context, m events.Msg) (events.Msg, error) {
	if err := s.onDisk(ctx, m.Seq); err != nil {
		return events.Msg{}, err
	}
	return m, nil
}

// onDisk waits, with Options.SyncFiles, until the stored message at seq is
// on disk too, so that nothing a power loss could take back is handed out.
func (s *Store) onDisk(ctx context.Context, seq uint64) error {
	if s.fsync == nil {
		return nil
	}
	return s.fsync.visible(ctx, seq)
}

// appendOne stores one message on its own (see Append).
func (s *Store) appendOne(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("append %s: %w: %v", subject, events.ErrUnavailable, err)
		}
		if s.nc.IsClosed() {
			// Not sent; once sent, a closed connection is an unknown
			// outcome (see appendOutcome).
			return 0, fmt.Errorf("append %s: %w: %v", subject, events.ErrUnavailable, nats.ErrConnectionClosed)
		}
		seq, err := s.publish(ctx, subject, expectLast, data)
		if err == nil {
			return seq, nil
		}
		if notSent(err) && attempt < 3 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
			}
			continue
		}
		return 0, fmt.Errorf("append %s at %d: %w: %v", subject, expectLast, appendOutcome(err), err)
	}
}

// publish sends one message expected at expectLast on its subject and
// reads the stream's acknowledgement. It is jetstream's Publish with those
// two options, without what every append paid for around it: a context
// and its timer per call (the connection's pooled timer bounds the wait,
// to the deadline of ctx at the most), the options parsed again, and the
// acknowledgement decoded by reflection when it has its usual shape. Its
// errors are the ones Publish gives, for appendOutcome and notSent.
func (s *Store) publish(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	timeout := publishTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if timeout <= 0 {
		return 0, context.DeadlineExceeded
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{
		hdrExpectSubj: []string{strconv.FormatUint(expectLast, 10)},
		hdrExpectStrm: []string{s.name},
	}}
	resp, err := s.nc.RequestMsg(msg, timeout)
	if errors.Is(err, nats.ErrNoResponders) {
		return 0, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return 0, err
	}
	return parsePubAck(resp.Data, s.name)
}

// parsePubAck reads a stream's answer to a publish: the sequence stored
// at, or the stream's refusal as a *jetstream.APIError.
func parsePubAck(b []byte, stream string) (uint64, error) {
	// The usual answer, {"stream":"LEDGER","seq":123}, read directly.
	if rest, ok := bytes.CutPrefix(b, []byte(`{"stream":"`)); ok {
		if rest, ok := bytes.CutPrefix(rest, []byte(stream)); ok {
			if digits, ok := bytes.CutPrefix(rest, []byte(`","seq":`)); ok {
				if digits, ok := bytes.CutSuffix(digits, []byte("}")); ok {
					if seq, err := strconv.ParseUint(string(digits), 10, 64); err == nil && seq > 0 {
						return seq, nil
					}
				}
			}
		}
	}
	var ack struct {
		Error    *jetstream.APIError `json:"error"`
		Stream   string              `json:"stream"`
		Sequence uint64              `json:"seq"`
	}
	if err := json.Unmarshal(b, &ack); err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	if ack.Error != nil {
		return 0, fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" || ack.Sequence == 0 {
		return 0, jetstream.ErrInvalidJSAck
	}
	if ack.Stream != stream {
		return 0, fmt.Errorf("%w: stored in stream %q, not %q", jetstream.ErrInvalidJSAck, ack.Stream, stream)
	}
	return ack.Sequence, nil
}

// appendOutcome is what a failed publish says of the message: refused
// because the subject moved (events.ErrConflict), maybe stored
// (events.ErrOutcomeUnknown: no answer in time, an answer that could not
// be read, a connection lost while waiting), or not stored
// (events.ErrUnavailable: it reached no stream, or the stream refused it
// for another reason, or the client would not send it).
func appendOutcome(err error) error {
	switch {
	case isConflict(err):
		return events.ErrConflict
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrInvalidJSAck) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected):
		return events.ErrOutcomeUnknown
	}
	return events.ErrUnavailable
}

// publishTimeout bounds waiting for one append's acknowledgement. A
// replicated stream answers in milliseconds; one that lost its leader does
// not answer at all until a new one is elected (seconds), which the
// caller's settling covers.
const publishTimeout = 5 * time.Second

// callTimeout bounds one request to the stream (a read, stream info). A
// request sent while the stream changes leader can go unanswered: the
// caller is told at once and tries again on its own schedule, instead of
// waiting out a long deadline for an answer that will never come.
const callTimeout = 2 * time.Second

// call bounds ctx for one request (see callTimeout).
func call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout)
}

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
	cons, err := s.ordered(ctx, filter, from)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", filter, err)
	}
	batch, err := cons.FetchNoWait(s.readBatchSize())
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", filter, mapErr(err))
	}
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			return 0, false, fmt.Errorf("read %s: metadata: %w", filter, err)
		}
		if err := s.onDisk(ctx, md.Sequence.Stream); err != nil {
			return 0, false, fmt.Errorf("read %s: %w", filter, err)
		}
		if err := fn(events.Msg{Seq: md.Sequence.Stream, Subject: m.Subject(), Data: m.Data()}); err != nil {
			return 0, false, err
		}
		next, more = md.Sequence.Stream+1, md.NumPending > 0
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return 0, false, fmt.Errorf("read %s: %w", filter, mapErr(err))
	}
	return next, more, nil
}

// readRest streams from sequence from, which readFirst saw pending, until
// the message after which nothing matching is pending.
func (s *Store) readRest(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	cons, err := s.ordered(ctx, filter, from)
	if err != nil {
		return fmt.Errorf("read %s: %w", filter, err)
	}
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

// ordered makes an ordered consumer of filter starting at sequence from.
func (s *Store) ordered(ctx context.Context, filter string, from uint64) (jetstream.Consumer, error) {
	if from == 0 {
		from = 1
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
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

// Follow delivers every message matching filter from sequence from onwards,
// now and as they are appended, until ctx ends. fn runs on one goroutine in
// stream order; an ordered consumer recreates itself after a disconnect, so
// a follower never skips or repeats a message.
func (s *Store) Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error {
	cons, err := s.ordered(ctx, filter, from)
	if err != nil {
		return fmt.Errorf("follow %s: %w", filter, err)
	}
	it, err := cons.Messages(jetstream.PullMaxBytes(s.readBytesSize()))
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

// SaveSnapshot stores derived state for name at stream sequence seq,
// replacing the previous one. The data is stored S2-compressed (a site's
// state takes about a third of its size): every snapshot round rewrites
// every changed site, and the server holds each block it writes in memory
// for a while, so the bytes written are memory too (BENCHMARKS.md "A
// million transactions over 1,000 sites").
func (s *Store) SaveSnapshot(ctx context.Context, name string, seq uint64, data []byte) error {
	meta := map[string]string{"seq": strconv.FormatUint(seq, 10)}
	if len(data) > 0 {
		data = s2.Encode(nil, data)
		meta[snapshotEncodingKey] = snapshotS2
	}
	_, err := s.snaps.Put(ctx, jetstream.ObjectMeta{Name: name, Metadata: meta}, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("save snapshot %s: %w", name, mapErr(err))
	}
	return nil
}

// A snapshot's metadata names its encoding; none is the raw state, as
// stored before snapshots were compressed.
const (
	snapshotEncodingKey = "enc"
	snapshotS2          = "s2"
)

// LoadSnapshot returns the latest snapshot of name and its sequence;
// events.ErrNotFound when there is none, events.ErrCorrupt when it cannot
// be decoded (the caller rebuilds the state from the stream instead).
func (s *Store) LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error) {
	r, err := s.snaps.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return 0, nil, fmt.Errorf("snapshot %s: %w", name, events.ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w", name, mapErr(err))
	}
	defer r.Close()
	info, err := r.Info()
	if err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w", name, err)
	}
	seq, err := strconv.ParseUint(info.Metadata["seq"], 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("snapshot %s: bad seq %q", name, info.Metadata["seq"])
	}
	// Read into one buffer of the object's size: io.ReadAll would grow
	// one by doubling, and a start-up reads a snapshot per site.
	if info.Size > maxSnapshotBytes {
		return 0, nil, fmt.Errorf("load snapshot %s: %d bytes, more than any snapshot", name, info.Size)
	}
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w", name, mapErr(err))
	}
	// Reading to the end is what checks the object's digest.
	if rest, err := io.ReadAll(r); err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w", name, mapErr(err))
	} else if len(rest) != 0 {
		return 0, nil, fmt.Errorf("load snapshot %s: longer than its size %d", name, info.Size)
	}
	data, err = decodeSnapshot(info.Metadata[snapshotEncodingKey], data)
	if err != nil {
		return 0, nil, fmt.Errorf("load snapshot %s: %w: %v", name, events.ErrCorrupt, err)
	}
	return seq, data, nil
}

// decodeSnapshot undoes the encoding enc names.
func decodeSnapshot(enc string, data []byte) ([]byte, error) {
	switch enc {
	case "":
		return data, nil
	case snapshotS2:
		n, err := s2.DecodedLen(data)
		if err != nil {
			return nil, err
		}
		if n > maxSnapshotBytes {
			return nil, fmt.Errorf("%d bytes decoded, more than any snapshot", n)
		}
		return s2.Decode(make([]byte, n), data)
	}
	return nil, fmt.Errorf("unknown encoding %q", enc)
}

// ListSnapshots returns the names of all stored snapshots.
func (s *Store) ListSnapshots(ctx context.Context) ([]string, error) {
	infos, err := s.snaps.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", mapErr(err))
	}
	out := make([]string, 0, len(infos))
	for _, i := range infos {
		if !i.Deleted {
			out = append(out, i.Name)
		}
	}
	return out, nil
}

// Ping checks that the stream answers.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.LastSeq(ctx)
	return err
}

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant, 10163:
			return true
		}
	}
	return false
}

// notSent reports errors that say the message reached no stream: no
// server had interest in the subject, or the connection could not send.
// Such an append is tried again.
func notSent(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrReconnectBufExceeded)
}

// mapErr maps a store error to the events package's: no such message is
// events.ErrNotFound; anything else, a refusal of the stream included (no
// leader, not ready, offline), is events.ErrUnavailable. The original
// error stays in the chain for errors.Is.
func mapErr(err error) error {
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%w: %w", events.ErrNotFound, err)
	}
	return fmt.Errorf("%w: %w", events.ErrUnavailable, err)
}
