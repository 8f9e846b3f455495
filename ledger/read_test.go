package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// A Fresh read through one gateway process sees what another has just
// stored, without waiting for anything else: read-your-writes across
// processes.
func TestLedger_Read_freshSeesAnotherProcessesWrites(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := e.ledger(e.store("a"), ledger.Config{})
	b := e.ledger(e.store("b"), ledger.Config{})
	setup(t, a, 0, 10_000)
	ba := bank(t, a)
	for i, pid := range []string{"p1", "p2", "p3"} {
		r, err := a.Execute(ctx, siteID, testkit.Deposit(ba, pid, "user-"+pid, 5_000), events.ActorMerchant)
		require.NoError(t, err)
		var got int32
		var ok bool
		require.NoError(t, b.Read(ctx, siteID, ledger.Fresh, func(s *aggregates.Site) error {
			got, ok = s.ByProcessID(pid)
			return nil
		}))
		require.True(t, ok, "deposit %d", i)
		assert.Equal(t, r.Decision.Tx, got)
	}
	assert.Equal(t, view(t, a, siteID), view(t, b, siteID), "b holds what a committed")
}
