package aggregates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSite_taken: the one check of processId idempotency answers a known
// processId for both kinds: the same request is a repeat (a deposit's
// alias one with alreadyPending), any other a conflict, and a processId
// not taken goes on to be decided.
func TestSite_taken(t *testing.T) {
	f := newFixture(t, SiteSettings{})
	f.fund(1_000_000)
	dep := f.deposit("p-dep", "u1", 25_000)
	d := f.do(f.depReq("p-alias", "u1", 30_000)) // u1's deposit is pending: an alias
	require.True(t, d.AlreadyPending)
	wd := f.withdraw("p-wd", "u2", 10_000)
	for _, c := range []struct {
		name       string
		kind       Kind
		req        Request
		taken      bool
		tx         int32
		repeat     bool
		alreadyPnd bool
		conflict   bool
	}{
		{"a deposit repeated", KindDeposit, f.depReq("p-dep", "u1", 25_000).Request, true, dep, true, false, false},
		{"a deposit's processId with another amount", KindDeposit, f.depReq("p-dep", "u1", 26_000).Request, true, dep, false, false, true},
		{"a deposit's processId for another user", KindDeposit, f.depReq("p-dep", "u9", 25_000).Request, true, dep, false, false, true},
		{"a deposit's processId for a withdrawal", KindWithdrawal, f.wdReq("p-dep", "u1", 25_000).Request, true, dep, false, false, true},
		{"an alias repeated", KindDeposit, f.depReq("p-alias", "u1", 30_000).Request, true, dep, true, true, false},
		{"an alias with another amount", KindDeposit, f.depReq("p-alias", "u1", 31_000).Request, true, dep, false, false, true},
		{"an alias for a withdrawal", KindWithdrawal, f.wdReq("p-alias", "u1", 30_000).Request, true, dep, false, false, true},
		{"a withdrawal repeated", KindWithdrawal, f.wdReq("p-wd", "u2", 10_000).Request, true, wd, true, false, false},
		{"a withdrawal's processId for a deposit", KindDeposit, f.depReq("p-wd", "u2", 10_000).Request, true, wd, false, false, true},
		{"a new processId", KindDeposit, f.depReq("p-new", "u3", 25_000).Request, false, 0, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, ok, err := f.s.taken(c.kind, c.req)
			require.Equal(t, c.taken, ok)
			if !c.taken {
				return
			}
			assert.Equal(t, c.tx, d.Tx)
			assert.Equal(t, c.repeat, d.Repeat)
			assert.Equal(t, c.alreadyPnd, d.AlreadyPending)
			if c.conflict {
				assert.ErrorIs(t, err, ErrProcessIDConflict)
			} else {
				assert.NoError(t, err)
			}
			assert.Empty(t, d.Events, "a known processId appends nothing")
		})
	}
}
