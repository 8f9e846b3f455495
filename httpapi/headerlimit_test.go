package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/httpapi"
)

// TestHeadersTooLarge: on a server configured as the gateway's, a request
// whose request line and headers are over httpapi.MaxHeader is refused
// with 431 headers_too_large in the envelope (the hosted page with its own
// HTML page), whatever its route and before its credentials are looked
// at, and its connection is closed; a request at the limit is served.
func TestHeadersTooLarge(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{maxHeaderBytes: httpapi.ServerMaxHeaderBytes})
	s.seedBanks()
	st := s.newSite(nil, 0)
	over := strings.Repeat("x", 70<<10)
	far := strings.Repeat("x", 200<<10)
	merchant := map[string]string{"appKey": st.AppKey, "sign": sign(st.Secret, nil)}
	ops := map[string]string{"Authorization": "Bearer " + adminToken}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := maps.Clone(h)
		if out == nil {
			out = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	// Many headers, none of them large.
	many := with(ops)
	for i := range 40 {
		many[fmt.Sprintf("X-Pad-%02d", i)] = strings.Repeat("y", 2<<10)
	}
	form := depositForm("ZAINCASH", "hdr-limit", "u1", 25000).Encode()

	tests := []struct {
		name, method, path, body string
		hdr                      map[string]string
		// html: the hosted page answers with its own error page.
		html bool
	}{
		{"merchant query", "GET", "/v1/banks?type=deposit&pad=" + over, "", merchant, false},
		{"merchant header", "POST", pathDeposit, form, with(merchant, "X-Pad", over,
			"Content-Type", "application/x-www-form-urlencoded", "sign", sign(st.Secret, []byte(form))), false},
		{"merchant without credentials", "GET", "/v1/balance?pad=" + over, "", nil, false},
		{"operator query", "GET", "/ops/v1/transactions?site=" + st.ID + "&pad=" + over, "", ops, false},
		{"operator header", "POST", "/ops/v1/sites", `{"name":"big"}`, with(ops, "X-Pad", over, "Content-Type", "application/json"), false},
		{"operator headers", "GET", "/ops/v1/banks", "", many, false},
		{"operator without token", "GET", "/ops/v1/sites?pad=" + over, "", nil, false},
		{"console", "GET", "/console/?pad=" + over, "", nil, false},
		{"hosted status", "GET", "/pay/" + st.ID + "-x/status?t=abc&pad=" + over, "", nil, false},
		{"unknown path", "GET", "/nope?pad=" + over, "", nil, false},
		{"far over", "GET", "/v1/banks?type=deposit&pad=" + far, "", merchant, false},
		{"health", "GET", "/healthz?pad=" + over, "", with(nil, "Request-Id", "hdr-limit-42"), false},
		{"hosted page", "GET", "/pay/" + st.ID + "-x?t=abc&pad=" + over, "", nil, true},
		{"hosted page in Arabic", "GET", "/pay/" + st.ID + "-x?lang=ar&t=abc&pad=" + over, "", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rd io.Reader
			if tc.body != "" {
				rd = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, s.URL+tc.path, rd)
			require.NoError(t, err)
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			r := do(t, req)
			assert.True(t, r.Close, "the connection is closed")
			if !tc.html {
				requireErr(t, r, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large", "")
				assert.Contains(t, r.Message, "64 KiB")
				if id := tc.hdr["Request-Id"]; id != "" {
					assert.Equal(t, id, r.RequestID, "the caller's Request-Id")
				}
				return
			}
			require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, r.HTTP, "body: %s", r.Raw)
			assert.Equal(t, "text/html; charset=utf-8", r.Header.Get("Content-Type"))
			assert.NotEmpty(t, r.Header.Get("Request-Id"))
			assert.Equal(t, "DENY", r.Header.Get("X-Frame-Options"), "the hosted page's headers")
			assert.Contains(t, string(r.Raw), "<!doctype html>")
			if strings.Contains(tc.path, "lang=ar") {
				assert.Contains(t, string(r.Raw), `dir="rtl"`)
			}
		})
	}

	t.Run("at the limit", func(t *testing.T) {
		// Signed calls whose headers fill the limit but for a margin for
		// what the client adds (Host, User-Agent, Accept-Encoding).
		pad := func(fixed int) string { return strings.Repeat("p", httpapi.MaxHeader-fixed-200) }
		req, err := http.NewRequest("GET", s.URL+"/v1/banks?type=deposit", nil)
		require.NoError(t, err)
		req.Header.Set("appKey", st.AppKey)
		req.Header.Set("sign", sign(st.Secret, []byte("type=deposit")))
		req.Header.Set("X-Pad", pad(len("GET /v1/banks?type=deposit HTTP/1.1")+len(st.AppKey)+100))
		requireOK(t, do(t, req))
		req, err = http.NewRequest("GET", s.URL+"/ops/v1/banks", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("X-Pad", pad(len("GET /ops/v1/banks HTTP/1.1")+len(adminToken)+100))
		requireOK(t, do(t, req))
	})

	t.Run("exact bound", func(t *testing.T) {
		// The request line and header lines as sent, each with its CRLF,
		// count; the blank line that ends them does not.
		u, err := url.Parse(s.URL)
		require.NoError(t, err)
		raw := func(size int) *http.Response {
			host := "Host: " + u.Host + "\r\n"
			line := func(q string) string { return "GET /healthz?pad=" + q + " HTTP/1.1\r\n" }
			q := strings.Repeat("q", size-len(line(""))-len(host))
			msg := line(q) + host
			require.Len(t, msg, size)
			c, err := net.Dial("tcp", u.Host)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = io.WriteString(c, msg+"\r\n")
			require.NoError(t, err)
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err)
			return res
		}
		res := raw(httpapi.MaxHeader)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, "exactly at the limit")
		res = raw(httpapi.MaxHeader + 1)
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, res.StatusCode, "one byte over: %s", b)
		assert.Contains(t, string(b), `"code":"headers_too_large"`)
		assert.True(t, res.Close, "the connection is closed")
	})
}
