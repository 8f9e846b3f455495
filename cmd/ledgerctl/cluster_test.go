package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// clusterWithin bounds waiting for the cluster to see a node go or come
// back; only a broken cluster reaches it.
const clusterWithin = 2 * time.Minute

// pollCluster runs `ledgerctl cluster --json` until cond holds of its exit
// status and report, and returns that report; it fails the test when cond
// still does not hold after clusterWithin. what says what was awaited.
func pollCluster(t *testing.T, urls string, what string, cond func(code int, rep clusterReport) bool) clusterReport {
	t.Helper()
	deadline := time.Now().Add(clusterWithin)
	var last string
	for {
		code, out, errOut := ledgerctl(t, "cluster", "--nats", urls, "--json")
		if code == exitUsage {
			t.Fatalf("ledgerctl cluster: usage error:\n%s", errOut)
		}
		var rep clusterReport
		if err := json.Unmarshal([]byte(out), &rep); err == nil && cond(code, rep) {
			return rep
		}
		last = fmt.Sprintf("exit %d\n%s%s", code, out, errOut)
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s; last answer: %s", clusterWithin, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ledgerOf is the ledger stream's placement in a report.
func ledgerOf(rep clusterReport) (placement, bool) {
	for _, p := range rep.Streams {
		if p.Stream == events.StreamName {
			return p, true
		}
	}
	return placement{}, false
}

// TestRun_clusterNamesTheLeader runs `ledgerctl cluster` against a
// three-node cluster holding the ledger stream with three replicas, as the
// compose deployment does: it names the node the cluster itself says
// leads the stream, and the other two as current followers (exit 0); with
// a follower stopped it says which one and exits 1; with the leader
// stopped it names the new leader.
func TestRun_clusterNamesTheLeader(t *testing.T) {
	for _, v := range natsEnv {
		t.Setenv(v, "")
	}
	c := testkit.StartCluster(t, testkit.ClusterConfig{SyncAlways: true})
	c.WaitReady()
	testkit.OpenStore(t, c.Nodes[0].Conn("open"), jsstore.Options{Replicas: 3})

	healthy := func(code int, rep clusterReport) bool {
		l, ok := ledgerOf(rep)
		return code == exitOK && rep.OK && ok && l.Leader != "" && len(l.Followers) == 2
	}
	rep := pollCluster(t, c.URLs(), "every stream has a leader and current followers", healthy)
	leader := c.StreamLeader()
	l, _ := ledgerOf(rep)
	assert.Equal(t, events.StreamName, rep.Streams[0].Stream, "the ledger stream comes first")
	assert.Equal(t, leader.Name, l.Leader, "the leader the cluster names")
	assert.Equal(t, 3, l.Replicas)
	var followers []string
	for _, f := range l.Followers {
		followers = append(followers, f.Server)
		assert.True(t, f.Current, "%s current", f.Server)
	}
	var others []string
	for _, n := range c.Nodes {
		if n != leader {
			others = append(others, n.Name)
		}
	}
	assert.ElementsMatch(t, others, followers)

	code, out, errOut := ledgerctl(t, "cluster", "--nats", c.URLs())
	require.Equal(t, exitOK, code, "%s%s", out, errOut)
	t.Logf("ledgerctl cluster:\n%s", out)
	assert.Regexp(t, regexp.MustCompile(`(?m)^`+events.StreamName+` +leader `+leader.Name+`  followers n\d current, n\d current$`), out)
	assert.Contains(t, out, "RESULT: OK")

	// A follower stops: the stream keeps its leader, the follower is named.
	var stopped *testkit.Node
	for _, n := range c.Nodes {
		if n != leader {
			stopped = n
			break
		}
	}
	stopped.Kill()
	rep = pollCluster(t, c.URLs(), stopped.Name+" is reported not current", func(code int, rep clusterReport) bool {
		l, ok := ledgerOf(rep)
		if code != exitMismatch || rep.OK || !ok || l.Leader != leader.Name {
			return false
		}
		for _, f := range l.Followers {
			if f.Server == stopped.Name && (f.Offline || !f.Current) {
				return true
			}
		}
		return false
	})
	l, _ = ledgerOf(rep)
	assert.NotEmpty(t, l.Problems)
	code, out, _ = ledgerctl(t, "cluster", "--nats", c.URLs())
	assert.Equal(t, exitMismatch, code)
	t.Logf("ledgerctl cluster with %s stopped:\n%s", stopped.Name, out)
	assert.Contains(t, out, "! "+stopped.Name+" is ")
	assert.Contains(t, out, "RESULT: DEGRADED")
	stopped.Start()
	pollCluster(t, c.URLs(), stopped.Name+" current again", healthy)

	// The leader stops: another node is elected and named.
	leader.Kill()
	rep = pollCluster(t, c.URLs(), "a new leader is named", func(_ int, rep clusterReport) bool {
		l, ok := ledgerOf(rep)
		return ok && l.Leader != "" && l.Leader != leader.Name
	})
	l, _ = ledgerOf(rep)
	assert.Equal(t, c.StreamLeader().Name, l.Leader)
}

// TestRun_clusterOneServer: a single server (the gateway's embedded one
// with --nats-listen) leads every stream itself and has no followers.
func TestRun_clusterOneServer(t *testing.T) {
	for _, v := range natsEnv {
		t.Setenv(v, "")
	}
	srv := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1"})
	srv.Store("test")
	code, out, errOut := ledgerctl(t, "cluster", "--nats", srv.URL(), "--json")
	require.Equal(t, exitOK, code, "%s%s", out, errOut)
	var rep clusterReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	l, ok := ledgerOf(rep)
	require.True(t, ok, out)
	assert.NotEmpty(t, l.Leader)
	assert.Empty(t, l.Followers)
	assert.Equal(t, 1, l.Replicas)
	assert.Empty(t, l.Problems)

}
