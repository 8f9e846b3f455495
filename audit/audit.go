// Package audit replays the ledger stream and checks its invariants: the
// per-subject hash chains, each site's treasury (balance and pending
// withdrawals computed from the events, independently of the aggregate), the
// transactions' state machine, the live read model a gateway starts from
// (snapshot plus later messages) against a full replay, and optionally the
// running gateway's operator API. It also generates synthetic histories for
// tests and for operators to try the audit on (Generate), and lists a site's
// history in readable form (History).
//
// The audit only reads: it never appends, and it loads snapshots without
// writing them.
package audit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// Source is what the audit reads: the ledger stream and its snapshots.
// *jsstore.Store implements it.
type Source interface {
	// Read calls fn for every message matching filter with sequence ≥
	// from, in stream order.
	Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error
	// LastSeq returns the stream's last sequence.
	LastSeq(ctx context.Context) (uint64, error)
	// LoadSnapshot returns a snapshot and the sequence it was saved at;
	// events.ErrNotFound when there is none.
	LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error)
	// ListSnapshots returns the names of all snapshots.
	ListSnapshots(ctx context.Context) ([]string, error)
}

// Options configure an audit.
type Options struct {
	// Site restricts the audit to one site ("" audits every subject).
	Site string
	// Workers is how many goroutines decode and replay; subjects are
	// spread over them, each subject's messages stay in order on one.
	// 0 means GOMAXPROCS.
	Workers int
	// Progress, when set, receives a progress line about four times a
	// second (messages and events done, rate), overwritten with \r.
	Progress io.Writer
	// Gateway, when set, is asked for every site's treasury.
	Gateway *Gateway
}

// SnapshotPrefix prefixes a site's snapshot name ("site-<id>"), as the
// ledger writes them.
const SnapshotPrefix = "site-"

// CheckpointName is the snapshot whose sequence promises that every site
// with messages up to it has a snapshot, as the ledger writes it.
const CheckpointName = "checkpoint"

// errStop ends a read at the audited range's end.
var errStop = errors.New("end of audited range")

// Run audits the stream from sequence 1 to its last sequence at the start.
// A returned error means the audit could not be carried out (the store
// failed); disagreements are in the report (Report.OK false).
func Run(ctx context.Context, src Source, o Options) (*Report, error) {
	start := time.Now()
	filter := events.SubjectPrefix + ">"
	if o.Site != "" {
		site, err := ids.ParseSite(o.Site)
		if err != nil {
			return nil, fmt.Errorf("audit: --site: %w", err)
		}
		if filter, err = events.SiteSubject(site); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}

	// Snapshots are loaded before the last sequence is read, so none is
	// newer than the audited range (unless saved in between, which the
	// live model reports as skipped).
	snaps, badSnaps, unreadableSnaps, err := loadSnapshots(ctx, src, o.Site)
	if err != nil {
		return nil, err
	}
	// The checkpoint promises a snapshot for every site with messages up
	// to its sequence (see ledger/state.go).
	cp, _, err := src.LoadSnapshot(ctx, CheckpointName)
	if errors.Is(err, events.ErrNotFound) {
		cp, err = 0, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	end, err := src.LastSeq(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}

	var prog progress
	prog.end = end
	if o.Progress != nil {
		stop := prog.run(o.Progress, start)
		defer stop()
	}

	// The pipeline. The reader cuts the stream into batches in stream
	// order; decoders decode and hash whole batches in parallel, in any
	// order; the sequencer takes the batches back in stream order and
	// hands each message to the worker that owns its subject. Every
	// subject is so applied in order on one goroutine, while decoding and
	// hashing (most of the work) are spread over every core even when one
	// site holds the whole history. The queues are short: reading is much
	// faster than replaying, and a deep queue would only hold the stream
	// in memory.
	ws := make([]*worker, workers)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &worker{in: make(chan []*decoded, 2), subjects: map[string]subjectAudit{}, snaps: snaps, checkpoint: cp, end: end, prog: &prog}
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
	var last uint64
	// The stream refuses deletes and purges, so every sequence up to end
	// holds a message: one missing over the whole stream is a message the
	// server dropped (a damaged block), whose loss no hash chain shows
	// when it was its subject's last.
	var missing, firstMissing uint64
	var readErr error
	if end > 0 {
		readErr = src.Read(ctx, filter, 1, func(m events.Msg) error {
			if m.Seq > end {
				return errStop
			}
			if o.Site == "" && m.Seq > last+1 {
				if missing == 0 {
					firstMissing = last + 1
				}
				missing += m.Seq - last - 1
			}
			cur.msgs = append(cur.msgs, decoded{m: m})
			curBytes += len(m.Data)
			if len(cur.msgs) >= batchMsgs || curBytes >= batchBytes {
				send()
			}
			last = m.Seq
			prog.msgs.Add(1)
			prog.seq.Store(m.Seq)
			if m.Seq == end {
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
		return nil, fmt.Errorf("audit: %w", readErr)
	}

	// Reports are built on the workers too: comparing a live model walks
	// every transaction of its site.
	rep := &Report{Filter: filter, LastSeq: end, Checkpoint: cp}
	var mu sync.Mutex
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

	var readP problems
	if o.Site == "" && last != end {
		readP.addf(nil, "", "the stream's last sequence is %d but the read ended at %d", end, last)
	}
	// Snapshots and the checkpoint were loaded before the last sequence
	// was read, and the stream only grows: one beyond it was saved from
	// messages the stream no longer has.
	if cp > end {
		readP.addf(nil, "", "the checkpoint is at sequence %d, beyond the stream's last (%d): messages %d to %d were lost; restore the data directory from a backup",
			cp, end, end+1, cp)
	}
	for _, id := range slices.Sorted(maps.Keys(snaps)) {
		if sn := snaps[id]; sn.seq > end {
			readP.addf(nil, "", "the snapshot of site %s is at sequence %d, beyond the stream's last (%d): messages were lost; restore the data directory from a backup",
				id, sn.seq, end)
		}
	}
	if missing > 0 {
		readP.addf(nil, "", "%d of the messages 1..%d are missing, the first at sequence %d: the stream never deletes one, so they were lost (damaged block files); restore the data directory from a backup",
			missing, end, firstMissing)
	}
	rep.Checks = append(rep.Checks, readP.check(CheckRead, fmt.Sprintf("messages 1..%d", end)))
	if o.Site != "" && len(rep.Sites) == 0 {
		var p problems
		p.addf(nil, "", "site %s has no messages in the stream", o.Site)
		rep.Checks = append(rep.Checks, p.check(CheckCreated, ""))
	}
	var snapP problems
	for _, n := range badSnaps {
		snapP.addf(nil, "", "snapshot %q: its name is no site id, so no gateway loads it; only a write that went around the subject check (an id with '*', '>' or '.') can have saved it", n)
	}
	for _, id := range slices.Sorted(maps.Keys(unreadableSnaps)) {
		snapP.addf(nil, "", "snapshot %s%s cannot be read (%s): a gateway replays the stream instead of loading it", SnapshotPrefix, id, unreadableSnaps[id])
	}
	audited := make(map[string]bool, len(rep.Sites))
	for _, s := range rep.Sites {
		audited[s.ID] = true
	}
	for _, id := range slices.Sorted(maps.Keys(snaps)) {
		if !audited[id] {
			snapP.addf(nil, "", "snapshot %s%s belongs to no site of the stream", SnapshotPrefix, id)
		}
	}
	rep.Checks = append(rep.Checks, snapP.check(CheckSnapshots, fmt.Sprintf("%d site snapshots", len(snaps))))
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

// snapshot is a site snapshot as loaded.
type snapshot struct {
	seq  uint64
	data []byte
}

// snapshotLoadLimit bounds the load of one snapshot (see the ledger's
// Config.SnapshotLoadLimit).
const snapshotLoadLimit = 15 * time.Second

// loadSnapshots loads the site snapshots (of one site when site is set),
// several at a time: each is a round trip to the object store. Snapshots
// named like a site's but whose id is no site id are returned by name in
// bad, unread; those that cannot be read (damaged) by site id in
// unreadable, with why.
func loadSnapshots(ctx context.Context, src Source, site string) (out map[string]snapshot, bad []string, unreadable map[string]string, err error) {
	var sites []string
	if site != "" {
		sites = []string{site}
	} else {
		names, err := src.ListSnapshots(ctx)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("audit: %w", err)
		}
		for _, n := range names {
			raw, ok := strings.CutPrefix(n, SnapshotPrefix)
			if !ok {
				continue
			}
			if _, err := ids.ParseSite(raw); err != nil {
				bad = append(bad, n)
				continue
			}
			sites = append(sites, raw)
		}
	}
	out, unreadable = make(map[string]snapshot, len(sites)), map[string]string{}
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, id := range sites {
		wg.Add(1)
		sem <- struct{}{}
		go func(id string) {
			defer wg.Done()
			defer func() { <-sem }()
			seq, data, err := events.LoadSnapshotWithin(ctx, src, SnapshotPrefix+id, snapshotLoadLimit)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, events.ErrNotFound):
			case errors.Is(err, events.ErrCorrupt):
				unreadable[id] = err.Error()
			case err != nil:
				if firstErr == nil {
					firstErr = fmt.Errorf("audit: %w", err)
				}
			default:
				out[id] = snapshot{seq: seq, data: data}
			}
		}(id)
	}
	wg.Wait()
	slices.Sort(bad)
	return out, bad, unreadable, firstErr
}

// batch is a run of consecutive stream messages, decoded together.
type batch struct {
	msgs []decoded
	done chan struct{} // closed once every message is decoded
}

func newBatch(n int) *batch { return &batch{msgs: make([]decoded, 0, n), done: make(chan struct{})} }

// worker audits the subjects assigned to it, each in stream order.
type worker struct {
	in         chan []*decoded
	subjects   map[string]subjectAudit
	snaps      map[string]snapshot
	checkpoint uint64
	end        uint64
	prog       *progress
}

func (w *worker) run() {
	for ds := range w.in {
		n := 0
		for _, d := range ds {
			a := w.subjects[d.m.Subject]
			if a == nil {
				a = w.newAudit(d.m.Subject)
				w.subjects[d.m.Subject] = a
			}
			n += a.message(d)
			// The decoded events are garbage from here on; the batch
			// may live on in another worker's queue.
			*d = decoded{}
		}
		w.prog.events.Add(uint64(n))
	}
}

func (w *worker) newAudit(subject string) subjectAudit {
	site, ok := events.SiteOf(subject)
	if !ok {
		return newOtherAudit(subject)
	}
	id := string(site)
	var live *liveModel
	if s, ok := w.snaps[id]; ok {
		live = newLiveModel(id, s.seq, s.data, w.end)
	}
	a := newSiteAudit(id, live)
	a.checkpoint = w.checkpoint
	return a
}

func (w *worker) reports() (sites []SiteReport, others []SubjectReport) {
	for _, a := range w.subjects {
		switch a := a.(type) {
		case *siteAudit:
			sites = append(sites, a.report())
		case *otherAudit:
			others = append(others, a.report())
		}
	}
	return sites, others
}

// progress counts what has been read and replayed.
type progress struct {
	end    uint64
	seq    atomic.Uint64
	msgs   atomic.Uint64
	events atomic.Uint64
}

// run prints a progress line four times a second until the returned stop
// is called, which prints the final line.
func (p *progress) run(w io.Writer, start time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	line := func() {
		el := time.Since(start).Seconds()
		ev := p.events.Load()
		rate := 0.0
		if el > 0 {
			rate = float64(ev) / el
		}
		pct := 100.0
		if p.end > 0 {
			pct = float64(p.seq.Load()) * 100 / float64(p.end)
		}
		fmt.Fprintf(w, "\raudit: %5.1f%%  seq %d/%d  %s messages  %s events  %s events/s  ",
			pct, p.seq.Load(), p.end, records.Group(int64(p.msgs.Load())), records.Group(int64(ev)), records.Group(int64(rate)))
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				line()
				fmt.Fprintln(w)
				return
			case <-t.C:
				line()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
