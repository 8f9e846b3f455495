package projections

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
)

// The crash child: the test binary run again with these variables applies
// the stream to a DB until it is killed.
const (
	childURL   = "PROJECTIONS_CRASH_URL"
	childDir   = "PROJECTIONS_CRASH_DIR"
	childMode  = "PROJECTIONS_CRASH_MODE" // catchup or follow
	childChunk = "PROJECTIONS_CRASH_CHUNK"
)

// TestMain lets the test binary act as the crash test's child process.
func TestMain(m *testing.M) {
	if url := os.Getenv(childURL); url != "" {
		if err := crashChild(url, os.Getenv(childDir), os.Getenv(childMode), os.Getenv(childChunk)); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashChild opens the DB in dir, says "started" on stdout and applies the
// stream at url through CatchUp or Follow, then says "done" and waits to
// be killed.
func crashChild(url, dir, mode, chunk string) error {
	nc, err := jsstore.Connect(url, "crash-child")
	if err != nil {
		return err
	}
	ctx := context.Background()
	st, err := jsstore.OpenExisting(ctx, nc, jsstore.Options{})
	if err != nil {
		return err
	}
	d, err := Open(dir, slog.New(slog.DiscardHandler), fold{})
	if err != nil {
		return err
	}
	if d.chunkMsgs, err = strconv.Atoi(chunk); err != nil {
		return err
	}
	last, err := st.LastSeq(ctx)
	if err != nil {
		return err
	}
	fmt.Println("started")
	// Every commit is told, so that the parent can kill at a point
	// chosen by what is applied, not by a guess at how long it takes.
	go func() {
		for {
			if err := d.WaitFor(ctx, d.Applied()+1); err != nil {
				return
			}
			fmt.Println("applied", d.Applied())
		}
	}()
	switch mode {
	case "catchup":
		err = d.CatchUp(ctx, st)
	case "follow":
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Follow(fctx, st) }()
		err = d.WaitFor(ctx, last)
		cancel()
		if ferr := <-done; err == nil {
			err = ferr
		}
	default:
		err = fmt.Errorf("mode %q", mode)
	}
	if err != nil {
		return err
	}
	fmt.Println("done")
	select {}
}

// TestDB_crash: a process applying the stream is killed (SIGKILL) at
// random points, through CatchUp's unsynced chunks and through Follow's
// group commits. After every kill the DB reopens at a checkpoint no later
// than the stream's end, holding exactly what a fresh DB that applied
// messages 1 to the checkpoint holds: never a message's changes without
// its checkpoint, nor a checkpoint without its changes. Each process
// resumes where the last one's checkpoint stands, and a catch-up to the
// end equals a replay of the whole history.
func TestDB_crash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	st, srv := newStore(t)
	msgs := history(t, st, 3000)
	last := msgs[len(msgs)-1].Seq
	dir := filepath.Join(t.TempDir(), "projections")
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	const kills = 10
	midway := 0
	var prev uint64
	for i := range kills {
		mode := []string{"catchup", "follow"}[i%2]
		chunk := 1 + rnd.IntN(64)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childURL+"="+srv.URL(), childDir+"="+dir, childMode+"="+mode,
			childChunk+"="+strconv.Itoa(chunk))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(out)
		require.True(t, lines.Scan(), "the child starts: %s", &stderr)
		require.Equal(t, "started", lines.Text())
		// A random point of its work: once it has applied a random
		// target (or at once), and a random moment later, in the middle
		// of whatever it does next. The outcome is checked whatever the
		// point turns out to be.
		var target uint64
		if prev < last && rnd.IntN(4) != 0 {
			target = prev + 1 + uint64(rnd.IntN(int(max(1, (last-prev)/2))))
		}
		for reached := uint64(0); reached < target && lines.Scan() && lines.Text() != "done"; {
			if n, ok := strings.CutPrefix(lines.Text(), "applied "); ok {
				reached, err = strconv.ParseUint(n, 10, 64)
				require.NoError(t, err)
			}
		}
		time.Sleep(time.Duration(rnd.IntN(2000)) * time.Microsecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		go func() { _, _ = io.Copy(io.Discard, out) }()
		_ = cmd.Wait()
		require.NotContains(t, stderr.String(), "crash child:", "kill %d (%s): the child failed by itself", i, mode)
		require.NotContains(t, stderr.String(), "DATA RACE", "kill %d (%s)", i, mode)

		d, err := Open(dir, slog.Default(), fold{})
		require.NoError(t, err, "kill %d (%s)", i, mode)
		cp := d.Checkpoint("fold")
		require.LessOrEqual(t, cp, last, "kill %d (%s)", i, mode)
		assert.Equal(t, replay(t, msgs[:cp]), dump(t, d, "fold"), "kill %d (%s): the model is messages 1..%d", i, mode, cp)
		require.NoError(t, d.Close())
		// The audit's read-models check says the same.
		checks, err := Verify(context.Background(), dir, st, slog.Default(), fold{})
		require.NoError(t, err)
		assert.Zero(t, checks[0].Differences, "kill %d (%s): %v", i, mode, checks[0].First)
		if cp < last {
			midway++
		}
		prev = cp
		t.Logf("kill %d (%s, chunks of %d): checkpoint %d of %d", i, mode, chunk, cp, last)
	}
	t.Logf("%d of %d kills landed before the end", midway, kills)

	d, err := Open(dir, slog.Default(), fold{})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.CatchUp(context.Background(), st))
	assert.Equal(t, last, d.Checkpoint("fold"))
	assert.Equal(t, replay(t, msgs), dump(t, d, "fold"))
}

// TestDB_rebuild: a model rebuilt from the stream, after its keys were
// dropped or the whole store removed, equals the model it replaced.
func TestDB_rebuild(t *testing.T) {
	st, _ := newStore(t)
	msgs := history(t, st, 500)
	for _, tc := range []struct {
		name   string
		remove func(t *testing.T, d *DB, dir string) *DB
	}{
		{"model dropped", func(t *testing.T, d *DB, _ string) *DB {
			require.NoError(t, d.Drop("fold"))
			assert.Empty(t, dump(t, d, "fold"))
			assert.Equal(t, uint64(0), d.Checkpoint("fold"))
			return d
		}},
		{"files removed", func(t *testing.T, d *DB, dir string) *DB {
			require.NoError(t, d.Close())
			require.NoError(t, os.RemoveAll(dir))
			d, err := Open(dir, slog.Default(), fold{})
			require.NoError(t, err)
			return d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := Open(dir, slog.Default(), fold{})
			require.NoError(t, err)
			d.chunkMsgs = 37
			require.NoError(t, d.CatchUp(context.Background(), st))
			before := dump(t, d, "fold")
			require.Equal(t, replay(t, msgs), before)
			d = tc.remove(t, d, dir)
			defer d.Close()
			require.NoError(t, d.CatchUp(context.Background(), st))
			assert.Equal(t, before, dump(t, d, "fold"))
			assert.Equal(t, msgs[len(msgs)-1].Seq, d.Checkpoint("fold"))
		})
	}
}
