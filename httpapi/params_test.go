package httpapi

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckParams: the first offending key in sorted order is named, and
// a request with only known keys, each once, costs no allocation (the
// keys are sorted only to name an offender).
func TestCheckParams(t *testing.T) {
	ok := url.Values{"bankId": {"ZAINCASH"}, "processId": {"p"}, "amount": {"1000"}, "userId": {"u"}, "userName": {"n"}, "name": {"A"}}
	assert.NoError(t, checkParams(ok, depositFields, "field"))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = checkParams(ok, depositFields, "field") }))

	tests := []struct {
		v     url.Values
		field string
	}{
		{url.Values{"zeta": {"1"}, "currency": {"IQD"}, "amount": {"1"}}, "currency"},
		{url.Values{"userId": {"a", "b"}, "processId": {"1", "2"}}, "processId"},
		{url.Values{"zeta": {"1"}, "amount": {"1", "2"}}, "amount"},
	}
	for _, tc := range tests {
		err := checkParams(tc.v, depositFields, "field")
		var ae *apiError
		if assert.ErrorAs(t, err, &ae) {
			assert.Equal(t, tc.field, ae.field)
		}
	}
}
