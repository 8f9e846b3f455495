package jsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iqdgateway/gateway/events"
)

// fileSync makes the acknowledged appends of an embedded server that does
// not fsync durable, with one fsync of the stream's block files for every
// group of appends acknowledged meanwhile, whatever their subjects
// (docs/ARCHITECTURE.md, "One fsync for many sites").
//
// It rests on how nats-server stores a message of a stream with one replica
// when it is not told to fsync every message: the record is written to the
// block file (a write(2) into the kernel's page cache) before the message is
// acknowledged (TestFileSync_writtenBeforeAcknowledged checks it on the
// version this module builds with). So:
//   - a process killed after the acknowledgement loses nothing: the kernel
//     holds the write;
//   - a machine that loses power loses nothing acknowledged by the store:
//     an append is answered only after an fsync of the block files that
//     started after its acknowledgement, and every such fsync covers every
//     write made before it started;
//   - nothing that is not on disk is shown: every message the store hands
//     out (Get, Next, Read, Follow) waits until it is, so neither the
//     ledger's state, nor a status lookup, nor a callback can tell of a
//     message that a power loss could take back.
//
// Only the process that runs the embedded server can fsync its files, so
// this serves a server nobody else writes to (no listening port).
//
// A round that is due first gathers: it waits, at most gatherFor, until as
// many answers have come as appends were on their way to the server when it
// became due, so that it covers those too. Over many sites each command is its
// own message, their acknowledgements arrive a few at a time, and a round
// started at the first of them served about ten; every round costs its
// fsync's CPU and the wake-ups of those it answers (BENCHMARKS.md,
// "Gathering an fsync round"). An append alone finds nothing in flight and
// is not delayed.
type fileSync struct {
	mdir string
	// acked is the highest sequence acknowledged to an append of this
	// process: written to the files before the acknowledgement.
	acked atomic.Uint64
	// sent counts the appends sent to the server, settled those answered
	// (stored or not); a stored one is settled once acked covers it.
	sent, settled atomic.Uint64
	// settledKick wakes a gathering round when an append settles.
	settledKick chan struct{}
	// gatherFor bounds how long a round gathers.
	gatherFor time.Duration
	// durable is the highest sequence known to be on disk.
	durable atomic.Uint64
	// atOpen is the stream's last sequence when the store opened: written
	// to the files by then. Every round covers it, so the messages an
	// earlier process stored (the ledger catching up after a restart) are
	// handed out after one fsync, not one each.
	atOpen uint64
	// mark records durable in a file (mark.go); nil: not kept.
	mark *os.File

	mu      sync.Mutex
	running *syncRound // the round under way
	next    *syncRound // the round that starts after it
	// gathering: next is gathering before it starts (no round runs).
	gathering bool
	failed    error       // an fsync failed: nothing is answered any more
	broken    atomic.Bool // failed is set

	stats FsyncStats

	// The files, used by the round under way only.
	cur    *os.File // the newest block known
	curIdx uint32
	// sync is (*os.File).Sync; tests watch it.
	sync func(*os.File) error
}

// FsyncStats counts the store's own fsync rounds (see Store.Fsyncs).
type FsyncStats struct {
	// Rounds that put everything before them on disk, and rounds that
	// failed (the first failure stops the store).
	Done, Failed atomic.Uint64
	// Waits is how many appends and reads waited for a round: divided by
	// the rounds, the appends one fsync served.
	Waits atomic.Uint64
}

// syncRound is one fsync of the block files and of those waiting for it.
type syncRound struct {
	// need is the highest sequence a waiter asked for; covers is acked
	// when the round started, or atOpen if higher. Both are on disk once
	// it is done.
	need, covers uint64
	// waiters is how many joined it.
	waiters int
	done    chan struct{}
	err     error
}

// defaultGatherFor bounds a round's gathering: about what an fsync of this
// machine's disk takes (0.23 ms median, 0.58 ms at the 99th percentile), so
// that waiting for answers on their way costs less than the round it
// saves.
const defaultGatherFor = 500 * time.Microsecond

func newFileSync(dir, stream string) *fileSync {
	return &fileSync{mdir: msgsDir(dir, stream), sync: (*os.File).Sync,
		settledKick: make(chan struct{}, 1), gatherFor: defaultGatherFor}
}

// msgsDir is where the embedded server under dir keeps a stream's blocks.
func msgsDir(dir, stream string) string {
	return filepath.Join(dir, "jetstream", "$G", "streams", stream, "msgs")
}

// errSyncFailed is the sticky failure: after a failed fsync the kernel may
// have dropped the writes it could not make, so what the server holds is no
// longer known to be on disk.
var errSyncFailed = errors.New("an fsync of the ledger's block files failed; restart the gateway")

// usable says whether appends may still be sent.
// It reads one atomic: every append asks.
func (f *fileSync) usable() error {
	if !f.broken.Load() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// raise sets a to v if v is higher.
func raise(a *atomic.Uint64, v uint64) {
	for old := a.Load(); v > old && !a.CompareAndSwap(old, v); old = a.Load() {
	}
}

// sending counts an append about to be sent; its answer must be settled
// (stored, or unsent when it failed).
func (f *fileSync) sending() { f.sent.Add(1) }

// unsent settles an append that was not stored (or whose outcome is
// unknown: nothing of it is acknowledged to wait for).
func (f *fileSync) unsent() { f.settle() }

func (f *fileSync) settle() {
	f.settled.Add(1)
	select {
	case f.settledKick <- struct{}{}:
	default:
	}
}

// stored waits until the message an append was just acknowledged at seq is
// on disk. The message is in the stream whatever happens here, so a wait
// that ends otherwise is an unknown outcome for the caller to settle.
func (f *fileSync) stored(ctx context.Context, seq uint64) error {
	raise(&f.acked, seq)
	// Settled only now: a round that gathers for it starts covering it.
	f.settle()
	if err := f.wait(ctx, seq); err != nil {
		return fmt.Errorf("%w: stored at %d, not known to be on disk: %v", events.ErrOutcomeUnknown, seq, err)
	}
	return nil
}

// visible waits until the message at seq, which the server has stored, is
// on disk; it is an error only when that cannot be known.
func (f *fileSync) visible(ctx context.Context, seq uint64) error {
	if err := f.wait(ctx, seq); err != nil {
		return fmt.Errorf("message %d: %w: not known to be on disk: %v", seq, events.ErrUnavailable, err)
	}
	return nil
}

// wait returns once an fsync that started after seq was written has ended.
// The caller knows seq is written (acknowledged, or read from the server).
func (f *fileSync) wait(ctx context.Context, seq uint64) error {
	if seq <= f.durable.Load() {
		return nil
	}
	f.mu.Lock()
	if f.failed != nil {
		f.mu.Unlock()
		return f.failed
	}
	r := f.running
	if r == nil || seq > r.covers {
		// The round under way may have started before seq was
		// written: the next one surely starts after.
		if f.next == nil {
			f.next = &syncRound{done: make(chan struct{})}
			if f.running == nil {
				go f.run()
			}
		}
		r = f.next
		r.need = max(r.need, seq)
	}
	r.waiters++
	f.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run makes rounds while anyone waits for one.
func (f *fileSync) run() {
	f.mu.Lock()
	for f.next != nil && f.failed == nil {
		if want := f.sent.Load(); f.settled.Load() < want {
			// Those who come meanwhile join f.next: no round runs.
			f.gathering = true
			f.mu.Unlock()
			f.gather(want)
			f.mu.Lock()
			f.gathering = false
		}
		r := f.next
		f.next, f.running = nil, r
		r.covers = max(f.acked.Load(), f.atOpen)
		f.mu.Unlock()
		err := f.syncFiles()
		if err == nil && f.mark != nil {
			// A check, not the data: a failed write only weakens it.
			_ = writeMark(f.mark, max(r.need, r.covers))
		}
		f.mu.Lock()
		f.stats.Waits.Add(uint64(r.waiters))
		if err != nil {
			f.stats.Failed.Add(1)
			f.failed = fmt.Errorf("%w: %v", errSyncFailed, err)
			f.broken.Store(true)
			r.err = f.failed
		} else {
			f.stats.Done.Add(1)
			raise(&f.durable, max(r.need, r.covers))
		}
		f.running = nil
		close(r.done)
	}
	if f.next != nil {
		// Failed: those waiting for the next round learn it too.
		f.next.err = f.failed
		close(f.next.done)
		f.next = nil
	}
	f.mu.Unlock()
}

// gather waits until want appends in all are settled, at most gatherFor.
// It counts answers, not whose: one sent later that is answered first
// stands in for one still on its way, and is covered as well.
func (f *fileSync) gather(want uint64) {
	t := time.NewTimer(f.gatherFor)
	defer t.Stop()
	for f.settled.Load() < want {
		select {
		case <-f.settledKick:
		case <-t.C:
			return
		}
	}
}

// syncFiles fsyncs every block file written since the last round (every
// block, the first time): the newest known and any the server started
// since, and then the directory if a block was started (a new file is found after a power loss only if its
// directory entry is on disk too).
func (f *fileSync) syncFiles() error {
	newDir := false
	if f.cur == nil {
		// The first round also fsyncs the older blocks: a process killed
		// between its acknowledgements and its fsync left their last
		// writes in the kernel only, and this process hands them out.
		files, err := blockFiles(f.mdir)
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("no message block in %s", f.mdir)
		}
		for _, b := range files[:len(files)-1] {
			if err := f.open(b.index); err != nil {
				return err
			}
			err := f.sync(f.cur)
			f.cur.Close()
			f.cur = nil
			if err != nil {
				return fmt.Errorf("fsync block %d: %w", b.index, err)
			}
		}
		if err := f.open(files[len(files)-1].index); err != nil {
			return err
		}
		newDir = true
	}
	for {
		nf, err := os.Open(f.blockPath(f.curIdx + 1))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return err
		}
		// The block before is full: its last records go to disk first.
		if err := f.sync(f.cur); err != nil {
			nf.Close()
			return fmt.Errorf("fsync block %d: %w", f.curIdx, err)
		}
		f.cur.Close()
		f.cur, f.curIdx, newDir = nf, f.curIdx+1, true
	}
	if err := f.sync(f.cur); err != nil {
		return fmt.Errorf("fsync block %d: %w", f.curIdx, err)
	}
	// The server never rewrites a block of this stream (no message is
	// ever removed from it); were the file at the path replaced anyway,
	// the one synced would not be the one read after a restart.
	held, err := f.cur.Stat()
	if err != nil {
		return err
	}
	if now, err := os.Stat(f.blockPath(f.curIdx)); err != nil || !os.SameFile(held, now) {
		return fmt.Errorf("block %d was replaced while open", f.curIdx)
	}
	if newDir {
		d, err := os.Open(f.mdir)
		if err != nil {
			return err
		}
		err = f.sync(d)
		d.Close()
		if err != nil {
			return fmt.Errorf("fsync %s: %w", f.mdir, err)
		}
	}
	return nil
}

func (f *fileSync) open(idx uint32) error {
	nf, err := os.Open(f.blockPath(idx))
	if err != nil {
		return err
	}
	f.cur, f.curIdx = nf, idx
	return nil
}

func (f *fileSync) blockPath(idx uint32) string {
	return filepath.Join(f.mdir, strconv.FormatUint(uint64(idx), 10)+".blk")
}
