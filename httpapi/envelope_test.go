package httpapi

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/records"
)

// The envelope is written by hand; it must be exactly what encoding/json
// writes of the same struct, whatever the data and the strings in it.
func TestEnvelope_appendJSON_matchesEncodingJSON(t *testing.T) {
	reason := "closed <by> \"ops\" & \u2028 \xff"
	rec := records.Record{Common: records.Common{TransactionID: "s-1", Amount: 25000, StatusReason: &reason, Name: "علي"},
		Deposit: &records.DepositFields{Lang: "ar", AlreadyPending: true}}
	cases := []struct {
		name string
		env  envelope
	}{
		{"record", envelope{Data: rec, Status: 200, ResponseTime: "3ms", AppVersion: "v1 <dev>", RequestID: "r-1"}},
		{"ops record", envelope{Data: records.OpsRecord{SiteID: "s", Record: rec}, Status: 200}},
		{"map", envelope{Data: map[string]any{"status": "ready", "sequence": uint64(math.MaxUint64)}, Status: 200}},
		{"nil data, error", envelope{Status: 409, Code: "conflict", Message: "a \"quoted\" <message>\n", Field: "amount",
			ResponseTime: "0ms", AppVersion: "x", RequestID: "y"}},
		{"slice", envelope{Data: []records.Record{rec}, Status: 200}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.env)
			require.NoError(t, err)
			got, err := tc.env.appendJSON(nil)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
		})
	}
	// A value encoding/json refuses is an error, not half a body.
	_, err := envelope{Data: math.Inf(1)}.appendJSON(nil)
	assert.Error(t, err)
}
