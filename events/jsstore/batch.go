package jsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/iqdgateway/gateway/events"
)

// Group commit across subjects (docs/ARCHITECTURE.md, "Group commit across
// sites"). The ledger packs the commands that queue up for one site into
// one message, but many sites with a command or two each still cost one
// stream write, and on a stream that fsyncs every message one fsync, each.
// So appends that wait at the same moment, on any subjects, are sent as
// one JetStream atomic batch: one proposal on a replicated stream, one
// flush and one fsync on a single file store. Every message of the batch
// still carries its own expected per-subject sequence, so the batch is
// fenced exactly as the single appends would be; a batch that is refused
// stores nothing, and its appends are then sent one by one, each getting
// the answer a single append gets.

// Batch limits: the server takes at most 1,000 messages in a batch by
// default; a smaller cap bounds how long a batch holds the stream.
const (
	maxBatchMsgs  = 256
	maxBatchBytes = 4 << 20
)

// Headers of JetStream's atomic batch publish.
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
	hdrExpectSubj  = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectStrm  = "Nats-Expected-Stream"
)

// errAtomicDisabled is JetStream's "atomic publish is disabled" (a stream
// created by an older build, or a server that refuses it).
const errAtomicDisabled = 10174

// batcher queues appends while a write is in flight and sends what queued
// as one batch once it is done.
type batcher struct {
	s *Store
	// min is the fewest appends sent as a batch; fewer go one by one.
	min int
	// linger is Options.Linger.
	linger time.Duration
	// off is set once the stream refused an atomic batch.
	off atomic.Bool

	mu      sync.Mutex
	queue   []*pending
	running bool

	stats BatchStats
}

// BatchStats counts the atomic batches a store sent (see Store.Batches).
type BatchStats struct {
	// Stored batches and the appends they held.
	Stored, Appends atomic.Uint64
	// Refused batches, whose appends were then sent one by one.
	Refused atomic.Uint64
	// Unknown batches: sent and not answered; each append settles its own.
	Unknown atomic.Uint64
}

// Batches returns the store's batch counters (nil when it sends every
// append alone).
func (s *Store) Batches() *BatchStats {
	if s.batch == nil {
		return nil
	}
	return &s.batch.stats
}

// pending is one append waiting for the batcher.
type pending struct {
	ctx     context.Context
	subject string
	expect  uint64
	data    []byte
	seq     uint64
	err     error
	done    chan struct{}
}

func (p *pending) finish(seq uint64, err error) {
	p.seq, p.err = seq, err
	close(p.done)
}

// append queues one append and waits for its outcome. Once queued it is
// always answered: an append taken for a batch is bounded by
// publishTimeout, and the answer must be what happened to it.
func (b *batcher) append(ctx context.Context, subject string, expect uint64, data []byte) (uint64, error) {
	p := &pending{ctx: ctx, subject: subject, expect: expect, data: data, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, p)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		go func() {
			if b.linger > 0 {
				time.Sleep(b.linger)
			}
			b.run()
		}()
	}
	<-p.done
	return p.seq, p.err
}

// run sends what queued, one write at a time, until the queue is empty.
func (b *batcher) run() {
	for {
		batch := b.take()
		if batch == nil {
			return
		}
		live := batch[:0:0]
		for _, p := range batch {
			if err := p.ctx.Err(); err != nil {
				// Its caller gave up before it was sent.
				p.finish(0, fmt.Errorf("append %s: %w: not sent: %v", p.subject, events.ErrUnavailable, err))
				continue
			}
			live = append(live, p)
		}
		if len(live) >= b.min && !b.off.Load() && b.commit(live) {
			continue
		}
		b.alone(live)
	}
}

// take removes the next batch from the queue (nil when empty, and the loop
// ends).
func (b *batcher) take() []*pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.running = false
		return nil
	}
	n, size := 0, 0
	for n < len(b.queue) && n < maxBatchMsgs {
		size += len(b.queue[n].data)
		if n > 0 && size > maxBatchBytes {
			break
		}
		n++
	}
	batch := b.queue[:n:n]
	b.queue = append([]*pending(nil), b.queue[n:]...)
	return batch
}

// alone sends each append on its own, all at once, and waits for them.
func (b *batcher) alone(batch []*pending) {
	var wg sync.WaitGroup
	for _, p := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.finish(b.s.appendOne(p.ctx, p.subject, p.expect, p.data))
		}()
	}
	wg.Wait()
}

// commit sends batch as one atomic batch and answers its appends. It
// reports false, answering none, when the batch was certainly not stored:
// the appends are then sent one by one, and each learns its own outcome (a
// refusal names no message, so only that tells the stale one apart).
func (b *batcher) commit(batch []*pending) bool {
	seqs, err := b.s.publishBatch(batch)
	switch {
	case err == nil:
		b.stats.Stored.Add(1)
		b.stats.Appends.Add(uint64(len(batch)))
		for i, p := range batch {
			p.finish(seqs[i], nil)
		}
		return true
	case errors.Is(err, errBatchNotStored):
		b.stats.Refused.Add(1)
		var api *batchAPIError
		if errors.As(err, &api) && api.ErrCode == errAtomicDisabled {
			b.off.Store(true)
		}
		return false
	}
	// Sent and not answered: maybe stored, all of it or none (the batch
	// is atomic). Each caller settles its own subject.
	b.stats.Unknown.Add(1)
	for _, p := range batch {
		p.finish(0, fmt.Errorf("append %s at %d in a batch of %d: %w", p.subject, p.expect, len(batch), err))
	}
	return true
}

// errBatchNotStored says a batch was certainly not stored.
var errBatchNotStored = errors.New("batch not stored")

// batchAPIError is the stream's refusal of a batch.
type batchAPIError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *batchAPIError) Error() string {
	return fmt.Sprintf("%s (%d)", e.Description, e.ErrCode)
}

// batchAck is the stream's answer to a batch's commit.
type batchAck struct {
	Stream string         `json:"stream"`
	Seq    uint64         `json:"seq"`
	Batch  string         `json:"batch"`
	Count  int            `json:"count"`
	Error  *batchAPIError `json:"error"`
}

// publishBatch sends batch as one atomic batch and returns the stream
// sequence of each message. Its errors wrap errBatchNotStored when
// nothing was stored, else events.ErrOutcomeUnknown.
func (s *Store) publishBatch(batch []*pending) ([]uint64, error) {
	id := nuid.Next()
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	var reply *nats.Msg
	for i, p := range batch {
		m := nats.NewMsg(p.subject)
		m.Data = p.data
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		m.Header.Set(hdrExpectSubj, strconv.FormatUint(p.expect, 10))
		m.Header.Set(hdrExpectStrm, s.name)
		if i < len(batch)-1 {
			// Staged without an answer; the commit's answer covers
			// them. One that is not sent leaves a gap, and the server
			// drops the batch without a commit.
			if err := s.nc.PublishMsg(m); err != nil {
				return nil, fmt.Errorf("%w: staging message %d: %v", errBatchNotStored, i+1, err)
			}
			continue
		}
		m.Header.Set(hdrBatchCommit, "1")
		var err error
		if reply, err = s.nc.RequestMsgWithContext(ctx, m); err != nil {
			if notSent(err) {
				return nil, fmt.Errorf("%w: commit: %v", errBatchNotStored, err)
			}
			return nil, fmt.Errorf("%w: commit: %v", appendOutcome(err), err)
		}
	}
	var ack batchAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return nil, fmt.Errorf("%w: batch answer %q: %v", events.ErrOutcomeUnknown, reply.Data, err)
	}
	if ack.Error != nil {
		return nil, fmt.Errorf("%w: %w", errBatchNotStored, ack.Error)
	}
	n := len(batch)
	if ack.Batch != id || ack.Count != n || ack.Stream != s.name || ack.Seq < uint64(n) {
		return nil, fmt.Errorf("%w: batch answer %q for batch %s of %d", events.ErrOutcomeUnknown, reply.Data, id, n)
	}
	// A batch is stored in one piece: its messages hold consecutive
	// sequences ending at the acknowledged one.
	seqs := make([]uint64, n)
	for i := range seqs {
		seqs[i] = ack.Seq - uint64(n-1-i)
	}
	return seqs, nil
}
