package jsstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// syncedStore starts a server that does not fsync and opens a store that
// does it itself (Options.SyncFiles), as the gateway runs by default.
func syncedStore(t *testing.T) (*testkit.Server, *jsstore.Store) {
	t.Helper()
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	return srv, testkit.OpenStore(t, srv.Conn("writer"), jsstore.Options{Files: srv.Dir(), SyncFiles: true})
}

func msgsDir(srv *testkit.Server) string {
	return jsstore.MsgsDir(srv.Dir(), events.StreamName)
}

// blocksHold reports whether the stream's block files, read now, hold data.
func blocksHold(t *testing.T, mdir string, data []byte) bool {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(mdir, "*.blk"))
	require.NoError(t, err)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		if bytes.Contains(b, data) {
			return true
		}
	}
	return false
}

func randomData(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// What the store's own fsync rests on: a server that does not fsync every
// message still writes it to its block file before acknowledging it. A
// nats-server that buffered the write past the acknowledgement would make
// an fsync after the acknowledgement miss it.
func TestFileSync_writtenBeforeAcknowledged(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	st := srv.Store("plain")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		subj := siteSubject(fmt.Sprint("w", i%9))
		last, err := st.LastFor(ctx, subj)
		require.NoError(t, err)
		data := randomData(rng, 64+i)
		_, err = st.Append(ctx, subj, last, data)
		require.NoError(t, err)
		require.True(t, blocksHold(t, msgsDir(srv), data), "append %d acknowledged before it was written to a block file", i)
	}
}

// fsyncLog records every fsync the store makes: the path, and for a block
// file what the file held when it was fsynced.
type fsyncLog struct {
	mu    sync.Mutex
	paths []string
	held  [][]byte
	// gate, when set, holds the next fsync until it is closed.
	gate chan struct{}
	// fail, when set, is the answer of every fsync.
	fail error
}

func (l *fsyncLog) watch(t *testing.T, st *jsstore.Store) {
	jsstore.WatchFsync(st, func(path string) error {
		l.mu.Lock()
		gate, fail := l.gate, l.fail
		l.gate = nil
		l.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if fail != nil {
			return fail
		}
		var held []byte
		if strings.HasSuffix(path, ".blk") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			held = b
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.paths = append(l.paths, path)
		l.held = append(l.held, held)
		return nil
	})
}

// syncedWith reports whether an fsync so far covered data.
func (l *fsyncLog) syncedWith(data []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.held {
		if bytes.Contains(h, data) {
			return true
		}
	}
	return false
}

func (l *fsyncLog) blockSyncs() (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.paths {
		if strings.HasSuffix(p, ".blk") {
			n++
		}
	}
	return n
}

// Every append is answered only after an fsync of a block file holding it,
// and the appends acknowledged while one fsync runs share the next one.
func TestFileSync_answersAfterOneFsyncForMany(t *testing.T) {
	srv, st := syncedStore(t)
	ctx := context.Background()
	var log fsyncLog
	log.watch(t, st)
	gate := make(chan struct{})
	log.gate = gate

	rng := rand.New(rand.NewPCG(5, 6))
	const n = 16
	datas := make([][]byte, n)
	for i := range datas {
		datas[i] = randomData(rng, 100)
	}
	errs := make(chan error, n)
	appendOne := func(i int) {
		_, err := st.Append(ctx, siteSubject(fmt.Sprint("m", i)), 0, datas[i])
		if err == nil && !log.syncedWith(datas[i]) {
			err = fmt.Errorf("append %d answered before an fsync held it", i)
		}
		errs <- err
	}
	// The first append's fsync is held; the others are acknowledged
	// meanwhile and wait for the next one.
	go appendOne(0)
	testkit.Eventually(t, 10*time.Second, func() bool { s, _ := st.LastSeq(ctx); return s == 1 }, "first append stored")
	for i := 1; i < n; i++ {
		go appendOne(i)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return jsstore.FsyncNextWaiters(st) == n-1 }, "the other appends acknowledged and waiting")
	select {
	case err := <-errs:
		t.Fatalf("an append was answered while the fsync was held: %v", err)
	default:
	}
	close(gate)
	for range n {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, 2, log.blockSyncs(), "one fsync for the first append, one for the %d acknowledged while it ran", n-1)
	stats := st.Fsyncs()
	assert.EqualValues(t, 2, stats.Done.Load())
	assert.EqualValues(t, n, stats.Waits.Load())
	assert.Zero(t, stats.Failed.Load())
	for _, d := range datas {
		assert.True(t, blocksHold(t, msgsDir(srv), d))
	}
}

// No message is handed out before it is on disk: not by Get, nor Read, nor
// Follow, which the ledger's state and the callbacks are built from.
func TestFileSync_handsOutNothingBeforeItIsOnDisk(t *testing.T) {
	_, st := syncedStore(t)
	ctx := context.Background()
	subj := siteSubject("first")
	_, err := st.Append(ctx, subj, 0, []byte("on disk"))
	require.NoError(t, err)

	var log fsyncLog
	log.watch(t, st)
	gate := make(chan struct{})
	log.gate = gate
	appended := make(chan error, 1)
	go func() { _, err := st.Append(ctx, subj, 1, []byte("held")); appended <- err }()
	testkit.Eventually(t, 10*time.Second, func() bool { s, _ := st.LastSeq(ctx); return s == 2 }, "second append stored")

	var followed []uint64
	var fmu sync.Mutex
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	go func() {
		_ = st.Follow(fctx, events.SubjectPrefix+">", 1, func(m events.Msg) {
			fmu.Lock()
			followed = append(followed, m.Seq)
			fmu.Unlock()
		})
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { fmu.Lock(); defer fmu.Unlock(); return len(followed) == 1 }, "the message on disk followed")

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = st.Get(short, 2)
	cancel()
	require.ErrorIs(t, err, events.ErrUnavailable, "Get of a message not on disk yet")
	short, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
	var read []uint64
	err = st.Read(short, subj, 1, func(m events.Msg) error { read = append(read, m.Seq); return nil })
	cancel()
	require.Error(t, err, "Read reaching a message not on disk yet")
	assert.Equal(t, []uint64{1}, read)
	fmu.Lock()
	assert.Equal(t, []uint64{1}, followed, "Follow passed a message not on disk yet")
	fmu.Unlock()

	close(gate)
	require.NoError(t, <-appended)
	m, err := st.Get(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, "held", string(m.Data))
	testkit.Eventually(t, 10*time.Second, func() bool { fmu.Lock(); defer fmu.Unlock(); return len(followed) == 2 }, "followed once on disk")
}

// A failed fsync may have lost the writes it was to make durable: the
// append it covered is an unknown outcome, and the store answers nothing
// more (no append sent, no message handed out) until the process restarts.
func TestFileSync_failedFsyncStopsTheStore(t *testing.T) {
	_, st := syncedStore(t)
	ctx := context.Background()
	subj := siteSubject("f")
	_, err := st.Append(ctx, subj, 0, []byte("one"))
	require.NoError(t, err)
	var log fsyncLog
	log.watch(t, st)
	log.fail = errors.New("input/output error")

	_, err = st.Append(ctx, subj, 1, []byte("two"))
	require.ErrorIs(t, err, events.ErrOutcomeUnknown)
	last, err := st.LastSeq(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, last, "the server stored it")

	assert.EqualValues(t, 1, st.Fsyncs().Failed.Load())
	_, err = st.Append(ctx, subj, 2, []byte("three"))
	require.ErrorIs(t, err, events.ErrUnavailable)
	last, err = st.LastSeq(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, last, "nothing sent after the failure")
	_, err = st.Get(ctx, 2)
	assert.ErrorIs(t, err, events.ErrUnavailable)
	m, err := st.Get(ctx, 1)
	require.NoError(t, err, "what was on disk before is still handed out")
	assert.Equal(t, "one", string(m.Data))
}

// When the server starts a new block file, the full one's last records and
// the new one are fsynced, and the directory that now names it.
func TestFileSync_newBlockAndItsDirectory(t *testing.T) {
	srv, st := syncedStore(t)
	ctx := context.Background()
	var log fsyncLog
	log.watch(t, st)
	rng := rand.New(rand.NewPCG(7, 8))
	subj := siteSubject("big")
	var last uint64
	var datas [][]byte
	for range 10 {
		d := randomData(rng, 1<<20)
		seq, err := st.Append(ctx, subj, last, d)
		require.NoError(t, err)
		require.True(t, log.syncedWith(d[:4096]), "answered before an fsync held sequence %d", seq)
		last = seq
		datas = append(datas, d)
	}
	blocks, err := filepath.Glob(filepath.Join(msgsDir(srv), "*.blk"))
	require.NoError(t, err)
	require.Greater(t, len(blocks), 1, "ten MiB fill more than one block")
	log.mu.Lock()
	paths := append([]string(nil), log.paths...)
	log.mu.Unlock()
	for _, b := range blocks {
		assert.Contains(t, paths, b)
	}
	dirAfterNew := false
	for i, p := range paths {
		if p == filepath.Join(msgsDir(srv), "2.blk") {
			dirAfterNew = slices.Contains(paths[i+1:], msgsDir(srv))
			break
		}
	}
	assert.True(t, dirAfterNew, "the directory is fsynced once it names the new block: %v", paths)

	// A process starting on these files (the one before may have been
	// killed before its last fsync) fsyncs every block before it hands
	// out a message.
	next := testkit.OpenStore(t, srv.Conn("next"), jsstore.Options{Files: srv.Dir(), SyncFiles: true})
	var log2 fsyncLog
	log2.watch(t, next)
	m, err := next.Get(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, datas[0], m.Data)
	log2.mu.Lock()
	defer log2.mu.Unlock()
	for _, b := range blocks {
		assert.Contains(t, log2.paths, b, "the first round fsyncs every block")
	}
	assert.Contains(t, log2.paths, msgsDir(srv))
}

// A caller that stops waiting for the fsync gets an unknown outcome (the
// message is stored; the write loop settles it), and the store carries on.
func TestFileSync_callerGoneDuringFsync(t *testing.T) {
	_, st := syncedStore(t)
	var log fsyncLog
	log.watch(t, st)
	gate := make(chan struct{})
	log.gate = gate
	ctx, cancel := context.WithCancel(context.Background())
	subj := siteSubject("gone")
	done := make(chan error, 1)
	go func() { _, err := st.Append(ctx, subj, 0, []byte("maybe")); done <- err }()
	testkit.Eventually(t, 10*time.Second, func() bool { s, _ := st.LastSeq(context.Background()); return s == 1 }, "stored")
	cancel()
	require.ErrorIs(t, <-done, events.ErrOutcomeUnknown)
	close(gate)
	seq, err := st.Append(context.Background(), subj, 1, []byte("next"))
	require.NoError(t, err)
	assert.EqualValues(t, 2, seq)
	m, err := st.Get(context.Background(), 1)
	require.NoError(t, err)
	assert.Equal(t, "maybe", string(m.Data))
}

// A block file replaced under the one the store holds open (which the
// server never does to the ledger) fails the round: what the fsync made
// durable is not what a restart would read.
func TestFileSync_replacedBlockStopsTheStore(t *testing.T) {
	srv, st := syncedStore(t)
	ctx := context.Background()
	subj := siteSubject("r")
	_, err := st.Append(ctx, subj, 0, []byte("one"))
	require.NoError(t, err)
	path := filepath.Join(jsstore.MsgsDir(srv.Dir(), events.StreamName), "1.blk")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".tmp", b, 0o600))
	require.NoError(t, os.Rename(path+".tmp", path))

	_, err = st.Append(ctx, subj, 1, []byte("two"))
	require.ErrorIs(t, err, events.ErrOutcomeUnknown)
	assert.EqualValues(t, 1, st.Fsyncs().Failed.Load())
	_, err = st.Append(ctx, subj, 2, []byte("three"))
	assert.ErrorIs(t, err, events.ErrUnavailable)
}

// A round that is due waits for the appends already sent, so that one
// fsync answers them too, and starts once they are answered.
func TestFileSync_roundGathersAppendsInFlight(t *testing.T) {
	_, st := syncedStore(t)
	ctx := context.Background()
	var log fsyncLog
	log.watch(t, st)
	// Bounded far beyond the test: only the settling ends the gathering.
	jsstore.SetGatherFor(st, time.Hour)
	_, err := st.Append(ctx, siteSubject("warm"), 0, []byte("first round: older blocks and the directory"))
	require.NoError(t, err)
	syncsBefore := log.blockSyncs()
	doneBefore := st.Fsyncs().Done.Load()

	// Two appends on their way. Gathering counts answers, not whose: b's
	// answer stands in for one of them, the release for the other.
	release := jsstore.HoldSend(st)
	defer jsstore.HoldSend(st)()
	errs := make(chan error, 2)
	go func() { _, err := st.Append(ctx, siteSubject("a"), 0, []byte("a")); errs <- err }()
	testkit.Eventually(t, 10*time.Second, func() bool {
		return jsstore.FsyncGathering(st) && jsstore.FsyncNextWaiters(st) == 1
	}, "the round for a gathering, a waiting")
	// Another append acknowledged meanwhile joins the same round.
	go func() { _, err := st.Append(ctx, siteSubject("b"), 0, []byte("b")); errs <- err }()
	testkit.Eventually(t, 10*time.Second, func() bool { return jsstore.FsyncNextWaiters(st) == 2 }, "b waiting too")
	assert.Equal(t, syncsBefore, log.blockSyncs(), "no fsync while the round gathers")
	select {
	case err := <-errs:
		t.Fatalf("an append was answered before its round: %v", err)
	default:
	}

	release()
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	assert.Equal(t, syncsBefore+1, log.blockSyncs(), "one fsync answered both")
	assert.Equal(t, doneBefore+1, st.Fsyncs().Done.Load())
	assert.False(t, jsstore.FsyncGathering(st))
}

// An answer that does not come holds a round back gatherFor at most.
func TestFileSync_gatheringIsBounded(t *testing.T) {
	_, st := syncedStore(t)
	jsstore.SetGatherFor(st, 20*time.Millisecond)
	release := jsstore.HoldSend(st)
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		_, err := st.Append(ctx, siteSubject("alone"), uint64(i), []byte("x"))
		require.NoError(t, err, "answered although an append in flight never settles")
	}
}

// Every append sent is settled, whatever its answer: a round never gathers
// for one that is over.
func TestFileSync_everyAppendSettles(t *testing.T) {
	_, st := syncedStore(t)
	ctx := context.Background()
	subj := siteSubject("s")
	_, err := st.Append(ctx, subj, 0, []byte("one"))
	require.NoError(t, err)
	_, err = st.Append(ctx, subj, 0, []byte("stale"))
	require.ErrorIs(t, err, events.ErrConflict)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = st.Append(cctx, subj, 1, []byte("cancelled"))
	require.Error(t, err)
	_, err = st.Append(ctx, subj, 1, bytes.Repeat([]byte("x"), 9<<20)) // over the stream's message size
	require.Error(t, err)
	assert.Zero(t, jsstore.FsyncInFlight(st))
}

// An append whose send panics is settled all the same (the ledger recovers
// the panic and goes on), so later rounds do not gather for it.
func TestFileSync_panickingSendSettles(t *testing.T) {
	_, st := syncedStore(t)
	ctx := context.Background()
	jsstore.SetSendHook(st, func() { panic("send failed in a way nobody foresaw") })
	assert.Panics(t, func() { _, _ = st.Append(ctx, siteSubject("p"), 0, []byte("lost")) })
	assert.Zero(t, jsstore.FsyncInFlight(st), "the panicked append is still counted on its way")

	// A later append is answered without waiting out the gathering bound
	// (an hour: it would run into its deadline instead).
	jsstore.SetSendHook(st, nil)
	jsstore.SetGatherFor(st, time.Hour)
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	seq, err := st.Append(tctx, siteSubject("p"), 0, []byte("stored"))
	require.NoError(t, err)
	assert.EqualValues(t, 1, seq)
	assert.Zero(t, jsstore.FsyncInFlight(st))
}

// A process reading what an earlier one stored (the ledger catching up
// after a restart) needs one fsync round for all of it, not one a message:
// a round covers every message the server had written when it started.
func TestFileSync_catchUpIsOneRoundNotOneAMessage(t *testing.T) {
	ctx := context.Background()
	const n = 200
	srv, before := syncedHistory(t, n)
	before.Close()
	srv.Restart()
	after := testkit.OpenStore(t, srv.Conn("after"), jsstore.Options{Files: srv.Dir(), SyncFiles: true})

	got := 0
	require.NoError(t, after.Read(ctx, events.SubjectPrefix+">", 1, func(m events.Msg) error {
		got++
		return nil
	}))
	assert.Equal(t, n, got)
	for seq := uint64(1); seq <= n; seq += 37 {
		_, err := after.Get(ctx, seq)
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, after.Fsyncs().Done.Load(), uint64(2),
		"rounds made to hand out %d messages stored before the process started", n)
}

// syncedHistory starts a server and stores n messages over seven site
// subjects through a store that fsyncs itself, on the connection it
// returns.
func syncedHistory(t *testing.T, n int) (*testkit.Server, *nats.Conn) {
	t.Helper()
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	nc := srv.Conn("before")
	st := testkit.OpenStore(t, nc, jsstore.Options{Files: srv.Dir(), SyncFiles: true})
	last := map[string]uint64{}
	for i := range n {
		subj := siteSubject(fmt.Sprint("s", i%7))
		seq, err := st.Append(context.Background(), subj, last[subj], []byte(fmt.Sprintf("message %03d of the history", i)))
		require.NoError(t, err)
		last[subj] = seq
	}
	return srv, nc
}

// A history shorter than what the store's fsync rounds once put on disk
// (a torn or damaged block the server truncated when it recovered it) is
// refused at the next open, not served; an intact one, and a store
// without a mark, open as before.
func TestFileSync_lostHistoryIsRefused(t *testing.T) {
	ctx := context.Background()
	const n = 30
	srv, nc := syncedHistory(t, n)
	nc.Close()

	// Intact: opens.
	srv.Restart()
	nc = srv.Conn("intact")
	_, err := jsstore.Open(ctx, nc, jsstore.Options{Files: srv.Dir(), SyncFiles: true})
	require.NoError(t, err)
	nc.Close()

	// The last record torn: the server drops it when it recovers the block.
	srv.Stop()
	paths, err := filepath.Glob(filepath.Join(msgsDir(srv), "*.blk"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	last := paths[len(paths)-1]
	fi, err := os.Stat(last)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(last, fi.Size()-10))
	// As after a crash: no index written at shutdown, so the server
	// recovers the stream from its blocks.
	require.NoError(t, os.Remove(filepath.Join(msgsDir(srv), "index.db")))
	srv.Restart()
	nc = srv.Conn("after")
	_, err = jsstore.Open(ctx, nc, jsstore.Options{Files: srv.Dir(), SyncFiles: true})
	require.ErrorIs(t, err, jsstore.ErrHistoryLost)
	assert.Contains(t, err.Error(), fmt.Sprintf("but %d was on disk", n))

	// Without the gateway's own fsync there is no mark to hold it to.
	_, err = jsstore.Open(ctx, nc, jsstore.Options{})
	require.NoError(t, err)

	// A reader of the offline directory (ledgerctl) checks the same mark.
	require.ErrorIs(t, jsstore.CheckDurableMark(srv.Dir(), events.StreamName, n-1), jsstore.ErrHistoryLost)
	require.NoError(t, jsstore.CheckDurableMark(srv.Dir(), events.StreamName, n))
	require.NoError(t, jsstore.CheckDurableMark(t.TempDir(), events.StreamName, 0), "no mark")
}

// Messages gone before the stream's last sequence (a block truncated in
// the middle while the server's index still names the old last sequence,
// which the mark then does not see) are refused at open, with the mark or
// without: the stream never deletes a message.
func TestOpen_missingMessagesAreRefused(t *testing.T) {
	ctx := context.Background()
	const n = 30
	srv, nc := syncedHistory(t, n)
	nc.Close()
	srv.Stop()
	paths, err := filepath.Glob(filepath.Join(msgsDir(srv), "*.blk"))
	require.NoError(t, err)
	require.Len(t, paths, 1)
	fi, err := os.Stat(paths[0])
	require.NoError(t, err)
	require.NoError(t, os.Truncate(paths[0], fi.Size()/2))
	srv.Restart()
	nc = srv.Conn("after")
	for _, o := range []jsstore.Options{{Files: srv.Dir(), SyncFiles: true}, {}} {
		_, err = jsstore.Open(ctx, nc, o)
		require.ErrorIs(t, err, jsstore.ErrHistoryLost, "options %+v", o)
		require.ErrorIs(t, err, events.ErrHistoryLost)
		assert.Contains(t, err.Error(), fmt.Sprintf("of the sequences 1 to %d", n))
	}
	// A server that may lose its last moments to a crash (--sync
	// interval) may leave such a gap: that mode's documented loss.
	_, err = jsstore.Open(ctx, nc, jsstore.Options{TailMayBeLost: true})
	require.NoError(t, err)
	// With the durable mark below the gap, nothing acknowledged is in it:
	// a power loss kept part of what was never answered.
	require.NoError(t, os.WriteFile(filepath.Join(srv.Dir(), "durable-"+events.StreamName), fmt.Appendf(nil, "%020d\n", 3), 0o600))
	_, err = jsstore.Open(ctx, nc, jsstore.Options{Files: srv.Dir(), SyncFiles: true})
	require.NoError(t, err)
}

// A mark that cannot be opened fails the open: the store would otherwise
// run without the check it promises.
func TestFileSync_unopenableMarkFailsTheOpen(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	require.NoError(t, os.Mkdir(filepath.Join(srv.Dir(), "durable-"+events.StreamName), 0o700))
	_, err := jsstore.Open(context.Background(), srv.Conn("open"), jsstore.Options{Files: srv.Dir(), SyncFiles: true})
	require.ErrorIs(t, err, jsstore.ErrDataDir)
	assert.Contains(t, err.Error(), "durable mark")
}
