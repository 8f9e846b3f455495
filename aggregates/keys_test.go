package aggregates

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates/recipient"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Request hashes stand for the SHA-256 of two different bodies.
const (
	hashA = "aaaa"
	hashB = "bbbb"
)

// keyedSite creates the site key derives, with key and hashA.
func keyedSite(t *testing.T, key string) *fixture {
	t.Helper()
	s := NewSite(ids.SiteForKey(key))
	d, err := s.Decide(CreateSite{AppKey: "ak", Secret: "sec", WebhookSecret: "whsec_x", Settings: SiteSettings{Name: ptr("Keyed"),
		NegativeLimit: ptr(int64(-100))}, IdempotencyKey: key, RequestHash: hashA}, t0, operator)
	require.NoError(t, err)
	commitEvents(t, s, d.Events)
	return &fixture{t: t, s: s, bank: testBank("b1", "ZAIN", recipient.Phone, 1), now: t0}
}

func TestCheckIdempotencyKey(t *testing.T) {
	for _, ok := range []string{"k", "retry 1", "~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./", strings.Repeat("k", 255)} {
		assert.NoError(t, CheckIdempotencyKey(ok), "%q", ok)
	}
	for _, bad := range []string{"", strings.Repeat("k", 256), "a\tb", "a\nb", "a\x00b", "a\x7fb", "ключ", "é"} {
		err := CheckIdempotencyKey(bad)
		var fe *FieldError
		require.ErrorAs(t, err, &fe, "%q", bad)
		assert.Equal(t, "Idempotency-Key", fe.Field)
		assert.ErrorIs(t, err, ErrInvalidRequest)
	}
}

func TestCreateSite_idempotencyKey(t *testing.T) {
	const key = "create-1"
	t.Run("unseen key creates the site with the key in a v2 event", func(t *testing.T) {
		s := NewSite(ids.SiteForKey(key))
		d, err := s.Decide(CreateSite{AppKey: "ak", Secret: "sec", Settings: SiteSettings{Name: ptr("Keyed")},
			IdempotencyKey: key, RequestHash: hashA}, t0, operator)
		require.NoError(t, err)
		require.Len(t, d.Events, 1)
		assert.Equal(t, "site.created.v2", d.Events[0].Name)
		p := d.Events[0].Payload.(*events.SiteCreated)
		assert.Equal(t, key, p.IdempotencyKey)
		assert.Equal(t, hashA, p.RequestHash)
		commitEvents(t, s, d.Events)
		assert.Same(t, s.Cfg, s.CreatedAs())
		assert.Equal(t, key, s.Cfg.IdempotencyKey)
	})
	t.Run("unkeyed creation keeps no answer", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		assert.Nil(t, f.s.CreatedAs())
	})

	tests := []struct {
		name string
		// site makes the existing site.
		site func(t *testing.T) *fixture
		cmd  CreateSite
		// want is nil for a repeat.
		want  error
		field string
	}{
		{"same key and body: a repeat", func(t *testing.T) *fixture { return keyedSite(t, key) },
			CreateSite{AppKey: "ak2", Secret: "other", Settings: SiteSettings{Name: ptr("Keyed")}, IdempotencyKey: key, RequestHash: hashA}, nil, ""},
		{"same key, another body", func(t *testing.T) *fixture { return keyedSite(t, key) },
			CreateSite{Settings: SiteSettings{Name: ptr("Other")}, IdempotencyKey: key, RequestHash: hashB}, ErrIdempotencyConflict, "Idempotency-Key"},
		{"same key, another body that is invalid", func(t *testing.T) *fixture { return keyedSite(t, key) },
			CreateSite{Settings: SiteSettings{}, IdempotencyKey: key, RequestHash: hashB}, ErrIdempotencyConflict, "Idempotency-Key"},
		{"the site at the key's id was created without a key", func(t *testing.T) *fixture {
			s := NewSite(ids.SiteForKey(key))
			d, err := s.Decide(CreateSite{Settings: SiteSettings{Name: ptr("Plain")}}, t0, operator)
			require.NoError(t, err)
			commitEvents(t, s, d.Events)
			return &fixture{t: t, s: s}
		}, CreateSite{Settings: SiteSettings{Name: ptr("Plain")}, IdempotencyKey: key, RequestHash: hashA}, ErrIdempotencyConflict, "Idempotency-Key"},
		{"a keyed site, created again without a key", func(t *testing.T) *fixture { return keyedSite(t, key) },
			CreateSite{Settings: SiteSettings{Name: ptr("Keyed")}}, ErrSiteExists, ""},
		{"invalid key", func(t *testing.T) *fixture { return keyedSite(t, key) },
			CreateSite{Settings: SiteSettings{Name: ptr("Keyed")}, IdempotencyKey: "a\nb", RequestHash: hashA}, ErrInvalidRequest, "Idempotency-Key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.site(t)
			before := observe(f.s)
			d, err := f.try(tc.cmd)
			if tc.want == nil {
				require.NoError(t, err)
				assert.True(t, d.Repeat)
				assert.Empty(t, d.Events)
				assert.Equal(t, int32(-1), d.Tx)
			} else {
				requireErr(t, d, err, tc.want, tc.field)
			}
			assert.Equal(t, before, observe(f.s))
		})
	}

	t.Run("a repeat answers the settings as created", func(t *testing.T) {
		f := keyedSite(t, key)
		created := *f.s.Cfg
		f.do(UpdateSite{Settings: SiteSettings{Name: ptr("Renamed"), NegativeLimit: ptr(int64(-5))}})
		f.do(RotateSecret{Secret: "sec2", Overlap: time.Hour})
		f.do(RotateSecret{Webhook: true, Secret: "whsec_2", Overlap: time.Hour})
		d, err := f.try(CreateSite{Settings: SiteSettings{Name: ptr("Keyed")}, IdempotencyKey: key, RequestHash: hashA})
		require.NoError(t, err)
		assert.True(t, d.Repeat)
		assert.Equal(t, created, *f.s.CreatedAs())
		assert.Equal(t, "Renamed", f.s.Cfg.Name)
		assert.Equal(t, key, f.s.Cfg.IdempotencyKey, "updates keep the creation's key")
	})
	t.Run("a keyed site must be at the id its key derives", func(t *testing.T) {
		s := NewSite(siteID)
		d, err := s.Decide(CreateSite{Settings: SiteSettings{Name: ptr("Keyed")}, IdempotencyKey: key, RequestHash: hashA}, t0, operator)
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrInvalidRequest, "a caller's bug, not the request's")
		assert.Empty(t, d.Events)
	})
	t.Run("a key needs a request hash", func(t *testing.T) {
		s := NewSite(ids.SiteForKey(key))
		d, err := s.Decide(CreateSite{Settings: SiteSettings{Name: ptr("Keyed")}, IdempotencyKey: key}, t0, operator)
		requireErr(t, d, err, ErrInvalidRequest, "")
	})
}

func TestAdjustTreasury_idempotencyKey(t *testing.T) {
	adj := func(amount int64, key, hash string) AdjustTreasury {
		return AdjustTreasury{Amount: amount, Reason: "top-up", IdempotencyKey: key, RequestHash: hash}
	}
	t.Run("unseen key moves the treasury once and keeps the answer", func(t *testing.T) {
		f := newFixture(t, SiteSettings{NegativeLimit: ptr(int64(-1000))})
		f.withdrawFunded(t)
		d := f.do(adj(5000, "k1", hashA))
		require.Len(t, d.Events, 1)
		assert.Equal(t, "treasury.adjusted.v3", d.Events[0].Name)
		assert.Equal(t, &events.TreasuryAdjusted{Amount: 5000, Reason: "top-up", IdempotencyKey: "k1", RequestHash: hashA}, d.Events[0].Payload)
		a, ok := f.s.KeyedAdjustment("k1")
		require.True(t, ok)
		assert.Equal(t, AdjustmentAnswer{RequestHash: hashA, Balance: 5300, PendingWithdrawals: 300, NegativeLimit: -1000}, a)
		assert.Equal(t, int64(5300-300+1000), a.Available())
		assert.Equal(t, f.s.Available(), a.Available())
	})
	t.Run("unkeyed adjustments keep nothing", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		f.do(adj(5000, "", ""))
		assert.Nil(t, f.s.adjusted)
	})

	tests := []struct {
		name  string
		cmd   AdjustTreasury
		want  error
		field string
	}{
		{"same key and body: a repeat", adj(5000, "k1", hashA), nil, ""},
		{"same key, another body", adj(7000, "k1", hashB), ErrIdempotencyConflict, "Idempotency-Key"},
		{"same key, another body that is invalid", adj(0, "k1", hashB), ErrIdempotencyConflict, "Idempotency-Key"},
		{"invalid key", adj(5000, strings.Repeat("k", 256), hashA), ErrInvalidRequest, "Idempotency-Key"},
		{"control character in the key", adj(5000, "k\x01", hashA), ErrInvalidRequest, "Idempotency-Key"},
		{"a key without a request hash", adj(5000, "k1", ""), ErrInvalidRequest, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.do(adj(5000, "k1", hashA))
			// Later changes do not change the first answer.
			f.do(adj(-200, "k2", hashA))
			f.do(UpdateSite{Settings: SiteSettings{NegativeLimit: ptr(int64(-9))}})
			first, _ := f.s.KeyedAdjustment("k1")
			before := observe(f.s)
			d, err := f.try(tc.cmd)
			if tc.want == nil {
				require.NoError(t, err)
				assert.True(t, d.Repeat)
				assert.Empty(t, d.Events)
				assert.Equal(t, int32(-1), d.Tx)
			} else {
				requireErr(t, d, err, tc.want, tc.field)
			}
			assert.Equal(t, before, observe(f.s))
			again, _ := f.s.KeyedAdjustment("k1")
			assert.Equal(t, first, again)
			assert.Equal(t, AdjustmentAnswer{RequestHash: hashA, Balance: 5000}, again)
		})
	}

	t.Run("a repeat in the same batch writes nothing", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		f.s.Begin()
		d1, err := f.try(adj(5000, "k1", hashA))
		require.NoError(t, err)
		for _, e := range d1.Events {
			f.s.Apply(e)
		}
		d2, err := f.try(adj(5000, "k1", hashA))
		require.NoError(t, err)
		assert.True(t, d2.Repeat)
		assert.Empty(t, d2.Events)
		_, err = f.try(adj(5000, "k1", hashB))
		assert.ErrorIs(t, err, ErrIdempotencyConflict)
		f.s.Rollback()
		_, ok := f.s.KeyedAdjustment("k1")
		assert.False(t, ok, "a rolled back batch leaves no key behind")
		d3, err := f.try(adj(5000, "k1", hashA))
		require.NoError(t, err)
		assert.Len(t, d3.Events, 1, "and the key is unseen again")
	})
	t.Run("a history holding the key twice answers as it first did", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		ev := func(amount int64) events.Event {
			p := &events.TreasuryAdjusted{Amount: amount, Reason: "r", IdempotencyKey: "k1", RequestHash: hashA}
			return events.Event{Name: p.EventName(), Time: t0.UnixMilli(), Actor: operator, Payload: p}
		}
		commitEvents(t, f.s, []events.Event{ev(100), ev(100)})
		a, _ := f.s.KeyedAdjustment("k1")
		assert.Equal(t, int64(100), a.Balance)
		assert.Equal(t, int64(200), f.s.Balance, "the balance is what the events say")
	})
}

// withdrawFunded leaves the site with balance 300 and 300 pending.
func (f *fixture) withdrawFunded(t *testing.T) {
	t.Helper()
	f.fund(300)
	f.withdraw("w1", "u1", 300)
}

func TestRollback_keyedCreation(t *testing.T) {
	s := NewSite(ids.SiteForKey("k"))
	before := observe(s)
	s.Begin()
	d, err := s.Decide(CreateSite{Settings: SiteSettings{Name: ptr("K")}, IdempotencyKey: "k", RequestHash: hashA}, t0, operator)
	require.NoError(t, err)
	s.Apply(d.Events[0])
	require.NotNil(t, s.CreatedAs())
	s.Rollback()
	assert.Nil(t, s.CreatedAs())
	assert.Equal(t, before, observe(s))
}

// A history written before the keys (v1 names) still applies, and answers
// no repeat.
func TestApply_v1Events(t *testing.T) {
	id := ids.SiteForKey("k")
	v1 := []events.Event{
		{Name: events.SiteCreatedV1Name, Time: t0.UnixMilli(), Actor: operator,
			Payload: &events.SiteCreated{SiteID: string(id), Name: "Old", AppKey: "ak", Secret: "sec", NegativeLimit: -50}},
		{Name: events.TreasuryAdjustedV1Name, Time: t0.UnixMilli(), Actor: operator, Payload: &events.TreasuryAdjusted{Amount: 700, Reason: "opening"}},
	}
	data, _, err := events.Seal([32]byte{}, v1)
	require.NoError(t, err)
	evs, err := events.Decode(data)
	require.NoError(t, err)
	s := NewSite(id)
	require.NoError(t, s.ApplyMessage(1, evs))
	assert.Equal(t, "Old", s.Cfg.Name)
	assert.Equal(t, int64(700), s.Balance)
	assert.Nil(t, s.CreatedAs())
	assert.Nil(t, s.adjusted)

	d, err := s.Decide(CreateSite{Settings: SiteSettings{Name: ptr("Old")}, IdempotencyKey: "k", RequestHash: hashA}, t0, operator)
	requireErr(t, d, err, ErrIdempotencyConflict, "Idempotency-Key")
	d, err = s.Decide(AdjustTreasury{Amount: 1, Reason: "r", IdempotencyKey: "k", RequestHash: hashA}, t0, operator)
	require.NoError(t, err)
	assert.Equal(t, events.TreasuryAdjustedName, d.Events[0].Name, "writers emit v2 only")
}

func TestSnapshot_keepsIdempotencyKeys(t *testing.T) {
	f := keyedSite(t, "site-key")
	f.do(AdjustTreasury{Amount: 900, Reason: "r", IdempotencyKey: "k1", RequestHash: hashA})
	f.do(AdjustTreasury{Amount: -100, Reason: "r", IdempotencyKey: "k2", RequestHash: hashB})
	f.do(AdjustTreasury{Amount: 5, Reason: "unkeyed"})
	f.do(RotateSecret{Secret: "sec2", Overlap: time.Hour})

	b, err := f.s.MarshalSnapshot(posOf(f.s))
	require.NoError(t, err)
	s2, err := restoreSnapshot(UserKey, b)
	require.NoError(t, err)
	assert.Equal(t, observe(f.s), observe(s2))
	assert.Equal(t, "sec", s2.CreatedAs().Secret)
	assert.Equal(t, "sec2", s2.Cfg.Secret)

	for _, s := range []*Site{f.s, s2} {
		d, err := s.Decide(AdjustTreasury{Amount: 900, Reason: "r", IdempotencyKey: "k1", RequestHash: hashA}, t0, operator)
		require.NoError(t, err)
		assert.True(t, d.Repeat)
		_, err = s.Decide(AdjustTreasury{Amount: 900, Reason: "r", IdempotencyKey: "k2", RequestHash: hashA}, t0, operator)
		assert.ErrorIs(t, err, ErrIdempotencyConflict)
		d, err = s.Decide(CreateSite{Settings: SiteSettings{Name: ptr("Keyed")}, IdempotencyKey: "site-key", RequestHash: hashA}, t0, operator)
		require.NoError(t, err)
		assert.True(t, d.Repeat)
	}
	a, ok := s2.KeyedAdjustment("k2")
	require.True(t, ok)
	assert.Equal(t, AdjustmentAnswer{RequestHash: hashB, Balance: 800, NegativeLimit: -100}, a)
}

func TestDecideCreateBank_idempotencyKey(t *testing.T) {
	const key = "bank-1"
	keyed := func(hash string) CreateBank {
		cmd := validCreateBank()
		cmd.ID, cmd.IdempotencyKey, cmd.RequestHash = string(ids.BankForKey(key)), key, hash
		return cmd
	}
	t.Run("unseen key creates the method with the key in a v2 event", func(t *testing.T) {
		evs, err := evsOf(NewCatalog().Decide(keyed(hashA), t0, operator))
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.Equal(t, "bank.created.v2", evs[0].Name)
		p := evs[0].Payload.(*events.BankCreated)
		assert.Equal(t, key, p.IdempotencyKey)
		assert.Equal(t, hashA, p.RequestHash)
	})

	unkeyedAtID := validCreateBank()
	unkeyedAtID.ID = string(ids.BankForKey(key))
	unkeyedAtID.Code = "PLAIN"
	otherCode := keyed(hashA)
	otherCode.ID, otherCode.IdempotencyKey = string(ids.BankForKey("bank-2")), "bank-2"
	wrongID := keyed(hashA)
	wrongID.ID = "bk_other"
	tests := []struct {
		name     string
		existing []CreateBank
		cmd      CreateBank
		// want is nil for a repeat (no events, no error).
		want  error
		field string
	}{
		{"same key and body: a repeat, not a code that exists", []CreateBank{keyed(hashA)}, keyed(hashA), nil, ""},
		{"same key, another body", []CreateBank{keyed(hashA)}, keyed(hashB), ErrIdempotencyConflict, "Idempotency-Key"},
		{"the method at the key's _id was created without a key", []CreateBank{unkeyedAtID}, keyed(hashA), ErrIdempotencyConflict, "Idempotency-Key"},
		{"another key with a code that exists", []CreateBank{keyed(hashA)}, otherCode, ErrBankExists, "code"},
		{"invalid key", nil, func() CreateBank { c := keyed(hashA); c.IdempotencyKey = "\x00"; return c }(), ErrInvalidRequest, "Idempotency-Key"},
		{"a key without a request hash", nil, keyed(""), ErrInvalidRequest, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := catalogWith(t, tc.existing...)
			n := len(c.Banks())
			evs, err := evsOf(c.Decide(tc.cmd, t0, operator))
			assert.Empty(t, evs)
			if tc.want == nil {
				assert.NoError(t, err)
			} else {
				requireErr(t, Decision{}, err, tc.want, tc.field)
			}
			assert.Len(t, c.Banks(), n)
		})
	}
	t.Run("a keyed method must have the _id its key derives", func(t *testing.T) {
		_, err := evsOf(NewCatalog().Decide(wrongID, t0, operator))
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrInvalidRequest)
	})
	t.Run("a repeat answers the method as created", func(t *testing.T) {
		c := catalogWith(t, keyed(hashA))
		b, ok := c.Resolve(string(ids.BankForKey(key)))
		require.True(t, ok)
		assert.Same(t, b, b.AsCreated())
		evs, err := evsOf(c.Decide(UpdateBank{ID: b.ID, MaxAmount: ptr(int64(9_000_000)), Enabled: ptr(false)}, t0, operator))
		require.NoError(t, err)
		c.Apply(evs[0])
		now, _ := c.Resolve(b.ID)
		assert.False(t, now.Enabled)
		assert.Same(t, b, now.AsCreated())
		assert.True(t, now.AsCreated().Enabled)
		assert.Equal(t, int64(5_000_000), now.AsCreated().MaxAmount)
		evs, err = evsOf(c.Decide(keyed(hashA), t0, operator))
		assert.NoError(t, err)
		assert.Empty(t, evs)
	})
	t.Run("v1 methods decode without a key", func(t *testing.T) {
		cmd := validCreateBank()
		p := &events.BankCreated{BankID: cmd.ID, Code: cmd.Code, Name: cmd.Name, IdentifierKind: cmd.IdentifierKind,
			MinAmount: cmd.MinAmount, MaxAmount: cmd.MaxAmount, Deposit: true, Accounts: cmd.Accounts}
		data, _, err := events.Seal([32]byte{}, []events.Event{{Name: events.BankCreatedV1Name, Time: 1, Actor: operator, Payload: p}})
		require.NoError(t, err)
		evs, err := events.Decode(data)
		require.NoError(t, err)
		c := NewCatalog()
		c.Apply(evs[0])
		b, ok := c.Resolve(cmd.Code)
		require.True(t, ok)
		assert.Empty(t, b.IdempotencyKey)
		assert.Same(t, b, b.AsCreated())
	})
}
