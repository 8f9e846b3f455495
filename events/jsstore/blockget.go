package jsstore

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/minio/highwayhash"

	"github.com/iqdgateway/gateway/events"
)

// blockIndex answers Get for the embedded server's stream from its message
// block files (the format is described at ReadFiles), so that reading one
// old message does not make the server load the message's whole block:
// nats-server reads a block (8 MiB for the ledger stream) into memory to
// serve any message in it, and frees it only through the garbage
// collector, so random reads of an old history fill the process's memory
// (BENCHMARKS.md, "A million transactions over 1,000 sites"). Here a read
// is a pread of the records between an indexed offset and the message; the
// kernel's page cache, outside the process, keeps what is read often.
//
// The index knows each sealed block's first sequence (one record header
// read), and the offset of every indexStride-th record of each block read
// from (about 2 KiB per 8 MiB block of 1 KiB messages), scanned the first
// time the block is needed. Every message read is checked (length, checksum,
// sequence), and anything unexpected (a removed message, a rewritten
// block) sends this and every later read to the server instead: the files
// are an optimisation, the server the authority.
type blockIndex struct {
	stream string
	mdir   string

	mu     sync.Mutex
	blocks []*indexedBlock // the sealed blocks, by block index
	// refreshed is when the block files were last listed.
	refreshed time.Time
	// broken stops the use of the files after a check failed.
	broken bool
}

// indexStride is how many records apart the index keeps offsets.
const indexStride = 16

type indexedBlock struct {
	index uint32
	path  string
	key   [32]byte // checksum key: SHA-256 of "<stream>-<index>"
	first uint64   // the first record's sequence
	next  uint64   // the next block's first sequence

	// The offsets are read when the block is first needed, under mu.
	mu      sync.Mutex
	scanned bool
	offs    []uint32 // offs[i]: offset of the record of sequence first+i*indexStride
}

func newBlockIndex(dir, stream string) *blockIndex {
	return &blockIndex{stream: stream, mdir: msgsDir(dir, stream)}
}

// errNotInFiles sends a read to the server.
var errNotInFiles = errors.New("not in the block files")

// get reads message seq from the files; errNotInFiles when they cannot
// answer it.
func (x *blockIndex) get(seq uint64) (events.Msg, error) {
	b, off, at, err := x.locate(seq)
	if err != nil {
		return events.Msg{}, err
	}
	m, err := readRecord(b, off, at, seq)
	if err != nil {
		x.mu.Lock()
		x.broken = true
		x.mu.Unlock()
		return events.Msg{}, fmt.Errorf("%w: %w", errNotInFiles, err)
	}
	return m, nil
}

// locate finds the indexed record at or before seq: its block, offset and
// sequence.
func (x *blockIndex) locate(seq uint64) (*indexedBlock, int64, uint64, error) {
	x.mu.Lock()
	if x.broken {
		x.mu.Unlock()
		return nil, 0, 0, errNotInFiles
	}
	b := x.find(seq)
	if b == nil {
		if err := x.refresh(); err != nil {
			x.broken = true
			x.mu.Unlock()
			return nil, 0, 0, fmt.Errorf("%w: %w", errNotInFiles, err)
		}
		b = x.find(seq)
	}
	x.mu.Unlock()
	if b == nil {
		return nil, 0, 0, errNotInFiles
	}
	offs, err := b.offsets()
	if err != nil {
		x.mu.Lock()
		x.broken = true
		x.mu.Unlock()
		return nil, 0, 0, fmt.Errorf("%w: %w", errNotInFiles, err)
	}
	i := (seq - b.first) / indexStride
	return b, int64(offs[i]), b.first + i*indexStride, nil
}

func (x *blockIndex) find(seq uint64) *indexedBlock {
	i, found := slices.BinarySearchFunc(x.blocks, seq, func(b *indexedBlock, seq uint64) int {
		switch {
		case b.next <= seq:
			return -1
		case b.first > seq:
			return 1
		}
		return 0
	})
	if !found || i >= len(x.blocks) {
		return nil
	}
	return x.blocks[i]
}

// refresh learns of the blocks the server has finished writing: every
// block file but the newest, whose first sequences (one record header
// each) say which block holds which sequences. The newest is the one the
// server appends to and holds in memory anyway, so reading from it costs
// the server nothing; a sealed block never changes. It lists the
// directory at most once per refreshEvery.
func (x *blockIndex) refresh() error {
	if now := time.Now(); now.Sub(x.refreshed) < refreshEvery {
		return nil
	} else {
		x.refreshed = now
	}
	files, err := blockFiles(x.mdir)
	if err != nil {
		return err
	}
	var last uint32
	if n := len(x.blocks); n > 0 {
		last = x.blocks[n-1].index
	}
	var sealed []*indexedBlock
	for _, f := range files {
		if len(x.blocks) > 0 && f.index <= last {
			continue
		}
		b := &indexedBlock{index: f.index, path: filepath.Join(x.mdir, f.name),
			key: sha256.Sum256(fmt.Appendf(nil, "%s-%d", x.stream, f.index))}
		if b.first, err = firstSeq(b.path); err != nil {
			return fmt.Errorf("block %d: %w", b.index, err)
		}
		if b.first != 0 {
			sealed = append(sealed, b)
		}
	}
	// Each block ends where the next begins; the newest (the last one
	// with a record) is not sealed yet.
	prev := uint64(0)
	if n := len(x.blocks); n > 0 {
		prev = x.blocks[n-1].next
	}
	for i := 0; i+1 < len(sealed); i++ {
		b := sealed[i]
		b.next = sealed[i+1].first
		if b.next <= b.first || (prev != 0 && b.first != prev) {
			return fmt.Errorf("block %d: sequences %d to %d do not follow %d", b.index, b.first, b.next, prev)
		}
		prev = b.next
		x.blocks = append(x.blocks, b)
	}
	return nil
}

// refreshEvery bounds how often refresh lists the block files.
const refreshEvery = time.Second

// firstSeq reads the sequence of a block file's first record (0: none yet).
func firstSeq(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var head [blkRecordHead]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return 0, nil // empty, or its first record not written yet
	}
	seq := binary.LittleEndian.Uint64(head[4:])
	if seq&(blkErasedBit|blkTombBit) != 0 || seq == 0 {
		return 0, fmt.Errorf("first record %#x is no message", seq)
	}
	return seq, nil
}

// offsets scans the block once, checking that its records carry the
// sequences first to next-1 in order, and returns their sparse offsets.
func (b *indexedBlock) offsets() ([]uint32, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.scanned {
		return b.offs, nil
	}
	f, err := os.Open(b.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	le := binary.LittleEndian
	var head [blkRecordHead]byte
	var offs []uint32
	var end int64
	for seq := b.first; seq < b.next; seq++ {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return nil, fmt.Errorf("block %d at byte %d: %w", b.index, end, err)
		}
		rl := le.Uint32(head[0:]) &^ blkHeaderBit
		if rl < blkRecordHead+blkChecksum || rl > blkMaxRecord || le.Uint64(head[4:]) != seq {
			return nil, fmt.Errorf("block %d at byte %d: not the record of sequence %d", b.index, end, seq)
		}
		if _, err := r.Discard(int(rl) - blkRecordHead); err != nil {
			return nil, fmt.Errorf("block %d at byte %d: %w", b.index, end, err)
		}
		if (seq-b.first)%indexStride == 0 {
			offs = append(offs, uint32(end))
		}
		end += int64(rl)
	}
	b.offs, b.scanned = offs, true
	return offs, nil
}

// readRecord reads the records of b from offset off (sequence at) up to
// seq's, and returns seq's, checked.
func readRecord(b *indexedBlock, off int64, at, seq uint64) (events.Msg, error) {
	f, err := os.Open(b.path)
	if err != nil {
		return events.Msg{}, err
	}
	defer f.Close()
	le := binary.LittleEndian
	var head [blkRecordHead]byte
	for ; ; at++ {
		if _, err := f.ReadAt(head[:], off); err != nil {
			return events.Msg{}, fmt.Errorf("block %d at byte %d: %w", b.index, off, err)
		}
		rl := le.Uint32(head[0:])
		hasHdr := rl&blkHeaderBit != 0
		rl &^= blkHeaderBit
		if rl < blkRecordHead+blkChecksum || rl > blkMaxRecord || le.Uint64(head[4:]) != at {
			return events.Msg{}, fmt.Errorf("block %d at byte %d: not the record of sequence %d", b.index, off, at)
		}
		if at < seq {
			off += int64(rl)
			continue
		}
		rec := make([]byte, rl)
		if _, err := f.ReadAt(rec, off); err != nil {
			return events.Msg{}, fmt.Errorf("block %d at byte %d: %w", b.index, off, err)
		}
		hh, err := highwayhash.New64(b.key[:])
		if err != nil {
			return events.Msg{}, err
		}
		subj, data, why := checkRecord(hh, rec, hasHdr)
		if why != "" {
			return events.Msg{}, fmt.Errorf("block %d, sequence %d: %s", b.index, seq, why)
		}
		return events.Msg{Seq: seq, Subject: string(subj), Data: data}, nil
	}
}
