package httpapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/matching"
	"github.com/iqdgateway/gateway/records"
)

// A matching stopped by the request's deadline answers 503 unavailable,
// saying so, for POST /ops/v1/matches and the console's matching alike.
func TestMatch_deadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dep := records.OpsRecord{}
	dep.TransactionID, dep.Type, dep.Status, dep.Amount, dep.Name = "s1-1", "deposit", "pending", 25000, "Ali Kareem"
	res, err := match(ctx, []matching.Transfer{{Amount: 25000, Name: "Ali Kareem"}}, []records.OpsRecord{dep})
	require.Error(t, err)
	assert.Nil(t, res)
	ae := classify(err)
	assert.Equal(t, 503, ae.status)
	assert.Equal(t, "unavailable", ae.code)
	assert.Contains(t, ae.message, "the matching did not finish")
}
