package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Snapshot names. A checkpoint P promises that every site with messages up
// to P has a snapshot. Snapshots live in one bucket that every gateway
// process writes, so a process whose follower lags can overwrite a site's
// snapshot with a state older than another process's checkpoint: start-up
// replays from the oldest of the checkpoint and the site snapshots.
const (
	snapSitePrefix = "site-"
	snapCheckpoint = "checkpoint"
)

// loadSnapshots restores site states and returns where replay starts.
//
// newest is the latest sequence the checkpoint or a loaded snapshot was
// saved at: the stream held it then.
func (l *Ledger) loadSnapshots(ctx context.Context) (from, newest uint64, err error) {
	cp, _, err := l.loadSnapshot(ctx, snapCheckpoint)
	if errors.Is(err, events.ErrNotFound) {
		return 1, 0, nil
	}
	if errors.Is(err, events.ErrCorrupt) {
		l.log.Warn("ignoring unreadable checkpoint; replaying the ledger from the start", "err", err)
		return 1, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	newest = cp
	names, err := l.store.ListSnapshots(ctx)
	if err != nil {
		return 0, 0, err
	}
	from = cp + 1
	for _, n := range names {
		raw, ok := strings.CutPrefix(n, snapSitePrefix)
		if !ok {
			continue
		}
		id, err := ids.ParseSite(raw)
		if err != nil {
			// Only a site id that went around the subject check can
			// have been snapshotted under such a name: its state is
			// no site's (ledgerctl audit lists it).
			l.log.Error("ignoring a snapshot whose name is not a site id", "name", n, "err", err)
			continue
		}
		_, data, err := l.loadSnapshot(ctx, n)
		if err != nil && !errors.Is(err, events.ErrCorrupt) {
			return 0, 0, err
		}
		var s *aggregates.Site
		var pos events.Position
		if err == nil {
			s, pos, err = aggregates.UnmarshalSiteSnapshot(data)
		}
		if err != nil || s.ID != id {
			// A snapshot this build cannot read is only an optimisation
			// lost: replay everything instead.
			l.log.Warn("ignoring unreadable snapshot; replaying the ledger from the start", "name", n, "err", err)
			l.dropStates()
			return 1, newest, nil
		}
		e, err := l.entry(id, true)
		if err != nil {
			return 0, 0, err
		}
		e.mu.Lock()
		e.mutate(func() error { e.state, e.pos = s, pos; return nil })
		e.snapSeq = pos.Seq
		l.published(e)
		e.mu.Unlock()
		// Messages of other sites up to the checkpoint are skipped by
		// the follower (their states are past them); this site's newer
		// ones must be replayed.
		from = min(from, pos.Seq+1)
		newest = max(newest, pos.Seq)
	}
	return from, newest, nil
}

// dropStates forgets the site states loaded from snapshots, for a start
// that replays the stream from its first message instead.
func (l *Ledger) dropStates() {
	l.mu.Lock()
	l.sites, l.byAppKey = map[ids.SiteID]*entry{}, map[string]*entry{}
	l.mu.Unlock()
}

// loadSnapshot loads one snapshot within Config.SnapshotLoadLimit
// (events.LoadSnapshotWithin).
func (l *Ledger) loadSnapshot(ctx context.Context, name string) (uint64, []byte, error) {
	return events.LoadSnapshotWithin(ctx, l.store, name, l.cfg.SnapshotLoadLimit)
}

// Snapshot writes every site that changed since its last snapshot, then a
// checkpoint at the follower's position when the round started.
func (l *Ledger) Snapshot(ctx context.Context) error { return l.snapshot(ctx, 0) }

// snapshot is Snapshot writing at most pace bytes of state a second (0:
// unpaced), until Close begins.
func (l *Ledger) snapshot(ctx context.Context, pace int64) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	if !l.ready.Load() {
		return nil
	}
	cp := l.followed.Load()
	start, written := time.Now(), int64(0)
	l.mu.RLock()
	list := make([]*entry, 0, len(l.sites))
	for _, e := range l.sites {
		list = append(list, e)
	}
	l.mu.RUnlock()
	for _, e := range list {
		if e.fault.Load() != nil {
			continue // its state is in doubt; the stream is the truth
		}
		e.mu.Lock()
		behind := e.behind
		e.mu.Unlock()
		if behind {
			return fmt.Errorf("snapshot: site %s lags the stream", e.id)
		}
		// Marshalling a large site takes a while: it holds the state
		// lock for reading, which lets readers and the append in flight
		// go on.
		var data []byte
		e.rw.RLock()
		created, pos := e.state.Created(), e.pos
		seq := pos.Seq
		var err error
		if created && seq != e.snapSeq {
			data, err = e.state.MarshalSnapshot(pos)
		}
		e.rw.RUnlock()
		if err != nil {
			return err
		}
		if data == nil {
			continue
		}
		if err := l.store.SaveSnapshot(ctx, snapSitePrefix+string(e.id), seq, data); err != nil {
			return err
		}
		e.snapSeq = seq
		if pace > 0 {
			written += int64(len(data))
			if err := l.paceSnapshot(ctx, start, written, pace); err != nil {
				return err
			}
		}
	}
	return l.store.SaveSnapshot(ctx, snapCheckpoint, cp, nil)
}

// paceSnapshot waits until written bytes since start are within pace,
// or Close begins.
func (l *Ledger) paceSnapshot(ctx context.Context, start time.Time, written, pace int64) error {
	wait := time.Until(start.Add(time.Duration(float64(written) / float64(pace) * float64(time.Second))))
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.closing:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Close stops taking commands, waits for queued ones, stops the follower and
// writes a final snapshot round so the next start is fast.
func (l *Ledger) Close(ctx context.Context) error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(l.closing)
	l.mu.RLock()
	list := make([]*entry, 0, len(l.sites))
	for _, e := range l.sites {
		list = append(list, e)
	}
	l.mu.RUnlock()
	for _, e := range list {
		for {
			e.qmu.Lock()
			idle := !e.running
			e.qmu.Unlock()
			if idle || ctx.Err() != nil {
				break
			}
			e.mu.Lock() // wait for the in-flight batch
			//lint:ignore SA2001 the critical section is the wait itself
			e.mu.Unlock()
		}
	}
	// The checkpoint is where the follower stands: let it reach this
	// ledger's own last appends first, so the next start replays little.
	// A store that does not answer only costs a longer replay.
	if l.ready.Load() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = l.CatchUp(cctx)
		cancel()
	}
	err := l.Snapshot(ctx)
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
	return err
}
