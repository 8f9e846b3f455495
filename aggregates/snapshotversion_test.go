package aggregates

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/iqdgateway/gateway/events"
)

// snapshotFields are the keys a snapshot of each version stores, at its
// top level and in its settings (Config, also the settings as created).
var snapshotFields = map[int]struct{ top, cfg []string }{
	6: {
		top: []string{"v", "id", "cfg", "seq", "hash", "balance", "pending", "txs", "pendingDeposits", "pids", "rotation",
			"reasons", "created", "adjusted", "aliases"},
		cfg: []string{"Name", "NegativeLimit", "IPAllowlist", "CallbackURL", "HostedPage", "DepositTTLSeconds", "RateLimit",
			"ReturnURL", "SupportContact", "AppKey", "Secret", "PrevSecret", "PrevSecretUntil", "WebhookSecret",
			"PrevWebhookSecret", "PrevWebhookSecretUntil", "CreatedAt", "Sandbox", "IdempotencyKey", "RequestHash"},
	},
	7: {
		top: []string{"v", "id", "cfg", "seq", "hash", "balance", "pending", "txs", "pendingDeposits", "pids", "rotation",
			"reasons", "created", "adjusted", "aliases"},
		cfg: []string{"Name", "NegativeLimit", "IPAllowlist", "CallbackURL", "HostedPage", "DepositTTLSeconds", "RateLimit",
			"ReturnURL", "SupportContact", "AppKey", "Secret", "PrevSecret", "PrevSecretUntil", "WebhookSecret",
			"PrevWebhookSecret", "PrevWebhookSecretUntil", "CreatedAt", "Sandbox", "OwnMethods", "Methods",
			"IdempotencyKey", "RequestHash"},
	},
}

// TestSnapshot_versionPinsFields: the fields a snapshot stores are those
// of its version. An older build decodes a snapshot of its own version
// without error and drops the keys it does not know, so a new field needs
// a new version (aggregates/snapshot.go, docs/ARCHITECTURE.md
// "Snapshots"): list the new version's fields above.
func TestSnapshot_versionPinsFields(t *testing.T) {
	want, ok := snapshotFields[snapshotVersion]
	require.True(t, ok, "snapshot version %d has no fields listed", snapshotVersion)
	keys := func(v any) []string {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, msgpack.Unmarshal(b, &m))
		return slices.Sorted(maps.Keys(m))
	}
	full := &siteSnapshot{Version: snapshotVersion, Cfg: &Config{}, Created: &Config{},
		Adjusted: map[string]AdjustmentAnswer{"k": {}}, Aliases: map[string]Alias{"p": {}}}
	assert.Equal(t, slices.Sorted(slices.Values(want.top)), keys(full), "a snapshot's fields")
	assert.Equal(t, slices.Sorted(slices.Values(want.cfg)), keys(&Config{}), "a snapshot's settings")
}

// TestSnapshot_readsOlderVersions: a snapshot of version 5 or 6 loads,
// a field it lacks as its zero value; one that holds a site's methods
// (version 6 as the build that introduced them wrote it) keeps them.
func TestSnapshot_readsOlderVersions(t *testing.T) {
	methods := []events.SiteMethod{{BankID: "b1", MaxAmount: 500, Accounts: []events.Account{{AccountName: "own", AccountNumber: "1"}}}}
	tests := []struct {
		name    string
		version int
		drop    []string // settings keys the version's writer did not know
		own     bool
		aliased bool
	}{
		{"version 5", 5, []string{"OwnMethods", "Methods"}, false, false},
		{"version 6 before the site's methods", 6, []string{"OwnMethods", "Methods"}, false, true},
		{"version 6 with the site's methods", 6, nil, true, true},
		{"current", snapshotVersion, nil, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.do(SetSiteMethods{Methods: methods})
			f.deposit("p1", "u1", 400)
			require.True(t, f.do(f.depReq("p2", "u1", 300)).AlreadyPending)
			b, err := f.s.MarshalSnapshot(posOf(f.s))
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, msgpack.Unmarshal(b, &m))
			m["v"] = tc.version
			for _, k := range tc.drop {
				delete(m["cfg"].(map[string]any), k)
			}
			if tc.version == 5 {
				delete(m, "aliases")
			}
			b, err = msgpack.Marshal(m)
			require.NoError(t, err)

			s, _, err := UnmarshalSiteSnapshot(b)
			require.NoError(t, err)
			assert.Equal(t, tc.own, s.Cfg.OwnMethods)
			if tc.own {
				assert.Equal(t, methods, s.Cfg.Methods)
			} else {
				assert.Empty(t, s.Cfg.Methods)
			}
			_, ok := s.ByAlias("p2")
			assert.Equal(t, tc.aliased, ok)
		})
	}
}
