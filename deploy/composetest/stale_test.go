package composetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// projectPrefix starts the project name of every stack this test starts.
const projectPrefix = "gwfault"

// staleAfter is the age past which a stack of this test has no test left:
// a run takes minutes, and go test ends a package after 10 by default.
const staleAfter = 30 * time.Minute

// staleProjects picks, from `docker ps -a` lines of "project<TAB>created",
// the projects of this test created before now − staleAfter. A stack is
// left behind when its test was killed before its cleanup (a package
// timeout, kill -9, a machine shut down mid-run); it holds CPU, memory and
// ports, and the figures of whatever runs next on the machine suffer.
func staleProjects(lines string, now time.Time) []string {
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(lines), "\n") {
		project, created, ok := strings.Cut(line, "\t")
		if !ok || !strings.HasPrefix(project, projectPrefix) || seen[project] {
			continue
		}
		// docker's CreatedAt: "2026-11-25 19:49:12 +0000 UTC".
		at, err := time.Parse("2006-01-02 15:04:05 -0700 MST", created)
		if err != nil || now.Sub(at) < staleAfter {
			continue
		}
		seen[project] = true
		out = append(out, project)
	}
	return out
}

// removeStale removes the containers, volumes and networks of stale
// stacks of this test, by their Compose labels.
func removeStale(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := docker(ctx, "ps", "-a", "--filter", "label=com.docker.compose.project",
		"--format", `{{.Label "com.docker.compose.project"}}`+"\t"+`{{.CreatedAt}}`)
	if err != nil {
		t.Logf("listing earlier stacks: %v", err)
		return
	}
	for _, p := range staleProjects(out, time.Now()) {
		label := "label=com.docker.compose.project=" + p
		ids, _ := docker(ctx, "ps", "-aq", "--filter", label)
		if f := strings.Fields(ids); len(f) > 0 {
			if _, err := docker(ctx, append([]string{"rm", "-f", "-v"}, f...)...); err != nil {
				t.Logf("removing the stale stack %s: %v", p, err)
				continue
			}
		}
		for _, kind := range []string{"volume", "network"} {
			names, _ := docker(ctx, kind, "ls", "-q", "--filter", label)
			if f := strings.Fields(names); len(f) > 0 {
				_, _ = docker(ctx, append([]string{kind, "rm"}, f...)...)
			}
		}
		t.Logf("removed the stack %s, left by an earlier run that did not end", p)
	}
}

func TestStaleProjects(t *testing.T) {
	now, err := time.Parse(time.RFC3339, "2026-11-25T20:40:00Z")
	require.NoError(t, err)
	lines := strings.Join([]string{
		"gwfault872616113\t2026-11-25 19:49:12 +0000 UTC", // 51 minutes old: stale
		"gwfault872616113\t2026-11-25 19:49:13 +0000 UTC", // its other container
		"gwfault123\t2026-11-25 20:30:00 +0000 UTC",       // 10 minutes: a run may still be going
		"myshop\t2026-11-20 10:00:00 +0000 UTC",           // not this test's
		"gwfault999\tyesterday",                           // unreadable: left alone
		"no tab here",
	}, "\n")
	assert.Equal(t, []string{"gwfault872616113"}, staleProjects(lines, now))
	assert.Empty(t, staleProjects("", now))
}
