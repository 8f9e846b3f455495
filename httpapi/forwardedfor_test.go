package httpapi_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestForwardedFor_trustedProxy: behind a trusted proxy, X-Forwarded-For
// entries with ports and brackets match a site's allowlist, and a header
// that is not a list of addresses is a 400 for every site, allowlist or
// not, before anything is written.
func TestForwardedFor_trustedProxy(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	banks := s.seedBanks()
	// The mapped entry is 198.51.100.0/24.
	listed := s.newSite(map[string]any{"ipAllowlist": []string{"203.0.113.0/24", "::ffff:198.51.100.0/120", "2001:db8::/32"}}, 1_000_000)
	open := s.newSite(nil, 1_000_000)

	const bad, refused = 400, 403
	cases := []struct {
		name   string
		st     site
		xff    string
		status int // 200, bad or refused
	}{
		{"ipv4 with port", listed, "203.0.113.7:5123", 200},
		{"ipv6 in brackets", listed, "[2001:db8::1]", 200},
		{"ipv6 in brackets with port", listed, "[2001:db8::1]:443", 200},
		{"spaces and a trusted hop", listed, "  203.0.113.7 , 127.0.0.2:80 ", 200},
		{"mapped client", listed, "[::ffff:203.0.113.7]:80", 200},
		{"client in a mapped allowlist entry", listed, "198.51.100.7", 200},
		{"garbage left of the client", listed, "garbage, 203.0.113.7:5123", 200},
		{"client outside the list", listed, "192.0.2.1:80", refused},
		{"no header: the proxy, outside the list", listed, "", refused},
		{"garbage", listed, "garbage", bad},
		{"port out of range", listed, "203.0.113.7:99999", bad},
		{"garbage behind a trusted hop", listed, "garbage, 127.0.0.2", bad},
		{"open site, ipv4 with port", open, "203.0.113.7:5123", 200},
		{"open site, no header", open, "", 200},
		{"open site, garbage", open, "garbage", bad},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.xff != "" {
				hdr["X-Forwarded-For"] = tc.xff
			}
			r := getWithHeaders(t, s, tc.st, "/v1/balance", "", hdr)
			switch tc.status {
			case bad:
				requireErr(t, r, bad, "invalid_request", "X-Forwarded-For")
				assert.Contains(t, r.Message, "X-Forwarded-For")
			case refused:
				requireErr(t, r, refused, "not_authorized", "")
			default:
				requireOK(t, r)
			}
		})
	}

	// A refused create writes nothing, and the check comes before the
	// signature: a wrong sign still gets the 400.
	for _, st := range []site{listed, open} {
		before := s.eventCount(t, st.ID)
		r := postWithHeaders(t, s, st, pathDeposit, depositForm(banks["ZAINCASH"].ID, "xff-bad", "u1", 25000),
			map[string]string{"X-Forwarded-For": "203.0.113.7, garbage"})
		requireErr(t, r, bad, "invalid_request", "X-Forwarded-For")
		r = getWithHeaders(t, s, st, "/v1/balance", "", map[string]string{"X-Forwarded-For": "garbage", "sign": "wrong"})
		requireErr(t, r, bad, "invalid_request", "X-Forwarded-For")
		s.unchanged(t, st, before, "")
	}

	// Without --trusted-proxies the same header is never read.
	plain := e.newStack(stackOptions{})
	waitSite(t, plain, open)
	requireOK(t, getWithHeaders(t, plain, open, "/v1/balance", "", map[string]string{"X-Forwarded-For": "garbage"}))
}
