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
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
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
	// TailMayBeLost says the server does not put every acknowledged
	// message on disk before answering (the embedded server's --sync
	// interval): after a machine crash its stream may end early, or miss
	// messages of its last moments, which is that mode's documented loss
	// and not damage. The open then does not refuse a stream missing
	// messages before its last (checkWhole).
	TailMayBeLost bool
}

// Store is the ledger's JetStream event store.
type Store struct {
	nc     *nats.Conn
	stream jetstream.Stream
	snaps  jetstream.ObjectStore
	name   string
	// self tells this store's hand-over requests from other processes'
	// (see handover.go).
	self string
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
	// sendHook, when set, runs before every append is sent (tests make
	// it panic).
	sendHook func()
}

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
	s := &Store{nc: nc, stream: st, snaps: snaps, name: o.Stream, self: newWriterID()}
	// A server that does not know atomic batches leaves the option out of
	// the configuration it answers with; it would store the staged
	// messages one by one.
	if o.BatchMin > 0 && st.CachedInfo().Config.AllowAtomicPublish {
		s.batch = &batcher{s: s, min: max(o.BatchMin, 2), linger: o.Linger}
	}
	if o.Files != "" && o.Replicas == 1 && st.CachedInfo().Config.Compression == jetstream.NoCompression {
		s.files = newBlockIndex(o.Files, o.Stream)
	}
	// markSeq is what the store's own fsync rounds once put on disk (0:
	// unknown).
	var markSeq uint64
	if o.SyncFiles {
		if o.Files == "" || o.Replicas != 1 {
			return nil, fmt.Errorf("open %s: the store can fsync the block files of an embedded server with one replica only (files %q, replicas %d)", o.Stream, o.Files, o.Replicas)
		}
		s.fsync = newFileSync(o.Files, o.Stream)
		s.fsync.atOpen = st.CachedInfo().State.LastSeq
		mark, seq, err := openMark(o.Files, o.Stream)
		if err != nil {
			return nil, err
		}
		if err := checkMark(o.Stream, s.fsync.atOpen, seq); err != nil {
			mark.Close()
			return nil, err
		}
		s.fsync.mark, markSeq = mark, seq
	}
	if !o.TailMayBeLost {
		if err := checkWhole(ctx, st, o.Stream, markSeq); err != nil {
			if s.fsync != nil {
				s.fsync.mark.Close()
			}
			return nil, err
		}
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
	if s.fsync == nil {
		return s.send(ctx, subject, expectLast, data)
	}
	if err := s.fsync.usable(); err != nil {
		return 0, fmt.Errorf("append %s: %w: %v", subject, events.ErrUnavailable, err)
	}
	seq, err := s.sendCounted(ctx, subject, expectLast, data)
	if err != nil {
		s.fsync.unsent()
		return seq, err
	}
	if err := s.fsync.stored(ctx, seq); err != nil {
		return 0, fmt.Errorf("append %s at %d: %w", subject, expectLast, err)
	}
	return seq, nil
}

// sendCounted sends an append that fileSync counts as on its way. Whatever
// ends the send settles it, a panic too (the ledger recovers panics while
// committing): an fsync round gathers until as many appends are settled
// as were counted, so one never settled would hold every later round back
// for its whole gathering bound.
func (s *Store) sendCounted(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	sent := false
	defer func() {
		if !sent {
			s.fsync.unsent()
		}
	}()
	s.fsync.sending()
	seq, err := s.send(ctx, subject, expectLast, data)
	sent = true
	return seq, err
}

// send stores one append, in a batch with others or alone.
func (s *Store) send(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	if s.sendHook != nil {
		s.sendHook()
	}
	if b := s.batch; b != nil && !b.off.Load() {
		return b.append(ctx, subject, expectLast, data)
	}
	return s.appendOne(ctx, subject, expectLast, data)
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

// Ping checks that the stream answers.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.LastSeq(ctx)
	return err
}

// errCodeLastSeqPerSubjectNotReady is nats-server's
// JSStreamExpectedLastSeqPerSubjectNotReady: a replicated stream cannot
// check an expected last subject sequence yet, after a leader change.
// nats.go names no constant for it. Like the two wrong-sequence codes it
// means "read again and decide again" (docs/ARCHITECTURE.md).
const errCodeLastSeqPerSubjectNotReady jetstream.ErrorCode = 10163

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant, errCodeLastSeqPerSubjectNotReady:
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

var _ events.Store = (*Store)(nil)
