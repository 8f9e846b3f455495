package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

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
