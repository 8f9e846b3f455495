package callbacks

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// privateCase is an address and the kind privateKind must name ("" for an
// address that may receive callbacks).
type privateCase struct {
	addr string
	want string
}

func runPrivateCases(t *testing.T, cases []privateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			a, err := netip.ParseAddr(tc.addr)
			require.NoError(t, err)
			assert.Equal(t, tc.want, privateKind(a))
		})
	}
}

// TestPrivateKind_ipv4Ranges checks the first and last address of every
// refused IPv4 range and the addresses just outside it.
func TestPrivateKind_ipv4Ranges(t *testing.T) {
	runPrivateCases(t, []privateCase{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"0.0.0.0", "unspecified"},
		{"0.255.255.255", "unspecified"},
		{"1.0.0.0", ""},
		{"9.255.255.255", ""},
		{"10.0.0.0", "private"},
		{"10.255.255.255", "private"},
		{"11.0.0.0", ""},
		{"100.63.255.255", ""},
		{"100.64.0.0", "carrier-grade NAT"},
		{"100.127.255.255", "carrier-grade NAT"},
		{"100.128.0.0", ""},
		{"126.255.255.255", ""},
		{"127.0.0.0", "loopback"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.255", "loopback"},
		{"128.0.0.0", ""},
		{"169.253.255.255", ""},
		{"169.254.0.0", "link-local"},
		{"169.254.169.254", "link-local"},
		{"169.254.255.255", "link-local"},
		{"169.255.0.0", ""},
		{"172.15.255.255", ""},
		{"172.16.0.0", "private"},
		{"172.31.255.255", "private"},
		{"172.32.0.0", ""},
		{"191.255.255.255", ""},
		{"192.0.0.0", "IETF protocol assignment"},
		{"192.0.0.255", "IETF protocol assignment"},
		{"192.0.1.0", ""},
		{"192.0.1.255", ""},
		{"192.0.2.0", "documentation"},
		{"192.0.2.255", "documentation"},
		{"192.0.3.0", ""},
		{"192.88.98.255", ""},
		{"192.88.99.0", "6to4 relay anycast"},
		{"192.88.99.255", "6to4 relay anycast"},
		{"192.88.100.0", ""},
		{"192.167.255.255", ""},
		{"192.168.0.0", "private"},
		{"192.168.255.255", "private"},
		{"192.169.0.0", ""},
		{"198.17.255.255", ""},
		{"198.18.0.0", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.20.0.0", ""},
		{"198.51.99.255", ""},
		{"198.51.100.0", "documentation"},
		{"198.51.100.255", "documentation"},
		{"198.51.101.0", ""},
		{"203.0.112.255", ""},
		{"203.0.113.0", "documentation"},
		{"203.0.113.255", "documentation"},
		{"203.0.114.0", ""},
		{"223.255.255.255", ""},
		{"224.0.0.0", "multicast"},
		{"224.0.0.251", "multicast"},
		{"239.255.255.255", "multicast"},
		{"240.0.0.0", "reserved"},
		{"255.255.255.254", "reserved"},
		{"255.255.255.255", "broadcast"},
	})
}

// TestPrivateKind_ipv6Ranges does the same for IPv6, whose policy allows
// global unicast (2000::/3) minus its special ranges and nothing else.
func TestPrivateKind_ipv6Ranges(t *testing.T) {
	runPrivateCases(t, []privateCase{
		{"2606:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"100::", "discard-only"},
		{"100::ffff:ffff:ffff:ffff", "discard-only"},
		{"100:0:0:1::", "reserved"},
		{"ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"},
		// The IETF protocol block 2001::/23 around Teredo (2001::/32).
		{"2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001:1::", "IETF protocol assignment"},
		{"2001:1::1", "IETF protocol assignment"},
		{"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "IETF protocol assignment"},
		{"2001:200::", ""},
		{"2001:1:ffff:ffff:ffff:ffff:ffff:ffff", "IETF protocol assignment"},
		{"2001:2::", "benchmarking"},
		{"2001:2:0:ffff:ffff:ffff:ffff:ffff", "benchmarking"},
		{"2001:2:1::", "IETF protocol assignment"},
		{"2001:20::1", "IETF protocol assignment"},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001:db8::", "documentation"},
		{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"},
		{"2001:db9::", ""},
		{"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"3fff::", "documentation"},
		{"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"},
		{"3fff:1000::", ""},
		// Global unicast is 2000::/3.
		{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"},
		{"2000::", ""},
		{"3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"4000::", "reserved"},
		{"5f00::1", "reserved"},
		{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"},
		{"fc00::", "private"},
		{"fd12:3456::1", "private"},
		{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "private"},
		{"fe00::", "reserved"},
		{"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"},
		{"fe80::", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local"},
		{"fec0::", "site-local"},
		{"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "site-local"},
		{"ff00::", "multicast"},
		{"ff02::1", "multicast"},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast"},
	})
}

// TestPrivateKind_embeddedIPv4 checks every IPv6 form that carries an IPv4
// address with a refused and an allowed one, and the addresses just
// outside each form.
func TestPrivateKind_embeddedIPv4(t *testing.T) {
	runPrivateCases(t, []privateCase{
		// IPv4-mapped: the connection goes to the IPv4 address itself.
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:8.8.8.8", ""},
		// IPv4-compatible ::/96 (:: and ::1 are above).
		{"::10.0.0.1", "private (embedded in IPv4-compatible)"},
		{"::127.0.0.1", "loopback (embedded in IPv4-compatible)"},
		{"::2", "unspecified (embedded in IPv4-compatible)"},
		{"::8.8.8.8", ""},
		{"::1:0:0", "reserved"},
		// NAT64, well-known prefix.
		{"64:ff9b::10.0.0.1", "private (embedded in NAT64)"},
		{"64:ff9b::169.254.169.254", "link-local (embedded in NAT64)"},
		{"64:ff9b::100.64.0.1", "carrier-grade NAT (embedded in NAT64)"},
		{"64:ff9b::255.255.255.255", "broadcast (embedded in NAT64)"},
		{"64:ff9b::8.8.8.8", ""},
		{"64:ff9b::", "unspecified (embedded in NAT64)"},
		{"64:ff9b::1:808:808", "reserved"},
		{"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"},
		// NAT64, local-use prefix: refused whatever it carries.
		{"64:ff9b:1::808:808", "NAT64 local-use"},
		{"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "NAT64 local-use"},
		{"64:ff9b:2::808:808", "reserved"},
		// 6to4: IPv4 in bits 16 to 48.
		{"2002:a00:1::", "private (embedded in 6to4)"},
		{"2002:c0a8:101::1", "private (embedded in 6to4)"},
		{"2002:7f00:1::1", "loopback (embedded in 6to4)"},
		{"2002:e000:1::1", "multicast (embedded in 6to4)"},
		{"2002::", "unspecified (embedded in 6to4)"},
		{"2002:808:808::1", ""},
		{"2002:808:808:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2003::", ""},
		// Teredo: server in bits 32 to 64, client inverted in the last
		// 32 bits. RFC 4380's example carries client 192.0.2.45.
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "documentation (embedded in Teredo)"},
		{"2001:0:808:808::fefe:fefe", ""},                                // server 8.8.8.8, client 1.1.1.1
		{"2001:0:808:808::f5ff:fffe", "private (embedded in Teredo)"},    // client 10.0.0.1
		{"2001:0:7f00:1::fefe:fefe", "loopback (embedded in Teredo)"},    // server 127.0.0.1
		{"2001:0:808:808::5601:5601", "link-local (embedded in Teredo)"}, // client 169.254.169.254
		{"2001:0:808:808::", "broadcast (embedded in Teredo)"},           // client 255.255.255.255
		{"2001:0:ffff:ffff:ffff:ffff:f7f7:f7f7", "broadcast (embedded in Teredo)"},
		{"2001:1::808:808", "IETF protocol assignment"},
	})
}

func TestPrivateKind_invalid(t *testing.T) {
	assert.Equal(t, "invalid", privateKind(netip.Addr{}))
}

// TestRefusePrivate checks the dialer's hook on the "ip:port" strings the
// dialer hands it.
func TestRefusePrivate(t *testing.T) {
	cases := []struct {
		address string
		addr    string // the refused address; "" when allowed
		kind    string
	}{
		{"8.8.8.8:443", "", ""},
		{"[2606:4700::1111]:443", "", ""},
		{"[2002:808:808::1]:80", "", ""},
		{"127.0.0.1:8080", "127.0.0.1", "loopback"},
		{"[::1]:443", "::1", "loopback"},
		{"[::]:80", "::", "unspecified"},
		{"0.0.0.0:80", "0.0.0.0", "unspecified"},
		{"10.1.2.3:80", "10.1.2.3", "private"},
		{"100.100.100.200:80", "100.100.100.200", "carrier-grade NAT"},
		{"169.254.169.254:80", "169.254.169.254", "link-local"},
		{"[::ffff:10.0.0.1]:80", "10.0.0.1", "private"},
		{"[::ffff:169.254.169.254]:80", "169.254.169.254", "link-local"},
		{"[fe80::1%eth0]:80", "fe80::1", "link-local"},
		{"[fd00::1]:443", "fd00::1", "private"},
		{"[64:ff9b::a9fe:a9fe]:80", "64:ff9b::a9fe:a9fe", "link-local (embedded in NAT64)"},
		{"[2002:a00:1::]:443", "2002:a00:1::", "private (embedded in 6to4)"},
		{"[2001:0:808:808::f5ff:fffe]:443", "2001:0:808:808::f5ff:fffe", "private (embedded in Teredo)"},
		{"[ff02::1]:80", "ff02::1", "multicast"},
		{"255.255.255.255:80", "255.255.255.255", "broadcast"},
	}
	for _, tc := range cases {
		t.Run(tc.address, func(t *testing.T) {
			err := refusePrivate("tcp", tc.address, nil)
			if tc.addr == "" {
				assert.NoError(t, err)
				return
			}
			var pe *errPrivate
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.addr, pe.addr.WithZone("").String())
			assert.Equal(t, tc.kind, pe.kind)
			assert.Contains(t, err.Error(), "refused to connect to")
			assert.Contains(t, err.Error(), tc.kind+" address")
		})
	}
	// A name never reaches the hook (the dialer resolves first); if it
	// did, it would be refused, not waved through.
	err := refusePrivate("tcp", "localhost:80", nil)
	assert.Error(t, err)
	var pe *errPrivate
	assert.False(t, errors.As(err, &pe))
}

// TestNewClient_refusesLoopback checks that the hook is on the client's
// dialer: nothing reaches a loopback server unless private addresses are
// allowed.
func TestNewClient_refusesLoopback(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()

	_, err := newClient(false, 1).Get(srv.URL)
	var pe *errPrivate
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "loopback", pe.kind)
	assert.Equal(t, int32(0), hits.Load())

	resp, err := newClient(true, 1).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, int32(1), hits.Load())
}

// What a failed attempt records of a transport error: neither the method
// and URL net/http puts in front (a URL may carry a merchant's token) nor
// the address of the resolver that failed a lookup (the gateway's own
// network).
func TestTrimURLError(t *testing.T) {
	dns := &net.DNSError{Err: "no such host", Name: "shop.example", Server: "10.0.0.2:53", IsNotFound: true}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"lookup through a resolver", &url.Error{Op: "Post", URL: "https://shop.example/cb?token=s3cret",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: dns}}, "dial tcp: lookup shop.example: no such host"},
		{"lookup without a resolver named", &url.Error{Op: "Post", URL: "https://shop.example/cb",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "shop.example"}}},
			"dial tcp: lookup shop.example: no such host"},
		{"refused", &url.Error{Op: "Post", URL: "https://shop.example/cb?token=s3cret",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}},
			"dial tcp: connect: connection refused"},
		{"no url error", dns, "lookup shop.example: no such host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := trimURLError(c.err)
			assert.Equal(t, c.want, got)
			assert.NotContains(t, got, "s3cret")
			assert.NotContains(t, got, "10.0.0.2")
		})
	}
}
