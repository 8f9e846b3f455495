package httpapi

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
)

// proxyServer is a Server that trusts the proxies given as
// --trusted-proxies entries.
func proxyServer(t *testing.T, entries ...string) *Server {
	t.Helper()
	var trusted []netip.Prefix
	for _, e := range entries {
		p, err := aggregates.ParseAllowEntry(e)
		require.NoError(t, err, e)
		trusted = append(trusted, p)
	}
	return &Server{cfg: Config{TrustedProxies: trusted}}
}

func TestClientIP(t *testing.T) {
	// The IPv4-mapped entry is 172.16.0.0/12.
	s := proxyServer(t, "10.0.0.0/8", "::ffff:172.16.0.0/108", "2001:db8:1::/48")
	const (
		proxy   = "10.0.0.1:40000"
		proxy6  = "[2001:db8:1::5]:40000"
		untrust = "203.0.113.9:5000"
	)
	cases := []struct {
		name string
		peer string
		xff  []string // nil: no header
		want string   // "" with wantErr
		// wantErr is the entry the error must name.
		wantErr string
	}{
		{name: "untrusted peer", peer: untrust, want: "203.0.113.9"},
		{name: "untrusted peer's header ignored", peer: untrust, xff: []string{"198.51.100.1"}, want: "203.0.113.9"},
		{name: "untrusted peer's garbage ignored", peer: untrust, xff: []string{"not-an-ip"}, want: "203.0.113.9"},
		{name: "untrusted mapped peer", peer: "[::ffff:203.0.113.9]:5000", want: "203.0.113.9"},
		{name: "untrusted ipv6 peer", peer: "[2001:db8:2::1]:5000", xff: []string{"198.51.100.1"}, want: "2001:db8:2::1"},
		{name: "peer not an address", peer: "pipe", xff: []string{"198.51.100.1"}, want: "invalid IP"},

		{name: "trusted, no header: the proxy", peer: proxy, want: "10.0.0.1"},
		{name: "trusted, empty header: the proxy", peer: proxy, xff: []string{""}, want: "10.0.0.1"},
		{name: "trusted, blank header: the proxy", peer: proxy, xff: []string{"  "}, want: "10.0.0.1"},
		{name: "trusted, mapped peer", peer: "[::ffff:10.0.0.1]:40000", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "trusted via a mapped entry", peer: "172.16.0.9:40000", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "ipv4", peer: proxy, xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "surrounding spaces", peer: proxy, xff: []string{" \t198.51.100.7  "}, want: "198.51.100.7"},
		{name: "ipv4 with port", peer: proxy, xff: []string{"198.51.100.7:5123"}, want: "198.51.100.7"},
		{name: "ipv6", peer: proxy, xff: []string{"2001:db8::1"}, want: "2001:db8::1"},
		{name: "ipv6 in brackets", peer: proxy, xff: []string{"[2001:db8::1]"}, want: "2001:db8::1"},
		{name: "ipv6 in brackets with port", peer: proxy, xff: []string{"[2001:db8::1]:443"}, want: "2001:db8::1"},
		{name: "ipv6 with zone", peer: proxy, xff: []string{"fe80::1%eth0"}, want: "fe80::1"},
		{name: "mapped", peer: proxy, xff: []string{"::ffff:198.51.100.7"}, want: "198.51.100.7"},
		{name: "mapped in brackets with port", peer: proxy, xff: []string{"[::ffff:198.51.100.7]:80"}, want: "198.51.100.7"},
		{name: "ipv6 proxy", peer: proxy6, xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "ipv6 proxy with zone", peer: "[2001:db8:1::5%eth0]:40000", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},

		{name: "chain of trusted proxies", peer: proxy, xff: []string{"198.51.100.7, 10.0.0.2, 2001:db8:1::9"}, want: "198.51.100.7"},
		{name: "chain with mapped and ported hops", peer: proxy, xff: []string{"198.51.100.7, [::ffff:172.16.0.5]:80, 10.0.0.2:1"}, want: "198.51.100.7"},
		{name: "spoofed left-most ignored", peer: proxy, xff: []string{"6.6.6.6, 198.51.100.7"}, want: "198.51.100.7"},
		{name: "garbage left of the client ignored", peer: proxy, xff: []string{"not-an-ip, 198.51.100.7"}, want: "198.51.100.7"},
		{name: "several headers are one list", peer: proxy, xff: []string{"6.6.6.6", "198.51.100.7, 10.0.0.2"}, want: "198.51.100.7"},
		{name: "empty last header", peer: proxy, xff: []string{"198.51.100.7", ""}, want: "198.51.100.7"},
		{name: "empty elements skipped", peer: proxy, xff: []string{"198.51.100.7,, 10.0.0.2 ,"}, want: "198.51.100.7"},
		{name: "every hop trusted: the left-most", peer: proxy, xff: []string{"10.0.0.3, 10.0.0.2"}, want: "10.0.0.3"},

		{name: "garbage", peer: proxy, xff: []string{"not-an-ip"}, wantErr: "not-an-ip"},
		{name: "garbage behind a trusted hop", peer: proxy, xff: []string{"not-an-ip, 10.0.0.2"}, wantErr: "not-an-ip"},
		{name: "garbage in a later header", peer: proxy, xff: []string{"198.51.100.7", "junk"}, wantErr: "junk"},
		{name: "garbage from an ipv6 proxy", peer: proxy6, xff: []string{"junk"}, wantErr: "junk"},
		{name: "unknown", peer: proxy, xff: []string{"unknown"}, wantErr: "unknown"},
		{name: "port out of range", peer: proxy, xff: []string{"198.51.100.7:99999"}, wantErr: "198.51.100.7:99999"},
		{name: "empty port", peer: proxy, xff: []string{"198.51.100.7:"}, wantErr: "198.51.100.7:"},
		{name: "ipv4 in brackets", peer: proxy, xff: []string{"[198.51.100.7]"}, wantErr: "[198.51.100.7]"},
		{name: "ipv4 in brackets with port", peer: proxy, xff: []string{"[198.51.100.7]:80"}, wantErr: "[198.51.100.7]:80"},
		{name: "unclosed bracket", peer: proxy, xff: []string{"[2001:db8::1"}, wantErr: "[2001:db8::1"},
		{name: "stray bracket", peer: proxy, xff: []string{"2001:db8::1]:443"}, wantErr: "2001:db8::1]:443"},
		{name: "ipv6 with port, no brackets", peer: proxy, xff: []string{"2001:db8::1:443x"}, wantErr: "2001:db8::1:443x"},
		{name: "cidr", peer: proxy, xff: []string{"198.51.100.0/24"}, wantErr: "198.51.100.0/24"},
		{name: "space-separated", peer: proxy, xff: []string{"198.51.100.7 10.0.0.2"}, wantErr: "198.51.100.7 10.0.0.2"},
		{name: "host name", peer: proxy, xff: []string{"client.example"}, wantErr: "client.example"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/balance", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, err := s.clientIP(r)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "X-Forwarded-For from trusted proxy")
				assert.Contains(t, err.Error(), `"`+tc.wantErr+`"`)
				assert.False(t, got.IsValid(), "no address with an error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.String())
		})
	}
}

// TestClientIP_noTrustedProxies: without --trusted-proxies the header is
// never read, whatever it holds.
func TestClientIP_noTrustedProxies(t *testing.T) {
	s := proxyServer(t)
	r := httptest.NewRequest("GET", "/v1/balance", nil)
	r.RemoteAddr = "10.0.0.1:40000"
	r.Header.Set("X-Forwarded-For", "not-an-ip")
	got, err := s.clientIP(r)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", got.String())
}

// TestClientIP_errorNamesTheProxy: the error names the proxy that sent
// the entry, the right-most trusted hop, for the operator's log.
func TestClientIP_errorNamesTheProxy(t *testing.T) {
	s := proxyServer(t, "10.0.0.0/8")
	r := httptest.NewRequest("GET", "/v1/balance", nil)
	r.RemoteAddr = "10.0.0.1:40000"
	r.Header.Set("X-Forwarded-For", "junk, 10.0.0.2")
	_, err := s.clientIP(r)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "trusted proxy 10.0.0.2:")

	ae := classify(badForwardedFor(err))
	assert.Equal(t, 400, ae.status)
	assert.Equal(t, "invalid_request", ae.code)
	assert.Equal(t, "X-Forwarded-For", ae.field)
	assert.Equal(t, "the X-Forwarded-For header from the trusted proxy is not a list of IP addresses", ae.message)
}
