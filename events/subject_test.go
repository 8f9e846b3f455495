package events

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/ids"
)

func TestSiteSubject_refusesNonTokens(t *testing.T) {
	// ids.SiteID is a string type, so a conversion can go around ParseSite;
	// the subject builder is the last line.
	for _, id := range []ids.SiteID{"", "*", ">", "a.b", "ledger.site.>", "a b", "a\tb", "a\nb", "a\x00", "a\x7f", "a\u00a0b", "a\u2028b", "\xff"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			subj, err := SiteSubject(id)
			assert.ErrorIs(t, err, ErrBadSubjectToken)
			assert.Empty(t, subj)
		})
	}
	subj, err := SiteSubject("s1")
	require.NoError(t, err)
	assert.Equal(t, "ledger.site.s1", subj)
}

func TestSiteOf(t *testing.T) {
	tests := []struct {
		subject string
		want    ids.SiteID
		ok      bool
	}{
		{"ledger.site.s1", "s1", true},
		{"ledger.site.demo", "demo", true},
		{"ledger.site.*", "", false},
		{"ledger.site.>", "", false},
		{"ledger.site.a.b", "", false},
		{"ledger.site.", "", false},
		{"ledger.catalog", "", false},
		{"ledger.operators", "", false},
		{"other.site.s1", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.subject, func(t *testing.T) {
			got, ok := SiteOf(tc.subject)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}
