package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/created":
			w.WriteHeader(http.StatusNoContent)
		case "/slow":
			time.Sleep(500 * time.Millisecond)
		case "/redirect":
			http.Redirect(w, r, "/nowhere", http.StatusFound)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	// A port nobody listens on: listen, note it, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String() + "/"
	require.NoError(t, ln.Close())

	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"2xx", []string{srv.URL + "/ok"}, 0},
		{"204 is 2xx", []string{srv.URL + "/created"}, 0},
		{"503", []string{srv.URL + "/readyz"}, 1},
		{"a redirect to a 503 is followed", []string{srv.URL + "/redirect"}, 1},
		{"refused", []string{closed}, 1},
		{"timeout", []string{"-timeout", "50ms", srv.URL + "/slow"}, 1},
		{"no URL", nil, 2},
		{"two URLs", []string{srv.URL, srv.URL}, 2},
		{"bad flag", []string{"-x", srv.URL}, 2},
		{"help", []string{"-h"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, tc.want, run(tc.args, &out, &errOut), "stdout %q stderr %q", out.String(), errOut.String())
		})
	}
}
