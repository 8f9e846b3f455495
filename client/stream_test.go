package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/client"
	"github.com/iqdgateway/gateway/internal/gatewaytest"
	"github.com/iqdgateway/gateway/internal/testkit"
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
	query url.Values
	step  chan string
	// cut breaks the connection.
	cut context.CancelFunc
}

// pass lets the connection through to the gateway.
func (c *frontConn) pass() { c.step <- "pass" }

// refuse answers the connection 503 unavailable, as the gateway does.
func (c *frontConn) refuse() { c.step <- "unavailable" }

// full answers the connection 429 with Retry-After: 15, as the gateway
// does to a site with all its streams open.
func (c *frontConn) full() { c.step <- "full" }

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
		c := &frontConn{query: r.URL.Query(), step: make(chan string, 1), cut: cancel}
		mu.Lock()
		held = append(held, c)
		mu.Unlock()
		f.conns <- c
		select {
		case step := <-c.step:
			switch step {
			case "unavailable":
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"data":null,"status":503,"code":"unavailable","message":"try again","requestId":"r1"}`)
				return
			case "full":
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.Header().Set("Retry-After", "15")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = io.WriteString(w, `{"data":null,"status":429,"code":"rate_limited","message":"too many streams","requestId":"r2"}`)
				return
			}
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
	assert.Empty(t, first.query.Get("after"), "from now on")
	assert.NotEmpty(t, first.query.Get("ts"), "signed with its time")
	first.pass()
	position := receive(t, connected, "position from the first connection")
	require.Regexp(t, `^[1-9][0-9]*-65536$`, position, "after everything stored up to here")
	first.cut()

	second := front.next(t)
	assert.Equal(t, position, second.query.Get("after"), "the reconnection resumes at the first position")
	lost, err := direct.CreateDeposit(ctx, deposit("gap-1", "u1", 25000))
	require.NoError(t, err)
	g.Approve(lost.TransactionID, 0)
	second.pass()
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

// The pause before a reconnection grows while connections fail, and is the
// first one again after a connection that came up broke.
func TestClient_callbacksPauseAgainFromTheFirst(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(nil, 0)
	front := newStreamFront(t, g.URL)
	const first = 200 * time.Millisecond
	c := client.New(front.URL, site.AppKey, site.Secret, client.WithRetries(4, first))
	direct := client.New(g.URL, site.AppKey, site.Secret)
	pauses := make(chan time.Duration, 16)
	client.ObservePauses(c, func(d time.Duration) { pauses <- d })
	connected := make(chan string, 4)
	got := make(chan client.StreamEvent, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- c.Callbacks(ctx, "", func(ev client.StreamEvent) error { got <- ev; return nil }, nil,
			client.OnConnect(func(position string) { connected <- position }))
	}()

	var seen []time.Duration
	for range 3 {
		front.next(t).refuse()
		seen = append(seen, receive(t, pauses, "pause"))
	}
	// A connection that serves a callback ends the outage.
	up := front.next(t)
	up.pass()
	receive(t, connected, "connection")
	d, err := direct.CreateDeposit(ctx, deposit("pause-1", "u1", 25000))
	require.NoError(t, err)
	g.Approve(d.TransactionID, 0)
	receive(t, got, "a callback")
	up.cut()
	seen = append(seen, receive(t, pauses, "pause after the break"))
	front.next(t).refuse()
	seen = append(seen, receive(t, pauses, "pause"))
	// One that only tells its position and ends does not.
	brief := front.next(t)
	brief.pass()
	receive(t, connected, "connection")
	brief.cut()
	seen = append(seen, receive(t, pauses, "pause after a connection that served nothing"))
	assert.Equal(t, []time.Duration{first, 2 * first, 4 * first, first, 2 * first, 4 * first}, seen)
	front.next(t) // held until the end
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}

// Without a pause of its own (WithRetries(n, 0)) Callbacks still pauses
// 100 ms before it reconnects, not asking a refusing gateway in a tight
// loop, and a gateway's Retry-After, when longer, is waited.
func TestClient_callbacksPauseAtLeast(t *testing.T) {
	g := gatewaytest.Start(t)
	site := g.NewSite(nil, 0)
	front := newStreamFront(t, g.URL)
	c := client.New(front.URL, site.AppKey, site.Secret, client.WithRetries(4, 0))
	pauses := make(chan time.Duration, 16)
	client.ObservePauses(c, func(d time.Duration) { pauses <- d })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Callbacks(ctx, "", func(client.StreamEvent) error { return nil }, nil) }()
	front.next(t).refuse()
	front.next(t).refuse()
	front.next(t).full()
	got := []time.Duration{receive(t, pauses, "pause"), receive(t, pauses, "pause"), receive(t, pauses, "pause")}
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 15 * time.Second}, got)
	front.next(t) // held until the end
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}

// A follower whose secret an operator rotated without overlap is refused
// as a new call would be: Callbacks ends with invalid_signature, and no
// callback stored after the rotation reached it.
func TestClient_callbacksEndWhenTheirSecretIsRevoked(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(nil, 0)
	old := client.New(g.URL, site.AppKey, site.Secret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan client.StreamEvent, 4)
	connected := make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- old.Callbacks(ctx, "", func(ev client.StreamEvent) error { got <- ev; return nil }, nil,
			client.OnConnect(func(position string) { connected <- position }))
	}()
	receive(t, connected, "connection")

	var rot struct{ Secret string }
	g.Ops("POST", "/ops/v1/sites/"+site.ID+"/secret", map[string]any{"overlapSeconds": 0}, &rot)
	fresh := client.New(g.URL, site.AppKey, rot.Secret)
	d, err := fresh.CreateDeposit(ctx, deposit("rot-1", "u1", 25000))
	require.NoError(t, err)
	g.Approve(d.TransactionID, 0)

	err = receive(t, done, "end of Callbacks")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusUnauthorized, e.Status)
	assert.Equal(t, "invalid_signature", e.Code)
	assert.Equal(t, "sign", e.Field)
	assert.NotEmpty(t, e.RequestID)
	assert.Empty(t, got, "a callback stored after the rotation")
}

// The position Callbacks resumes from is the stream's SSE id; a callback
// whose body lacks its id does not move it back to "now".
func TestClient_callbacksResumeFromTheSSEID(t *testing.T) {
	afters := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		afters <- r.URL.Query().Get("after")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 7-65536\n\n")
		fmt.Fprint(w, "id: 8-0\nevent: callback\ndata: {\"type\":\"deposit.approved\"}\n\n")
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "k", "s")
	client.ObservePauses(c, func(time.Duration) {})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- c.Callbacks(ctx, "", func(client.StreamEvent) error { return nil }, nil)
	}()
	assert.Equal(t, "", receive(t, afters, "first connection"))
	assert.Equal(t, "8-0", receive(t, afters, "reconnection"), "after the callback it received")
	cancel()
	<-done
}

// A gateway that stops ends the stream with a comment and a reconnection
// time (docs/callbacks.md "When a gateway stops"): Callbacks tells onError
// ErrGatewayStopping, waits that time (at least 100 ms) rather than its
// own pause, and reconnects after the last callback it received.
func TestClient_callbacksReconnectWhenTheGatewayStops(t *testing.T) {
	for _, tc := range []struct {
		name, retry string
		want        time.Duration
	}{
		{"the time asked", "300", 300 * time.Millisecond},
		{"at least 100 ms", "0", 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			afters := make(chan string)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				offer(ctx, afters, r.URL.Query().Get("after"))
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "id: 7-65536\n\n")
				fmt.Fprint(w, "id: 8-0\nevent: callback\ndata: {\"id\":\"8-0\",\"type\":\"deposit.approved\"}\n\n")
				fmt.Fprint(w, ": the gateway is stopping; connect again\nretry: "+tc.retry+"\n\n")
			}))
			t.Cleanup(srv.Close)
			c := client.New(srv.URL, "k", "s", client.WithRetries(4, 2*time.Second))
			pauses := make(chan time.Duration)
			client.ObservePauses(c, func(d time.Duration) { offer(ctx, pauses, d) })
			errs, got := make(chan error), make(chan string)
			done := make(chan error, 1)
			go func() {
				done <- c.Callbacks(ctx, "", func(ev client.StreamEvent) error { offer(ctx, got, ev.ID); return nil },
					func(err error) { offer(ctx, errs, err) })
			}()
			assert.Equal(t, "", receive(t, afters, "first connection"))
			assert.Equal(t, "8-0", receive(t, got, "the callback"))
			assert.ErrorIs(t, receive(t, errs, "the break told"), client.ErrGatewayStopping)
			assert.Equal(t, tc.want, receive(t, pauses, "pause"), "the gateway's reconnection time, not the 2 s pause")
			assert.Equal(t, "8-0", receive(t, afters, "reconnection"), "after the callback it received")
			cancel()
			<-done
		})
	}
}

// offer sends v on ch unless ctx ends first.
func offer[T any](ctx context.Context, ch chan<- T, v T) {
	select {
	case ch <- v:
	case <-ctx.Done():
	}
}
