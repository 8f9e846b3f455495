package aggregates

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
)

// collidingKey is a userKey under which the given userIds all share one
// key, as two userIds whose FNV-1a hashes collide would; others keep theirs.
func collidingKey(users ...string) func(string) uint64 {
	return func(u string) uint64 {
		if slices.Contains(users, u) {
			return 42
		}
		return UserKey(u)
	}
}

// newCollidingFixture is newFixture on a site where alice, bob and carol
// share one user key.
func newCollidingFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, SiteSettings{})
	f.s.userKey = collidingKey("alice", "bob", "carol")
	f.fund(100_000)
	return f
}

// askAgain requests a new deposit for user and reports which deposit the
// user is given back as already pending (-1 when a new one is created).
func askAgain(f *fixture, pid, user string) int32 {
	f.t.Helper()
	d, err := f.try(f.depReq(pid, user, 777))
	require.NoError(f.t, err)
	require.False(f.t, d.Repeat)
	if d.AlreadyPending {
		require.Len(f.t, d.Events, 1)
		assert.Equal(f.t, events.DepositAliasAddedName, d.Events[0].Name)
		return d.Tx
	}
	assert.Equal(f.t, events.DepositRequestedName, d.Events[len(d.Events)-1].Name)
	return -1
}

func TestPendingIndex_collidingUsers(t *testing.T) {
	t.Run("each user has a pending deposit of their own", func(t *testing.T) {
		f := newCollidingFixture(t)
		a := f.deposit("pa", "alice", 1000)
		b := f.deposit("pb", "bob", 2000)
		require.Equal(t, f.s.userKey("alice"), f.s.userKey("bob"))
		assert.Equal(t, map[uint64]int32{42: a}, f.s.pending.byKey, "alice took the key first")
		assert.Equal(t, map[string]int32{"bob": b}, f.s.pending.collide, "bob is indexed by his userId")
		c := f.deposit("pc", "carol", 3000)
		d := f.deposit("pd", "dave", 4000)

		assert.Equal(t, a, askAgain(f, "x1", "alice"))
		assert.Equal(t, b, askAgain(f, "x2", "bob"))
		assert.Equal(t, c, askAgain(f, "x3", "carol"))
		assert.Equal(t, d, askAgain(f, "x4", "dave"))
		assert.Equal(t, map[string]int32{"alice": a, "bob": b, "carol": c, "dave": d}, pendingByUser(f.s))
		assert.Equal(t, []int32{a, b, c, d}, pendingSet(f.s))
		// The deposit given back is the user's own: its amount and
		// recipient are those of their request.
		assert.Equal(t, int64(2000), f.s.Txs[askAgain(f, "x5", "bob")].Amount)
	})

	closes := []struct {
		name string
		// close ends the first deposit of user (index i).
		close func(f *fixture, i int32)
	}{
		{"approve", func(f *fixture, i int32) { f.do(ApproveDeposit{TxID: tx(i)}) }},
		{"reject", func(f *fixture, i int32) { f.do(RejectDeposit{TxID: tx(i), Reason: "no transfer"}) }},
		{"expire", func(f *fixture, i int32) {
			f.now = t0.Add(2 * time.Minute)
			f.do(ExpireDeposit{TxID: tx(i)})
		}},
	}
	for _, tc := range closes {
		for _, closed := range []string{"alice", "bob"} {
			t.Run(tc.name+" "+closed+" leaves the other pending", func(t *testing.T) {
				f := newCollidingFixture(t)
				// The deposit to close lives a minute, the other half an
				// hour: an expiry leaves the other one fresh.
				withTTL := func(user string) {
					ttl := int64(1800)
					if user == closed {
						ttl = 60
					}
					f.do(UpdateSite{Settings: SiteSettings{DepositTTLSeconds: ptr(ttl)}})
				}
				withTTL("alice")
				a := f.deposit("pa", "alice", 1000) // indexed by key
				withTTL("bob")
				b := f.deposit("pb", "bob", 2000) // indexed by userId
				own := map[string]int32{"alice": a, "bob": b}
				other := map[string]string{"alice": "bob", "bob": "alice"}[closed]
				tc.close(f, own[closed])

				assert.Equal(t, own[other], askAgain(f, "x1", other), "%s keeps the pending deposit", other)
				assert.Equal(t, map[string]int32{other: own[other]}, pendingByUser(f.s))
				assert.Equal(t, []int32{own[other]}, pendingSet(f.s))
				n := f.deposit("pn", closed, 500)
				assert.Equal(t, n, askAgain(f, "x2", closed))
				assert.Equal(t, own[other], askAgain(f, "x3", other))
				assert.Equal(t, map[string]int32{other: own[other], closed: n}, pendingByUser(f.s))
			})
		}
	}

	t.Run("late approval of an expired deposit keeps the newer pending one", func(t *testing.T) {
		for _, user := range []string{"alice", "bob"} {
			t.Run(user, func(t *testing.T) {
				f := newCollidingFixture(t)
				a := f.deposit("pa", "alice", 1000)
				b := f.deposit("pb", "bob", 2000)
				old := map[string]int32{"alice": a, "bob": b}[user]
				f.now = t0.Add(31 * time.Minute)
				f.do(ExpireDeposit{TxID: tx(old)})
				n := f.deposit("pn", user, 3000)
				f.do(ApproveDeposit{TxID: tx(old)})
				assert.Equal(t, StatusApproved, f.s.Txs[old].Status)
				assert.Equal(t, n, askAgain(f, "x1", user))
				assert.Len(t, pendingSet(f.s), 2)
			})
		}
	})

	t.Run("a stale deposit of a colliding user is expired and replaced", func(t *testing.T) {
		f := newCollidingFixture(t)
		a := f.deposit("pa", "alice", 1000)
		f.now = t0.Add(20 * time.Minute)
		b := f.deposit("pb", "bob", 2000)
		f.now = t0.Add(40 * time.Minute) // alice's is past its expiry, bob's not
		d, err := f.try(f.depReq("pa2", "alice", 1500))
		require.NoError(t, err)
		require.Equal(t, []string{events.DepositExpiredName, events.DepositRequestedName}, eventNames(d.Events))
		assert.Equal(t, &events.DepositExpired{TxID: string(tx(a))}, d.Events[0].Payload)
		commitEvents(t, f.s, d.Events)
		assert.Equal(t, b, askAgain(f, "x1", "bob"))
		assert.Equal(t, d.Tx, askAgain(f, "x2", "alice"))
		assert.Equal(t, map[string]int32{"alice": d.Tx, "bob": b}, pendingByUser(f.s))
	})
}

// TestPendingIndex_replacedByNewerDeposit covers histories Decide does not
// produce (a second deposit of a user whose first is still pending): apply
// must still keep one entry per user, wherever the user is indexed.
func TestPendingIndex_replacedByNewerDeposit(t *testing.T) {
	for _, user := range []string{"alice", "bob"} {
		t.Run(user, func(t *testing.T) {
			f := newCollidingFixture(t)
			f.deposit("pa", "alice", 1000)
			f.deposit("pb", "bob", 2000)
			d, err := f.try(f.depReq("pn", "dave", 3000))
			require.NoError(t, err)
			p := d.Events[0].Payload.(*events.DepositRequested)
			p.UserID = user
			commitEvents(t, f.s, d.Events)
			assert.Equal(t, d.Tx, askAgain(f, "x1", user))
			assert.Len(t, pendingByUser(f.s), 2)
			assert.Len(t, pendingSet(f.s), 2)
		})
	}
}
