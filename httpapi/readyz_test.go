package httpapi_test

import (
	"errors"
	"sync/atomic"
	"testing"
)

// TestReadyz_readModels: a gateway whose read models stopped (a model
// failed on a message, the disk refused a write) is not ready: /readyz
// answers 503 rather than have a load balancer send it reads it cannot
// serve current.
func TestReadyz_readModels(t *testing.T) {
	e := newEnv(t)
	// A fault, not the normal course: each refused probe is an ERROR, as
	// for a store that cannot be reached.
	e.log.ExpectErrors("the read models stopped")
	var fault atomic.Pointer[error]
	s := e.newStack(stackOptions{readModels: func() error {
		if p := fault.Load(); p != nil {
			return *p
		}
		return nil
	}})
	for _, tc := range []struct {
		name  string
		fault error
		code  int
	}{
		{"following", nil, 200},
		{"stopped", errors.New("read models stopped: projections: fold: message 7: refused"), 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				fault.Store(&tc.fault)
			}
			r := s.send(t, "GET", "/readyz", "", nil)
			if tc.code == 200 {
				requireOK(t, r)
				return
			}
			requireErr(t, r, 503, "unavailable", "")
		})
	}
}
