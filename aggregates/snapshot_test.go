package aggregates

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/iqdgateway/gateway/aggregates/recipient"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// decodeSnapshot marshals s and decodes the bytes back into the snapshot
// structure, so snapshots can be compared without depending on msgpack's map
// ordering (which is not deterministic). Zero rotation counters are dropped:
// they pick the same account as a missing one.
func decodeSnapshot(t *testing.T, s *Site) siteSnapshot {
	t.Helper()
	b, err := s.MarshalSnapshot(posOf(s))
	require.NoError(t, err)
	var snap siteSnapshot
	require.NoError(t, msgpack.Unmarshal(b, &snap))
	snap.Rotation = dropZero(snap.Rotation)
	return snap
}

// busyFixture builds a site with transactions in every state, rotated
// accounts on two banks, reasons, rotated secrets and a pending user whose
// deposit is past its expiry.
func busyFixture(t *testing.T) (*fixture, *Bank) {
	f := newFixture(t, SiteSettings{NegativeLimit: ptr(int64(-5000)), IPAllowlist: ptr([]string{"10.0.0.0/8", "192.0.2.1"}),
		CallbackURL: ptr("https://shop.example/cb"), HostedPage: ptr(true), DepositTTLSeconds: ptr(int64(600)), RateLimit: ptr(int64(7))})
	b2 := testBank("b2", "CARD", recipient.CardNo, 2)
	f.fund(20000)
	f.do(RotateSecret{Secret: "sec2", Overlap: time.Hour})
	f.do(RotateSecret{Webhook: true, Secret: "whsec_2", Overlap: 2 * time.Hour})
	f.deposit("d0", "u0", 1000) // 0 pending, goes stale
	f.now = t0.Add(5 * time.Minute)
	f.deposit("d1", "u1", 2000) // 1 approved for 1800
	f.do(ApproveDeposit{TxID: tx(1), Amount: 1800})
	f.deposit("d2", "u2", 3000) // 2 rejected
	f.do(RejectDeposit{TxID: tx(2), Reason: "no transfer"})
	f.deposit("d4", "u8", 900)      // 3 expired below
	f.do(f.wdReq("w0", "u4", 5000)) // 4 pending
	f.withdraw("w1", "u5", 6000)    // 5 processing
	f.do(ProcessWithdrawal{TxID: tx(5)})
	f.withdraw("w2", "u6", 700) // 6 paid
	f.do(ProcessWithdrawal{TxID: tx(6)})
	f.do(PayWithdrawal{TxID: tx(6), Reference: "BANK-REF-6"})
	f.withdraw("w3", "u7", 800) // 7 rejected
	f.do(RejectWithdrawal{TxID: tx(7), Reason: "closed"})
	f.now = t0.Add(20 * time.Minute)
	f.do(ExpireDeposit{TxID: tx(3)})
	r := f.depReq("d3", "u3", 4000) // 8 pending on b2, fresh
	r.Bank = b2
	f.do(r)
	return f, b2
}

func TestSnapshotRoundTrip(t *testing.T) {
	f, _ := busyFixture(t)
	require.Equal(t, int64(20000+1800-700), f.s.Balance)
	require.Equal(t, int64(5000+6000), f.s.PendingWithdrawals)

	b, err := f.s.MarshalSnapshot(posOf(f.s))
	require.NoError(t, err)
	s2, pos2, err := UnmarshalSiteSnapshot(b)
	require.NoError(t, err)
	positions.Store(s2, pos2)

	assert.Equal(t, observe(f.s), observe(s2))
	assert.Equal(t, f.s.ID, s2.ID)
	assert.Equal(t, *f.s.Cfg, *s2.Cfg)
	assert.Equal(t, "sec2", s2.Cfg.Secret)
	assert.Equal(t, "sec", s2.Cfg.PrevSecret)
	assert.Equal(t, "whsec_2", s2.Cfg.WebhookSecret)
	assert.Equal(t, posOf(f.s), pos2)
	assert.Equal(t, f.s.Available(), s2.Available())
	assert.Nil(t, s2.j)
	for i := range f.s.Txs {
		assert.Equal(t, f.s.Reason(int32(i)), s2.Reason(int32(i)), "reason %d", i)
		id := ids.NewTx(siteID, int32(i))
		j, ok := s2.Lookup(id)
		assert.True(t, ok)
		assert.Equal(t, int32(i), j)
		j, ok = s2.ByProcessID(f.s.ProcessID(int32(i)))
		assert.True(t, ok)
		assert.Equal(t, int32(i), j)
	}
	assert.Equal(t, "no transfer", s2.Reason(2))
	assert.Equal(t, "BANK-REF-6", s2.Reason(6))
	assert.Equal(t, "closed", s2.Reason(7))
	assert.Equal(t, "", s2.Reason(0))

	// Pending deposits seen by the expiry sweep.
	collect := func(s *Site) map[int32]Status {
		m := map[int32]Status{}
		s.PendingDeposits(func(i int32, tx *Tx) { m[i] = tx.Status })
		return m
	}
	assert.Equal(t, map[int32]Status{0: StatusPending, 8: StatusPending}, collect(s2))
	assert.Equal(t, collect(f.s), collect(s2))

	// A second round trip is stable.
	b2, err := s2.MarshalSnapshot(posOf(s2))
	require.NoError(t, err)
	s3, err := restoreSnapshot(UserKey, b2)
	require.NoError(t, err)
	assert.Equal(t, observe(s2), observe(s3))
}

// TestSnapshotDecidesIdentically runs the same commands against the
// original site and the one restored from its snapshot and requires the same
// decisions, errors and resulting state.
func TestSnapshotDecidesIdentically(t *testing.T) {
	type mk func(f *fixture, b2 *Bank) Command
	dep := func(pid, user string, amount int64) mk {
		return func(f *fixture, _ *Bank) Command { return f.depReq(pid, user, amount) }
	}
	steps := []struct {
		name string
		cmd  mk
		want func(t *testing.T, d Decision, err error)
	}{
		{"repeat deposit", dep("d1", "u1", 2000), func(t *testing.T, d Decision, err error) {
			require.NoError(t, err)
			assert.True(t, d.Repeat)
			assert.Equal(t, int32(1), d.Tx)
		}},
		{"conflicting repeat", dep("d1", "u1", 2001), func(t *testing.T, d Decision, err error) {
			assert.ErrorIs(t, err, ErrProcessIDConflict)
			assert.Equal(t, int32(1), d.Tx)
		}},
		{"repeat withdrawal", func(f *fixture, _ *Bank) Command { return f.wdReq("w1", "u5", 6000) }, func(t *testing.T, d Decision, err error) {
			require.NoError(t, err)
			assert.True(t, d.Repeat)
			assert.Equal(t, int32(5), d.Tx)
		}},
		{"already pending on b2", dep("d9", "u3", 100), func(t *testing.T, d Decision, err error) {
			require.NoError(t, err)
			assert.True(t, d.AlreadyPending)
			assert.Equal(t, int32(8), d.Tx)
		}},
		{"stale pending is expired and replaced", dep("d10", "u0", 100), func(t *testing.T, d Decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, []string{events.DepositExpiredName, events.DepositRequestedName}, eventNames(d.Events))
			assert.Equal(t, int32(9), d.Tx)
		}},
		{"rotation continues on b1", dep("d11", "u20", 100), func(t *testing.T, d Decision, err error) {
			require.NoError(t, err)
			// b1 served d0, d1, d2, d4 and d10: next is index 5 % 3.
			assert.Equal(t, "acct-2", d.Events[0].Payload.(*events.DepositRequested).AccountName)
		}},
		{"rotation continues on b2", func(f *fixture, b2 *Bank) Command {
			r := f.depReq("d12", "u21", 100)
			r.Bank = b2
			return r
		}, func(t *testing.T, d Decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, "acct-1", d.Events[0].Payload.(*events.DepositRequested).AccountName)
		}},
		{"treasury room", func(f *fixture, _ *Bank) Command { return f.wdReq("w9", "u9", 20000+1800-700-11000+5000) },
			func(t *testing.T, d Decision, err error) {
				requireErr(t, d, err, ErrInsufficientBalance, "amount")
			}},
		{"treasury room minus one", func(f *fixture, _ *Bank) Command { return f.wdReq("w9", "u9", 20000+1800-700-11000+5000-1) },
			func(t *testing.T, d Decision, err error) {
				require.NoError(t, err)
				require.Len(t, d.Events, 1)
			}},
		{"approve expired deposit", func(*fixture, *Bank) Command { return ApproveDeposit{TxID: tx(3)} }, func(t *testing.T, d Decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, &events.DepositApproved{TxID: string(tx(3)), Amount: 900, Requested: 900}, d.Events[0].Payload)
		}},
		{"pay processing", func(*fixture, *Bank) Command { return PayWithdrawal{TxID: tx(5)} }, func(t *testing.T, d Decision, err error) {
			require.NoError(t, err)
		}},
		{"reject approved deposit", func(*fixture, *Bank) Command { return RejectDeposit{TxID: tx(1), Reason: "x"} }, func(t *testing.T, d Decision, err error) {
			requireRefusedTransition(t, d, err)
		}},
		{"expire the b2 deposit", func(f *fixture, _ *Bank) Command { f.now = t0.Add(time.Hour); return ExpireDeposit{TxID: tx(8)} },
			func(t *testing.T, d Decision, err error) {
				require.NoError(t, err)
			}},
	}

	orig, b2 := busyFixture(t)
	b, err := orig.s.MarshalSnapshot(posOf(orig.s))
	require.NoError(t, err)
	restoredSite, err := restoreSnapshot(UserKey, b)
	require.NoError(t, err)
	restored := &fixture{t: t, s: restoredSite, bank: orig.bank, now: orig.now}

	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			c1 := st.cmd(orig, b2)
			c2 := st.cmd(restored, b2)
			restored.now = orig.now
			d1, err1 := orig.try(c1)
			d2, err2 := restored.try(c2)
			st.want(t, d1, err1)
			st.want(t, d2, err2)
			assert.Equal(t, d1, d2)
			assert.Equal(t, fmt.Sprint(err1), fmt.Sprint(err2))
			if err1 == nil && len(d1.Events) > 0 {
				commitEvents(t, orig.s, d1.Events)
				commitEvents(t, restored.s, d2.Events)
			}
			assert.Equal(t, observe(orig.s), observe(restored.s))
		})
	}
	assert.Equal(t, int64(20000+1800-700+900-6000), restored.s.Balance)
}

// TestSnapshot_collidingUsers: users sharing a key keep their own pending
// deposits through a snapshot, whose index is rebuilt from the arena.
func TestSnapshot_collidingUsers(t *testing.T) {
	f := newCollidingFixture(t)
	a := f.deposit("pa", "alice", 1000) // indexed by key
	b := f.deposit("pb", "bob", 2000)   // by userId
	c := f.deposit("pc", "carol", 3000) // by userId
	d := f.deposit("pd", "dave", 4000)  // a key of his own
	f.do(ApproveDeposit{TxID: tx(a)})
	e := f.deposit("pe", "eve", 5000)
	want := map[string]int32{"bob": b, "carol": c, "dave": d, "eve": e}
	require.Equal(t, want, pendingByUser(f.s))

	data, err := f.s.MarshalSnapshot(posOf(f.s))
	require.NoError(t, err)
	s2, err := restoreSnapshot(f.s.userKey, data)
	require.NoError(t, err)
	assert.Equal(t, observe(f.s), observe(s2))
	assert.Equal(t, want, pendingByUser(s2))
	// Alice's approval freed the key that bob and carol are indexed
	// apart from; the rebuilt index gives it to bob, the first of them.
	assert.Equal(t, map[string]int32{"bob": b, "carol": c}, f.s.pending.collide)
	assert.Equal(t, map[string]int32{"carol": c}, s2.pending.collide)

	restored := &fixture{t: t, s: s2, bank: f.bank, now: f.now}
	for _, r := range []*fixture{f, restored} {
		assert.Equal(t, b, askAgain(r, "x1", "bob"))
		assert.Equal(t, c, askAgain(r, "x2", "carol"))
		assert.Equal(t, int32(-1), askAgain(r, "x3", "alice"))
		r.do(ApproveDeposit{TxID: tx(b)})
		assert.Equal(t, c, askAgain(r, "x4", "carol"))
		assert.Equal(t, int32(-1), askAgain(r, "x5", "bob"))
	}
	assert.Equal(t, observe(f.s), observe(s2))

	// No key is stored: they are derived from the userIds in the arena,
	// so the same snapshot read under the real UserKey gives every user
	// their own pending deposit as well.
	s3, err := restoreSnapshot(UserKey, data)
	require.NoError(t, err)
	assert.Equal(t, want, pendingByUser(s3))
}

func TestSnapshotOfNewSite(t *testing.T) {
	s := NewSite("fresh")
	b, err := s.MarshalSnapshot(posOf(s))
	require.NoError(t, err)
	s2, err := restoreSnapshot(UserKey, b)
	require.NoError(t, err)
	assert.Equal(t, ids.SiteID("fresh"), s2.ID)
	assert.False(t, s2.Created())
	assert.Empty(t, s2.Txs)
	d, err := s2.Decide(ApproveDeposit{TxID: "fresh-1"}, t0, operator)
	requireErr(t, d, err, ErrSiteNotFound, "")
	d, err = s2.Decide(CreateSite{Settings: SiteSettings{Name: ptr("n")}}, t0, operator)
	require.NoError(t, err)
	require.Len(t, d.Events, 1)
}

func TestUnmarshalSiteSnapshotRejects(t *testing.T) {
	// good is a snapshot with one pending deposit, p1 of user u1, changed
	// by mod.
	good := func(mod func(*siteSnapshot)) []byte {
		snap := siteSnapshot{Version: snapshotVersion, ID: "s1", Hash: make([]byte, 32),
			Txs:             []Tx{{Kind: KindDeposit, Status: StatusPending, Amount: 10, Requested: 10}},
			ProcessIDs:      []byte{2, 'p', '1', 2, 'u', '1'},
			PendingDeposits: []int32{0}}
		mod(&snap)
		b, err := msgpack.Marshal(&snap)
		require.NoError(t, err)
		return b
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", []byte{0xc1, 0x00, 0x01}},
		{"truncated", good(func(*siteSnapshot) {})[:5]},
		{"unknown version", good(func(s *siteSnapshot) { s.Version = snapshotVersion + 1 })},
		{"older version", good(func(s *siteSnapshot) { s.Version = 4 })}, // 5 and 6 are read (snapshotversion_test.go)
		{"alias of nothing", good(func(s *siteSnapshot) { s.Aliases = map[string]Alias{"p": {Tx: 99}} })},
		{"version zero", good(func(s *siteSnapshot) { s.Version = 0 })},
		{"short hash", good(func(s *siteSnapshot) { s.Hash = make([]byte, 31) })},
		{"no hash", good(func(s *siteSnapshot) { s.Hash = nil })},
		{"wildcard id", good(func(s *siteSnapshot) { s.ID = "*" })},
		{"full wildcard id", good(func(s *siteSnapshot) { s.ID = ">" })},
		{"dotted id", good(func(s *siteSnapshot) { s.ID = "a.b" })},
		{"empty id", good(func(s *siteSnapshot) { s.ID = "" })},
		{"version 3", version3(t)},
		{"processId offset past the arena", good(func(s *siteSnapshot) { s.Txs[0].PidOff = 6 })},
		{"processId past the arena", good(func(s *siteSnapshot) { s.ProcessIDs = []byte{5, 'p', '1'} })},
		{"no userId length", good(func(s *siteSnapshot) { s.ProcessIDs = []byte{2, 'p', '1'} })},
		{"userId past the arena", good(func(s *siteSnapshot) { s.ProcessIDs = []byte{2, 'p', '1', 3, 'u', '1'} })},
		{"pending deposit out of range", good(func(s *siteSnapshot) { s.PendingDeposits = []int32{1} })},
		{"negative pending deposit", good(func(s *siteSnapshot) { s.PendingDeposits = []int32{-1} })},
		{"pending deposit twice", good(func(s *siteSnapshot) { s.PendingDeposits = []int32{0, 0} })},
		{"pending withdrawal", good(func(s *siteSnapshot) { s.Txs[0].Kind = KindWithdrawal })},
		{"pending deposit without a userId", good(func(s *siteSnapshot) { s.ProcessIDs = []byte{2, 'p', '1', 0} })},
		{"adjustment under no key", good(func(s *siteSnapshot) { s.Adjusted = map[string]AdjustmentAnswer{"": {RequestHash: "h"}} })},
		{"adjustment under a key with a newline", good(func(s *siteSnapshot) { s.Adjusted = map[string]AdjustmentAnswer{"a\nb": {RequestHash: "h"}} })},
		{"settings as created without settings", good(func(s *siteSnapshot) { s.Created = &Config{Settings: Settings{Name: "x"}} })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := restoreSnapshot(UserKey, tc.data)
			assert.Error(t, err)
			assert.Nil(t, s)
		})
	}
	s, err := restoreSnapshot(UserKey, good(func(*siteSnapshot) {}))
	require.NoError(t, err)
	assert.Equal(t, ids.SiteID("s1"), s.ID)
	assert.Equal(t, "p1", s.ProcessID(0))
	i, ok := s.pendingOf("u1")
	assert.True(t, ok)
	assert.Equal(t, int32(0), i)
}

// version3 encodes a snapshot of the previous format: userIds were not in
// the arena and the pending index was a map of user keys.
func version3(t *testing.T) []byte {
	t.Helper()
	b, err := msgpack.Marshal(map[string]any{"v": 3, "id": "s1", "hash": make([]byte, 32),
		"txs": []Tx{{Kind: KindDeposit, Status: StatusPending}}, "pids": []byte{2, 'p', '1'},
		"pendingUsers": map[uint64]int32{UserKey("u1"): 0}})
	require.NoError(t, err)
	return b
}

// restoreSnapshot is unmarshalSiteSnapshot that records where the restored
// site stands in its simulated stream (see positions).
func restoreSnapshot(key func(string) uint64, b []byte) (*Site, error) {
	s, pos, err := unmarshalSiteSnapshot(b, key)
	if err == nil {
		positions.Store(s, pos)
	}
	return s, err
}

// TestConfig_snapshotLayout: the settings are stored inline in a
// snapshot's Config, under the keys they had before Settings was a type of
// its own, so snapshots written before read the same.
func TestConfig_snapshotLayout(t *testing.T) {
	flat := map[string]any{"Name": "Shop", "NegativeLimit": int64(-5000), "IPAllowlist": []string{"10.0.0.0/8"},
		"CallbackURL": "https://shop.example/cb", "HostedPage": true, "DepositTTLSeconds": int64(600), "RateLimit": int64(7),
		"AppKey": "ak", "Secret": "sec", "CreatedAt": int64(1)}
	b, err := msgpack.Marshal(flat)
	require.NoError(t, err)
	var c Config
	require.NoError(t, msgpack.Unmarshal(b, &c))
	want := Config{Settings: Settings{Name: "Shop", NegativeLimit: -5000, IPAllowlist: []string{"10.0.0.0/8"},
		CallbackURL: "https://shop.example/cb", HostedPage: true, DepositTTLSeconds: 600, RateLimit: 7},
		AppKey: "ak", Secret: "sec", CreatedAt: 1}
	assert.Equal(t, want, c)

	b, err = msgpack.Marshal(&want)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, msgpack.Unmarshal(b, &back))
	for k := range flat {
		assert.Contains(t, back, k, "stored at the top level of the Config")
	}
	assert.NotContains(t, back, "Settings")
}
