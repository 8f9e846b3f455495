package aggregates

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// The hosted page's settings travel in site.page_updated, after
// site.created in the creation's message and alone or after site.updated
// in an update's, so that no shipped event changes shape.
func TestSitePage(t *testing.T) {
	names := func(d Decision) []string {
		var out []string
		for _, e := range d.Events {
			out = append(out, e.Name)
		}
		return out
	}
	f := newFixture(t, SiteSettings{ReturnURL: ptr("https://shop.example/back"), SupportContact: ptr("+964 770 000 0000")})
	assert.Equal(t, "https://shop.example/back", f.s.Cfg.ReturnURL)
	assert.Equal(t, "+964 770 000 0000", f.s.Cfg.SupportContact)

	d := f.do(UpdateSite{Settings: SiteSettings{SupportContact: ptr("help@shop.example")}})
	assert.Equal(t, []string{events.SitePageUpdatedName}, names(d))
	p := d.Events[0].Payload.(*events.SitePageUpdated)
	assert.Nil(t, p.ReturnURL, "unchanged")
	assert.Equal(t, "https://shop.example/back", f.s.Cfg.ReturnURL)
	assert.Equal(t, "help@shop.example", f.s.Cfg.SupportContact)

	d = f.do(UpdateSite{Settings: SiteSettings{RateLimit: ptr(int64(5)), ReturnURL: ptr("")}})
	assert.Equal(t, []string{events.SiteUpdatedName, events.SitePageUpdatedName}, names(d))
	assert.Equal(t, "", f.s.Cfg.ReturnURL, "removed")
	assert.Equal(t, int64(5), f.s.Cfg.RateLimit)

	d = f.do(UpdateSite{Settings: SiteSettings{Name: ptr("Renamed")}})
	assert.Equal(t, []string{events.SiteUpdatedName}, names(d))

	// A creation without them writes site.created alone.
	plain := NewSite(ids.SiteID("splain"))
	d, err := plain.Decide(CreateSite{Settings: SiteSettings{Name: ptr("Plain")}}, t0, operator)
	require.NoError(t, err)
	assert.Equal(t, []string{events.SiteCreatedName}, names(d))

	for _, tc := range []struct {
		name  string
		st    SiteSettings
		field string
	}{
		{"javascript URL", SiteSettings{ReturnURL: ptr("javascript:alert(1)")}, "returnUrl"},
		{"relative URL", SiteSettings{ReturnURL: ptr("/orders")}, "returnUrl"},
		{"ftp URL", SiteSettings{ReturnURL: ptr("ftp://shop.example/")}, "returnUrl"},
		{"user in URL", SiteSettings{ReturnURL: ptr("https://u:p@shop.example/")}, "returnUrl"},
		{"long URL", SiteSettings{ReturnURL: ptr("https://shop.example/" + strings.Repeat("a", 2048))}, "returnUrl"},
		{"blank contact", SiteSettings{SupportContact: ptr("   ")}, "supportContact"},
		{"control characters", SiteSettings{SupportContact: ptr("call\nme")}, "supportContact"},
		{"long contact", SiteSettings{SupportContact: ptr(strings.Repeat("x", 257))}, "supportContact"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.try(UpdateSite{Settings: tc.st})
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
			s := NewSite(ids.SiteID("sbad"))
			tc.st.Name = ptr("Bad")
			_, err = s.Decide(CreateSite{Settings: tc.st}, t0, operator)
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
		})
	}
}

// A keyed creation's repeat answers with the page settings it created the
// site with, not with a later change.
func TestSitePage_keyedCreation(t *testing.T) {
	const key = "create-page"
	s := NewSite(ids.SiteForKey(key))
	d, err := s.Decide(CreateSite{AppKey: "ak", Secret: "sec", Settings: SiteSettings{Name: ptr("Keyed"),
		ReturnURL: ptr("https://shop.example/a")}, IdempotencyKey: key, RequestHash: hashA}, t0, operator)
	require.NoError(t, err)
	require.Len(t, d.Events, 2)
	commitEvents(t, s, d.Events)
	assert.Equal(t, "https://shop.example/a", s.CreatedAs().ReturnURL)
	assert.Same(t, s.Cfg, s.CreatedAs())

	d, err = s.Decide(UpdateSite{Settings: SiteSettings{ReturnURL: ptr("https://shop.example/b")}}, t0, operator)
	require.NoError(t, err)
	commitEvents(t, s, d.Events)
	assert.Equal(t, "https://shop.example/b", s.Cfg.ReturnURL)
	assert.Equal(t, "https://shop.example/a", s.CreatedAs().ReturnURL, "the creation's answer")
}

// A sandbox site is one from its creation on; expiring a deposit before
// its time is for sandbox sites only.
func TestSandbox_site(t *testing.T) {
	sb := newFixture(t, SiteSettings{Sandbox: ptr(true)})
	assert.True(t, sb.s.Cfg.Sandbox)
	live := newFixture(t, SiteSettings{})
	assert.False(t, live.s.Cfg.Sandbox)
	for _, f := range []*fixture{sb, live} {
		_, err := f.try(UpdateSite{Settings: SiteSettings{Sandbox: ptr(false)}})
		var fe *FieldError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "sandbox", fe.Field)
	}
	for _, f := range []*fixture{sb, live} {
		i := f.deposit("d1", "u1", 5000)
		now := ExpireDeposit{TxID: ids.NewTx(f.s.ID, i), Now: true}
		_, err := f.try(ExpireDeposit{TxID: now.TxID})
		assert.ErrorIs(t, err, ErrNotDue, "not before its time")
		if f == live {
			_, err = f.try(now)
			assert.ErrorIs(t, err, ErrNotSandbox)
			continue
		}
		_, err = f.try(now)
		assert.ErrorIs(t, err, ErrSandboxTransaction, "only its merchant expires a deposit early")
		d, err := f.s.Decide(now, f.now, events.ActorMerchant)
		require.NoError(t, err)
		commitEvents(t, f.s, d.Events)
		assert.Equal(t, events.DepositExpiredName, d.Events[0].Name)
		assert.Equal(t, StatusExpired, f.s.Txs[i].Status)
	}
}

// A test callback is asked of a sandbox site's transaction, of its kind,
// and changes nothing.
func TestSandbox_callback(t *testing.T) {
	sb := newFixture(t, SiteSettings{Sandbox: ptr(true)})
	i := sb.deposit("d1", "u1", 5000)
	id := ids.NewTx(sb.s.ID, i)
	before := sb.s.Txs[i]
	d := sb.do(SandboxCallback{TxID: id, Type: "deposit.approved"})
	require.Len(t, d.Events, 1)
	p := d.Events[0].Payload.(*events.SandboxCallback)
	assert.Equal(t, "deposit.approved", p.Type)
	assert.Equal(t, string(id), p.TxID)
	assert.Equal(t, before.Status, sb.s.Txs[i].Status)
	assert.Equal(t, before.Amount, sb.s.Txs[i].Amount)
	for _, typ := range []string{"withdrawal.paid", "deposit.refunded", ""} {
		_, err := sb.try(SandboxCallback{TxID: id, Type: typ})
		var fe *FieldError
		require.ErrorAs(t, err, &fe, typ)
		assert.Equal(t, "type", fe.Field)
	}
	_, err := sb.try(SandboxCallback{TxID: ids.NewTx(sb.s.ID, 99), Type: "deposit.approved"})
	assert.ErrorIs(t, err, ErrNotFound)
	live := newFixture(t, SiteSettings{})
	j := live.deposit("d1", "u1", 5000)
	_, err = live.try(SandboxCallback{TxID: ids.NewTx(live.s.ID, j), Type: "deposit.approved"})
	assert.ErrorIs(t, err, ErrNotSandbox)
}

// An adjustment that takes the treasury below its negative limit needs
// allowBelowLimit, which its event records; one that stays above, or
// adds money, does not.
func TestAdjustTreasury_belowLimit(t *testing.T) {
	f := newFixture(t, SiteSettings{NegativeLimit: ptr(int64(-1000))})
	f.do(AdjustTreasury{Amount: 5000, Reason: "opening"})
	f.do(AdjustTreasury{Amount: -6000, Reason: "to the limit"}) // available 6000 → 0
	_, err := f.try(AdjustTreasury{Amount: -1, Reason: "one more"})
	assert.ErrorIs(t, err, ErrBelowLimit)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "amount", fe.Field)
	assert.Contains(t, fe.Msg, "1 IQD below its negative limit (available is 0)")
	d := f.do(AdjustTreasury{Amount: -1, Reason: "on purpose", AllowBelowLimit: true})
	assert.True(t, d.Events[0].Payload.(*events.TreasuryAdjusted).AllowBelowLimit)
	assert.Equal(t, int64(-1), f.s.Available())
	f.do(AdjustTreasury{Amount: 10, Reason: "a credit is always taken"})
}

// Aliases survive a snapshot, and a version 5 snapshot (before aliases)
// still loads.
func TestSnapshot_aliases(t *testing.T) {
	f := newFixture(t, SiteSettings{})
	first := f.deposit("p1", "u1", 5000)
	d := f.do(f.depReq("p2", "u1", 6000))
	require.True(t, d.AlreadyPending)
	b, err := f.s.MarshalSnapshot(posOf(f.s))
	require.NoError(t, err)
	got, _, err := UnmarshalSiteSnapshot(b)
	require.NoError(t, err)
	i, ok := got.ByAlias("p2")
	require.True(t, ok)
	assert.Equal(t, first, i)
	again, err := got.Decide(f.depReq("p2", "u1", 6000), f.now, operator)
	require.NoError(t, err)
	assert.True(t, again.AlreadyPending && again.Repeat)
	_, err = got.Decide(f.depReq("p2", "u1", 7000), f.now, operator)
	assert.ErrorIs(t, err, ErrProcessIDConflict, "another request under the alias")
	_, err = got.Decide(f.wdReq("p2", "u1", 1000), f.now, operator)
	assert.ErrorIs(t, err, ErrProcessIDConflict, "a withdrawal cannot take an alias")
}

// A sandbox site's transactions are moved by its merchant, never by an
// operator (paying a test withdrawal would send real money), and the
// merchant moves no live site's; expiry by the system is anybody's.
func TestSandbox_whoMoves(t *testing.T) {
	actions := func(f *fixture) map[string]Command {
		d := f.deposit("d1", "u1", 5000)
		f.do(AdjustTreasury{Amount: 100_000, Reason: "funds"})
		w := f.withdraw("w1", "u1", 5000)
		dep, wd := ids.NewTx(f.s.ID, d), ids.NewTx(f.s.ID, w)
		taken := ids.NewTx(f.s.ID, f.withdraw("w2", "u1", 5000))
		mover := operator
		if f.s.Cfg.Sandbox {
			mover = events.ActorMerchant
		}
		took, err := f.s.Decide(ProcessWithdrawal{TxID: taken}, f.now, mover)
		require.NoError(t, err)
		commitEvents(t, f.s, took.Events)
		return map[string]Command{
			"approve": ApproveDeposit{TxID: dep}, "reject deposit": RejectDeposit{TxID: dep, Reason: "no"},
			"take": ProcessWithdrawal{TxID: wd}, "pay": PayWithdrawal{TxID: taken, Reference: "r"},
			"reject withdrawal": RejectWithdrawal{TxID: wd, Reason: "no"},
		}
	}
	for _, c := range []struct {
		sandbox bool
		actor   string
		want    error
	}{
		{true, operator, ErrSandboxTransaction},
		{true, "admin", ErrSandboxTransaction},
		{true, events.ActorSystem, ErrSandboxTransaction},
		{true, events.ActorMerchant, nil},
		{false, events.ActorMerchant, ErrNotSandbox},
		{false, operator, nil},
	} {
		f := newFixture(t, SiteSettings{Sandbox: ptr(c.sandbox)})
		for name, cmd := range actions(f) {
			_, err := f.s.Decide(cmd, f.now, c.actor)
			if c.want == nil {
				assert.NoError(t, err, "%s by %s, sandbox %v", name, c.actor, c.sandbox)
			} else {
				assert.ErrorIs(t, err, c.want, "%s by %s, sandbox %v", name, c.actor, c.sandbox)
			}
		}
	}
	sb := newFixture(t, SiteSettings{Sandbox: ptr(true)})
	i := sb.deposit("d1", "u1", 5000)
	sb.now = sb.now.Add(time.Hour)
	_, err := sb.s.Decide(ExpireDeposit{TxID: ids.NewTx(sb.s.ID, i)}, sb.now, events.ActorSystem)
	assert.NoError(t, err, "a sandbox deposit expires in its time")
}
