package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/projections"
	"github.com/iqdgateway/gateway/projections/projtest"
)

// TestOpenReadModels: the read models are caught up with the stream when
// openReadModels returns and follow it after; without models nothing is
// opened, not even a directory.
func TestOpenReadModels(t *testing.T) {
	log := testkit.NewLog(t, slog.LevelInfo).Logger
	st := testkit.NewStore(t)
	ctx := context.Background()
	subject, err := events.SiteSubject(ids.NewSite())
	require.NoError(t, err)
	var last uint64
	appendOne := func() {
		data, _, err := events.Seal([32]byte{}, []events.Event{{Name: events.SiteSandboxName, Time: 1, Actor: "admin",
			Payload: &events.SiteSandbox{Sandbox: true}}})
		require.NoError(t, err)
		last, err = st.Append(ctx, subject, last, data)
		require.NoError(t, err)
	}
	for range 5 {
		appendOne()
	}

	t.Run("no models", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "projections")
		rm, err := openReadModels(ctx, dir, nil, st, log)
		require.NoError(t, err)
		assert.NoError(t, rm.check())
		rm.close()
		_, err = os.Stat(dir)
		assert.ErrorIs(t, err, os.ErrNotExist)
	})

	t.Run("a model", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "projections")
		rm, err := openReadModels(ctx, dir, []projections.Model{projtest.Tally{}}, st, log)
		require.NoError(t, err)
		defer rm.close()
		assert.Equal(t, last, rm.db.Checkpoint("tally"), "caught up before it returns")
		appendOne()
		require.NoError(t, rm.db.WaitFor(ctx, last))
		n, err := projtest.TallyOf(rm.db.View("tally"), subject)
		require.NoError(t, err)
		assert.Equal(t, uint64(6), n)
		assert.NoError(t, rm.check())
	})
}
