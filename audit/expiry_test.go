package audit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// TestAudit_earlyExpiry: a deposit expired before its expiresAt passes
// only on a sandbox site, expired by its merchant ("expire now",
// docs/merchant-api.md "Sandbox sites"); an expiry when it is due passes
// on any site.
func TestAudit_earlyExpiry(t *testing.T) {
	tests := []struct {
		name    string
		sandbox bool
		actor   string
		after   time.Duration // from the deposit's creation
		fails   bool
	}{
		{"a sandbox's merchant, now", true, events.ActorMerchant, time.Second, false},
		{"a sandbox's merchant, when due", true, events.ActorMerchant, time.Hour, false},
		{"a sandbox's operator, early", true, "admin", time.Second, true},
		{"a sandbox's expiry sweep, early", true, events.ActorSystem, time.Second, true},
		{"a live site's merchant, early", false, events.ActorMerchant, time.Second, true},
		{"a live site's expiry sweep, early", false, events.ActorSystem, time.Second, true},
		{"a live site's expiry sweep, when due", false, events.ActorSystem, time.Hour, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			created := time.Now()
			s, pending, _ := handSite(t, e, "s-expiry", tc.sandbox, created)
			at := created.Add(tc.after)
			if tc.fails {
				// No path of the gateway writes it: only a sandbox's
				// merchant expires now (docs/merchant-api.md "Sandbox
				// sites").
				p := &events.DepositExpired{TxID: pending}
				appendEvents(t, e.st, s, events.Event{Name: p.EventName(), Time: at.UnixMilli(), Actor: tc.actor, Payload: p})
			} else {
				decideAppend(t, e, s, aggregates.ExpireDeposit{TxID: ids.TxID(pending), Now: tc.after < time.Hour}, at, tc.actor)
			}

			rep := e.runAudit(t, audit.Options{})
			if !tc.fails {
				assert.Empty(t, failed(rep))
				return
			}
			assert.Equal(t, []string{string(s.ID) + "/" + audit.CheckTransitions}, failed(rep))
			c := check(t, rep, string(s.ID), audit.CheckTransitions)
			if assert.Len(t, c.Problems, 1) {
				assert.Contains(t, c.Problems[0].Message, "before its expiry")
				assert.Equal(t, pending, c.Problems[0].Tx)
			}
		})
	}
}
