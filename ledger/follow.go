package ledger

// The follower: every message of the stream applied in order, whoever
// wrote it, and the readiness that start-up replay ends with.

import (
	"context"
	"errors"
	"time"

	"github.com/iqdgateway/gateway/events"
)

// WaitReady blocks until the ledger has caught up with the stream as it was
// at start-up, or ctx ends.
func (l *Ledger) WaitReady(ctx context.Context) error {
	select {
	case <-l.readyC:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ready reports whether start-up replay has caught up.
func (l *Ledger) Ready() bool { return l.ready.Load() }

// Followed returns the stream sequence the follower has applied up to.
func (l *Ledger) Followed() uint64 { return l.followed.Load() }

func (l *Ledger) checkReady() {
	if !l.ready.Load() && l.followed.Load() >= l.target.Load() {
		if l.ready.CompareAndSwap(false, true) {
			close(l.readyC)
		}
	}
}

// follow applies every stream message, restarting after store errors.
func (l *Ledger) follow(ctx context.Context, from uint64) {
	for ctx.Err() == nil {
		if from == 0 {
			from = 1
		}
		err := l.store.Follow(ctx, events.SubjectPrefix+">", from, func(m events.Msg) {
			l.applyFollowed(m)
		})
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("ledger follower stopped; restarting", "err", err)
		from = l.followed.Load() + 1
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (l *Ledger) applyFollowed(m events.Msg) {
	defer func() {
		l.followed.Store(m.Seq)
		l.checkReady()
	}()
	if l.followShared(m) {
		return
	}
	id, ok := events.SiteOf(m.Subject)
	if !ok {
		if m.Subject != events.CatalogSubject && m.Subject != events.OperatorsSubject {
			// Only a writer that went around events.SiteSubject can
			// have stored it; it belongs to no site and is not applied.
			l.log.Error("ledger message on a subject that is no site's; not applied (ledgerctl audit lists them)",
				"subject", m.Subject, "seq", m.Seq)
		}
		return
	}
	e, err := l.entry(id, true)
	if err != nil {
		l.log.Error("site message not applied", "subject", m.Subject, "seq", m.Seq, "err", err)
		return
	}
	if m.Seq <= e.applied.Load() {
		return // written by this process, already applied
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if f := e.fault.Load(); f != nil {
		if !f.rebuild || l.rebuildLocked(e) != nil {
			return
		}
	}
	if m.Seq <= e.pos.Seq {
		return
	}
	// A panic here would stop the follower of every site: the site is
	// taken out of service instead.
	err = safely(func() error { return l.applySiteLocked(e, m) })
	var pe *panicError
	if errors.As(err, &pe) {
		l.log.Error("panic while applying a site message; the site is not served", "site", e.id,
			"subject", m.Subject, "seq", m.Seq, "panic", pe.v, "stack", pe.stack)
		e.fault.Store(&fault{err: err})
	}
}
