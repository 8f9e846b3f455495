package httpapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/iqdgateway/gateway/aggregates"
)

// clientIP is the peer address, or, when the peer is a trusted proxy, the
// right-most X-Forwarded-For address that is not itself a trusted proxy
// (the left-most address when every hop is trusted; the peer when the
// header is absent or empty). Entries may carry a port or brackets
// ("203.0.113.7:5123", "[2001:db8::1]:443"); IPv4-mapped addresses are
// unmapped so that they match IPv4 lists.
//
// An entry that is not an address, reached before the first untrusted hop,
// is an error: the proxy we trust sent something we cannot read, and
// taking the proxy's own address instead would let a malformed header
// pass an allowlist that holds the proxy. Entries left of the first
// untrusted hop are the client's to write and are never read.
func (s *Server) clientIP(r *http.Request) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		// Not a TCP peer (a test's or a wrapper's RemoteAddr): no address,
		// which no allowlist contains.
		return netip.Addr{}, nil
	}
	peer = peer.WithZone("").Unmap()
	if !s.trusted(peer) {
		return peer, nil
	}
	// Several X-Forwarded-For headers are one list (RFC 9110 §5.3);
	// empty elements are ignored, as in every HTTP list.
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue
		}
		a, err := parseHop(hop)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("X-Forwarded-For from trusted proxy %s: %w", client, err)
		}
		if !s.trusted(a) {
			return a, nil
		}
		client = a
	}
	return client, nil
}

// parseHop reads one X-Forwarded-For entry: an address, an address with a
// port ("203.0.113.7:5123", "[2001:db8::1]:443") or a bracketed IPv6
// address ("[2001:db8::1]"), as proxies variously write them. The result
// has no zone and is unmapped.
func parseHop(hop string) (netip.Addr, error) {
	a, err := netip.ParseAddr(hop)
	if err != nil {
		var ap netip.AddrPort
		if ap, err = netip.ParseAddrPort(hop); err == nil {
			a = ap.Addr()
		} else if inner, ok := strings.CutPrefix(hop, "["); ok && strings.HasSuffix(inner, "]") {
			a, err = netip.ParseAddr(strings.TrimSuffix(inner, "]"))
			if err == nil && !a.Is6() {
				err = errors.New("brackets hold only IPv6 addresses")
			}
		}
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("entry %q is not an IP address: %w", hop, err)
	}
	return a.WithZone("").Unmap(), nil
}

// badForwardedFor is the answer to an X-Forwarded-For from a trusted proxy
// that is not a list of addresses; err, which names the entry, goes to the
// log.
func badForwardedFor(err error) error {
	return fmt.Errorf("%w: %w", errBad("invalid_request", "X-Forwarded-For",
		"the X-Forwarded-For header from the trusted proxy is not a list of IP addresses"), err)
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func allowed(list []string, a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, e := range list {
		if p, err := aggregates.ParseAllowEntry(e); err == nil && p.Contains(a) {
			return true
		}
	}
	return false
}
