package memstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"ledger.site.a", "ledger.site.a", true},
		{"ledger.site.a", "ledger.site.ab", false},
		{"ledger.site.a", "ledger.site", false},
		{"ledger.site.a", "ledger.site.a.b", false},
		{"ledger.*", "ledger.catalog", true},
		{"ledger.*", "ledger.site.a", false},
		{"ledger.*.a", "ledger.site.a", true},
		{"ledger.*.a", "ledger.site.b", false},
		{"ledger.>", "ledger.site.a", true},
		{"ledger.>", "ledger.catalog", true},
		{"ledger.>", "ledger", false},
		{"ledger.site.>", "ledger.site.a.b.c", true},
		{"ledger.site.>", "ledger.catalog", false},
		{">", "ledger", true},
		{"*", "ledger", true},
		{"*", "ledger.a", false},
		{"other.>", "ledger.a", false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, match(tc.filter, tc.subject), "%s ~ %s", tc.filter, tc.subject)
	}
	assert.True(t, literal("ledger.site.a*b"), "a token holding * is literal")
	assert.False(t, literal("ledger.site.*"))
	assert.False(t, literal("ledger.>"))
}
