package audit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// limitedSite stores a site with a negative limit of −1000, a balance of
// 5000 and a withdrawal of 2000 pending: 4000 available.
func limitedSite(t *testing.T, e *env, now time.Time) *aggregates.Site {
	t.Helper()
	s := aggregates.NewSite("s-treasury")
	name, limit := "shop", int64(-1000)
	decideAppend(t, e, s, aggregates.CreateSite{AppKey: "k", Secret: "sec", WebhookSecret: "wh",
		Settings: aggregates.SiteSettings{Name: &name, NegativeLimit: &limit}}, now, "admin")
	decideAppend(t, e, s, aggregates.AdjustTreasury{Amount: 5000, Reason: "opening"}, now, "admin")
	decideAppend(t, e, s, testkit.Withdrawal(testBank(), "w1", "u1", 2000, "07701234567"), now, events.ActorMerchant)
	require.Equal(t, int64(4000), s.Available())
	return s
}

// TestAudit_debitBelowLimit: a treasury.adjusted.v3 debit that takes the
// treasury below its negative limit without allowBelowLimit, which the
// aggregate refuses, fails the treasury-rule check; v1 and v2 debits were
// never checked so and pass.
func TestAudit_debitBelowLimit(t *testing.T) {
	// The site: negative limit −1000, balance 5000, a 2000 withdrawal
	// pending: 4000 available.
	tests := []struct {
		name   string
		event  string
		amount int64
		allow  bool
		fails  bool
	}{
		{"to the limit", events.TreasuryAdjustedName, -4000, false, false},
		{"below the limit", events.TreasuryAdjustedName, -4001, false, true},
		{"below the limit on purpose", events.TreasuryAdjustedName, -4001, true, false},
		{"far below the limit", events.TreasuryAdjustedName, -1_000_000, false, true},
		{"a credit", events.TreasuryAdjustedName, 1, false, false},
		{"below the limit, v2", events.TreasuryAdjustedV2Name, -4001, false, false},
		{"below the limit, v1", events.TreasuryAdjustedV1Name, -4001, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			now := time.Now()
			s := limitedSite(t, e, now)
			if tc.event == events.TreasuryAdjustedName {
				// The audit fails what the aggregate refuses.
				_, err := s.Decide(aggregates.AdjustTreasury{Amount: tc.amount, Reason: "r", AllowBelowLimit: tc.allow}, now, "admin")
				if tc.fails {
					require.ErrorIs(t, err, aggregates.ErrBelowLimit)
				} else {
					require.NoError(t, err)
				}
			}
			// Stored as a writer that skipped the check, or one from before
			// it, would have.
			p := &events.TreasuryAdjusted{Amount: tc.amount, Reason: "r", AllowBelowLimit: tc.allow}
			seq := appendEvents(t, e.st, s, events.Event{Name: tc.event, Time: now.UnixMilli(), Actor: "admin", Payload: p})

			rep := e.runAudit(t, audit.Options{})
			if !tc.fails {
				assert.Empty(t, failed(rep))
				return
			}
			assert.Equal(t, []string{string(s.ID) + "/" + audit.CheckTreasury}, failed(rep))
			c := check(t, rep, string(s.ID), audit.CheckTreasury)
			if assert.Len(t, c.Problems, 1) {
				assert.Equal(t, seq, c.Problems[0].At.Seq)
				assert.Contains(t, c.Problems[0].Message, "without allowBelowLimit")
				assert.Contains(t, c.Problems[0].Message, "available was 4000")
			}
		})
	}
}

// TestAudit_limitLeft: a site.updated.v2 must say exactly what its change
// of the negative limit left available, and nothing when it changes no
// limit; v1 never said.
func TestAudit_limitLeft(t *testing.T) {
	// The site: negative limit −1000, balance 5000, a 2000 withdrawal
	// pending: a limit of 0 leaves 3000.
	limit := func(v int64) *int64 { return &v }
	tests := []struct {
		name  string
		event string
		p     *events.SiteUpdated
		fails string
	}{
		{"as decided", events.SiteUpdatedName, &events.SiteUpdated{NegativeLimit: limit(0), Available: limit(3000)}, ""},
		{"another amount", events.SiteUpdatedName, &events.SiteUpdated{NegativeLimit: limit(0), Available: limit(4000)}, "balance 5000, pending 2000 leave 3000"},
		{"nothing said", events.SiteUpdatedName, &events.SiteUpdated{NegativeLimit: limit(0)}, "without saying what is left available (3000)"},
		{"said without a change", events.SiteUpdatedName, &events.SiteUpdated{Available: limit(3000)}, "without changing the negative limit"},
		{"v1 says nothing", events.SiteUpdatedV1Name, &events.SiteUpdated{NegativeLimit: limit(0)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			now := time.Now()
			s := limitedSite(t, e, now)
			if tc.fails == "" && tc.event == events.SiteUpdatedName {
				// What passes is what the aggregate writes.
				d, err := s.Decide(aggregates.UpdateSite{Settings: aggregates.SiteSettings{NegativeLimit: tc.p.NegativeLimit}}, now, "admin")
				require.NoError(t, err)
				require.Equal(t, tc.p, d.Events[0].Payload)
			}
			seq := appendEvents(t, e.st, s, events.Event{Name: tc.event, Time: now.UnixMilli(), Actor: "admin", Payload: tc.p})

			rep := e.runAudit(t, audit.Options{})
			if tc.fails == "" {
				assert.Empty(t, failed(rep))
				return
			}
			assert.Equal(t, []string{string(s.ID) + "/" + audit.CheckTreasury}, failed(rep))
			c := check(t, rep, string(s.ID), audit.CheckTreasury)
			if assert.Len(t, c.Problems, 1) {
				assert.Equal(t, seq, c.Problems[0].At.Seq)
				assert.Contains(t, c.Problems[0].Message, tc.fails)
			}
		})
	}
}
