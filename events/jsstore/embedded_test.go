package jsstore_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// TestRunServer_listenPortInUse: a client port another process holds is
// an error naming the address and why, at once, not a wait for the start
// timeout that ends in "not ready".
func TestRunServer_listenPortInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	_, err = jsstore.RunServer(jsstore.ServerConfig{Dir: t.TempDir(), Listen: taken.Addr().String(),
		StartTimeout: 2 * testkit.WaitFor})
	require.Error(t, err)
	assert.NotErrorIs(t, err, jsstore.ErrStartTimeout)
	assert.Contains(t, err.Error(), taken.Addr().String())
	assert.Contains(t, err.Error(), "address already in use")
}

// TestRunServer_listenPortZero: port 0 is a free port, as for any
// listener, not nats-server's 4222; the server's address tells which.
func TestRunServer_listenPortZero(t *testing.T) {
	s, err := jsstore.RunServer(jsstore.ServerConfig{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	addr, ok := s.Addr().(*net.TCPAddr)
	require.True(t, ok, "listens on %v", s.Addr())
	assert.NotZero(t, addr.Port)
	assert.NotEqual(t, 4222, addr.Port)
	nc, err := jsstore.Dial("nats://"+addr.String(), "tcp")
	require.NoError(t, err)
	assert.NoError(t, nc.Flush())
	nc.Close()
}

// TestRunServer_startTimeout: a server not ready within StartTimeout is
// ErrStartTimeout, saying how long it waited and for what.
func TestRunServer_startTimeout(t *testing.T) {
	_, err := jsstore.RunServer(jsstore.ServerConfig{Dir: t.TempDir(), StartTimeout: time.Nanosecond})
	require.ErrorIs(t, err, jsstore.ErrStartTimeout)
	assert.Contains(t, err.Error(), "waited 1ns for the server to")
}
