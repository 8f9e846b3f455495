package audit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// TestAudit_liveModelComparesNewerState: a snapshot that lost or changed
// a sandbox flag, the site's methods, its page settings or an alias (what
// an encoder missing a field would write) fails the live-model check; the
// snapshot as written passes.
func TestAudit_liveModelComparesNewerState(t *testing.T) {
	tests := []struct {
		name   string
		damage func(snap, cfg map[string]any)
		want   string // in the live-model problem; "" passes
	}{
		{"as written", func(_, _ map[string]any) {}, ""},
		{"sandbox lost", func(_, cfg map[string]any) { cfg["Sandbox"] = false }, "settings differ: [sandbox]"},
		{"own methods lost", func(_, cfg map[string]any) { cfg["OwnMethods"], cfg["Methods"] = false, nil }, "settings differ: [methods]"},
		{"a method's limit changed", func(_, cfg map[string]any) {
			cfg["Methods"].([]any)[0].(map[string]any)["max"] = 8000
		}, "settings differ: [methods]"},
		{"a method's account changed", func(_, cfg map[string]any) {
			cfg["Methods"].([]any)[0].(map[string]any)["accounts"] = []any{map[string]any{"accountName": "other", "accountNumber": "9"}}
		}, "settings differ: [methods]"},
		{"return URL lost", func(_, cfg map[string]any) { cfg["ReturnURL"] = "" }, "settings differ: [returnUrl]"},
		{"support contact changed", func(_, cfg map[string]any) { cfg["SupportContact"] = "elsewhere" }, "settings differ: [supportContact]"},
		{"aliases lost", func(snap, _ map[string]any) { delete(snap, "aliases") }, `alias "p2" of the full replay is not in the live model`},
		{"an alias's request changed", func(snap, _ map[string]any) {
			snap["aliases"].(map[string]any)["p2"].([]any)[1] = 1
		}, `alias "p2" names`},
		{"an alias added", func(snap, _ map[string]any) {
			snap["aliases"].(map[string]any)["p9"] = []any{0, 1}
		}, `alias "p9" of the live model is not in the full replay`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			now := time.Now()
			s := aggregates.NewSite("s-live")
			name, sb, url, support := "sandbox shop", true, "https://shop.example/back", "help@shop.example"
			decideAppend(t, e, s, aggregates.CreateSite{AppKey: "k", Secret: "sec", WebhookSecret: "wh",
				Settings: aggregates.SiteSettings{Name: &name, Sandbox: &sb, ReturnURL: &url, SupportContact: &support}}, now, "admin")
			decideAppend(t, e, s, aggregates.SetSiteMethods{Methods: []events.SiteMethod{{BankID: testBank().ID, MaxAmount: 9000,
				Accounts: []events.Account{{AccountName: "own", AccountNumber: "1"}}}}}, now, "admin")
			decideAppend(t, e, s, testkit.Deposit(testBank(), "p1", "u1", 5000), now, events.ActorMerchant)
			require.True(t, decideAppend(t, e, s, testkit.Deposit(testBank(), "p2", "u1", 6000), now, events.ActorMerchant).AlreadyPending)

			data, err := s.MarshalSnapshot(posOf(s))
			require.NoError(t, err)
			var snap map[string]any
			require.NoError(t, msgpack.Unmarshal(data, &snap))
			tc.damage(snap, snap["cfg"].(map[string]any))
			data, err = msgpack.Marshal(snap)
			require.NoError(t, err)
			require.NoError(t, e.st.SaveSnapshot(context.Background(), audit.SnapshotPrefix+string(s.ID), posOf(s).Seq, data))

			rep := e.runAudit(t, audit.Options{})
			c := check(t, rep, string(s.ID), audit.CheckLiveModel)
			if tc.want == "" {
				assert.Empty(t, failed(rep))
				assert.Equal(t, audit.Pass, c.Status, c.Detail)
				return
			}
			assert.Equal(t, []string{string(s.ID) + "/" + audit.CheckLiveModel}, failed(rep))
			var all []string
			for _, p := range c.Problems {
				all = append(all, p.Message)
			}
			assert.Contains(t, strings.Join(all, "\n"), tc.want)
		})
	}
}
