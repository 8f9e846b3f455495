package audit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Run audits the stream from sequence 1 to its last sequence at the start.
// A returned error means the audit could not be carried out (the store
// failed); disagreements are in the report (Report.OK false). Its stages:
// what is audited (scopeOf), the replay of every message (replay), the
// workers' reports (collect), then the checks of what was read
// (readCheck) and of the snapshots (snapshotCheck), and the gateway's
// treasuries when asked.
func Run(ctx context.Context, src Source, o Options) (*Report, error) {
	start := time.Now()
	sc, err := scopeOf(ctx, src, o)
	if err != nil {
		return nil, err
	}
	var prog progress
	prog.end = sc.end
	if o.Progress != nil {
		stop := prog.run(o.Progress, start)
		defer stop()
	}
	rd, err := replay(ctx, src, sc, &prog)
	if err != nil {
		return nil, err
	}
	rep := collect(sc, rd.workers)
	rep.Checks = append(rep.Checks, rd.check(sc))
	if sc.site != "" && len(rep.Sites) == 0 {
		var p problems
		p.addf(nil, "", "site %s has no messages in the stream", sc.site)
		rep.Checks = append(rep.Checks, p.check(CheckCreated, ""))
	}
	rep.Checks = append(rep.Checks, sc.snapshotCheck(rep))
	if o.Gateway != nil {
		o.Gateway.compare(ctx, rep)
	}
	if o.Progress != nil {
		prog.events.Store(rep.Events)
	}
	rep.Elapsed = time.Since(start)
	rep.finish()
	return rep, nil
}

// scope is what an audit covers, read before the stream is: the subjects,
// the snapshots and the checkpoint, and the stream's last sequence.
type scope struct {
	site    string // "" for every subject
	filter  string
	workers int
	snaps   map[string]snapshot
	// badSnaps are snapshots whose names are no site id; unreadableSnaps
	// those that cannot be read, with why.
	badSnaps        []string
	unreadableSnaps map[string]string
	checkpoint, end uint64
}

func scopeOf(ctx context.Context, src Source, o Options) (scope, error) {
	sc := scope{site: o.Site, filter: events.SubjectPrefix + ">", workers: o.Workers}
	if o.Site != "" {
		site, err := ids.ParseSite(o.Site)
		if err != nil {
			return sc, fmt.Errorf("audit: --site: %w", err)
		}
		if sc.filter, err = events.SiteSubject(site); err != nil {
			return sc, fmt.Errorf("audit: %w", err)
		}
	}
	if sc.workers <= 0 {
		sc.workers = runtime.GOMAXPROCS(0)
	}
	// Snapshots are loaded before the last sequence is read, so none is
	// newer than the audited range (unless saved in between, which the
	// live model reports as skipped).
	var err error
	sc.snaps, sc.badSnaps, sc.unreadableSnaps, err = loadSnapshots(ctx, src, o.Site)
	if err != nil {
		return sc, err
	}
	// The checkpoint promises a snapshot for every site with messages up
	// to its sequence (see ledger/state.go).
	sc.checkpoint, _, err = src.LoadSnapshot(ctx, CheckpointName)
	if errors.Is(err, events.ErrNotFound) {
		sc.checkpoint, err = 0, nil
	}
	if err != nil {
		return sc, fmt.Errorf("audit: %w", err)
	}
	if sc.end, err = src.LastSeq(ctx); err != nil {
		return sc, fmt.Errorf("audit: %w", err)
	}
	return sc, nil
}

// read is what the replay saw: the workers holding every subject's audit,
// the last sequence read, and the messages missing on the way.
type read struct {
	workers               []*worker
	last                  uint64
	missing, firstMissing uint64
}

// replay reads every message of the scope and has it applied.
//
// The pipeline. The reader cuts the stream into batches in stream order;
// decoders decode and hash whole batches in parallel, in any order; the
// sequencer takes the batches back in stream order and hands each message
// to the worker that owns its subject. Every subject is so applied in
// order on one goroutine, while decoding and hashing (most of the work)
// are spread over every core even when one site holds the whole history.
// The queues are short: reading is much faster than replaying, and a deep
// queue would only hold the stream in memory.
func replay(ctx context.Context, src Source, sc scope, prog *progress) (read, error) {
	workers := sc.workers
	ws := make([]*worker, workers)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &worker{in: make(chan []*decoded, 2), subjects: map[string]subjectAudit{}, snaps: sc.snaps, checkpoint: sc.checkpoint, end: sc.end, prog: prog}
		wg.Add(1)
		go func(w *worker) {
			defer wg.Done()
			w.run()
		}(ws[i])
	}
	decodeQ := make(chan *batch, workers)
	orderQ := make(chan *batch, 4*workers)
	var dwg sync.WaitGroup
	for range workers {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			for b := range decodeQ {
				for i := range b.msgs {
					b.msgs[i].decode()
				}
				close(b.done)
			}
		}()
	}
	seqDone := make(chan struct{})
	go func() {
		defer close(seqDone)
		seed := maphash.MakeSeed()
		out := make([][]*decoded, workers)
		for b := range orderQ {
			<-b.done
			for i := range b.msgs {
				d := &b.msgs[i]
				k := 0
				if workers > 1 {
					k = int(maphash.String(seed, d.m.Subject) % uint64(workers))
				}
				out[k] = append(out[k], d)
			}
			for k := range out {
				if len(out[k]) > 0 {
					ws[k].in <- out[k]
					out[k] = nil
				}
			}
		}
		for _, w := range ws {
			close(w.in)
		}
	}()

	const batchMsgs, batchBytes = 64, 2 << 20
	cur := newBatch(batchMsgs)
	curBytes := 0
	send := func() {
		if len(cur.msgs) > 0 {
			orderQ <- cur
			decodeQ <- cur
			cur, curBytes = newBatch(batchMsgs), 0
		}
	}
	rd := read{workers: ws}
	// The stream refuses deletes and purges, so every sequence up to end
	// holds a message: one missing over the whole stream is a message the
	// server dropped (a damaged block), whose loss no hash chain shows
	// when it was its subject's last.
	var readErr error
	if sc.end > 0 {
		readErr = src.Read(ctx, sc.filter, 1, func(m events.Msg) error {
			if m.Seq > sc.end {
				return errStop
			}
			if sc.site == "" && m.Seq > rd.last+1 {
				if rd.missing == 0 {
					rd.firstMissing = rd.last + 1
				}
				rd.missing += m.Seq - rd.last - 1
			}
			cur.msgs = append(cur.msgs, decoded{m: m})
			curBytes += len(m.Data)
			if len(cur.msgs) >= batchMsgs || curBytes >= batchBytes {
				send()
			}
			rd.last = m.Seq
			prog.msgs.Add(1)
			prog.seq.Store(m.Seq)
			if m.Seq == sc.end {
				return errStop
			}
			return nil
		})
	}
	send()
	close(orderQ)
	close(decodeQ)
	dwg.Wait()
	<-seqDone
	wg.Wait()
	if readErr != nil && !errors.Is(readErr, errStop) {
		return rd, fmt.Errorf("audit: %w", readErr)
	}
	return rd, nil
}

// collect builds the report of every subject the workers replayed, on the
// workers too: comparing a live model walks every transaction of its
// site.
func collect(sc scope, ws []*worker) *Report {
	rep := &Report{Filter: sc.filter, LastSeq: sc.end, Checkpoint: sc.checkpoint}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func(w *worker) {
			defer wg.Done()
			sites, others := w.reports()
			mu.Lock()
			rep.Sites = append(rep.Sites, sites...)
			rep.Subjects = append(rep.Subjects, others...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	for _, s := range rep.Sites {
		rep.Messages += s.Messages
		rep.Events += s.Events
	}
	for _, s := range rep.Subjects {
		rep.Messages += s.Messages
		rep.Events += s.Events
	}
	rep.sortReports()
	return rep
}

// check is the read's check: every message up to the end read, none
// missing, and no checkpoint or snapshot beyond the stream's end.
func (rd read) check(sc scope) Check {
	var p problems
	if sc.site == "" && rd.last != sc.end {
		p.addf(nil, "", "the stream's last sequence is %d but the read ended at %d", sc.end, rd.last)
	}
	// Snapshots and the checkpoint were loaded before the last sequence
	// was read, and the stream only grows: one beyond it was saved from
	// messages the stream no longer has.
	if sc.checkpoint > sc.end {
		p.addf(nil, "", "the checkpoint is at sequence %d, beyond the stream's last (%d): messages %d to %d were lost; restore the data directory from a backup",
			sc.checkpoint, sc.end, sc.end+1, sc.checkpoint)
	}
	for _, id := range slices.Sorted(maps.Keys(sc.snaps)) {
		if sn := sc.snaps[id]; sn.seq > sc.end {
			p.addf(nil, "", "the snapshot of site %s is at sequence %d, beyond the stream's last (%d): messages were lost; restore the data directory from a backup",
				id, sn.seq, sc.end)
		}
	}
	if rd.missing > 0 {
		p.addf(nil, "", "%d of the messages 1..%d are missing, the first at sequence %d: the stream never deletes one, so they were lost (damaged block files); restore the data directory from a backup",
			rd.missing, sc.end, rd.firstMissing)
	}
	return p.check(CheckRead, fmt.Sprintf("messages 1..%d", sc.end))
}

// snapshotCheck is the snapshots' check: each one readable, named for a
// site, and of a site the stream has.
func (sc scope) snapshotCheck(rep *Report) Check {
	var p problems
	for _, n := range sc.badSnaps {
		p.addf(nil, "", "snapshot %q: its name is no site id, so no gateway loads it; only a write that went around the subject check (an id with '*', '>' or '.') can have saved it", n)
	}
	for _, id := range slices.Sorted(maps.Keys(sc.unreadableSnaps)) {
		p.addf(nil, "", "snapshot %s%s cannot be read (%s): a gateway replays the stream instead of loading it", SnapshotPrefix, id, sc.unreadableSnaps[id])
	}
	audited := make(map[string]bool, len(rep.Sites))
	for _, s := range rep.Sites {
		audited[s.ID] = true
	}
	for _, id := range slices.Sorted(maps.Keys(sc.snaps)) {
		if !audited[id] {
			p.addf(nil, "", "snapshot %s%s belongs to no site of the stream", SnapshotPrefix, id)
		}
	}
	return p.check(CheckSnapshots, fmt.Sprintf("%d site snapshots", len(sc.snaps)))
}
