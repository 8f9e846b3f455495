package ids

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostile are strings that must never parse as any id: wildcards,
// separators, whitespace, control characters, encodings and oversize.
var hostile = []string{
	"", "*", ">", "*-1", ">-1", "a.b", "a.b-1", "ledger.site.>", "ledger.site.*", "..", ".", "-", "--",
	"a b", " a", "a\t", "a\n", "a\r-1", "a\x00", "a\x7f", "%2A", "%3E-1", "a%2Eb", "a/b", "a\\b",
	"é", "a\u00a0b", "a\u2028", "s1-1\n", strings.Repeat("a", MaxLen+1),
}

func TestParse_refusesHostile(t *testing.T) {
	parsers := map[string]func(string) error{
		"site":     func(s string) error { _, err := ParseSite(s); return err },
		"tx":       func(s string) error { _, err := ParseTx(s); return err },
		"operator": func(s string) error { _, err := ParseOperator(s); return err },
		"bank":     func(s string) error { _, err := ParseBank(s); return err },
		"event":    func(s string) error { _, err := ParseEvent(s); return err },
	}
	for name, parse := range parsers {
		for _, s := range hostile {
			t.Run(fmt.Sprintf("%s/%q", name, s), func(t *testing.T) {
				err := parse(s)
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrInvalid))
			})
		}
	}
}

func TestParseSite(t *testing.T) {
	for _, s := range []string{"demo", "s1", "sabcdefghijklm", "my-site", "A_b-9", strings.Repeat("x", maxSiteLen)} {
		got, err := ParseSite(s)
		require.NoError(t, err, s)
		assert.Equal(t, SiteID(s), got)
	}
	_, err := ParseSite(strings.Repeat("x", maxSiteLen+1))
	assert.Error(t, err, "a site id leaves room for its transactions' suffix")
}

func TestTx_roundTrip(t *testing.T) {
	tests := []struct {
		site SiteID
		i    int32
		want TxID
	}{
		{"s1", 0, "s1-1"},
		{"s1", 9, "s1-a"},
		{"s1", 35, "s1-10"},
		{"s1", 1295, "s1-100"},
		{"my-site", 4, "my-site-5"},
		{"s1", 1<<31 - 2, "s1-zik0zj"},
		{SiteID(strings.Repeat("x", maxSiteLen)), 1<<31 - 2, TxID(strings.Repeat("x", maxSiteLen) + "-zik0zj")},
	}
	for _, tc := range tests {
		t.Run(string(tc.want), func(t *testing.T) {
			id := NewTx(tc.site, tc.i)
			assert.Equal(t, tc.want, id)
			parsed, err := ParseTx(string(id))
			require.NoError(t, err)
			assert.Equal(t, id, parsed)
			assert.Equal(t, tc.site, parsed.Site())
			i, ok := parsed.Index()
			require.True(t, ok)
			assert.Equal(t, tc.i, i)
		})
	}
}

func TestParseTx_refuses(t *testing.T) {
	for _, id := range []string{"s1-", "-1", "s1-0", "s1-00", "s1-01", "s1-zz!", "s1", "s1-A", "s1-+1", "s1- 1",
		"s1-1_0", "s1-zzzzzzzzzzzz", "s1-zik0zk", "a.b-1", "*-1", ">-1", "s 1-1"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			_, err := ParseTx(id)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Equal(t, SiteID(""), TxID(id).Site(), "an unparsed id names no site")
			_, ok := TxID(id).Index()
			assert.False(t, ok)
		})
	}
}

func TestParseEvent(t *testing.T) {
	good := map[string]EventID{"1-0": {1, 0}, "48213-7": {48213, 7}, "18446744073709551615-65536": {1<<64 - 1, 1 << 16}}
	for s, want := range good {
		got, err := ParseEvent(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got)
		assert.Equal(t, s, got.String())
	}
	for _, s := range []string{"0-0", "01-0", "1-01", "1--1", "1-65537", "1", "-1", "1-", "x-0", "1-0-0", "18446744073709551616-0"} {
		_, err := ParseEvent(s)
		assert.ErrorIs(t, err, ErrInvalid, s)
	}
}

func TestMint_parses(t *testing.T) {
	for range 100 {
		s := NewSite()
		_, err := ParseSite(string(s))
		require.NoError(t, err)
		_, err = ParseOperator(string(NewOperator()))
		require.NoError(t, err)
		_, err = ParseBank(string(NewBank()))
		require.NoError(t, err)
		_, err = ParseTx(string(NewTx(s, 1<<31-2)))
		require.NoError(t, err)
	}
	assert.NotEqual(t, NewSite(), NewSite())
	k := NewAppKey()
	assert.Regexp(t, `^ak_[a-z2-7]{24}$`, k)
	assert.NotEqual(t, k, NewAppKey())
}

func TestForKey_derivesMintedShapes(t *testing.T) {
	tests := []struct {
		key  string
		site SiteID
		bank BankID
	}{
		// Expected values computed apart from this package (Python's
		// hashlib and base64).
		{"retry-1", "sbuvvo65rpoflg", "eb1ab78acefc9a8a4039ade0"},
		{"a key with spaces ~!", "spbc4am26qtwdk", "2eeac88d04c951073a23b4a6"},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			assert.Equal(t, tc.site, SiteForKey(tc.key))
			assert.Equal(t, tc.bank, BankForKey(tc.key))
			assert.Equal(t, SiteForKey(tc.key), SiteForKey(tc.key), "a repeat of the key names the same site")
			_, err := ParseSite(string(SiteForKey(tc.key)))
			require.NoError(t, err)
			_, err = ParseBank(string(BankForKey(tc.key)))
			require.NoError(t, err)
			assert.Len(t, string(SiteForKey(tc.key)), len(NewSite()))
			assert.Len(t, string(BankForKey(tc.key)), len(NewBank()))
		})
	}
	assert.NotEqual(t, SiteForKey("k1"), SiteForKey("k2"))
	assert.NotEqual(t, BankForKey("k1"), BankForKey("k2"))
}
