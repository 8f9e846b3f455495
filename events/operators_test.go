package events

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func TestOperatorEvents_roundTrip(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		keys []string // the payload's stored field names, which must never change
	}{
		{"created", Event{Name: OperatorCreatedName, Time: 1700000000000, Actor: "admin",
			Payload: &OperatorCreated{ID: "o1", Name: "Alice", Role: "auditor", TokenHash: "ab12"}},
			[]string{"id", "name", "role", "tokenHash"}},
		{"revoked", Event{Name: OperatorRevokedName, Time: 1700000000001, Actor: "o2",
			Payload: &OperatorRevoked{ID: "o1"}},
			[]string{"id"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.ev.Name, tc.ev.Payload.EventName())
			b, _, err := Seal([32]byte{}, []Event{tc.ev})
			require.NoError(t, err)
			got, err := Decode(b)
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tc.ev.Payload, got[0].Payload)
			assert.Equal(t, tc.ev.Actor, got[0].Actor)

			raw, err := msgpack.Marshal(tc.ev.Payload)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, msgpack.Unmarshal(raw, &m))
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			assert.ElementsMatch(t, tc.keys, keys)
		})
	}
}

func TestOperatorsSubject_isALedgerSubject(t *testing.T) {
	// The stream takes SubjectPrefix + ">": the operators must be in it,
	// and must not be mistaken for a site.
	assert.Regexp(t, `^`+regexp.QuoteMeta(SubjectPrefix)+`[a-z]+$`, OperatorsSubject)
	assert.NotContains(t, OperatorsSubject, SitePrefix)
	assert.NotEqual(t, CatalogSubject, OperatorsSubject)
}
