package ledger_test

import (
	"context"
	"sync/atomic"

	"github.com/iqdgateway/gateway/ledger"
)

// appendGate is the real store whose appends wait for release while hold
// is set, so a test can look at the ledger while an append is in flight.
type appendGate struct {
	ledger.Store
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *appendGate) Append(ctx context.Context, subject string, expectLast uint64, data []byte) (uint64, error) {
	if g.hold.Load() {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.release
	}
	return g.Store.Append(ctx, subject, expectLast, data)
}
