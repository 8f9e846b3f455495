package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The garbage collector's heap growth target when GOGC is not set depends on
// the live heap. A small heap (a new or lightly used gateway, where the
// embedded server's buffers are most of it) is collected at Go's default of
// 100: collections cost a tenth of the CPU at 50 (BENCHMARKS.md "Collecting
// less often while the heap is small"). A large one is mostly long-lived
// ledger state without pointers, cheap to collect around but expensive to
// double, so it is held to 50: the figures of a million transactions
// (BENCHMARKS.md "A million transactions over 1,000 sites") are taken there.
// Between the two thresholds the target stays where it was, so a heap near
// one does not flip it at every sample.
const (
	smallHeapGCPercent = 100
	largeHeapGCPercent = 50
	largeHeapAbove     = 64 << 20 // live bytes from which the heap is large
	smallHeapBelow     = 48 << 20 // live bytes under which it is small again
	gcPercentEvery     = 100 * time.Millisecond
)

// gcPercentFor returns the target for a live heap of live bytes, given the
// current target cur.
func gcPercentFor(cur int, live uint64) int {
	switch {
	case live > largeHeapAbove:
		return largeHeapGCPercent
	case live < smallHeapBelow:
		return smallHeapGCPercent
	}
	return cur
}

// tuneGCPercent sets the target from the live heap ten times a second (a
// read of one runtime metric, which stops nothing) until ctx
// ends. Called only when GOGC is not set: an operator's GOGC is kept as it
// is.
func tuneGCPercent(ctx context.Context) {
	tuneGCPercentWith(ctx, func(p int) { debug.SetGCPercent(p) })
}

// tuneGCPercentWith is tuneGCPercent with the setter passed in.
func tuneGCPercentWith(ctx context.Context, set func(int)) {
	cur := smallHeapGCPercent
	set(cur)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(gcPercentEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // a runtime without the metric: keep the target as set
		}
		if next := gcPercentFor(cur, sample[0].Value.Uint64()); next != cur {
			set(next)
			cur = next
		}
	}
}
