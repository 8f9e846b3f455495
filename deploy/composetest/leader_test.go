package composetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/iqdgateway/gateway/events"
)

// clusterReport is the part of `ledgerctl cluster --json` the test reads.
type clusterReport struct {
	OK      bool `json:"ok"`
	Streams []struct {
		Stream    string `json:"stream"`
		Leader    string `json:"leader"`
		Followers []struct {
			Server  string `json:"server"`
			Current bool   `json:"current"`
			Offline bool   `json:"offline"`
		} `json:"followers"`
	} `json:"streams"`
}

// ledgerctlCluster runs ledgerctl cluster on the host against the
// published NATS ports, as README.md "Run as a cluster" does, and returns
// the ledger stream's leader, the followers it names as not current or
// offline, its exit status and its text.
func (s *stack) ledgerctlCluster(ctx context.Context) (leader string, down []string, code int, out string) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(s.root, "deploy", "bin", "ledgerctl"), "cluster", "--json", "--nats", s.natsURLs())
	cmd.Env = append(os.Environ(), "GATEWAY_NATS_USER="+s.settings["NATS_CLIENT_USER"],
		"GATEWAY_NATS_PASSWORD="+s.settings["NATS_CLIENT_PASSWORD"], "GATEWAY_NATS_PASSWORD_FILE=", "GATEWAY_NATS_NKEY_SEED_FILE=")
	b, err := cmd.Output()
	code = cmd.ProcessState.ExitCode()
	out = string(b)
	if err != nil && code < 0 {
		return "", nil, code, err.Error()
	}
	var rep clusterReport
	if json.Unmarshal(b, &rep) != nil {
		return "", nil, code, out
	}
	for _, st := range rep.Streams {
		if st.Stream != events.StreamName {
			continue
		}
		for _, f := range st.Followers {
			if f.Offline || !f.Current {
				down = append(down, f.Server)
			}
		}
		return st.Leader, down, code, out
	}
	return "", nil, code, out
}

// checkClusterSays waits until ledgerctl cluster names leader as the
// ledger stream's leader and, when down is not empty, names down as a
// follower not current (exit status 1); with down empty, exit status 0.
// The leader is the one the JetStream API named a moment before; should
// the two disagree for a while (another election), the wait goes on until
// leaderWithin.
func (s *stack) checkClusterSays(ctx context.Context, leader, down string) {
	t := s.t
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, leaderWithin)
	defer cancel()
	var last string
	for {
		got, gotDown, code, out := s.ledgerctlCluster(wctx)
		switch {
		case got != leader:
			last = fmt.Sprintf("leader %q, want %q (exit %d)\n%s", got, leader, code, out)
		case down == "" && code != 0:
			last = fmt.Sprintf("exit %d with every node up\n%s", code, out)
		case down != "" && (code != 1 || len(gotDown) != 1 || gotDown[0] != down):
			last = fmt.Sprintf("exit %d, followers not current %v, want 1 and [%s]\n%s", code, gotDown, down, out)
		default:
			return
		}
		if wctx.Err() != nil {
			t.Errorf("ledgerctl cluster after %s: %s", leaderWithin, last)
			return
		}
		pollPause(wctx)
	}
}
