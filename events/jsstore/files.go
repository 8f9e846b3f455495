package jsstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/minio/highwayhash"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
)

// ErrFilesUnusable means ReadFiles stopped because the stream's files are
// not in the plain shape it reads (compressed, encrypted, with removed
// messages, or not as the server described them): the messages from the
// sequence it returned on are to be read through the server.
var ErrFilesUnusable = errors.New("stream files not readable directly")

// The message block format of nats-server's file store (v2.15): a stream's
// messages live in <store>/jetstream/<account>/streams/<stream>/msgs/<n>.blk,
// in sequence order across blocks, each record
//
//	total_len(4) seq(8) ts(8) subj_len(2) subj [hdr_len(4) hdr] msg checksum(8)
//
// little endian; the top bit of total_len says a header is present, the top
// bits of seq mark an erased message and a delete tombstone. The checksum is
// a HighwayHash-64 of seq, ts, subject, header and message, keyed with the
// SHA-256 of "<stream>-<block index>".
const (
	blkRecordHead = 22
	blkChecksum   = 8
	blkHeaderBit  = 1 << 31
	blkErasedBit  = 1 << 63
	blkTombBit    = 1 << 62
	// blkMaxRecord is where the server itself stops trusting a length.
	blkMaxRecord = 32 << 20
)

// ReadFiles calls fn for every message of the stream from sequence from on,
// in order, reading the stream's message blocks under dir (the store
// directory the embedded server runs on) instead of asking the server to
// deliver them: an offline audit of a million small messages spends most of
// its time in delivery otherwise (docs/ARCHITECTURE.md, "Auditing").
//
// Only a stream the server describes as uncompressed, starting at sequence
// 1 and with no removed message is read so, and every record is checked:
// its length, its checksum, and that sequences follow one another with no
// gap. Anything else ends the read with ErrFilesUnusable, and next says
// from which sequence the server must deliver the rest; messages before it
// were delivered and checked. The server must hold the directory (so that
// it recovered the store and no other server writes it) and take no writes
// while the files are read: ledgerctl's offline mode.
func (s *Store) ReadFiles(ctx context.Context, dir string, from uint64, fn func(events.Msg) error) (next uint64, err error) {
	if from == 0 {
		from = 1
	}
	ictx, cancel := call(ctx)
	info, err := s.stream.Info(ictx)
	cancel()
	if err != nil {
		return from, fmt.Errorf("read files: %w", mapErr(err))
	}
	switch {
	case info.Config.Compression != jetstream.NoCompression:
		return from, fmt.Errorf("%w: the stream is compressed", ErrFilesUnusable)
	case info.State.NumDeleted > 0:
		return from, fmt.Errorf("%w: %d messages were removed", ErrFilesUnusable, info.State.NumDeleted)
	case info.State.Msgs > 0 && info.State.FirstSeq != 1:
		return from, fmt.Errorf("%w: the stream starts at sequence %d", ErrFilesUnusable, info.State.FirstSeq)
	}
	mdir := msgsDir(dir, s.name)
	blocks, err := blockFiles(mdir)
	if err != nil {
		return from, fmt.Errorf("%w: %w", ErrFilesUnusable, err)
	}
	r := blockReader{stream: s.name, next: 1, from: from, fn: fn, subjects: map[string]string{}}
	for _, b := range blocks {
		if err := ctx.Err(); err != nil {
			return r.deliverFrom(), err
		}
		buf, err := os.ReadFile(filepath.Join(mdir, b.name))
		if err != nil {
			return r.deliverFrom(), fmt.Errorf("%w: %w", ErrFilesUnusable, err)
		}
		if err := r.block(b.index, buf); err != nil {
			return r.deliverFrom(), err
		}
	}
	if r.next <= info.State.LastSeq {
		return r.deliverFrom(), fmt.Errorf("%w: the files end at sequence %d, the stream at %d", ErrFilesUnusable, r.next-1, info.State.LastSeq)
	}
	return r.next, nil
}

type blockFile struct {
	index uint32
	name  string
}

// blockFiles lists the message blocks of a stream in index order.
func blockFiles(mdir string) ([]blockFile, error) {
	ents, err := os.ReadDir(mdir)
	if err != nil {
		return nil, err
	}
	var out []blockFile
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".blk")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		i, err := strconv.ParseUint(n, 10, 32)
		if err != nil {
			continue
		}
		out = append(out, blockFile{index: uint32(i), name: e.Name()})
	}
	slices.SortFunc(out, func(a, b blockFile) int { return int(int64(a.index) - int64(b.index)) })
	return out, nil
}

// blockReader walks the records of consecutive blocks.
type blockReader struct {
	stream   string
	next     uint64 // the sequence the next record must carry
	from     uint64
	fn       func(events.Msg) error
	subjects map[string]string // one string per subject, not one per message
}

// deliverFrom is where the server takes over after a stop: the next
// sequence, or from if nothing was delivered yet.
func (r *blockReader) deliverFrom() uint64 { return max(r.next, r.from) }

// block checks and delivers every record of one block. A message's Data is
// a slice of buf, which is never reused.
func (r *blockReader) block(index uint32, buf []byte) error {
	key := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", r.stream, index)))
	hh, err := highwayhash.New64(key[:])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFilesUnusable, err)
	}
	le := binary.LittleEndian
	bad := func(off int, why string, args ...any) error {
		return fmt.Errorf("%w: block %d, record at byte %d: %s", ErrFilesUnusable, index, off, fmt.Sprintf(why, args...))
	}
	for off := 0; off < len(buf); {
		if len(buf)-off < blkRecordHead+blkChecksum {
			return bad(off, "%d bytes left, less than a record", len(buf)-off)
		}
		head := buf[off : off+blkRecordHead]
		rl := le.Uint32(head[0:])
		hasHdr := rl&blkHeaderBit != 0
		rl &^= blkHeaderBit
		seq := le.Uint64(head[4:])
		if rl < blkRecordHead+blkChecksum || rl > blkMaxRecord || int(rl) > len(buf)-off {
			return bad(off, "length %d", rl)
		}
		if seq&(blkErasedBit|blkTombBit) != 0 {
			return bad(off, "a removed message")
		}
		subj, data, why := checkRecord(hh, buf[off:off+int(rl)], hasHdr)
		if why != "" {
			return bad(off, "%s (seq %d)", why, seq)
		}
		if seq != r.next {
			return bad(off, "sequence %d where %d was due", seq, r.next)
		}
		if seq >= r.from {
			sub, ok := r.subjects[string(subj)]
			if !ok {
				sub = string(subj)
				r.subjects[sub] = sub
			}
			if err := r.fn(events.Msg{Seq: seq, Subject: sub, Data: data}); err != nil {
				r.next++
				return err
			}
		}
		r.next++
		off += int(rl)
	}
	return nil
}

// checkRecord checks one whole record (hasHdr: its length had the header
// bit) against its checksum, hh keyed for its block, and returns its
// subject and message (slices of rec); why says what is wrong, if anything.
func checkRecord(hh hash.Hash64, rec []byte, hasHdr bool) (subj, data []byte, why string) {
	le := binary.LittleEndian
	body := rec[blkRecordHead : len(rec)-blkChecksum]
	slen := int(le.Uint16(rec[20:]))
	if slen > len(body) {
		return nil, nil, fmt.Sprintf("subject length %d", slen)
	}
	subj, rest := body[:slen], body[slen:]
	var hdr []byte
	if hasHdr {
		if len(rest) < 4 || int(le.Uint32(rest)) > len(rest)-4 {
			return nil, nil, "header length"
		}
		hl := int(le.Uint32(rest))
		hdr, rest = rest[4:4+hl], rest[4+hl:]
	}
	hh.Reset()
	hh.Write(rec[4:20])
	hh.Write(subj)
	hh.Write(hdr)
	hh.Write(rest)
	var sum [blkChecksum]byte
	if !bytes.Equal(hh.Sum(sum[:0]), rec[len(rec)-blkChecksum:]) {
		return nil, nil, "checksum mismatch"
	}
	return subj, rest[:len(rest):len(rest)], ""
}
