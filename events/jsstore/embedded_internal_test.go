package jsstore

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStopStarting: a server whose start failed is stopped whenever the
// failure came, also before the server ran (a Shutdown then is lost, and
// the server ran on in its directory): once stopStarting returns, Start
// has returned and the server does not run.
func TestStopStarting(t *testing.T) {
	for i := range 20 {
		s, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), DontListen: true, NoSigs: true, NoLog: true})
		require.NoError(t, err)
		started := make(chan struct{})
		go func() {
			defer close(started)
			s.Start()
		}()
		stopStarting(s, started)
		select {
		case <-started:
		default:
			t.Fatalf("start %d: Start still runs after stopStarting", i)
		}
		assert.False(t, s.Running(), "start %d: the server runs", i)
	}
}
