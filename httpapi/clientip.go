package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"gateway/aggregates"
)

// clientIP is the peer address, or, when the peer is a trusted proxy, the
// right-most X-Forwarded-For address that is not itself a trusted proxy.
func (s *Server) clientIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	peer = peer.Unmap()
	if !s.trusted(peer) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer
		}
		a = a.Unmap()
		if !s.trusted(a) {
			return a
		}
		peer = a
	}
	return peer
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
