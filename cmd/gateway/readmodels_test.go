package main

import (
	"context"
	"encoding/binary"
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
)

// perSubject is a toy read model: messages per subject.
type perSubject struct{}

func (perSubject) Name() string    { return "persubject" }
func (perSubject) Version() uint32 { return 1 }
func (perSubject) Apply(b *projections.Batch, m events.Msg, _ []events.Event) error {
	v, _, err := b.Get([]byte(m.Subject))
	if err != nil {
		return err
	}
	var n uint64
	if len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	return b.Set([]byte(m.Subject), binary.BigEndian.AppendUint64(nil, n+1))
}

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
		rm, err := openReadModels(ctx, dir, []projections.Model{perSubject{}}, st, log)
		require.NoError(t, err)
		defer rm.close()
		assert.Equal(t, last, rm.db.Checkpoint("persubject"), "caught up before it returns")
		appendOne()
		require.NoError(t, rm.db.WaitFor(ctx, last))
		v, ok, err := rm.db.View("persubject").Get([]byte(subject))
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, uint64(6), binary.BigEndian.Uint64(v))
		assert.NoError(t, rm.check())
	})
}
