package httpapi_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/ledger"
)

// TestLookup_creationGoneFromTheStream: a transaction whose creation
// message the server no longer has (dropped from a damaged block; the
// stream never deletes one) answers 503 and logs an ERROR naming it, not
// a 500 that says nothing, nor a 404 that would say there is no such
// transaction.
func TestLookup_creationGoneFromTheStream(t *testing.T) {
	e := newEnv(t)
	e.log.ExpectErrors("is gone from the stream")
	a := e.newStack(stackOptions{})
	a.seedBanks()
	st := a.newSite(nil, 0)
	tx := rec(t, a.post(st, pathDeposit, depositForm("ZAINCASH", "gone-1", "u1", 25000))).TransactionID
	var seq uint64
	require.NoError(t, a.Ledger.Read(context.Background(), ids.SiteID(st.ID), ledger.Local, func(s *aggregates.Site) error {
		i, ok := s.Lookup(ids.TxID(tx))
		require.True(t, ok)
		seq = s.Txs[i].Seq
		return nil
	}))
	require.Positive(t, seq)

	// Another process, which has not read that transaction's creation yet.
	var gone atomic.Uint64
	gone.Store(seq)
	b := e.newStack(stackOptions{gone: &gone})
	r := b.get(st, "/v1/transactions/"+tx, "")
	requireErr(t, r, 503, "unavailable", "")
	assert.Contains(t, r.Message, "a message is missing from the event store")
	assert.Contains(t, e.log.String(), "is gone from the stream")
}
