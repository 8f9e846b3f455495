package ledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ledger"
)

// lostAck wraps the real store: while armed, an append is stored and then
// reported as failed with err: as when its acknowledgement is lost (err
// ErrOutcomeUnknown), or as a store that wrongly reported a refusal
// (ErrUnavailable, ErrConflict: a retry of a stored attempt conflicting
// with it), which the write loop's check still catches.
type lostAck struct {
	ledger.Store
	armed atomic.Bool
	err   error
}

func (s *lostAck) Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	seq, err := s.Store.Append(ctx, subject, expectLast, data)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		return 0, fmt.Errorf("injected: %w", s.err)
	}
	return seq, err
}

// TestLedger_lostAcknowledgementIsSettled: an adjustment whose append was
// stored but not acknowledged is answered as done and applied once; it is
// neither reported as failed nor decided and appended a second time.
func TestLedger_lostAcknowledgementIsSettled(t *testing.T) {
	for _, injected := range []error{events.ErrOutcomeUnknown, events.ErrUnavailable, events.ErrConflict} {
		t.Run(injected.Error(), func(t *testing.T) {
			onEachStore(t, func(t *testing.T, e *env) {
				st := &lostAck{Store: e.store("lossy"), err: injected}
				l := e.ledger(st, ledger.Config{})
				setup(t, l, 0, 10_000)
				before := view(t, l, siteID)

				st.armed.Store(true)
				res, err := l.Execute(context.Background(), siteID, aggregates.AdjustTreasury{Amount: 500, Reason: "top-up"}, "op-1")
				require.NoError(t, err)
				assert.False(t, st.armed.Load(), "the fault was not injected")
				assert.NotZero(t, res.Seq)

				after := view(t, l, siteID)
				assert.Equal(t, before.Balance+500, after.Balance, "applied exactly once")
				_, msgs := messages(t, st, siteID)
				adjustments := 0
				for _, m := range msgs {
					for _, ev := range m {
						if ev.Name == events.TreasuryAdjustedName {
							adjustments++
						}
					}
				}
				assert.Equal(t, 2, adjustments, "the funding and the one top-up")
				// The ledger goes on from the settled state.
				_, err = l.Execute(context.Background(), siteID, aggregates.AdjustTreasury{Amount: 1, Reason: "next"}, "op-1")
				require.NoError(t, err)
				assert.Equal(t, before.Balance+501, view(t, l, siteID).Balance)
			})
		})
	}
}
