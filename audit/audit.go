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
	"io"
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
