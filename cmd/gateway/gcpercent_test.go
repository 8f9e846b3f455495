package main

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/iqdgateway/gateway/internal/testkit"
)

func TestGCPercentFor(t *testing.T) {
	tests := []struct {
		name string
		cur  int
		live uint64
		want int
	}{
		{"a small heap", 50, 10 << 20, 100},
		{"a large heap", 100, 200 << 20, 50},
		{"just past the large threshold", 100, largeHeapAbove + 1, 50},
		{"between the thresholds keeps 100", 100, 56 << 20, 100},
		{"between the thresholds keeps 50", 50, 56 << 20, 50},
		{"just under the small threshold", 50, smallHeapBelow - 1, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, gcPercentFor(tc.cur, tc.live))
		})
	}
}

// TestTuneGCPercent follows the process's own live heap: a large one held
// brings the target to 50, and once it is released and collected the
// target goes back to 100.
func TestTuneGCPercent(t *testing.T) {
	var mu sync.Mutex
	var set []int
	last := func() int {
		mu.Lock()
		defer mu.Unlock()
		if len(set) == 0 {
			return 0
		}
		return set[len(set)-1]
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tuneGCPercentWith(ctx, func(p int) { mu.Lock(); set = append(set, p); mu.Unlock() })
	}()
	defer func() { cancel(); <-done }()

	testkit.Eventually(t, testkit.WaitFor, func() bool { return last() == 100 }, "starts at 100")
	held := make([][]byte, 0, 100)
	for range 100 {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 1
		}
		held = append(held, b)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { runtime.GC(); return last() == 50 }, "50 with 100 MiB live")
	runtime.KeepAlive(held)
	held = nil
	testkit.Eventually(t, 10*time.Second, func() bool { runtime.GC(); return last() == 100 }, "100 again once it is collected")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{100, 50, 100}, set, "one change at each threshold")
}
