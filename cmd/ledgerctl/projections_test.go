package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/projections"
	"github.com/iqdgateway/gateway/projections/projtest"
)

func projectionsCmd(t *testing.T, models []projections.Model, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runProjections(context.Background(), args, &out, &errOut, models)
	return code, out.String(), errOut.String()
}

type statusReport struct {
	LastSeq uint64                    `json:"lastSeq"`
	Models  []projections.ModelStatus `json:"models"`
}

func status(t *testing.T, models []projections.Model, args ...string) statusReport {
	t.Helper()
	code, out, errOut := projectionsCmd(t, models, append([]string{"status", "--json"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	var rep statusReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	return rep
}

// TestRun_projections: status reports an unbuilt model, rebuild builds it
// to the stream's last sequence (every model, or the one named), status
// then reports its checkpoint; usage errors are refused before anything
// is opened.
func TestRun_projections(t *testing.T) {
	dir := t.TempDir()
	code, _, errOut := ledgerctl(t, "generate", "--quiet", "--data", dir, "--events", "2000", "--sites", "3", "--batch", "10")
	require.Equal(t, exitOK, code, errOut)
	models := []projections.Model{projtest.Tally{}}

	rep := status(t, models, "--data", dir)
	require.Len(t, rep.Models, 1)
	assert.Equal(t, projections.ModelStatus{Name: "tally", Version: 1}, rep.Models[0])
	last := rep.LastSeq
	require.NotZero(t, last)

	for _, args := range [][]string{{"rebuild", "--data", dir}, {"rebuild", "--model", "tally", "--data", dir}} {
		code, out, errOut := projectionsCmd(t, models, args...)
		require.Equal(t, exitOK, code, errOut)
		assert.Contains(t, out, "rebuilt tally (version 1) to stream sequence")
		rep = status(t, models, "--data", dir)
		assert.Equal(t, projections.ModelStatus{Name: "tally", Version: 1, Stored: 1, Checkpoint: last}, rep.Models[0], "%v", args)
	}

	code, out, _ := projectionsCmd(t, nil, "rebuild", "--data", dir)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "no read models")
	code, out, _ = projectionsCmd(t, nil, "status", "--data", dir)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "no read models")

	for _, args := range [][]string{
		{},
		{"nonsense"},
		{"rebuild", "--model", "nosuch", "--data", dir},
		{"status"},
		{"status", "--nats", "nats://127.0.0.1:1"},
	} {
		code, _, _ := projectionsCmd(t, models, args...)
		assert.Equal(t, exitUsage, code, "%v", args)
	}
}

// TestAudit_readModels: the audit compares every read model with its own
// replay of the stream; a model whose stored keys were changed fails it,
// naming the key, and one not built yet is named as not compared.
func TestAudit_readModels(t *testing.T) {
	dir := t.TempDir()
	code, _, errOut := ledgerctl(t, "generate", "--quiet", "--data", dir, "--events", "2000", "--sites", "3", "--batch", "10")
	require.Equal(t, exitOK, code, errOut)
	models := []projections.Model{projtest.Tally{}}
	audit := func() (int, map[string]any) {
		var out, errOut bytes.Buffer
		code := runAudit(context.Background(), []string{"--json", "--quiet", "--data", dir}, &out, &errOut, models)
		var rep struct {
			Checks []map[string]any `json:"checks"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &rep), errOut.String())
		for _, c := range rep.Checks {
			if c["name"] == "read-models" {
				return code, c
			}
		}
		t.Fatalf("no read-models check in %s", out.String())
		return 0, nil
	}

	code, c := audit()
	assert.Equal(t, exitOK, code)
	assert.Equal(t, "pass", c["status"])
	assert.Contains(t, c["detail"], "tally not compared: not built yet")

	code, _, errOut = projectionsCmd(t, models, "rebuild", "--data", dir)
	require.Equal(t, exitOK, code, errOut)
	code, c = audit()
	assert.Equal(t, exitOK, code)
	assert.Equal(t, "pass", c["status"])
	assert.Regexp(t, `tally: \d+ keys up to \d+`, c["detail"])

	// One count changed behind the model's back.
	p, err := pebble.Open(filepath.Join(dir, "projections"), &pebble.Options{})
	require.NoError(t, err)
	it, err := p.NewIter(&pebble.IterOptions{LowerBound: []byte("tally\x00"), UpperBound: []byte("tally\x01")})
	require.NoError(t, err)
	require.True(t, it.First())
	key := bytes.Clone(it.Key())
	require.NoError(t, it.Close())
	require.NoError(t, p.Set(key, []byte{0, 0, 0, 0, 0, 0, 0, 99}, pebble.Sync))
	require.NoError(t, p.Close())
	code, c = audit()
	assert.Equal(t, exitMismatch, code)
	assert.Equal(t, "fail", c["status"])
	assert.Contains(t, fmt.Sprint(c["list"]), "tally: key")
}
