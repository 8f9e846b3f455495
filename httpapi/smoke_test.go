package httpapi_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDepositRoundTrip(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	form := url.Values{"bankId": {"ZAINCASH"}, "processId": {"p1"}, "amount": {"25000"}, "userId": {"u1"},
		"userName": {"ali"}, "name": {"Ali Kareem"}}
	r := s.post(st, "/v1/transactions/deposit", form)
	require.Equal(t, 200, r.HTTP, "%s", r.Raw)
	var rec map[string]any
	r.decode(t, &rec)
	require.Equal(t, "pending", rec["status"])
	g := s.get(st, "/v1/transactions", "processId=p1")
	require.Equal(t, 200, g.HTTP, "%s", g.Raw)
	var rec2 map[string]any
	g.decode(t, &rec2)
	require.Equal(t, rec["transactionId"], rec2["transactionId"])
	require.Equal(t, rec["hash"], rec2["hash"])
}
