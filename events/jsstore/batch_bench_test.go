package jsstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
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

// What gathering an fsync round saves (docs/ARCHITECTURE.md, "One fsync
// for many sites"): 64 writers, each appending to its own subject one
// append after another, as 64 clients over many sites do, on the
// embedded default (the store fsyncs the block files), with rounds that
// start at once and with rounds that gather:
//
//	go test -run X -bench Store_fsyncRounds -benchtime 20000x ./events/jsstore/
//
// ns/op is per append; appends/fsync is how many appends a round answered.
func BenchmarkStore_fsyncRounds(b *testing.B) {
	for _, tc := range []struct {
		name   string
		gather time.Duration
	}{{"at once", 0}, {"gathering", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			srv := testkit.StartServer(b, jsstore.ServerConfig{})
			st := testkit.OpenStore(b, srv.Conn("bench"), jsstore.Options{Files: srv.Dir(), SyncFiles: true})
			if tc.gather >= 0 {
				jsstore.SetGatherFor(st, tc.gather)
			}
			const writers = 64
			var next atomic.Int64
			before := st.Fsyncs().Done.Load()
			b.ResetTimer()
			var wg sync.WaitGroup
			for k := range writers {
				wg.Go(func() {
					var last uint64
					for next.Add(1) <= int64(b.N) {
						seq, err := st.Append(context.Background(), siteSubject(fmt.Sprint("w", k)), last, make([]byte, 300))
						if err != nil {
							b.Error(err)
							return
						}
						last = seq
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/float64(st.Fsyncs().Done.Load()-before), "appends/fsync")
		})
	}
}
