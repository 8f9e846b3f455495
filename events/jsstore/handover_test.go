package jsstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// heard is what one store's OnHandOver passed on.
type heard struct {
	mu   sync.Mutex
	reqs []string
}

func (h *heard) add(subject string, hold bool) {
	op := "-"
	if hold {
		op = "+"
	}
	h.mu.Lock()
	h.reqs = append(h.reqs, op+subject)
	h.mu.Unlock()
}

func (h *heard) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.reqs...)
}

// TestStore_handOver: a store hears the hand-over requests of the other
// stores of its stream, in the order each sent them, and not its own, nor
// those of another stream, nor any it cannot read.
func TestStore_handOver(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	a, b := srv.Store("a"), srv.Store("b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ha, hb heard
	require.NoError(t, a.OnHandOver(ctx, ha.add))
	require.NoError(t, b.OnHandOver(ctx, hb.add))

	// Requests no store of this stream sent, or that cannot be read.
	nc := srv.Conn("other")
	for _, raw := range []string{"", "x", "x y", "x * ledger.site.s9", "x + "} {
		require.NoError(t, nc.Publish("gateway.ledger.LEDGER.handover", []byte(raw)))
	}
	require.NoError(t, nc.Publish("gateway.ledger.OTHER.handover", []byte("x + ledger.site.s8")))
	require.NoError(t, nc.Flush())

	want := []string{"+ledger.site.s1", "+ledger.site.s1", "-ledger.site.s1", "+ledger.site.s2"}
	require.NoError(t, a.HandOver("ledger.site.s1", true))
	require.NoError(t, a.HandOver("ledger.site.s1", true))
	require.NoError(t, a.HandOver("ledger.site.s1", false))
	require.NoError(t, a.HandOver("ledger.site.s2", true))
	require.NoError(t, b.HandOver("ledger.site.s3", false))

	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(hb.list()) >= len(want) && len(ha.list()) >= 1 },
		"both stores hear the other's requests")
	assert.Equal(t, want, hb.list(), "b hears a's requests, in order, and not its own")
	assert.Equal(t, []string{"-ledger.site.s3"}, ha.list(), "a hears b's request, not its own")
}
