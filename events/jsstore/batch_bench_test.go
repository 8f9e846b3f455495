package jsstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"gateway/events/jsstore"
	"gateway/internal/testkit"
)

// What a write costs the stream on a single file store that fsyncs every
// message (the embedded default): appends of different subjects sent
// alone, all at once, against the same appends sent as one atomic batch.
// The difference is the fixed cost of a batch, which sets --batch-min
// (docs/ARCHITECTURE.md, "Group commit across sites"):
//
//	go test -run X -bench Store_write -benchtime 2000x ./events/jsstore/
//
// ns/op is per append in both.
func BenchmarkStore_writeAlone(b *testing.B) {
	st := testkit.StartServer(b, jsstore.ServerConfig{SyncAlways: true}).Store("bench")
	const subjects = 64
	last := make([]uint64, subjects)
	b.ResetTimer()
	for done := 0; done < b.N; done += subjects {
		var wg sync.WaitGroup
		for k := range min(subjects, b.N-done) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seq, err := st.Append(context.Background(), siteSubject(fmt.Sprint("s", k)), last[k], make([]byte, 300))
				if err != nil {
					b.Error(err)
				}
				last[k] = seq
			}()
		}
		wg.Wait()
	}
}

func BenchmarkStore_writeBatch(b *testing.B) {
	for _, size := range []int{1, 8, 16, 64, 256} {
		b.Run(fmt.Sprint("size=", size), func(b *testing.B) {
			st := testkit.StartServer(b, jsstore.ServerConfig{SyncAlways: true}).Store("bench")
			last := make([]uint64, size)
			b.ResetTimer()
			for done := 0; done < b.N; done += size {
				ps := make([]jsstore.Pending, min(size, b.N-done))
				for k := range ps {
					ps[k] = jsstore.Pending{Subject: siteSubject(fmt.Sprint("s", k)), Expect: last[k], Data: make([]byte, 300)}
				}
				seqs, _, err := jsstore.PublishBatch(st, ps)
				if err != nil {
					b.Fatal(err)
				}
				copy(last, seqs)
			}
		})
	}
}
