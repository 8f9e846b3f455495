package jsstore

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ServerConfig configures an embedded nats-server with JetStream.
type ServerConfig struct {
	// Dir is the JetStream store directory.
	Dir string
	// SyncAlways fsyncs every message before it is acknowledged. Without
	// it the server syncs every SyncInterval and a machine crash can lose
	// acknowledged writes, unless the one process writing to it fsyncs the
	// files itself (Options.SyncFiles).
	SyncAlways bool
	// SyncInterval is how often a server without SyncAlways fsyncs what
	// it wrote; 0: nats-server's default, 2 minutes.
	SyncInterval time.Duration
	// Listen exposes the client port ("host:port"); empty: in-process only.
	Listen string
	// Auth is the only credential the server accepts, on the port and in
	// process alike; the zero Auth accepts anyone. An exposed port without
	// it lets whoever reaches the port read every site's secrets, so the
	// gateway refuses that unless told it is meant (--nats-listen-insecure).
	Auth Auth
	// StartTimeout bounds the wait for the server to accept connections
	// (default DefaultStartTimeout). Most of it is the server recovering
	// every stream's state from Dir: its message blocks, and all of them
	// when a stream's index was not written at the last stop (a crash).
	// That takes longer the more history Dir holds and the busier the
	// machine.
	StartTimeout time.Duration
	// Logger is told every few seconds, while the start takes its time,
	// what it waits for (nil: nothing is logged).
	Logger *slog.Logger
}

// DefaultStartTimeout is the default ServerConfig.StartTimeout.
const DefaultStartTimeout = 2 * time.Minute

// ErrStartTimeout is a server not ready to accept connections within
// ServerConfig.StartTimeout.
var ErrStartTimeout = errors.New("embedded nats: not ready in time")

// RunServer starts an embedded nats-server and waits until it accepts
// connections.
func RunServer(c ServerConfig) (*server.Server, error) {
	opts := &server.Options{
		ServerName: "gateway-embedded",
		JetStream:  true,
		StoreDir:   c.Dir,
		SyncAlways: c.SyncAlways,
		// The server keeps a configured interval as it is (0 picks its
		// default).
		SyncInterval: c.SyncInterval,
		NoSigs:       true,
		NoLog:        true,
		Port:         server.RANDOM_PORT,
		Host:         "127.0.0.1",
		// A ledger message may hold a group of events; allow large ones.
		MaxPayload: 8 << 20,
	}
	if c.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return nil, fmt.Errorf("nats listen %q: %w", c.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("nats listen port %q: %w", port, err)
		}
		if p == 0 {
			// Port 0 is nats-server's 4222; here, as for any listener,
			// it asks for a free port (the server's Addr tells which).
			p = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, p
	}
	if err := c.Auth.configure(opts); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	w := newStartWatch(c)
	defer w.stop()
	if err := checkStoreFiles(c.Dir); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	w.serving(s)
	started := make(chan struct{})
	go func() {
		defer close(started)
		s.Start()
	}()
	if err := w.waitReady(); err != nil {
		stopStarting(s, started)
		return nil, err
	}
	return s, nil
}

// startGrace bounds how long a start that failed waits for the server's
// Start to return before it shuts the server down anyway.
const startGrace = 10 * time.Second

// stopStarting shuts down a server whose start failed. The server's
// Shutdown counts only once, and one that comes before Start has made the
// server running is lost: the server would run on, writing in its
// directory after the start reported failure (and its directory lock was
// let go). So Start is let return first, which it does soon unless it is
// recovering a large store; a Start that takes longer than startGrace is
// shut down anyway, and left to the process's exit.
func stopStarting(s *server.Server, started <-chan struct{}) {
	select {
	case <-started:
	case <-time.After(startGrace):
	}
	s.Shutdown()
	s.WaitForShutdown()
}

// ConnectInProcess connects to an embedded server without a socket. A
// server with ServerConfig.Auth wants it here too: pass Auth.Options.
func ConnectInProcess(s *server.Server, name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(s), nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectBufSize(-1)}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("connect embedded nats: %w", err)
	}
	return nc, nil
}

// Dial connects once to an external server or cluster, for one-shot tools
// (ledgerctl): no server answering is an error at once, not a retry loop.
// opts are typically Auth.Options.
func Dial(urls, name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.Name(name), nats.ReconnectBufSize(-1)}, opts...)
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", urls, err)
	}
	return nc, nil
}

// Connect connects to an external server or cluster (comma-separated URLs)
// and keeps reconnecting for ever: the gateway answers 503 meanwhile. A
// connection that stops answering pings is given up within about 6 s.
//
// Publishes are never buffered while disconnected (ReconnectBufSize -1): a
// buffered append would reach the stream after its caller was told it
// failed. opts are typically Auth.Options.
//
// A server that refuses the credentials is an error at once: that is a
// configuration to fix, not an outage to wait out.
func Connect(urls, name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond), nats.ReconnectBufSize(-1),
		// A server cut off the network answers nothing and closes
		// nothing: only missed pings tell, and then the client moves
		// to another server of the cluster (2 minutes by default).
		nats.PingInterval(2 * time.Second), nats.MaxPingsOutstanding(2)}, opts...)
	nc, err := nats.Connect(urls, opts...)
	if err != nil && !errors.Is(err, nats.ErrAuthorization) {
		// No server answering yet: keep trying in the background.
		nc, err = nats.Connect(urls, append(opts, nats.RetryOnFailedConnect(true))...)
	}
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", urls, err)
	}
	return nc, nil
}
