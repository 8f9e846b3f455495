package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// SweepExpired expires every pending deposit whose expiresAt has passed, as
// the system actor, and returns how many it expired. Every gateway process
// may sweep: an expiry is an ordinary command, so when two processes race
// for one deposit the append of the second conflicts, its state catches up,
// and the deposit is then no longer pending: exactly one deposit.expired
// event is stored.
func (l *Ledger) SweepExpired(ctx context.Context) (int, error) {
	now := l.cfg.Now().UnixMilli()
	n := 0
	var firstErr error
	for _, site := range l.SiteIDs() {
		var due []ids.TxID
		err := l.Read(ctx, site, Local, func(s *aggregates.Site) error {
			s.PendingDeposits(func(i int32, tx *aggregates.Tx) {
				if tx.ExpiresAt <= now {
					due = append(due, ids.NewTx(site, i))
				}
			})
			return nil
		})
		if err != nil {
			if firstErr == nil && !errors.Is(err, aggregates.ErrSiteNotFound) {
				firstErr = err
			}
			continue
		}
		for _, id := range due {
			_, err := l.Execute(ctx, site, aggregates.ExpireDeposit{TxID: id}, events.ActorSystem)
			switch {
			case err == nil:
				n++
			case errors.Is(err, aggregates.ErrInvalidTransition), errors.Is(err, aggregates.ErrNotDue):
				// Approved, rejected or expired meanwhile (perhaps by
				// another process): nothing to do.
			default:
				if firstErr == nil {
					firstErr = err
				}
			}
		}
	}
	return n, firstErr
}

// RunExpiry sweeps at once (so deposits that fell due while no gateway was
// running expire on start-up) and then every interval, until ctx ends.
func (l *Ledger) RunExpiry(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		start := time.Now()
		n, err := l.SweepExpired(ctx)
		if ctx.Err() == nil {
			// A sweep cut short by the stop is not a slow one.
			l.cfg.Metrics.Swept(time.Since(start), n, err)
		}
		if err != nil && ctx.Err() == nil {
			l.log.Warn("deposit expiry sweep incomplete", "expired", n, "err", err)
		} else if n > 0 {
			l.log.Info("deposits expired", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
