// Package testkit is the support every package's tests share, so that each
// does not grow its own copy: an embedded JetStream server in a temp dir
// (restartable on the same dir), ledger stores on it, polling with a
// deadline instead of sleeping, and a log capture that fails a test which
// logged an ERROR it did not declare.
//
// It imports only events/jsstore, NATS, testify and the standard library,
// so that the in-package tests of every other package (ledger, httpapi,
// callbacks, projections) can import it without an import cycle. For the
// same reason the in-package tests of events/jsstore cannot: its tests that
// use testkit are in package jsstore_test.
package testkit

import (
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// WaitFor is how long a polled condition may take by default before the
// test fails. It only bounds waiting for something that must happen (on a
// loaded 2-core machine it can take seconds); nothing asserts how fast it
// happens.
const WaitFor = 30 * time.Second

// Eventually polls cond until it holds, and fails the test (t.Fatalf) if it
// still does not after within; format and args say what was awaited. It
// polls often at first and backs off to 25ms, so cheap conditions are seen
// at once and expensive ones (an HTTP call) do not hog the CPU. Call it
// from the test's goroutine.
func Eventually(t testing.TB, within time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", within, fmt.Sprintf(format, args...))
		}
		time.Sleep(pause)
		pause = min(2*pause, 25*time.Millisecond)
	}
}

// Busy keeps n processes spinning on the CPU until the test ends, as other
// work on a loaded machine does: it widens the windows in which replicas
// lag behind, so races that a quiet machine hides show up. They are
// processes, not goroutines, so that the kernel shares the CPU finely and
// the test's own goroutines are not starved by Go's scheduler.
func Busy(t testing.TB, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// Together runs fn(i) for i in [0, n) on n goroutines released at the same
// moment, and returns once all of them have: the start of every race a
// test provokes.
func Together(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}
