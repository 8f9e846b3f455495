package composetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/events"
)

// Fault schedule. These durations only hold a fault for a while; nothing
// waits on a timer for a condition, and no figure decides pass or fail.
const (
	warmUp         = 5 * time.Second
	leaderDownFor  = 5 * time.Second
	pauseFor       = 5 * time.Second
	partitionFor   = 10 * time.Second
	steadyAfter    = 5 * time.Second
	workersPerGate = 2
	// float is the treasury: large enough that no withdrawal is refused.
	float = int64(1_000_000_000_000)
)

// Bounds on waiting for things that must happen; only a broken deployment
// reaches them.
const (
	startupWithin = 3 * time.Minute
	healWithin    = 3 * time.Minute
	leaderWithin  = time.Minute
)

// TestCompose_faults runs docker-compose.yml and checks the contract of
// README.md "Run as a cluster" under faults: while signed deposits and
// withdrawals (and operator approvals and payments) go through both
// gateways at once, the ledger stream's leader is killed and restarted, a
// gateway is paused, and a NATS node is cut off the network and put back.
// Then every acknowledged write must be there exactly once, through either
// gateway; a write answered 503 must not be; no processId may have two
// transactions; the balances must equal the history; and ledgerctl audit
// must pass against the cluster. It logs the longest span without an
// acknowledged write and how many requests were answered 503.
func TestCompose_faults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds images and runs a six-container cluster")
	}
	s := newStack(t)
	upAt := time.Now()
	s.up()
	s.waitStartup(upAt)

	nc, err := nats.Connect(s.natsURLs(), nats.UserInfo(s.settings["NATS_CLIENT_USER"], s.settings["NATS_CLIENT_PASSWORD"]),
		nats.Name("composetest"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("connect to the cluster's published ports: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}

	gws := []*gateway{newGateway("gateway-1", s.gatewayURL("gateway-1"), s.settings["GATEWAY_ADMIN_TOKEN"]),
		newGateway("gateway-2", s.gatewayURL("gateway-2"), s.settings["GATEWAY_ADMIN_TOKEN"])}
	st := setUp(t, gws)
	checkHostedLinks(t, s, gws)

	d := newDrive(gws, st)
	d.start()
	defer d.stop()
	tl := &timeline{t: t, start: d.began}
	s.faults(js, tl)
	d.stop()
	driveTook := time.Since(d.began)

	s.waitHealed(js)
	attempts := d.results()
	report(t, attempts, tl, driveTook)

	checkAttempts(t, gws, st, attempts)
	s.checkRestarts()
	s.audit(gws[0])
}

// timeline records what the fault schedule did, as offsets from the start
// of the drive, for the report.
type timeline struct {
	t     *testing.T
	start time.Time
	lines []string
}

func (tl *timeline) note(format string, args ...any) {
	line := fmt.Sprintf("%7.2fs  %s", time.Since(tl.start).Seconds(), fmt.Sprintf(format, args...))
	tl.lines = append(tl.lines, line)
	tl.t.Log("fault: " + line)
}

// waitStartup waits until every container is up and passing its health
// check, noting how long each took, and then checks that none of them
// exited on the way: a gateway must wait for a fresh cluster, not die.
func (s *stack) waitStartup(upAt time.Time) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startupWithin)
	defer cancel()
	ready := map[string]time.Duration{}
	var last map[string]containerState
	for len(ready) < len(allServices()) {
		states, err := s.states(ctx)
		if err != nil {
			t.Fatalf("start-up: %v", err)
		}
		last = states
		for svc, c := range states {
			if _, ok := ready[svc]; !ok && c.healthy() {
				ready[svc] = time.Since(upAt)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("start-up: not every container is healthy after %s: %v", startupWithin, last)
		}
		pollPause(ctx)
	}
	var b strings.Builder
	for _, svc := range allServices() {
		fmt.Fprintf(&b, " %s %.1fs", svc, ready[svc].Seconds())
	}
	t.Logf("start-up: healthy after (up -d to health check passing, checked every 5 s):%s", b.String())
	// What the gateways waited for, to show in the report; the contract is
	// that they wait, which the restart counts below check.
	for _, svc := range append(gatewayServices(), "callbacks") {
		out, err := s.run(ctx, "logs", "--no-color", svc)
		if err != nil {
			t.Logf("start-up: logs of %s: %v", svc, err)
			continue
		}
		var warned []string
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				warned = append(warned, strings.TrimSpace(line))
			}
		}
		if len(warned) > 0 {
			t.Logf("start-up: %s logged %d warnings and errors:\n  %s", svc, len(warned), strings.Join(warned[:min(10, len(warned))], "\n  "))
		}
	}
	for _, svc := range allServices() {
		if c := last[svc]; c.restarts > 0 {
			t.Errorf("start-up: %s restarted %d times on a fresh cluster (last exit status %d); it must wait for the cluster instead",
				svc, c.restarts, c.exitCode)
		}
	}
}

// pollPause is the pause between two looks at something awaited.
func pollPause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(250 * time.Millisecond):
	}
}

// setup is what the test created through the operator API.
type setup struct {
	site site
}

// faults kills the ledger stream's leader and starts it again, pauses a
// gateway, and cuts the stream's (new) leader off the network and puts it
// back, each while the drivers run.
func (s *stack) faults(js jetstream.JetStream, tl *timeline) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hold(ctx, warmUp)

	leader := s.leader(ctx, js, "")
	s.checkClusterSays(ctx, leader, "")
	tl.note("ledger stream leader is %s, as ledgerctl cluster says; %s; docker kill %s", leader, s.connections(ctx), leader)
	if _, err := docker(ctx, "kill", s.ids[leader]); err != nil {
		t.Fatalf("kill %s: %v", leader, err)
	}
	killed := time.Now()
	next := s.leader(ctx, js, leader)
	tl.note("new ledger stream leader %s, %.2fs after the kill", next, time.Since(killed).Seconds())
	s.checkClusterSays(ctx, next, leader)
	tl.note("ledgerctl cluster names %s the leader and %s not current", next, leader)
	hold(ctx, leaderDownFor)
	if _, err := s.run(ctx, "start", leader); err != nil {
		t.Fatalf("start %s again: %v", leader, err)
	}
	tl.note("%s started again", leader)
	s.waitHealthy(ctx, leader)
	tl.note("%s healthy", leader)

	if _, err := s.run(ctx, "pause", "gateway-2"); err != nil {
		t.Fatalf("pause gateway-2: %v", err)
	}
	tl.note("gateway-2 paused")
	hold(ctx, pauseFor)
	if _, err := s.run(ctx, "unpause", "gateway-2"); err != nil {
		t.Fatalf("unpause gateway-2: %v", err)
	}
	tl.note("gateway-2 unpaused")

	network, err := s.network(ctx)
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	cut := s.leader(ctx, js, "")
	tl.note("ledger stream leader is %s; %s", cut, s.connections(ctx))
	if _, err := docker(ctx, "network", "disconnect", network, s.ids[cut]); err != nil {
		t.Fatalf("partition %s: %v", cut, err)
	}
	tl.note("ledger stream leader %s cut off the network", cut)
	hold(ctx, partitionFor)
	// The service name is the alias the other nodes' routes and the
	// gateways dial; a plain connect would not restore it.
	if _, err := docker(ctx, "network", "connect", "--alias", cut, network, s.ids[cut]); err != nil {
		t.Fatalf("reconnect %s: %v", cut, err)
	}
	tl.note("%s back on the network", cut)
	s.waitHealthy(ctx, allServices()...)
	tl.note("every container healthy; %s", s.connections(ctx))
	hold(ctx, steadyAfter)
	tl.note("drive stops")
}

// hold keeps a fault in place (or lets traffic run) for d.
func hold(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// leader waits for the ledger stream to have a leader other than not and
// returns its service. A node's server_name is its service's name.
func (s *stack) leader(ctx context.Context, js jetstream.JetStream, not string) string {
	t := s.t
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, leaderWithin)
	defer cancel()
	var last error
	for wctx.Err() == nil {
		info, err := streamInfo(wctx, js)
		switch {
		case err != nil:
			last = err
		case info.Cluster == nil || info.Cluster.Leader == "":
			last = fmt.Errorf("stream %s has no leader", events.StreamName)
		case info.Cluster.Leader == not:
			last = fmt.Errorf("stream %s is still led by %s", events.StreamName, not)
		case !slices.Contains(natsServices(), info.Cluster.Leader):
			t.Fatalf("stream %s is led by %q, which is no service of docker-compose.yml", events.StreamName, info.Cluster.Leader)
		default:
			return info.Cluster.Leader
		}
		pollPause(wctx)
	}
	t.Fatalf("no leader for stream %s after %s: %v", events.StreamName, leaderWithin, last)
	return ""
}

func streamInfo(ctx context.Context, js jetstream.JetStream) (*jetstream.StreamInfo, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	str, err := js.Stream(rctx, events.StreamName)
	if err != nil {
		return nil, fmt.Errorf("stream info %s: %w", events.StreamName, err)
	}
	return str.CachedInfo(), nil
}

// waitHealthy waits until the services' containers pass their health
// checks.
func (s *stack) waitHealthy(ctx context.Context, services ...string) {
	t := s.t
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, healWithin)
	defer cancel()
	for {
		states, err := s.states(wctx)
		sick := map[string]containerState{}
		for _, svc := range services {
			if c := states[svc]; err != nil || !c.healthy() {
				sick[svc] = c
			}
		}
		if err == nil && len(sick) == 0 {
			return
		}
		if wctx.Err() != nil {
			t.Fatalf("not healthy after %s: %v (err %v)", healWithin, sick, err)
		}
		pollPause(wctx)
	}
}

// waitHealed waits until every container is healthy and the ledger
// stream has a leader and three current replicas.
func (s *stack) waitHealed(js jetstream.JetStream) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), healWithin)
	defer cancel()
	start := time.Now()
	s.waitHealthy(ctx, allServices()...)
	var last string
	for ctx.Err() == nil {
		info, err := streamInfo(ctx, js)
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == 2 {
			current := true
			for _, r := range info.Cluster.Replicas {
				current = current && r.Current && !r.Offline
			}
			if current {
				t.Logf("healed: every container healthy and stream %s current on three nodes, %.1fs after the drive stopped",
					events.StreamName, time.Since(start).Seconds())
				return
			}
		}
		last = fmt.Sprintf("%+v %v", info, err)
		pollPause(ctx)
	}
	t.Fatalf("stream %s not current on three nodes after %s: %s", events.StreamName, healWithin, last)
}
