package projections

import (
	"context"
	"encoding/binary"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerify: a model that equals its replay passes; one whose keys were
// changed, removed or added, or that is ahead of the stream, differs, and
// Verify names the keys.
func TestVerify(t *testing.T) {
	st, _ := newStore(t)
	msgs := history(t, st, 300)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		name   string
		damage func(t *testing.T, p *pebble.DB)
		cp     uint64 // the checkpoint stored, 0: every message's
		diffs  int
		first  string
	}{
		{"as built", nil, 0, 0, ""},
		{"a value changed", func(t *testing.T, p *pebble.DB) {
			require.NoError(t, p.Set(append(modelPrefix("fold"), "s\x00"+msgs[0].Subject...), []byte("x"), pebble.Sync))
		}, 0, 1, "holds 78, the replay"},
		{"a key removed", func(t *testing.T, p *pebble.DB) {
			require.NoError(t, p.Delete(append(modelPrefix("fold"), "s\x00"+msgs[0].Subject...), pebble.Sync))
		}, 0, 1, "is missing (the replay holds it)"},
		{"a key added", func(t *testing.T, p *pebble.DB) {
			require.NoError(t, p.Set(append(modelPrefix("fold"), "zzz"...), []byte("1"), pebble.Sync))
		}, 0, 1, `key "zzz" is not in the replay`},
		{"ahead of the stream", nil, uint64(len(msgs)) + 5, 1, "the model is ahead of the stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := Open(dir, log, fold{})
			require.NoError(t, err)
			require.NoError(t, d.ApplyMessages(msgs))
			require.NoError(t, d.Close())
			if tc.damage != nil || tc.cp != 0 {
				p, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLog{log}})
				require.NoError(t, err)
				if tc.damage != nil {
					tc.damage(t, p)
				}
				if tc.cp != 0 {
					require.NoError(t, p.Set(checkpointKey("fold"), binary.BigEndian.AppendUint64(nil, tc.cp), pebble.Sync))
				}
				require.NoError(t, p.Close())
			}

			got, err := Verify(ctx, dir, st, log, fold{})
			require.NoError(t, err)
			require.Len(t, got, 1)
			c := got[0]
			assert.Empty(t, c.Skipped)
			assert.Equal(t, tc.diffs, c.Differences, "%v", c.First)
			if tc.first != "" && assert.NotEmpty(t, c.First) {
				assert.Contains(t, c.First[0], tc.first)
			}
			assert.Positive(t, c.Keys)
		})
	}

	// A model not built yet, or stored in another format, is not compared.
	empty := t.TempDir()
	got, err := Verify(ctx, empty, st, log, fold{})
	require.NoError(t, err)
	assert.Equal(t, "not built yet", got[0].Skipped)
	d, err := Open(empty, log, fold{})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	got, err = Verify(ctx, empty, st, log, foldV2{})
	require.NoError(t, err)
	assert.Contains(t, got[0].Skipped, "stored in format 1, this build's is 2")
}

// foldV2 is fold in another format.
type foldV2 struct{ fold }

func (foldV2) Version() uint32 { return 2 }
