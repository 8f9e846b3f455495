package aggregates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
)

// TestApplyMessage_refusesForeign: a message that cannot be this site's is
// refused whole, before anything of it is applied, so a read that caught
// other sites' subjects can never merge their states.
func TestApplyMessage_refusesForeign(t *testing.T) {
	ev := func(p events.Payload) events.Event {
		return events.Event{Name: p.EventName(), Time: t0.UnixMilli(), Actor: operator, Payload: p}
	}
	create := func(id string) events.Event {
		return ev(&events.SiteCreated{SiteID: id, Name: "n", AppKey: "ak-" + id, Secret: "s"})
	}
	credit := ev(&events.TreasuryAdjusted{Amount: 1000, Reason: "r"})
	tests := []struct {
		name    string
		created bool
		evs     []events.Event
	}{
		{"another site's creation", false, []events.Event{create("s2")}},
		{"another site's creation after a valid event", true, []events.Event{credit, create("s2")}},
		{"a second creation", true, []events.Event{create(siteID)}},
		{"two creations in one message", false, []events.Event{create(siteID), create(siteID)}},
		{"an event before the creation", false, []events.Event{credit}},
		{"a settings change before the creation", false, []events.Event{ev(&events.SiteUpdated{Name: ptr("x")})}},
		{"a method event", true, []events.Event{ev(&events.BankCreated{BankID: "b", Code: "B"})}},
		{"a method scope", true, []events.Event{ev(&events.BankScoped{BankID: "b", Scoped: true})}},
		{"an operator event", true, []events.Event{ev(&events.OperatorCreated{ID: "o1", Name: "n", Role: "admin"})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSite(siteID)
			if tc.created {
				s = newFixture(t, SiteSettings{}).s
			}
			before := observe(s)
			err := s.ApplyMessage(posOf(s).Seq+1, tc.evs)
			require.ErrorIs(t, err, ErrForeignEvent)
			assert.Equal(t, before, observe(s), "a refused message changes nothing")
		})
	}

	s := NewSite(siteID)
	require.NoError(t, s.ApplyMessage(1, []events.Event{create(siteID), credit}))
	assert.True(t, s.Created())
	assert.Equal(t, int64(1000), s.Balance)
}

// TestApplyMessage_sharedRefuseForeign: the catalog and the operators, too,
// refuse a message holding any event that is not theirs, whole, and apply
// their own.
func TestApplyMessage_sharedRefuseForeign(t *testing.T) {
	ev := func(p events.Payload) events.Event {
		return events.Event{Name: p.EventName(), Time: t0.UnixMilli(), Actor: operator, Payload: p}
	}
	bank := ev(&events.BankCreated{BankID: "b1", Code: "ZAIN", Name: events.LocalizedName{En: "Zain"},
		IdentifierKind: "PHONE", MinAmount: 1, MaxAmount: 10, Deposit: true})
	op := ev(&events.OperatorCreated{ID: "o1", Name: "Alice", Role: "operator", TokenHash: "h"})
	site := ev(&events.TreasuryAdjusted{Amount: 1, Reason: "r"})
	type shared interface {
		ApplyMessage(uint64, []events.Event) error
	}
	count := func(a shared) int {
		switch a := a.(type) {
		case *Catalog:
			return len(a.Banks())
		case *Operators:
			return len(a.List())
		}
		return -1
	}
	tests := []struct {
		name    string
		agg     func() shared
		own     events.Event
		foreign []events.Event
	}{
		{"catalog", func() shared { return NewCatalog() }, bank, []events.Event{op, site}},
		{"operators", func() shared { return NewOperators() }, op, []events.Event{bank, ev(&events.BankScoped{BankID: "b1"}), site}},
	}
	for _, tc := range tests {
		for _, f := range tc.foreign {
			t.Run(tc.name+" refuses "+f.Name, func(t *testing.T) {
				a := tc.agg()
				err := a.ApplyMessage(1, []events.Event{tc.own, f})
				require.ErrorIs(t, err, ErrForeignEvent)
				assert.Contains(t, err.Error(), "message 1 event 1 is a "+f.Name)
				assert.Zero(t, count(a), "nothing of the message is applied")
			})
		}
		t.Run(tc.name+" applies its own", func(t *testing.T) {
			a := tc.agg()
			require.NoError(t, a.ApplyMessage(1, []events.Event{tc.own}))
			assert.Equal(t, 1, count(a))
		})
	}
}
