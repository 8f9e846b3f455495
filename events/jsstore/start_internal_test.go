package jsstore

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a log destination safe for the start watch's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// take returns what was logged since the last take.
func (b *syncBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.b.String()
	b.b.Reset()
	return s
}

// TestStartWatch_saysWhatItWaitsFor follows a start through what a slow
// one waits for: the check of the block files, then the server, with what
// it last said, how long so far and the timeout; and a server that is not
// ready in time is ErrStartTimeout naming what it waited for.
func TestStartWatch_saysWhatItWaitsFor(t *testing.T) {
	dir := t.TempDir()
	blocks := filepath.Join(dir, "jetstream", "$G", "streams", "LEDGER", "msgs")
	require.NoError(t, os.MkdirAll(blocks, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(blocks, "1.blk"), make([]byte, 1234), 0o600))
	var out syncBuffer
	w := newStartWatch(ServerConfig{Dir: dir, Listen: "127.0.0.1:4999", StartTimeout: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&out, nil))})
	defer w.stop()

	w.report()
	line := out.take()
	assert.Contains(t, line, `level=INFO msg="embedded NATS server not ready yet"`)
	assert.Contains(t, line, "the check of the message blocks written in "+dir+" since the last start (1234 bytes of JetStream files)")
	assert.Contains(t, line, "storeBytes=1234")
	assert.NotContains(t, line, "timeout=", "the check is not bounded by the timeout")

	// A server made and not started is never ready.
	s, err := server.NewServer(&server.Options{JetStream: true, StoreDir: dir, DontListen: true, NoSigs: true})
	require.NoError(t, err)
	w.serving(s)
	w.said.Noticef("  Starting restore for stream '%s > %s'", "$G", "LEDGER")
	w.report()
	line = out.take()
	assert.Contains(t, line, "the server to start (it last said: Starting restore for stream '$G > LEDGER')")
	assert.Contains(t, line, "timeout=50ms")
	assert.Contains(t, line, "serverElapsed=")

	err = w.waitReady()
	require.ErrorIs(t, err, ErrStartTimeout)
	assert.Contains(t, err.Error(), "waited 50ms for the server to start (it last said: Starting restore")

	w.said.quiet()
	w.said.Noticef("Server is ready")
	assert.Equal(t, "Starting restore for stream '$G > LEDGER'", w.said.last(), "nothing is kept once the start is over")
}

// TestStartWatch_recovering: once JetStream runs, the wait is for the
// recovery of the streams from their files, then the client port.
func TestStartWatch_recovering(t *testing.T) {
	dir := t.TempDir()
	var out syncBuffer
	w := newStartWatch(ServerConfig{Dir: dir, Listen: "127.0.0.1:4999", Logger: slog.New(slog.NewTextHandler(&out, nil))})
	defer w.stop()
	s, err := server.NewServer(&server.Options{JetStream: true, StoreDir: dir, DontListen: true, NoSigs: true})
	require.NoError(t, err)
	w.serving(s)
	go s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	require.True(t, s.ReadyForConnections(time.Minute))
	w.report()
	assert.Regexp(t, `the server to recover its JetStream streams from their \d+ bytes of files in .* and listen on 127.0.0.1:4999`, out.take(),
		"JetStream is enabled: what remains is the recovery, then the port")
}
