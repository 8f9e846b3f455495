package callbacks

import (
	"net/netip"
)

// addrRange is one line of the callback address policy: the addresses of
// prefix are refused as kind, or, when embedded is set, judged by the IPv4
// addresses they carry. An entry with neither is allowed.
type addrRange struct {
	prefix netip.Prefix
	kind   string
	// embedded names the IPv6 form ("6to4") whose IPv4 addresses
	// extract returns.
	embedded string
	extract  func(a [16]byte) []netip.Addr
}

// blocked4 lists the IPv4 ranges that may not receive callbacks; the first
// entry that contains an address decides, so a narrow range comes before a
// wide one that holds it. It follows the IANA IPv4 special-purpose registry
// (RFC 6890 and updates), keeping every range that is not globally
// reachable or that no merchant's web server can sit on:
//   - documentation (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24) and
//     benchmarking (198.18.0.0/15) ranges are never routed on the internet,
//     so a callback there can only reach a network that reused them inside;
//   - 192.0.0.0/24 holds protocol addresses (DS-Lite, NAT64 discovery,
//     PCP and TURN anycast), none of them a web server;
//   - 192.88.99.0/24 is the deprecated 6to4 relay anycast (RFC 7526): a
//     relay, not a host.
var blocked4 = []addrRange{
	// 0.0.0.0/8 is "this network": on Linux a connection to it reaches
	// the local host.
	{prefix: netip.MustParsePrefix("0.0.0.0/8"), kind: "unspecified"},
	{prefix: netip.MustParsePrefix("10.0.0.0/8"), kind: "private"},
	// Shared address space (RFC 6598): the far side of a carrier's NAT,
	// and some cloud providers' internal services.
	{prefix: netip.MustParsePrefix("100.64.0.0/10"), kind: "carrier-grade NAT"},
	{prefix: netip.MustParsePrefix("127.0.0.0/8"), kind: "loopback"},
	// Cloud metadata services (169.254.169.254) live here.
	{prefix: netip.MustParsePrefix("169.254.0.0/16"), kind: "link-local"},
	{prefix: netip.MustParsePrefix("172.16.0.0/12"), kind: "private"},
	{prefix: netip.MustParsePrefix("192.0.0.0/24"), kind: "IETF protocol assignment"},
	{prefix: netip.MustParsePrefix("192.0.2.0/24"), kind: "documentation"},
	{prefix: netip.MustParsePrefix("192.88.99.0/24"), kind: "6to4 relay anycast"},
	{prefix: netip.MustParsePrefix("192.168.0.0/16"), kind: "private"},
	{prefix: netip.MustParsePrefix("198.18.0.0/15"), kind: "benchmarking"},
	{prefix: netip.MustParsePrefix("198.51.100.0/24"), kind: "documentation"},
	{prefix: netip.MustParsePrefix("203.0.113.0/24"), kind: "documentation"},
	{prefix: netip.MustParsePrefix("224.0.0.0/4"), kind: "multicast"},
	{prefix: netip.MustParsePrefix("255.255.255.255/32"), kind: "broadcast"},
	{prefix: netip.MustParsePrefix("240.0.0.0/4"), kind: "reserved"},
}

// blocked6 is the IPv6 policy, read like blocked4 (first match decides).
// Only 2000::/3 is allocated as global unicast, so the list ends by
// allowing it and refusing everything else: an address from a range
// assigned after this was written is refused until someone looks at it.
// Forms that carry an IPv4 address are judged by that address, since the
// packets end up there (through a translator, a relay or a tunnel):
//   - NAT64 64:ff9b::/96 (RFC 6052), the last 32 bits;
//   - 6to4 2002::/16 (RFC 3056), bits 16 to 48;
//   - Teredo 2001::/32 (RFC 4380), the server in bits 32 to 64 and the
//     client, inverted, in the last 32 bits: both must be allowed;
//   - IPv4-compatible ::/96 (RFC 4291, deprecated), the last 32 bits.
//
// The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) is refused outright:
// it is a translator inside the operator's own network, and the prefix
// length it is used with (/48 to /96, RFC 6052 §2.2) moves the IPv4 bits,
// so the address alone does not say which IPv4 host it reaches; reading it
// as /96 would let a /64 deployment's 10.0.0.1 pass as 1.0.0.0. A gateway
// that reaches the internet only through such a translator sets
// --callback-allow-private.
//
// Also refused: the discard prefix 100::/64 (RFC 6666), the rest of the
// IETF protocol block 2001::/23 (benchmarking 2001:2::/48, ORCHID, AMT,
// AS112: no web servers), both documentation prefixes (2001:db8::/32 and
// 3fff::/20, RFC 9637) and the deprecated site-local fec0::/10, which
// Linux still routes when configured.
var blocked6 = []addrRange{
	{prefix: netip.MustParsePrefix("::/128"), kind: "unspecified"},
	{prefix: netip.MustParsePrefix("::1/128"), kind: "loopback"},
	{prefix: netip.MustParsePrefix("::/96"), embedded: "IPv4-compatible", extract: last32},
	{prefix: netip.MustParsePrefix("64:ff9b::/96"), embedded: "NAT64", extract: last32},
	{prefix: netip.MustParsePrefix("64:ff9b:1::/48"), kind: "NAT64 local-use"},
	{prefix: netip.MustParsePrefix("100::/64"), kind: "discard-only"},
	{prefix: netip.MustParsePrefix("2001::/32"), embedded: "Teredo", extract: teredo},
	{prefix: netip.MustParsePrefix("2001:2::/48"), kind: "benchmarking"},
	{prefix: netip.MustParsePrefix("2001::/23"), kind: "IETF protocol assignment"},
	{prefix: netip.MustParsePrefix("2001:db8::/32"), kind: "documentation"},
	{prefix: netip.MustParsePrefix("2002::/16"), embedded: "6to4", extract: sixToFour},
	{prefix: netip.MustParsePrefix("3fff::/20"), kind: "documentation"},
	{prefix: netip.MustParsePrefix("2000::/3")}, // global unicast: allowed
	{prefix: netip.MustParsePrefix("fc00::/7"), kind: "private"},
	{prefix: netip.MustParsePrefix("fe80::/10"), kind: "link-local"},
	{prefix: netip.MustParsePrefix("fec0::/10"), kind: "site-local"},
	{prefix: netip.MustParsePrefix("ff00::/8"), kind: "multicast"},
	{prefix: netip.MustParsePrefix("::/0"), kind: "reserved"},
}

// last32 reads the IPv4 address in the last 32 bits (NAT64 /96,
// IPv4-compatible).
func last32(a [16]byte) []netip.Addr {
	return []netip.Addr{netip.AddrFrom4([4]byte(a[12:16]))}
}

// sixToFour reads a 6to4 address's IPv4 address, bits 16 to 48.
func sixToFour(a [16]byte) []netip.Addr {
	return []netip.Addr{netip.AddrFrom4([4]byte(a[2:6]))}
}

// teredo reads a Teredo address's server (bits 32 to 64) and client (the
// last 32 bits, every bit inverted so that NATs do not rewrite it).
func teredo(a [16]byte) []netip.Addr {
	client := [4]byte{^a[12], ^a[13], ^a[14], ^a[15]}
	return []netip.Addr{netip.AddrFrom4([4]byte(a[4:8])), netip.AddrFrom4(client)}
}

// privateKind names why addr may not receive callbacks ("" when it may),
// by the first entry of blocked4 or blocked6 that contains it. An IPv6
// address that carries a refused IPv4 address is refused as that address's
// kind, naming the form ("private (embedded in 6to4)").
func privateKind(addr netip.Addr) string {
	if !addr.IsValid() {
		return "invalid"
	}
	// A zone (fe80::1%eth0) would make every Prefix.Contains false; the
	// IPv4-mapped form (::ffff:10.0.0.1) connects to the IPv4 address.
	addr = addr.WithZone("").Unmap()
	if addr.Is4() {
		return lookup(blocked4, addr).kind
	}
	r := lookup(blocked6, addr)
	if r.extract == nil {
		return r.kind
	}
	for _, v4 := range r.extract(addr.As16()) {
		if k := lookup(blocked4, v4).kind; k != "" {
			return k + " (embedded in " + r.embedded + ")"
		}
	}
	return ""
}

// lookup returns the first entry of table that contains addr (the zero
// entry, allowed, when none does).
func lookup(table []addrRange, addr netip.Addr) addrRange {
	for _, r := range table {
		if r.prefix.Contains(addr) {
			return r
		}
	}
	return addrRange{}
}
