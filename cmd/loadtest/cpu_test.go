package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStatCPU(t *testing.T) {
	rest := " S 1 2 3 4 5 6 7 8 9 10 %s %s 13 14 15 16 17 18 19 20"
	line := func(comm, ut, st string) string {
		return "4242 (" + comm + ")" + strings.NewReplacer("%s %s", ut+" "+st).Replace(rest)
	}
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		wantErr    bool
	}{
		{"plain", line("gateway", "150", "50"), 2 * time.Second, false},
		{"a name with spaces and parentheses", line("a) b (c) 9 9", "1", "2"), 30 * time.Millisecond, false},
		{"zero", line("refgw", "0", "0"), 0, false},
		{"not a number", line("gateway", "x", "1"), 0, true},
		{"cut short", "4242 (gateway) S 1 2 3", 0, true},
		{"no name", "4242 gateway S", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU(tc.stat)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReadCPU_thisProcess(t *testing.T) {
	before, err := readCPU(os.Getpid())
	require.NoError(t, err)
	self0, err := selfCPU()
	require.NoError(t, err)
	// Burn some CPU: both readings must grow by about as much.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := readCPU(os.Getpid())
	require.NoError(t, err)
	self1, err := selfCPU()
	require.NoError(t, err)
	assert.Greater(t, after, before, "/proc's figure grows with the CPU used")
	assert.Greater(t, self1, self0, "getrusage's figure grows with the CPU used")
	assert.InDelta(t, (self1 - self0).Seconds(), (after - before).Seconds(), 0.1, "the two read the same clock")
}

func TestLine_cpuPerRequest(t *testing.T) {
	r := &LoadReport{Target: "gateway", Kind: "deposit"}
	assert.NotContains(t, r.Line(), "cpu_per_req", "nothing said when nothing was read")
	s, c := 123.45, 40.0
	r.ServerCPUus, r.ClientCPUus = &s, &c
	assert.Contains(t, r.Line(), " cpu_per_req=123.5us loadtest_cpu_per_req=40.0us")
}
