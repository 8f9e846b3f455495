package testkit

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
)

// Server is an embedded nats-server with JetStream, started by
// jsstore.RunServer as the gateway starts its own, and shut down when the
// test ends. It can be stopped and restarted on the same directory, to test
// what survives a restart.
type Server struct {
	t   testing.TB
	cfg jsstore.ServerConfig
	srv *server.Server
}

// StartServer starts an embedded server with cfg. An empty cfg.Dir is a
// fresh t.TempDir(); cfg.Listen "127.0.0.1:-1" exposes a random port (see
// URL), kept across restarts; cfg.Auth is presented by Conn.
func StartServer(t testing.TB, cfg jsstore.ServerConfig) *Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s := &Server{t: t, cfg: cfg}
	s.start()
	return s
}

func (s *Server) start() {
	s.t.Helper()
	srv, err := jsstore.RunServer(s.cfg)
	require.NoError(s.t, err)
	s.srv = srv
	s.t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if s.cfg.Listen != "" {
		// A restart listens where this one does, even when it was given
		// a random port, so TCP clients reconnect to it.
		addr, ok := srv.Addr().(*net.TCPAddr)
		require.True(s.t, ok, "server listens on %v", srv.Addr())
		host, _, err := net.SplitHostPort(s.cfg.Listen)
		require.NoError(s.t, err)
		s.cfg.Listen = net.JoinHostPort(host, strconv.Itoa(addr.Port))
	}
}

// Stop shuts the server down and waits until it has; its directory stays.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// Restart stops the server (if it runs) and starts a new one on the same
// directory and configuration, listening on the same port if it listens.
// Clients over TCP reconnect to it (jsstore.Connect keeps trying); in-process
// connections made before do not follow it: make new ones.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// NATS returns the running nats-server (a new one after Restart).
func (s *Server) NATS() *server.Server { return s.srv }

// Dir is the server's JetStream directory.
func (s *Server) Dir() string { return s.cfg.Dir }

// URL is the client URL of a server started with cfg.Listen.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Conn opens an in-process connection named name, presenting the server's
// credentials (cfg.Auth) before opts; it is closed when the test ends (and
// may be closed before).
func (s *Server) Conn(name string, opts ...nats.Option) *nats.Conn {
	s.t.Helper()
	auth, err := s.cfg.Auth.Options()
	require.NoError(s.t, err)
	nc, err := jsstore.ConnectInProcess(s.srv, name, append(auth, opts...)...)
	require.NoError(s.t, err)
	s.t.Cleanup(nc.Close)
	return nc
}

// Store opens the ledger store over a new connection of its own, as a
// separate gateway process would.
func (s *Server) Store(name string) *jsstore.Store {
	s.t.Helper()
	return OpenStore(s.t, s.Conn(name), jsstore.Options{})
}

// OpenStore opens (creating) the ledger stream and snapshot bucket over nc.
func OpenStore(t testing.TB, nc *nats.Conn, o jsstore.Options) *jsstore.Store {
	t.Helper()
	st, err := jsstore.Open(context.Background(), nc, o)
	require.NoError(t, err)
	return st
}

// NewStore starts a server of its own and opens the ledger store on it as
// the gateway runs by default (the store fsyncs the server's files before
// it answers an append): the one-line setup of a test that needs nothing
// else.
func NewStore(t testing.TB) *jsstore.Store {
	t.Helper()
	srv := StartServer(t, jsstore.ServerConfig{SyncInterval: time.Second})
	return OpenStore(t, srv.Conn("test"), jsstore.Options{Files: srv.Dir(), SyncFiles: true})
}
