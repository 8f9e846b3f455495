package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gateway/client"
	"gateway/internal/gatewaytest"
	"gateway/internal/testkit"
)

// streamFront stands between a client and the gateway and hands the test
// each connection of the callback stream as it arrives, held until the
// test lets it through; the other calls pass.
type streamFront struct {
	URL   string
	conns chan *frontConn
}

// frontConn is one connection of the stream through a streamFront.
type frontConn struct {
	query string
	// pass lets the connection through to the gateway.
	pass chan struct{}
	// cut breaks the connection.
	cut context.CancelFunc
}

func newStreamFront(t *testing.T, gatewayURL string) *streamFront {
	t.Helper()
	target, err := url.Parse(gatewayURL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	f := &streamFront{conns: make(chan *frontConn, 16)}
	var mu sync.Mutex
	var held []*frontConn
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/callbacks/stream" {
			proxy.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		c := &frontConn{query: r.URL.RawQuery, pass: make(chan struct{}), cut: cancel}
		mu.Lock()
		held = append(held, c)
		mu.Unlock()
		f.conns <- c
		select {
		case <-c.pass:
		case <-ctx.Done():
			return
		}
		proxy.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range held {
			c.cut()
		}
		mu.Unlock()
		srv.Close()
	})
	f.URL = srv.URL
	return f
}

// next is the next connection of the stream.
func (f *streamFront) next(t *testing.T) *frontConn {
	t.Helper()
	select {
	case c := <-f.conns:
		return c
	case <-time.After(testkit.WaitFor):
		t.Fatal("the client did not connect to the stream")
		return nil
	}
}

// receive is the next value of ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testkit.WaitFor):
		t.Fatalf("no %s", what)
		var zero T
		return zero
	}
}

// A follower that started "from now on" and lost its connection before
// any callback came reconnects after the position the gateway told it
// first: a callback stored while it was away is streamed, then those
// stored after it is back.
func TestClient_callbacksResumeFromTheFirstPosition(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(nil, 0)
	front := newStreamFront(t, g.URL)
	direct := client.New(g.URL, site.AppKey, site.Secret)
	c := client.New(front.URL, site.AppKey, site.Secret, client.WithRetries(4, time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan client.StreamEvent, 8)
	connected := make(chan string, 8)
	done := make(chan error, 1)
	go func() {
		done <- c.Callbacks(ctx, "", func(ev client.StreamEvent) error { got <- ev; return nil }, nil,
			client.OnConnect(func(position string) { connected <- position }))
	}()

	first := front.next(t)
	assert.Empty(t, first.query, "from now on")
	close(first.pass)
	position := receive(t, connected, "position from the first connection")
	require.Regexp(t, `^[1-9][0-9]*-65536$`, position, "after everything stored up to here")
	first.cut()

	second := front.next(t)
	assert.Equal(t, url.Values{"after": {position}}.Encode(), second.query, "the reconnection resumes at the first position")
	lost, err := direct.CreateDeposit(ctx, deposit("gap-1", "u1", 25000))
	require.NoError(t, err)
	g.Approve(lost.TransactionID, 0)
	close(second.pass)
	assert.Equal(t, position, receive(t, connected, "position from the second connection"), "a resumed stream tells where it resumes")

	seen, err := direct.CreateDeposit(ctx, deposit("gap-2", "u2", 25000))
	require.NoError(t, err)
	g.Approve(seen.TransactionID, 0)
	for _, want := range []string{lost.TransactionID, seen.TransactionID} {
		ev := receive(t, got, "callback of "+want)
		assert.Equal(t, "deposit.approved", ev.Type)
		assert.Contains(t, string(ev.Body), `"transactionId":"`+want+`"`)
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}
