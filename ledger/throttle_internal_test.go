package ledger

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Any number of callers within one interval share one run and its result;
// a caller after the interval gets a run of its own.
func TestThrottle_sharesOneRunPerInterval(t *testing.T) {
	th := throttle{every: 200 * time.Millisecond}
	var runs atomic.Int32
	boom := errors.New("boom")
	fn := func(context.Context) error {
		runs.Add(1)
		return boom
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = th.do(ctx, fn)
		}()
	}
	wg.Wait()
	// The callers that arrive while the first run is under way share the
	// next one, scheduled an interval later: two runs at most.
	assert.LessOrEqual(t, runs.Load(), int32(2))
	for _, err := range errs {
		assert.ErrorIs(t, err, boom, "every caller gets the shared run's result")
	}

	n := runs.Load()
	require.ErrorIs(t, th.do(ctx, fn), boom)
	assert.Equal(t, n+1, runs.Load(), "a later caller gets a run of its own")

	// A caller that gives up does not wait for the run.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.Error(t, th.do(cctx, fn))
}
