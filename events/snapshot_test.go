package events_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
)

// snapSource answers a snapshot at once (ok) or waits for it until the
// caller gives up; its stream's last sequence answers unless down.
type snapSource struct{ ok, down bool }

func (s snapSource) LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error) {
	if s.ok {
		return 7, []byte("state"), nil
	}
	<-ctx.Done()
	return 0, nil, fmt.Errorf("load %s: %w: %v", name, events.ErrUnavailable, ctx.Err())
}

func (s snapSource) LastSeq(context.Context) (uint64, error) {
	if s.down {
		return 0, events.ErrUnavailable
	}
	return 9, nil
}

func TestLoadSnapshotWithin(t *testing.T) {
	ctx := context.Background()
	seq, data, err := events.LoadSnapshotWithin(ctx, snapSource{ok: true}, "site-s1", time.Second)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), seq)
	assert.Equal(t, "state", string(data))

	// Never delivered while the store answers: the snapshot is damaged.
	_, _, err = events.LoadSnapshotWithin(ctx, snapSource{}, "site-s1", 20*time.Millisecond)
	require.ErrorIs(t, err, events.ErrCorrupt)
	assert.Contains(t, err.Error(), "not read within 20ms while the store answers")

	// The store answers nothing: it is the store that is down.
	_, _, err = events.LoadSnapshotWithin(ctx, snapSource{down: true}, "site-s1", 20*time.Millisecond)
	require.ErrorIs(t, err, events.ErrUnavailable)
	assert.False(t, errors.Is(err, events.ErrCorrupt))
}
