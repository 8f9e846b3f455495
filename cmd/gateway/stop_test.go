package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/client"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// TestGracefulStop_callbackStreamFollowsOn: two gateways on one NATS server,
// a merchant following its callbacks with the Go client through whichever
// gateway accepts the connection (as behind a load balancer). The gateway
// serving the stream is stopped with SIGTERM: it ends the stream at once
// (the drain has nothing left to wait for, and does not log "drain
// incomplete"), the client is told ErrGatewayStopping and follows on
// through the other gateway, and every callback, stored before, during and
// after the switch, arrives once, in order.
func TestGracefulStop_callbackStreamFollowsOn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	ns := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1"})
	addrA, addrB := testkit.FreeAddr(t), testkit.FreeAddr(t)
	cmdA, outA := startWith(t, addrA, "--nats", ns.URL(), "--log-level", "info")
	startWith(t, addrB, "--nats", ns.URL())
	a, b := "http://"+addrA, "http://"+addrB
	site := clusterSite(t, a, b)

	// The load balancer: A while it accepts connections, else B.
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		if conn, err := d.DialContext(ctx, network, addrA); err == nil {
			return conn, nil
		}
		return d.DialContext(ctx, network, addrB)
	}}}
	c := client.New("http://gateway.test", site.AppKey, site.Secret, client.WithHTTPClient(hc))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, connected, breaks := make(chan string, 16), make(chan string, 4), make(chan error, 4)
	done := make(chan error, 1)
	go func() {
		done <- c.Callbacks(ctx, "", func(ev client.StreamEvent) error {
			var body struct {
				Data struct {
					TransactionID string `json:"transactionId"`
				} `json:"data"`
			}
			if err := json.Unmarshal(ev.Body, &body); err != nil {
				return err
			}
			got <- body.Data.TransactionID
			return nil
		}, func(err error) { breaks <- err }, client.OnConnect(func(position string) { connected <- position }))
	}()
	receive := func(ch <-chan string, what string) string {
		t.Helper()
		select {
		case v := <-ch:
			return v
		case err := <-done:
			t.Fatalf("Callbacks ended waiting for %s: %v", what, err)
		case <-time.After(testkit.WaitFor):
			t.Fatalf("no %s", what)
		}
		return ""
	}
	approve := func(base, pid string) string {
		t.Helper()
		e, err := merchant(site, "POST", base, "/v1/transactions/deposit", txForm("deposit", pid, 5000))
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, e.Code)
		tx := decodeTx(t, e).TransactionID
		opsCall(t, base, "POST", "/ops/v1/deposits/"+tx+"/approve", nil, nil)
		return tx
	}

	receive(connected, "the stream through A")
	before := approve(a, "before")
	require.Equal(t, before, receive(got, "the callback before the stop"))

	require.NoError(t, cmdA.Process.Signal(syscall.SIGTERM))
	during := approve(b, "during")
	require.NoError(t, cmdA.Wait(), "gateway A did not stop cleanly")
	log := outA.String()
	assert.Contains(t, log, "callbackStreams=1", "the stream was open when the stop began")
	assert.Contains(t, log, "msg=stopped")
	assert.NotContains(t, log, "drain incomplete", "the drain waited for the stream")

	var brk error
	select {
	case brk = <-breaks:
	case err := <-done:
		t.Fatalf("Callbacks ended: %v", err)
	case <-time.After(testkit.WaitFor):
		t.Fatal("the client was not told of the stream's end")
	}
	assert.ErrorIs(t, brk, client.ErrGatewayStopping)
	receive(connected, "the stream through B")
	after := approve(b, "after")
	assert.Equal(t, []string{during, after}, []string{receive(got, "callback"), receive(got, "callback")},
		"each callback once, in order, none missed")
	assert.Empty(t, got, "a callback twice")
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	assert.False(t, strings.Contains(log, "level=ERROR"), "errors in A's log:\n%s", log)
}
