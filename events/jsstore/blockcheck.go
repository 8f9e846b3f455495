package jsstore

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/minio/highwayhash"
)

// checkStoreFiles checks the message block files of a store directory
// before the embedded server opens them (docs/ARCHITECTURE.md, "A damaged
// sequence field" and "A history shorter than what was on disk is
// refused"), for two kinds of damage the server would take on trust:
//
//   - A record whose sequence does not lie between its neighbours' and
//     whose checksum fails: ErrDataDir. When the server loads a block it
//     indexes the records by the sequence each one's header names, filling
//     any hole up to it with one slot per missing message, and checks a
//     record's checksum only when that message is read: one flipped high
//     bit in a sequence field makes it allocate an index for a thousand
//     billion messages and exhaust the machine's memory.
//   - A record at or below its stream's durable mark (what the store's own
//     fsync rounds put on disk, all of it acknowledged: mark.go) whose
//     checksum fails: ErrHistoryLost. The server, its index intact, would
//     count that message as stored and fail only when it is read.
//
// Records whose lengths stop making sense (a torn tail) end the walk of
// their block: the server rebuilds such a block, checking every checksum as
// it goes, and a loss shows as a gap the open refuses. Compressed or
// encrypted streams are left alone.
//
// A block is read whole once: a block file that passed is listed in
// checkedName with its size and modification time, and is not read again
// while both hold (the history's blocks are only ever appended to), so a
// start reads what was written since the last one, not the whole history.
// Damage done to a file later without changing either is found by
// `ledgerctl audit`, which reads every record.
func checkStoreFiles(storeDir string) error {
	mdirs, err := filepath.Glob(filepath.Join(storeDir, "jetstream", "*", "streams", "*", "msgs"))
	if err != nil {
		return err
	}
	checked := loadChecked(storeDir)
	passed := map[string]blockStamp{}
	var buf []byte
	for _, mdir := range mdirs {
		sdir := filepath.Dir(mdir)
		if !plainStream(sdir) {
			continue
		}
		stream := filepath.Base(sdir)
		mark, err := readMark(storeDir, stream)
		if err != nil {
			// A mark that cannot be read would hide a loss: the store's
			// open refuses it too (openMark).
			return fmt.Errorf("%w: %w", ErrDataDir, err)
		}
		w := streamWalk{stream: stream, mark: mark, checked: checked, passed: passed}
		if buf, err = w.run(mdir, buf); err != nil {
			return err
		}
	}
	if !maps.Equal(checked, passed) {
		saveChecked(storeDir, passed)
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

// record is one message record of a block: where, its sequence, and what
// its checksum said once checked.
type record struct {
	path         string
	off          int
	seq          uint64
	checked, bad bool
}

// maxHole bounds the gap a stream's last record may leave after the one
// before it (its successor unknown): a hole the server fills costs it 4
// bytes a missing sequence, 4 MiB at this bound; a flipped high bit leaves
// one of many GiB.
const maxHole = 1 << 20

// streamWalk walks one stream's blocks in order. Sequences only ever rise
// along the files, tombstones aside (they name removed messages of earlier
// blocks and are not indexed), so a record is out of line when its
// sequence is not above the one before it or not below the one after it,
// or, with no record after it, more than maxHole above the one before. A
// record is judged once its successor is known: the walk holds the two
// before it, and checks the checksum of a block's last record before its
// bytes go.
type streamWalk struct {
	stream          string
	mark            uint64
	checked, passed map[string]blockStamp

	prev, cur record
	have      int // records held: cur from 1, prev from 2
	// hh and data are the block at hand's checksum hash and bytes.
	hh   hash.Hash64
	data []byte
}

func (w *streamWalk) run(mdir string, buf []byte) ([]byte, error) {
	blocks, err := blockFiles(mdir)
	if err != nil {
		return buf, fmt.Errorf("jetstream store: stream %s: %w", w.stream, err)
	}
	for _, bf := range blocks {
		path := filepath.Join(mdir, bf.name)
		key := w.stream + "/" + strconv.FormatUint(uint64(bf.index), 10)
		st, err := os.Stat(path)
		if err != nil {
			return buf, fmt.Errorf("jetstream store: %w", err)
		}
		stamp := blockStamp{size: st.Size(), mtime: st.ModTime().UnixNano()}
		if w.checked[key] == stamp {
			// Passed before, unchanged since: not read again. The
			// record held last has no known successor now.
			if err := w.last(); err != nil {
				return buf, err
			}
			w.passed[key] = stamp
			continue
		}
		if buf, err = readInto(buf, path); err != nil {
			return buf, fmt.Errorf("jetstream store: %w", err)
		}
		if err := w.walk(bf.index, path, buf); err != nil {
			return buf, err
		}
		w.passed[key] = stamp
	}
	return buf, w.last()
}

// walk checks one block's records (data is the whole block file).
func (w *streamWalk) walk(index uint32, path string, data []byte) error {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", w.stream, index)))
	hh, err := highwayhash.New64(sum[:])
	if err != nil {
		return err
	}
	w.hh, w.data = hh, data
	le := binary.LittleEndian
	for off := 0; len(data)-off >= blkRecordHead+blkChecksum; {
		rl := le.Uint32(data[off:]) &^ blkHeaderBit
		if rl < blkRecordHead+blkChecksum || rl > blkMaxRecord || int(rl) > len(data)-off {
			break // the server rebuilds this block, checking as it goes
		}
		if raw := le.Uint64(data[off+4:]); raw&blkTombBit == 0 {
			r := record{path: path, off: off, seq: raw &^ blkErasedBit}
			if r.seq <= w.mark {
				// Acknowledged and put on disk: it must be whole.
				if w.check(&r); r.bad {
					return fmt.Errorf("%w: stream %s, block file %s, record at byte %d (sequence %d, acknowledged and put on disk): checksum mismatch; restore the data directory from a backup",
						ErrHistoryLost, w.stream, path, off, r.seq)
				}
			}
			if err := w.next(r); err != nil {
				return err
			}
		}
		off += int(rl)
	}
	// The record held last is judged by the next block's first: check it
	// while its bytes are at hand.
	if w.have > 0 && !w.cur.checked {
		w.check(&w.cur)
	}
	return nil
}

// next takes the record after cur, which judges cur.
func (w *streamWalk) next(r record) error {
	if w.have >= 1 {
		before := uint64(0)
		if w.have >= 2 {
			before = w.prev.seq
		}
		if !(before < w.cur.seq && w.cur.seq < r.seq) {
			if err := w.outOfLine(&w.cur); err != nil {
				return err
			}
		}
	}
	w.prev, w.cur = w.cur, r
	w.have++
	return nil
}

// last judges the record held last, which has no successor (the stream
// ends, or the next block is not read), and forgets the records held.
func (w *streamWalk) last() error {
	defer func() { w.have = 0 }()
	if w.have == 0 {
		return nil
	}
	before := uint64(0)
	if w.have >= 2 {
		before = w.prev.seq
	}
	if before < w.cur.seq && w.cur.seq-before <= maxHole {
		return nil
	}
	return w.outOfLine(&w.cur)
}

// outOfLine refuses r, a record out of line, when its checksum fails.
func (w *streamWalk) outOfLine(r *record) error {
	if !r.checked {
		w.check(r) // a record of the block at hand: the others were checked
	}
	if !r.bad {
		return nil
	}
	return fmt.Errorf("%w: stream %s, block file %s, record at byte %d is damaged: its sequence field (%d) is out of line with its neighbours' and it fails its check (checksum mismatch); nats-server would exhaust memory indexing it; restore the data directory from a backup",
		ErrDataDir, w.stream, r.path, r.off, r.seq)
}

// check checks the checksum of r, a record of the block at hand.
func (w *streamWalk) check(r *record) {
	le := binary.LittleEndian
	rl := le.Uint32(w.data[r.off:])
	hasHdr := rl&blkHeaderBit != 0
	rl &^= blkHeaderBit
	_, _, why := checkRecord(w.hh, w.data[r.off:r.off+int(rl)], hasHdr)
	r.checked, r.bad = true, why != ""
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

// checkedName lists, in a store directory, the block files that passed
// checkStoreFiles: "<stream>/<index> <size> <modification time, ns>" a
// line. Losing it costs one read of every block at the next start.
const checkedName = "checked-blocks"

type blockStamp struct{ size, mtime int64 }

func loadChecked(dir string) map[string]blockStamp {
	out := map[string]blockStamp{}
	f, err := os.Open(filepath.Join(dir, checkedName))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			continue
		}
		size, err1 := strconv.ParseInt(fs[1], 10, 64)
		mtime, err2 := strconv.ParseInt(fs[2], 10, 64)
		if err1 == nil && err2 == nil {
			out[fs[0]] = blockStamp{size, mtime}
		}
	}
	return out
}

// saveChecked writes the list whole, through a temporary file, so that a
// crash leaves the old list or the new one. A list that cannot be written
// costs only a longer next start.
func saveChecked(dir string, m map[string]blockStamp) {
	var b strings.Builder
	for k, v := range m {
		fmt.Fprintf(&b, "%s %d %d\n", k, v.size, v.mtime)
	}
	tmp := filepath.Join(dir, checkedName+".tmp")
	if os.WriteFile(tmp, []byte(b.String()), 0o600) == nil {
		_ = os.Rename(tmp, filepath.Join(dir, checkedName))
	}
}
