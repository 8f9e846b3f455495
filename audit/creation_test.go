package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
)

// TestAudit_creationOnlyEvents: site.sandbox, and a site.page_updated
// marked atCreation, pass in the site's creation message, where only the
// creation writes them, and fail the site-created check anywhere else.
func TestAudit_creationOnlyEvents(t *testing.T) {
	url, yes, name := "https://shop.example/back", true, "shop"
	ev := func(p events.Payload) events.Event {
		return events.Event{Name: p.EventName(), Time: time.Now().UnixMilli(), Actor: "admin", Payload: p}
	}
	tests := []struct {
		name     string
		settings aggregates.SiteSettings // the creation's
		later    []events.Event          // appended in a message of their own
		want     string                  // in the site-created problem; "" passes
	}{
		{"sandbox and page settings at creation", aggregates.SiteSettings{Sandbox: &yes, ReturnURL: &url}, nil, ""},
		{"page settings updated later", aggregates.SiteSettings{},
			[]events.Event{ev(&events.SitePageUpdated{ReturnURL: &url})}, ""},
		{"a sandbox made later", aggregates.SiteSettings{},
			[]events.Event{ev(&events.SiteSandbox{Sandbox: true})}, "site.sandbox outside the site's creation message"},
		{"a sandbox made again later", aggregates.SiteSettings{Sandbox: &yes},
			[]events.Event{ev(&events.SiteSandbox{Sandbox: true})}, "site.sandbox outside the site's creation message"},
		{"page settings of the creation later", aggregates.SiteSettings{},
			[]events.Event{ev(&events.SitePageUpdated{ReturnURL: &url, AtCreation: true})}, "site.page_updated marked atCreation outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			s := aggregates.NewSite("s-created")
			st := tc.settings
			st.Name = &name
			decideAppend(t, e, s, aggregates.CreateSite{AppKey: "k", Secret: "sec", WebhookSecret: "wh", Settings: st}, time.Now(), "admin")
			var seq uint64
			if len(tc.later) > 0 {
				seq = appendEvents(t, e.st, s, tc.later...)
			}

			rep := e.runAudit(t, audit.Options{})
			if tc.want == "" {
				assert.Empty(t, failed(rep))
				return
			}
			assert.Equal(t, []string{string(s.ID) + "/" + audit.CheckCreated}, failed(rep))
			c := check(t, rep, string(s.ID), audit.CheckCreated)
			if assert.Len(t, c.Problems, 1) {
				assert.Equal(t, seq, c.Problems[0].At.Seq)
				assert.True(t, strings.Contains(c.Problems[0].Message, tc.want), c.Problems[0].Message)
			}
		})
	}
}
