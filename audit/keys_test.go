package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// TestAudit_idempotencyKeys: a treasury adjustment whose Idempotency-Key
// was already used (the request moved money twice) and a keyed site that
// is not at the id its key derives fail the idempotency-keys check, and
// only it; the aggregate still answers the first adjustment's balance.
func TestAudit_idempotencyKeys(t *testing.T) {
	e := newEnv(t)
	now := time.Date(2026, 11, 23, 1, 2, 3, 0, time.UTC)
	ev := func(p events.Payload) events.Event {
		return events.Event{Name: p.EventName(), Time: now.UnixMilli(), Actor: "op-1", Payload: p}
	}

	good := aggregates.NewSite(ids.SiteForKey("site-1"))
	appendEvents(t, e.st, good, ev(&events.SiteCreated{SiteID: string(good.ID), Name: "Keyed", AppKey: "ak_1",
		IdempotencyKey: "site-1", RequestHash: "h"}))
	adj := &events.TreasuryAdjusted{Amount: 500, Reason: "top-up", IdempotencyKey: "adj-1", RequestHash: "h"}
	first := appendEvents(t, e.st, good, ev(adj))
	appendEvents(t, e.st, good, ev(&events.TreasuryAdjusted{Amount: 7, Reason: "unkeyed"}))
	twice := appendEvents(t, e.st, good, ev(adj))

	misplaced := aggregates.NewSite("s-misplaced")
	appendEvents(t, e.st, misplaced, ev(&events.SiteCreated{SiteID: string(misplaced.ID), Name: "Keyed elsewhere",
		AppKey: "ak_2", IdempotencyKey: "site-2", RequestHash: "h"}))

	rep := e.runAudit(t, audit.Options{})
	assert.ElementsMatch(t, []string{string(good.ID) + "/" + audit.CheckIdempotency,
		string(misplaced.ID) + "/" + audit.CheckIdempotency}, failed(rep))

	c := check(t, rep, string(good.ID), audit.CheckIdempotency)
	require.Equal(t, 1, c.Count, "%v", c.Problems)
	assert.Equal(t, twice, c.Problems[0].At.Seq)
	assert.Equal(t, events.TreasuryAdjustedName, c.Problems[0].At.Event)
	assert.Contains(t, c.Problems[0].Message, `Idempotency-Key "adj-1" was already used by the adjustment at #`)
	s, _ := rep.Site(string(good.ID))
	assert.Equal(t, int64(1007), s.Balance, "the balance is what the events say")
	a, ok := good.KeyedAdjustment("adj-1")
	require.True(t, ok)
	assert.Equal(t, int64(500), a.Balance, "the first answer stands (message %d)", first)

	c = check(t, rep, string(misplaced.ID), audit.CheckIdempotency)
	require.Equal(t, 1, c.Count)
	assert.Contains(t, c.Problems[0].Message, "derives site "+string(ids.SiteForKey("site-2")))
}

// TestHistory_v1Events: a history written before the keys reads as it
// was stored, secrets redacted.
func TestHistory_v1Events(t *testing.T) {
	e := newEnv(t)
	s := aggregates.NewSite("old")
	appendEvents(t, e.st, s,
		events.Event{Name: events.SiteCreatedV1Name, Time: 1, Actor: "op-1",
			Payload: &events.SiteCreated{SiteID: "old", Name: "Old", AppKey: "ak", Secret: "sekrit", WebhookSecret: "whsec_sekrit"}},
		events.Event{Name: events.TreasuryAdjustedV1Name, Time: 2, Actor: "op-1", Payload: &events.TreasuryAdjusted{Amount: 9, Reason: "r"}})
	var lines []string
	require.NoError(t, audit.History(context.Background(), e.st, "old", 1, 0, func(en audit.Entry) error {
		lines = append(lines, en.Line())
		return nil
	}))
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], "op-1 site.created.v1 id=old name=Old appKey=ak secret=[redacted] webhookSecret=[redacted] negativeLimit=0")
	assert.NotContains(t, lines[0], "sekrit")
	assert.NotContains(t, lines[0], "idempotencyKey")
	assert.Contains(t, lines[1], "treasury.adjusted.v1 amount=9 reason=r")
	assert.Equal(t, int64(9), s.Balance)
	rep := e.runAudit(t, audit.Options{})
	assert.True(t, rep.OK, "failed: %v", failed(rep))
}
