package records

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
)

// The readable history redacts a site's secrets whichever version of
// site.created holds them, and shows an Idempotency-Key (it is no secret).
func TestReadable_siteCreatedVersions(t *testing.T) {
	tests := []struct {
		name    string
		p       *events.SiteCreated
		wantKey any
	}{
		{events.SiteCreatedV1Name, &events.SiteCreated{SiteID: "s1", Name: "Shop", Secret: "sekrit", WebhookSecret: "whsec_sekrit"}, nil},
		{events.SiteCreatedName, &events.SiteCreated{SiteID: "s1", Name: "Shop", Secret: "sekrit", WebhookSecret: "whsec_sekrit",
			IdempotencyKey: "create-1", RequestHash: "ab12"}, "create-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, _, err := events.Seal([32]byte{}, []events.Event{{Name: tc.name, Time: 1, Actor: "op", Payload: tc.p}})
			require.NoError(t, err)
			evs, err := events.Decode(data)
			require.NoError(t, err)
			it, err := Readable(7, 0, evs[0])
			require.NoError(t, err)
			assert.Equal(t, tc.name, it.Name)
			assert.Equal(t, "[redacted]", it.Data["secret"])
			assert.Equal(t, "[redacted]", it.Data["webhookSecret"])
			assert.Equal(t, tc.wantKey, it.Data["idempotencyKey"])
			assert.Equal(t, "Shop", it.Data["name"])
		})
	}
}
