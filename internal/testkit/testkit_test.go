package testkit_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// recorder is a testing.TB that records failures and cleanups instead of
// acting on them, to test the helpers' own failures.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	fatal    string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Cleanup(fn func()) { r.cleanups = append(r.cleanups, fn) }

// end runs the cleanups as the testing package does, last first.
func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// inGoroutine runs fn on a goroutine of its own, as a test body whose
// Fatalf ends it.
func inGoroutine(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

func TestEventually(t *testing.T) {
	n := 0
	testkit.Eventually(t, time.Second, func() bool { n++; return n == 5 }, "the fifth poll")
	assert.Equal(t, 5, n, "polls until the condition holds, not once more")

	r := &recorder{TB: t}
	start := time.Now()
	inGoroutine(func() {
		testkit.Eventually(r, 50*time.Millisecond, func() bool { return false }, "%s %d", "never", 7)
	})
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	assert.Equal(t, "timed out after 50ms waiting until never 7", r.fatal)
}

func TestLog_failsOnUnexpectedErrors(t *testing.T) {
	tests := []struct {
		name   string
		log    func(l *testkit.Log)
		failed []string
	}{
		{"nothing logged", func(*testkit.Log) {}, nil},
		{"warnings and infos", func(l *testkit.Log) { l.Warn("slow"); l.Info("fine") }, nil},
		{"an error", func(l *testkit.Log) { l.Error("message not applied", "seq", 3) }, []string{"message not applied"}},
		{"an expected error", func(l *testkit.Log) {
			l.ExpectErrors("not applied")
			l.Error("message not applied", "seq", 3)
		}, nil},
		{"an expected and an unexpected error", func(l *testkit.Log) {
			l.ExpectErrors("not applied", "other")
			l.Error("message not applied")
			l.Error("panic while deciding")
		}, []string{"panic while deciding"}},
		{"every error allowed", func(l *testkit.Log) { l.AllowErrors(); l.Error("anything") }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			l := testkit.NewLog(r, slog.LevelInfo)
			tc.log(l)
			r.end()
			require.Len(t, r.errors, len(tc.failed), "%q", r.errors)
			for i, want := range tc.failed {
				assert.Contains(t, r.errors[i], want)
			}
		})
	}
}

func TestLog_levelAndString(t *testing.T) {
	l := testkit.NewLog(t, slog.LevelWarn)
	l.Info("not captured")
	l.Warn("captured", "site", "s1")
	assert.NotContains(t, l.String(), "not captured")
	assert.Contains(t, l.String(), "level=WARN msg=captured site=s1")
}

func TestBuffer_concurrentWriters(t *testing.T) {
	var b testkit.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprint(&b, "x")
			}
		}()
	}
	wg.Wait()
	assert.Len(t, b.String(), 800)
}

// A server restarted on its directory keeps what was stored; connections
// and stores made after the restart read it.
func TestServer_restartKeepsTheStream(t *testing.T) {
	ctx := context.Background()
	srv := testkit.StartServer(t, jsstore.ServerConfig{SyncAlways: true})
	seq, err := srv.Store("before").Append(ctx, events.SitePrefix+"a", 0, []byte("kept"))
	require.NoError(t, err)
	dir := srv.Dir()
	srv.Stop()
	srv.Stop() // harmless
	srv.Restart()
	assert.Equal(t, dir, srv.Dir())
	m, err := srv.Store("after").Get(ctx, seq)
	require.NoError(t, err)
	assert.Equal(t, "kept", string(m.Data))
}

// A TCP client of a server on a random port finds it again after a
// restart: the restarted server listens on the same port.
func TestServer_restartKeepsThePort(t *testing.T) {
	ctx := context.Background()
	srv := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1"})
	url := srv.URL()
	nc, err := jsstore.Connect(url, "tcp")
	require.NoError(t, err)
	defer nc.Close()
	st := testkit.OpenStore(t, nc, jsstore.Options{})
	seq, err := st.Append(ctx, events.SitePrefix+"a", 0, []byte("kept"))
	require.NoError(t, err)
	srv.Restart()
	assert.Equal(t, url, srv.URL())
	testkit.Eventually(t, testkit.WaitFor, nc.IsConnected, "the client reconnects")
	m, err := st.Get(ctx, seq)
	require.NoError(t, err)
	assert.Equal(t, "kept", string(m.Data))
}

// A server with credentials is reached over its port by clients that
// present them; Conn presents them itself.
func TestServer_listenWithAuth(t *testing.T) {
	auth := jsstore.Auth{User: "gw", Password: "testkit-pw"}
	srv := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1", Auth: auth})
	require.NoError(t, srv.Conn("in-process").Flush())
	opts, err := auth.Options()
	require.NoError(t, err)
	nc, err := jsstore.Dial(srv.URL(), "tcp", opts...)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.Flush())
	st := testkit.OpenStore(t, nc, jsstore.Options{})
	last, err := st.LastSeq(context.Background())
	require.NoError(t, err)
	assert.Zero(t, last)
}
