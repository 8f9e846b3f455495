package jsstore

import (
	"bufio"
	"bytes"
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

	"gateway/events"
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
// The index holds the offset of every indexStride-th record of each sealed
// block (about 2 KiB per 8 MiB block of 1 KiB messages); it grows as the
// server seals blocks. Every message read is checked (length, checksum,
// sequence), and anything unexpected (a removed message, a rewritten
// block) sends this and every later read to the server instead: the files
// are an optimisation, the server the authority.
type blockIndex struct {
	stream string
	mdir   string

	mu     sync.Mutex
	blocks []*indexedBlock // the sealed blocks with records, by block index
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
	first uint64   // the first record's sequence (0: no record)
	next  uint64   // the sequence after the last record
	end   int64    // the offset after the last record
	offs  []uint32 // offs[i]: offset of the record of sequence first+i*indexStride
}

func newBlockIndex(dir, stream string) *blockIndex {
	return &blockIndex{stream: stream, mdir: filepath.Join(dir, "jetstream", "$G", "streams", stream, "msgs")}
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
	defer x.mu.Unlock()
	if x.broken {
		return nil, 0, 0, errNotInFiles
	}
	b := x.find(seq)
	if b == nil {
		if err := x.refresh(); err != nil {
			x.broken = true
			return nil, 0, 0, fmt.Errorf("%w: %w", errNotInFiles, err)
		}
		if b = x.find(seq); b == nil {
			return nil, 0, 0, errNotInFiles
		}
	}
	i := (seq - b.first) / indexStride
	return b, int64(b.offs[i]), b.first + i*indexStride, nil
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

// refresh indexes the blocks the server has finished writing: every block
// file but the newest. The newest is the one the server appends to and
// holds in memory anyway, so reading from it costs the server nothing; a
// sealed block never changes. It lists the directory at most once per
// refreshEvery.
func (x *blockIndex) refresh() error {
	if now := time.Now(); now.Sub(x.refreshed) < refreshEvery {
		return nil
	} else {
		x.refreshed = now
	}
	files, err := blockFiles(x.mdir)
	if err != nil || len(files) < 2 {
		return err
	}
	for _, f := range files[:len(files)-1] {
		var next uint64
		if n := len(x.blocks); n > 0 {
			if f.index <= x.blocks[n-1].index {
				continue
			}
			next = x.blocks[n-1].next
		}
		b := &indexedBlock{index: f.index, path: filepath.Join(x.mdir, f.name),
			key: sha256.Sum256(fmt.Appendf(nil, "%s-%d", x.stream, f.index))}
		if err := b.scan(next); err != nil {
			return err
		}
		if b.first != 0 {
			x.blocks = append(x.blocks, b)
		}
	}
	return nil
}

// refreshEvery bounds how often refresh lists the block files.
const refreshEvery = time.Second

// scan indexes a sealed block. want is the sequence its first record must
// carry (0: any, for the first block).
func (b *indexedBlock) scan(want uint64) error {
	f, err := os.Open(b.path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	le := binary.LittleEndian
	var head [blkRecordHead]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("block %d at byte %d: %w", b.index, b.end, err)
		}
		rl := le.Uint32(head[0:]) &^ blkHeaderBit
		seq := le.Uint64(head[4:])
		if rl < blkRecordHead+blkChecksum || rl > blkMaxRecord {
			return fmt.Errorf("block %d at byte %d: length %d", b.index, b.end, rl)
		}
		if seq&(blkErasedBit|blkTombBit) != 0 {
			return fmt.Errorf("block %d at byte %d: a removed message", b.index, b.end)
		}
		if _, err := r.Discard(int(rl) - blkRecordHead); err != nil {
			return fmt.Errorf("block %d at byte %d: %w", b.index, b.end, err)
		}
		switch {
		case b.first == 0 && want != 0 && seq != want, b.first != 0 && seq != b.next:
			return fmt.Errorf("block %d at byte %d: sequence %d out of order", b.index, b.end, seq)
		case b.first == 0:
			b.first = seq
		}
		if (seq-b.first)%indexStride == 0 {
			b.offs = append(b.offs, uint32(b.end))
		}
		b.next = seq + 1
		b.end += int64(rl)
	}
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
		return checkRecord(b, rec, hasHdr, seq)
	}
}

// checkRecord checks a whole record (its checksum) and returns its message.
func checkRecord(b *indexedBlock, rec []byte, hasHdr bool, seq uint64) (events.Msg, error) {
	le := binary.LittleEndian
	bad := func(why string) error { return fmt.Errorf("block %d, sequence %d: %s", b.index, seq, why) }
	body := rec[blkRecordHead : len(rec)-blkChecksum]
	slen := int(le.Uint16(rec[20:]))
	if slen > len(body) {
		return events.Msg{}, bad("subject length")
	}
	subj, rest := body[:slen], body[slen:]
	var hdr []byte
	if hasHdr {
		if len(rest) < 4 || int(le.Uint32(rest)) > len(rest)-4 {
			return events.Msg{}, bad("header length")
		}
		hl := int(le.Uint32(rest))
		hdr, rest = rest[4:4+hl], rest[4+hl:]
	}
	hh, err := highwayhash.New64(b.key[:])
	if err != nil {
		return events.Msg{}, err
	}
	hh.Write(rec[4:20])
	hh.Write(subj)
	hh.Write(hdr)
	hh.Write(rest)
	var sum [blkChecksum]byte
	if !bytes.Equal(hh.Sum(sum[:0]), rec[len(rec)-blkChecksum:]) {
		return events.Msg{}, bad("checksum mismatch")
	}
	return events.Msg{Seq: seq, Subject: string(subj), Data: rest[:len(rest):len(rest)]}, nil
}
