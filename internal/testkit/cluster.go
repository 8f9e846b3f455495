package testkit

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
)

// Cluster is a JetStream cluster of in-process nats-servers routed to each
// other over loopback, as a production deployment runs three separate
// ones: streams created with Replicas 3 are replicated by Raft, have a
// leader that can be killed, and followers that can lag. Nodes keep their
// directories and ports across Kill and Start, so a restarted node rejoins.
type Cluster struct {
	t     testing.TB
	Nodes []*Node
}

// Node is one server of a Cluster.
type Node struct {
	c    *Cluster
	Name string
	opts server.Options
	srv  *server.Server
}

// ClusterConfig says how a test cluster runs.
type ClusterConfig struct {
	// Size is the number of nodes (3 when 0).
	Size int
	// SyncAlways fsyncs before every acknowledgement, as production runs.
	SyncAlways bool
	// Start is how many of the nodes to start at once (all when 0); the
	// others are started with Node.Start, e.g. to see what a client does
	// while the cluster has no quorum.
	Start int
}

// StartCluster starts a cluster of in-process nats-servers (node names n1,
// n2, …) and returns without waiting for JetStream to elect a meta leader:
// call WaitReady for that. Every node is shut down when the test ends.
func StartCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	if cfg.Size == 0 {
		cfg.Size = 3
	}
	if cfg.Start == 0 {
		cfg.Start = cfg.Size
	}
	c := &Cluster{t: t}
	clientPorts, routePorts := freePorts(t, cfg.Size), freePorts(t, cfg.Size)
	routes := make([]string, cfg.Size)
	for i, p := range routePorts {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	for i := range cfg.Size {
		n := &Node{c: c, Name: fmt.Sprintf("n%d", i+1)}
		n.opts = server.Options{
			ServerName: n.Name,
			Host:       "127.0.0.1",
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   t.TempDir(),
			SyncAlways: cfg.SyncAlways,
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: 8 << 20,
			Cluster: server.ClusterOpts{
				Name: "test",
				Host: "127.0.0.1",
				Port: routePorts[i],
			},
			Routes: server.RoutesFromStr(strings.Join(append(append([]string(nil), routes[:i]...), routes[i+1:]...), ",")),
		}
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			n.Kill()
		}
	})
	for _, n := range c.Nodes[:cfg.Start] {
		n.Start()
	}
	return c
}

// freePorts returns n distinct loopback ports that were free a moment ago,
// below the kernel's ephemeral range (32768 and up on Linux). A node may
// start seconds after its ports are chosen, and meanwhile every outgoing
// connection on the machine (other tests' gateways and clients, a cluster
// retrying its routes) takes a source port from the ephemeral range, as
// a listener on port 0 does: one of them taking a node's port kept that
// node from ever starting.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	const lo, hi = 20000, 32000
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		require.Less(t, tries, 1000, "no free port between %d and %d", lo, hi)
		port := lo + rand.IntN(hi-lo)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken (or held by this very loop)
		}
		lns = append(lns, ln)
		ports = append(ports, port)
	}
	return ports
}

// FreeAddr is a free loopback address for a process the test starts
// later, its port chosen as freePorts does: below the ephemeral range,
// which the machine's own outgoing connections take ports from.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
}

// Start starts the node (again) on its directory and ports; starting a
// running node does nothing.
func (n *Node) Start() {
	n.c.t.Helper()
	if n.Running() {
		return
	}
	opts := n.opts // the server keeps and changes its options
	srv, err := server.NewServer(&opts)
	require.NoError(n.c.t, err)
	go srv.Start()
	require.True(n.c.t, srv.ReadyForConnections(30*time.Second), "node %s accepts connections", n.Name)
	n.srv = srv
}

// Kill shuts the node down at once, as a crashed process; its directory
// stays. Killing a stopped node does nothing.
func (n *Node) Kill() {
	if n.srv == nil {
		return
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}

// Running reports whether the node runs.
func (n *Node) Running() bool { return n.srv != nil }

// URL is the node's client URL (valid while it is stopped too).
func (n *Node) URL() string {
	return (&url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", n.opts.Port)}).String()
}

// URLs is every node's client URL, comma-separated, as --nats takes them.
func (c *Cluster) URLs() string {
	var us []string
	for _, n := range c.Nodes {
		us = append(us, n.URL())
	}
	return strings.Join(us, ",")
}

// WaitReady waits until every running node sees a JetStream meta leader
// and is current with it, and the leader counts every running node online
// (a replicated stream can then be placed).
func (c *Cluster) WaitReady() {
	c.t.Helper()
	Eventually(c.t, WaitFor, func() bool {
		var leader *Node
		running := 0
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			running++
			if !n.srv.JetStreamIsCurrent() {
				return false
			}
			if n.srv.JetStreamIsLeader() {
				leader = n
			}
		}
		// A replicated stream is placed only on peers the meta leader has
		// stats from: until then its creation fails with "no suitable
		// peers for placement, peer offline".
		return leader != nil && len(leader.srv.JetStreamClusterPeers()) >= running
	}, "the cluster has a JetStream meta leader that counts every running node online")
}

// StreamLeader returns the node leading the ledger stream, waiting for one.
func (c *Cluster) StreamLeader() *Node {
	c.t.Helper()
	var leader *Node
	Eventually(c.t, WaitFor, func() bool {
		for _, n := range c.Nodes {
			if n.Running() && n.srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, events.StreamName) {
				leader = n
				return true
			}
		}
		return false
	}, "the %s stream has a leader", events.StreamName)
	return leader
}

// Conn connects to the cluster through node n first (the client fails
// over to the others), reconnecting for ever; it is closed when the test
// ends.
func (n *Node) Conn(name string, opts ...nats.Option) *nats.Conn {
	n.c.t.Helper()
	urls := []string{n.URL()}
	for _, o := range n.c.Nodes {
		if o != n {
			urls = append(urls, o.URL())
		}
	}
	nc, err := jsstore.Connect(strings.Join(urls, ","), name, append([]nats.Option{nats.DontRandomize()}, opts...)...)
	require.NoError(n.c.t, err)
	n.c.t.Cleanup(nc.Close)
	return nc
}
