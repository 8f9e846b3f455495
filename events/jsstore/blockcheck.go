package jsstore

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/minio/highwayhash"
)

// checkStoreFiles refuses a store directory holding a record that
// nats-server would trust without checking, before the server opens it.
//
// When the server loads a message block into memory it indexes the records
// by the sequence each one's header names, and fills any hole up to that
// sequence with one slot per missing message; the record's checksum is
// checked later, only when that message is read. So one flipped bit high in
// a record's sequence field makes the server allocate an index for a
// thousand billion messages and exhaust the machine's memory as it opens
// the stream (docs/ARCHITECTURE.md, "A damaged sequence field"). Here every
// record of every uncompressed stream is walked first: one whose sequence
// does not lie between its neighbours' and whose checksum fails is damaged,
// and the open is refused with ErrDataDir naming it, which stops a gateway's
// start at once. A record with a sound sequence and a bad
// checksum is left to the server and the audit, and so is a block whose
// records stop making sense (a length out of range): the server rebuilds
// such a block, checking every checksum as it goes.
//
// The walk reads each block file once; only the records out of line are
// read again, whole, for their checksum.
func checkStoreFiles(storeDir string) error {
	mdirs, err := filepath.Glob(filepath.Join(storeDir, "jetstream", "*", "streams", "*", "msgs"))
	if err != nil {
		return err
	}
	for _, mdir := range mdirs {
		sdir := filepath.Dir(mdir)
		if !plainStream(sdir) {
			continue
		}
		if err := checkStreamFiles(mdir, filepath.Base(sdir)); err != nil {
			return err
		}
	}
	return nil
}

// plainStream reports whether the stream in sdir keeps its records as the
// block format describes them: its configuration is readable (not
// encrypted) and names no compression.
func plainStream(sdir string) bool {
	b, err := os.ReadFile(filepath.Join(sdir, "meta.inf"))
	if err != nil {
		return false
	}
	var cfg struct {
		Compression string `json:"compression"`
	}
	if json.Unmarshal(b, &cfg) != nil {
		return false
	}
	return cfg.Compression == "" || cfg.Compression == "none"
}

// recordAt is one record's place in its stream's block files.
type recordAt struct {
	block uint32
	path  string
	off   int64
	len   uint32
	seq   uint64
}

// checkStreamFiles walks the records of one stream's blocks in order.
// Sequences only ever rise along the files, tombstones aside (they name
// removed messages of earlier blocks and are not indexed), so a record is
// out of line when its sequence is not above the one before it or not below
// the one after it; the stream's last record has no successor and is
// checked whatever its sequence.
func checkStreamFiles(mdir, stream string) error {
	blocks, err := blockFiles(mdir)
	if err != nil {
		return fmt.Errorf("jetstream store: stream %s: %w", stream, err)
	}
	var prev, cur recordAt
	have := 0 // records held: cur is set from 1, prev from 2
	// judge checks r, between the sequences before and after it
	// (after: 0 when it is the last record).
	judge := func(r recordAt, before, after uint64) error {
		if after != 0 && before < r.seq && r.seq < after {
			return nil
		}
		return checkRecordAt(stream, r)
	}
	for _, bf := range blocks {
		err := walkBlock(filepath.Join(mdir, bf.name), bf.index, func(r recordAt) error {
			if have >= 1 {
				before := uint64(0)
				if have >= 2 {
					before = prev.seq
				}
				if err := judge(cur, before, r.seq); err != nil {
					return err
				}
			}
			prev, cur = cur, r
			have++
			return nil
		})
		if err != nil {
			return err
		}
	}
	if have == 0 {
		return nil
	}
	before := uint64(0)
	if have >= 2 {
		before = prev.seq
	}
	return judge(cur, before, 0)
}

// walkBlock calls fn for each message record of one block file, tombstones
// left out, up to the first record whose length makes no sense.
func walkBlock(path string, index uint32, fn func(recordAt) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("jetstream store: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("jetstream store: %w", err)
	}
	size := st.Size()
	r := bufio.NewReaderSize(f, 256<<10)
	le := binary.LittleEndian
	var head [blkRecordHead]byte
	for off := int64(0); off+blkRecordHead+blkChecksum <= size; {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return fmt.Errorf("jetstream store: %s at byte %d: %w", path, off, err)
		}
		rl := le.Uint32(head[0:]) &^ blkHeaderBit
		if rl < blkRecordHead+blkChecksum || rl > blkMaxRecord || int64(rl) > size-off {
			return nil // the server rebuilds this block, checking as it goes
		}
		if seq := le.Uint64(head[4:]); seq&blkTombBit == 0 {
			if err := fn(recordAt{block: index, path: path, off: off, len: rl, seq: seq &^ blkErasedBit}); err != nil {
				return err
			}
		}
		if _, err := r.Discard(int(rl) - blkRecordHead); err != nil {
			return fmt.Errorf("jetstream store: %s at byte %d: %w", path, off, err)
		}
		off += int64(rl)
	}
	return nil
}

// checkRecordAt reads one record whole and refuses it if its checksum fails.
func checkRecordAt(stream string, r recordAt) error {
	f, err := os.Open(r.path)
	if err != nil {
		return fmt.Errorf("jetstream store: %w", err)
	}
	defer f.Close()
	rec := make([]byte, r.len)
	if _, err := f.ReadAt(rec, r.off); err != nil {
		return fmt.Errorf("jetstream store: %s at byte %d: %w", r.path, r.off, err)
	}
	key := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", stream, r.block)))
	hh, err := highwayhash.New64(key[:])
	if err != nil {
		return err
	}
	hasHdr := binary.LittleEndian.Uint32(rec[0:])&blkHeaderBit != 0
	if _, _, why := checkRecord(hh, rec, hasHdr); why != "" {
		return fmt.Errorf("%w: stream %s, block file %s, record at byte %d is damaged: its sequence field (%d) is out of line with its neighbours' and it fails its check (%s); nats-server would exhaust memory indexing it; restore the data directory from a backup",
			ErrDataDir, stream, r.path, r.off, r.seq, why)
	}
	return nil
}

// checkAcknowledged reads every record of the stream's block files up to
// sequence upTo (the durable mark: what the store's own fsync rounds put on
// disk, all of it acknowledged) and refuses, with ErrHistoryLost naming
// it, one whose checksum fails. The server, its index intact, would count
// such a message as stored and fail only when it is read (a status lookup,
// an audit); its history is lost as surely as a missing one's, and the
// store refuses it as it refuses a gap (docs/ARCHITECTURE.md, "A history
// shorter than what was on disk is refused"). Records past upTo were never
// answered and are the server's to recover.
func checkAcknowledged(mdir, stream string, upTo uint64) error {
	if upTo == 0 {
		return nil // no mark yet: nothing known to be on disk
	}
	blocks, err := blockFiles(mdir)
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	le := binary.LittleEndian
	var buf []byte // one block at a time, reused: a restart's memory peak counts
	for _, bf := range blocks {
		path := filepath.Join(mdir, bf.name)
		if buf, err = readInto(buf, path); err != nil {
			return fmt.Errorf("stream %s: %w", stream, err)
		}
		key := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", stream, bf.index)))
		hh, err := highwayhash.New64(key[:])
		if err != nil {
			return err
		}
		for off := 0; len(buf)-off >= blkRecordHead+blkChecksum; {
			rl := le.Uint32(buf[off:])
			hasHdr := rl&blkHeaderBit != 0
			rl &^= blkHeaderBit
			seq := le.Uint64(buf[off+4:])
			if rl < blkRecordHead+blkChecksum || rl > blkMaxRecord || int(rl) > len(buf)-off {
				break // the server rebuilds this block; a loss shows as a gap
			}
			if s := seq &^ (blkErasedBit | blkTombBit); seq&blkTombBit == 0 && s <= upTo {
				if _, _, why := checkRecord(hh, buf[off:off+int(rl)], hasHdr); why != "" {
					return fmt.Errorf("%w: stream %s, block file %s, record at byte %d (sequence %d, acknowledged and put on disk): %s; restore the data directory from a backup",
						ErrHistoryLost, stream, path, off, s, why)
				}
			}
			off += int(rl)
		}
	}
	return nil
}

// readInto reads the file at path into buf, grown if need be.
func readInto(buf []byte, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return buf, err
	}
	n := int(st.Size())
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	k, err := io.ReadFull(f, buf)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil // shorter than it was a moment ago: what is there
	}
	return buf[:k], err
}
