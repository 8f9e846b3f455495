package jsstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// Reading one old message at random out of 96 MiB of 1 KiB messages (twelve
// 8 MiB blocks), by the server and from the block files
// (docs/ARCHITECTURE.md, "Reading one old message"):
//
//	go test -run X -bench Store_getOld -benchtime 20000x ./events/jsstore/
//
// The server is restarted after the writes, so that no block is in memory,
// as for a history written long ago. heap-MiB is how much the Go heap grew
// over the reads (before a collection): the server's block buffers stay
// there until one.
func BenchmarkStore_getOld(b *testing.B) {
	srv := testkit.StartServer(b, jsstore.ServerConfig{})
	w := srv.Store("writer")
	ctx := context.Background()
	const n = 96 << 10
	data := make([]byte, 1000)
	last := map[string]uint64{}
	for i := range n {
		subj := siteSubject(fmt.Sprint("s", i%100))
		seq, err := w.Append(ctx, subj, last[subj], data)
		require.NoError(b, err)
		last[subj] = seq
	}
	// A history read long after it was written: the server has no block
	// in memory.
	srv.Restart()
	for _, mode := range []struct {
		name  string
		files string
	}{{"files", srv.Dir()}, {"server", ""}} {
		b.Run(mode.name, func(b *testing.B) {
			st := testkit.OpenStore(b, srv.Conn(mode.name), jsstore.Options{Files: mode.files})
			// Twice: the server's buffer pools outlive one collection.
			runtime.GC()
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			rng := rand.New(rand.NewPCG(1, 2))
			b.ResetTimer()
			for range b.N {
				// The newest block is the server's either way.
				if _, err := st.Get(ctx, 1+rng.Uint64N(n*3/4)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(int64(ms.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MiB")
		})
	}
}
