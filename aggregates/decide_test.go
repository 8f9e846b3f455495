package aggregates

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates/recipient"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// t0 is the fixed clock every test starts from.
var t0 = time.Date(2025, time.March, 1, 10, 0, 0, 0, time.UTC)

const (
	siteID   = "s1"
	operator = "op-1"
)

func ptr[T any](v T) *T { return &v }

// testBank returns an enabled deposit+withdraw method with n recipient
// accounts named "acct-<i>" / "0770000000<i>".
func testBank(id, code string, kind recipient.Kind, n int) *Bank {
	b := &Bank{ID: id, Code: code, Name: events.LocalizedName{En: "Zain Cash " + code, Ar: "زين كاش"},
		IdentifierKind: kind, MinAmount: 1, MaxAmount: 10_000_000, Deposit: true, Withdraw: true, Enabled: true}
	for i := range n {
		b.Accounts = append(b.Accounts, events.Account{AccountName: fmt.Sprintf("acct-%d", i),
			AccountNumber: fmt.Sprintf("0770000000%d", i)})
	}
	return b
}

// positions is where each test site stands in its simulated stream: the
// position is the ledger's, not the aggregate's, so the tests keep it
// beside the site.
var positions sync.Map // *Site → events.Position

func posOf(s *Site) events.Position {
	p, _ := positions.Load(s)
	pos, _ := p.(events.Position)
	return pos
}

// commitEvents applies evs as one batch, the way the ledger does, as the
// next message of the site's simulated stream.
func commitEvents(t *testing.T, s *Site, evs []events.Event) {
	t.Helper()
	s.Begin()
	for _, e := range evs {
		s.Apply(e)
	}
	pos := posOf(s)
	_, _, err := events.Seal(pos.Hash, evs)
	require.NoError(t, err)
	next, err := pos.Next(pos.Seq+1, evs)
	require.NoError(t, err)
	s.Commit(next.Seq)
	positions.Store(s, next)
}

// fixture is a created site plus a PHONE method with three accounts and a
// movable clock.
type fixture struct {
	t    *testing.T
	s    *Site
	bank *Bank
	now  time.Time
}

func newFixture(t *testing.T, st SiteSettings) *fixture {
	t.Helper()
	if st.Name == nil {
		st.Name = ptr("Shop One")
	}
	s := NewSite(siteID)
	d, err := s.Decide(CreateSite{AppKey: "ak", Secret: "sec", WebhookSecret: "whsec_x", Settings: st}, t0, operator)
	require.NoError(t, err)
	commitEvents(t, s, d.Events)
	require.True(t, s.Created())
	return &fixture{t: t, s: s, bank: testBank("b1", "ZAIN", recipient.Phone, 3), now: t0}
}

// try decides cmd at f.now without applying it.
func (f *fixture) try(cmd Command) (Decision, error) {
	return f.s.Decide(cmd, f.now, operator)
}

// do decides cmd, requires success and commits its events.
func (f *fixture) do(cmd Command) Decision {
	f.t.Helper()
	d, err := f.try(cmd)
	require.NoError(f.t, err, "%T", cmd)
	if len(d.Events) > 0 {
		commitEvents(f.t, f.s, d.Events)
	}
	return d
}

func (f *fixture) depReq(pid, user string, amount int64) RequestDeposit {
	return RequestDeposit{Request: Request{ProcessID: pid, Amount: amount, UserID: user, UserName: user + "_nick",
		Name: "Ali Hassan", Bank: f.bank, BankRef: f.bank.Code}, Lang: "en"}
}

func (f *fixture) wdReq(pid, user string, amount int64) RequestWithdrawal {
	return RequestWithdrawal{Request: Request{ProcessID: pid, Amount: amount, UserID: user, UserName: user + "_nick",
		Name: "Ali Hassan", Bank: f.bank, BankRef: f.bank.Code}, AccountName: "Ali Hassan", IBAN: "07701234567"}
}

func (f *fixture) deposit(pid, user string, amount int64) int32 {
	f.t.Helper()
	d := f.do(f.depReq(pid, user, amount))
	require.Len(f.t, d.Events, 1)
	return d.Tx
}

func (f *fixture) withdraw(pid, user string, amount int64) int32 {
	f.t.Helper()
	d := f.do(f.wdReq(pid, user, amount))
	require.Len(f.t, d.Events, 1)
	return d.Tx
}

func (f *fixture) fund(amount int64) {
	f.t.Helper()
	f.do(AdjustTreasury{Amount: amount, Reason: "float"})
}

func tx(i int32) ids.TxID { return ids.NewTx(siteID, i) }

// siteState is every piece of a site's state, internal indexes included,
// so tests can check that a refused decision or a rollback changed nothing.
// The internal indexes are held as any so the comparison does not depend on
// their key types.
type siteState struct {
	Created       bool
	Cfg           Config
	Balance       int64
	Pending       int64
	Txs           []Tx
	ByProcess     any
	PendingByUser any
	Rotation      any
	Reasons       any
	PendingDeps   []int32
	// Adjusted and CreatedAs are what repeats of Idempotency-Keys are
	// answered with.
	Adjusted  map[string]AdjustmentAnswer
	CreatedAs *Config
}

func observe(s *Site) siteState {
	st := siteState{Created: s.Created(), Balance: s.Balance, Pending: s.PendingWithdrawals,
		Txs: slices.Clone(s.Txs), ByProcess: pidState(s), PendingByUser: pendingByUser(s),
		Reasons: maps.Clone(s.reasons), Rotation: dropZero(s.rotation), PendingDeps: pendingSet(s)}
	if s.Cfg != nil {
		st.Cfg = *s.Cfg
		st.Cfg.IPAllowlist = slices.Clone(s.Cfg.IPAllowlist)
	}
	if len(s.adjusted) > 0 {
		st.Adjusted = maps.Clone(s.adjusted)
	}
	if s.created != nil {
		c := *s.created
		c.IPAllowlist = slices.Clone(c.IPAllowlist)
		st.CreatedAs = &c
	}
	if st.Txs == nil {
		st.Txs = []Tx{}
	}
	return st
}

// pidState copies the processId index: arena contents and both maps.
func pidState(s *Site) any {
	return struct {
		Arena   []byte
		ByHash  map[uint64]int32
		Collide map[string]int32
	}{slices.Clone(s.pids.arena), maps.Clone(s.pids.byHash), maps.Clone(s.pids.collide)}
}

// pendingByUser maps each userId in the pending-deposit index to its
// deposit. Which of the two maps holds a user depends on the order users
// took their key, which a snapshot does not keep; what a decision sees is
// this mapping.
func pendingByUser(s *Site) map[string]int32 {
	out := map[string]int32{}
	for _, i := range s.pending.byKey {
		out[string(s.pids.user(s.Txs[i].PidOff))] = i
	}
	for u, i := range s.pending.collide {
		out[u] = i
	}
	return out
}

// pendingMaps copies both maps of the pending-deposit index as they are (a
// missing collision map and an empty one are the same).
func pendingMaps(s *Site) any {
	return struct {
		ByKey   map[uint64]int32
		Collide map[string]int32
	}{maps.Clone(s.pending.byKey), maps.Collect(maps.All(s.pending.collide))}
}

// dropZero copies m without its zero values: a zero rotation counter and a
// missing one pick the same account.
func dropZero[K, V comparable](m map[K]V) map[K]V {
	out := map[K]V{}
	var zero V
	for k, v := range m {
		if v != zero {
			out[k] = v
		}
	}
	return out
}

// pendingSet lists, sorted, the deposits PendingDeposits reports.
func pendingSet(s *Site) []int32 {
	out := []int32{}
	s.PendingDeposits(func(i int32, tx *Tx) { out = append(out, i) })
	slices.Sort(out)
	return out
}

// requireErr checks the error identity, the FieldError field (when field is
// not empty) and that the decision carries no events.
func requireErr(t *testing.T, d Decision, err error, want error, field string) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, want)
	assert.Empty(t, d.Events)
	assert.False(t, d.Repeat)
	assert.False(t, d.AlreadyPending)
	if field != "" {
		var fe *FieldError
		require.True(t, errors.As(err, &fe), "want *FieldError, got %T %v", err, err)
		assert.Equal(t, field, fe.Field)
		assert.NotEmpty(t, fe.Msg)
	}
}

// requireRefusedTransition checks a refused transition: explained, and
// blaming no field of the request (the transaction's status is to blame).
func requireRefusedTransition(t *testing.T, d Decision, err error) {
	t.Helper()
	requireErr(t, d, err, ErrInvalidTransition, "")
	var fe *FieldError
	require.True(t, errors.As(err, &fe), "want *FieldError, got %T %v", err, err)
	assert.Empty(t, fe.Field)
	assert.Contains(t, fe.Msg, "cannot ")
}

func eventNames(evs []events.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Name)
	}
	return out
}

// ---------------------------------------------------------------- site

func TestCreateSite(t *testing.T) {
	tests := []struct {
		name    string
		st      SiteSettings
		wantTTL int64
		check   func(t *testing.T, c *Config)
	}{
		{name: "defaults", st: SiteSettings{Name: ptr("Shop")}, wantTTL: 1800, check: func(t *testing.T, c *Config) {
			assert.Equal(t, int64(0), c.NegativeLimit)
			assert.Equal(t, "", c.CallbackURL)
			assert.False(t, c.HostedPage)
			assert.Equal(t, int64(0), c.RateLimit)
			assert.Nil(t, c.IPAllowlist)
		}},
		{name: "all settings", st: SiteSettings{Name: ptr("Shop"), NegativeLimit: ptr(int64(-500)),
			IPAllowlist: ptr([]string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32"}), CallbackURL: ptr("https://shop.example/cb"),
			HostedPage: ptr(true), DepositTTLSeconds: ptr(int64(900)), RateLimit: ptr(int64(20))},
			wantTTL: 900, check: func(t *testing.T, c *Config) {
				assert.Equal(t, int64(-500), c.NegativeLimit)
				assert.Equal(t, []string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32"}, c.IPAllowlist)
				assert.Equal(t, "https://shop.example/cb", c.CallbackURL)
				assert.True(t, c.HostedPage)
				assert.Equal(t, int64(20), c.RateLimit)
			}},
		{name: "boundary values", st: SiteSettings{Name: ptr("Shop"), NegativeLimit: ptr(int64(0)),
			DepositTTLSeconds: ptr(int64(60)), RateLimit: ptr(int64(1_000_000)), CallbackURL: ptr("")},
			wantTTL: 60, check: func(t *testing.T, c *Config) {
				assert.Equal(t, int64(1_000_000), c.RateLimit)
			}},
		{name: "max ttl", st: SiteSettings{Name: ptr("Shop"), DepositTTLSeconds: ptr(int64(604800))}, wantTTL: 604800},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSite(siteID)
			require.False(t, s.Created())
			d, err := s.Decide(CreateSite{AppKey: "ak1", Secret: "sec1", WebhookSecret: "whsec_1", Settings: tc.st}, t0, operator)
			require.NoError(t, err)
			assert.Equal(t, int32(-1), d.Tx)
			require.Len(t, d.Events, 1)
			e := d.Events[0]
			assert.Equal(t, events.SiteCreatedName, e.Name)
			assert.Equal(t, t0.UnixMilli(), e.Time)
			assert.Equal(t, operator, e.Actor)
			p, ok := e.Payload.(*events.SiteCreated)
			require.True(t, ok)
			assert.Equal(t, siteID, p.SiteID)
			assert.Equal(t, "Shop", p.Name)
			assert.Equal(t, "ak1", p.AppKey)
			assert.Equal(t, "sec1", p.Secret)
			assert.Equal(t, "whsec_1", p.WebhookSecret)
			assert.Equal(t, tc.wantTTL, p.DepositTTLSeconds)
			assert.False(t, s.Created(), "Decide must not change state")

			commitEvents(t, s, d.Events)
			require.True(t, s.Created())
			assert.Equal(t, "Shop", s.Cfg.Name)
			assert.Equal(t, "ak1", s.Cfg.AppKey)
			assert.Equal(t, "sec1", s.Cfg.Secret)
			assert.Equal(t, "whsec_1", s.Cfg.WebhookSecret)
			assert.Equal(t, tc.wantTTL, s.Cfg.DepositTTLSeconds)
			assert.Equal(t, t0.UnixMilli(), s.Cfg.CreatedAt)
			assert.Equal(t, uint64(1), posOf(s).Seq)
			assert.NotEqual(t, [32]byte{}, posOf(s).Hash)
			assert.Equal(t, int64(0), s.Balance)
			if tc.check != nil {
				tc.check(t, s.Cfg)
			}
		})
	}
}

// settingsErrors are invalid settings shared by CreateSite and UpdateSite.
var settingsErrors = []struct {
	name  string
	st    SiteSettings
	field string
}{
	{"empty name", SiteSettings{Name: ptr("")}, "name"},
	{"blank name", SiteSettings{Name: ptr("  \t")}, "name"},
	{"name too long", SiteSettings{Name: ptr(strings.Repeat("n", 257))}, "name"},
	{"positive negativeLimit", SiteSettings{NegativeLimit: ptr(int64(1))}, "negativeLimit"},
	{"huge negativeLimit", SiteSettings{NegativeLimit: ptr(int64(-(1 << 51)))}, "negativeLimit"},
	{"bad CIDR", SiteSettings{IPAllowlist: ptr([]string{"10.0.0.0/8", "10.0.0.0/33"})}, "ipAllowlist"},
	{"not an address", SiteSettings{IPAllowlist: ptr([]string{"shop.example"})}, "ipAllowlist"},
	{"empty allowlist entry", SiteSettings{IPAllowlist: ptr([]string{""})}, "ipAllowlist"},
	{"relative callback", SiteSettings{CallbackURL: ptr("/callback")}, "callbackUrl"},
	{"ftp callback", SiteSettings{CallbackURL: ptr("ftp://shop.example/cb")}, "callbackUrl"},
	{"callback without host", SiteSettings{CallbackURL: ptr("https://")}, "callbackUrl"},
	{"callback without scheme", SiteSettings{CallbackURL: ptr("shop.example/cb")}, "callbackUrl"},
	{"callback with credentials", SiteSettings{CallbackURL: ptr("https://u:p@shop.example/cb")}, "callbackUrl"},
	{"callback too long", SiteSettings{CallbackURL: ptr("https://shop.example/" + strings.Repeat("a", 2048))}, "callbackUrl"},
	{"callback port out of range", SiteSettings{CallbackURL: ptr("http://127.0.0.1:99999/")}, "callbackUrl"},
	{"callback port zero", SiteSettings{CallbackURL: ptr("https://shop.example:0/cb")}, "callbackUrl"},
	{"callback with a space", SiteSettings{CallbackURL: ptr("https://shop.example/ok k")}, "callbackUrl"},
	{"callback with only a port", SiteSettings{CallbackURL: ptr("https://:443/cb")}, "callbackUrl"},
	{"return URL with a space", SiteSettings{ReturnURL: ptr("https://shop.example/back to")}, "returnUrl"},
	{"callback with a zero-width space", SiteSettings{CallbackURL: ptr("https://shop.example/c\u200bb")}, "callbackUrl"},
	{"callback with a bidi override", SiteSettings{CallbackURL: ptr("https://shop.example/\u202ebc")}, "callbackUrl"},
	{"return URL with a control character", SiteSettings{ReturnURL: ptr("https://shop.example/\u0085")}, "returnUrl"},
	{"ttl too short", SiteSettings{DepositTTLSeconds: ptr(int64(59))}, "depositTtlSeconds"},
	{"ttl zero", SiteSettings{DepositTTLSeconds: ptr(int64(0))}, "depositTtlSeconds"},
	{"ttl too long", SiteSettings{DepositTTLSeconds: ptr(int64(604801))}, "depositTtlSeconds"},
	{"negative rateLimit", SiteSettings{RateLimit: ptr(int64(-1))}, "rateLimit"},
	{"rateLimit too high", SiteSettings{RateLimit: ptr(int64(1_000_001))}, "rateLimit"},
}

// TestWebURL_saysWhy: a refused URL is told what is wrong with it.
func TestWebURL_saysWhy(t *testing.T) {
	for raw, want := range map[string]string{
		"https://shop.example/" + strings.Repeat("a", 2048): "at most 2048 bytes",
		"https://shop.example/c\u200bb":                     "invisible characters",
		"ftp://shop.example/cb":                             "absolute http or https URL",
		"https://u:p@shop.example/cb":                       "user name or password",
		"https://shop.example:0/cb":                         "port from 1 to 65535",
		"https://shop.example:443/cb":                       "",
		"http://مثال.example/رد":                            "",
	} {
		assert.Equal(t, want != "", webURL(raw) != "", raw)
		assert.Contains(t, webURL(raw), want, raw)
	}
}

func TestCreateSiteValidation(t *testing.T) {
	t.Run("name missing", func(t *testing.T) {
		s := NewSite(siteID)
		d, err := s.Decide(CreateSite{Settings: SiteSettings{RateLimit: ptr(int64(1))}}, t0, operator)
		requireErr(t, d, err, ErrInvalidRequest, "name")
		assert.False(t, s.Created())
	})
	for _, tc := range settingsErrors {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			if st.Name == nil {
				st.Name = ptr("Shop")
			}
			s := NewSite(siteID)
			d, err := s.Decide(CreateSite{Settings: st}, t0, operator)
			requireErr(t, d, err, ErrInvalidRequest, tc.field)
			assert.Equal(t, int32(-1), d.Tx)
			assert.False(t, s.Created())
		})
	}
}

func TestCreateSiteTwice(t *testing.T) {
	f := newFixture(t, SiteSettings{})
	before := observe(f.s)
	d, err := f.try(CreateSite{Settings: SiteSettings{Name: ptr("Again")}})
	requireErr(t, d, err, ErrSiteExists, "")
	assert.Equal(t, before, observe(f.s))
	assert.Equal(t, "Shop One", f.s.Cfg.Name)
}

func TestCommandsOnMissingSite(t *testing.T) {
	b := testBank("b1", "ZAIN", recipient.Phone, 1)
	req := Request{ProcessID: "p1", Amount: 1000, UserID: "u1", UserName: "u", Name: "n", Bank: b, BankRef: "ZAIN"}
	cmds := []Command{
		UpdateSite{Settings: SiteSettings{Name: ptr("x")}},
		RotateSecret{Secret: "new", Overlap: time.Hour},
		RotateSecret{Webhook: true, Secret: "new", Overlap: time.Hour},
		AdjustTreasury{Amount: 100, Reason: "r"},
		RequestDeposit{Request: req},
		RequestWithdrawal{Request: req, AccountName: "a", IBAN: "07701234567"},
		ApproveDeposit{TxID: tx(0)},
		RejectDeposit{TxID: tx(0), Reason: "r"},
		ExpireDeposit{TxID: tx(0)},
		ProcessWithdrawal{TxID: tx(0)},
		PayWithdrawal{TxID: tx(0)},
		RejectWithdrawal{TxID: tx(0), Reason: "r"},
	}
	for _, cmd := range cmds {
		t.Run(fmt.Sprintf("%T", cmd), func(t *testing.T) {
			s := NewSite(siteID)
			d, err := s.Decide(cmd, t0, operator)
			requireErr(t, d, err, ErrSiteNotFound, "")
			assert.Equal(t, int32(-1), d.Tx)
		})
	}
}

func TestUpdateSite(t *testing.T) {
	base := SiteSettings{Name: ptr("Shop"), NegativeLimit: ptr(int64(-100)), IPAllowlist: ptr([]string{"10.0.0.1"}),
		CallbackURL: ptr("https://a.example/cb"), HostedPage: ptr(true), DepositTTLSeconds: ptr(int64(600)), RateLimit: ptr(int64(5))}
	baseCfg := Config{Settings: Settings{Name: "Shop", NegativeLimit: -100,
		IPAllowlist: []string{"10.0.0.1"}, CallbackURL: "https://a.example/cb", HostedPage: true, DepositTTLSeconds: 600,
		RateLimit: 5}, AppKey: "ak", Secret: "sec", WebhookSecret: "whsec_x", CreatedAt: t0.UnixMilli()}
	tests := []struct {
		name   string
		update SiteSettings
		want   func(c *Config)
	}{
		{"nothing", SiteSettings{}, func(c *Config) {}},
		{"name only", SiteSettings{Name: ptr("Renamed")}, func(c *Config) { c.Name = "Renamed" }},
		{"negativeLimit only", SiteSettings{NegativeLimit: ptr(int64(-2000))}, func(c *Config) { c.NegativeLimit = -2000 }},
		{"negativeLimit to zero", SiteSettings{NegativeLimit: ptr(int64(0))}, func(c *Config) { c.NegativeLimit = 0 }},
		{"allowlist only", SiteSettings{IPAllowlist: ptr([]string{"192.0.2.0/24"})}, func(c *Config) { c.IPAllowlist = []string{"192.0.2.0/24"} }},
		{"allowlist cleared", SiteSettings{IPAllowlist: ptr([]string{})}, func(c *Config) { c.IPAllowlist = []string{} }},
		{"callback only", SiteSettings{CallbackURL: ptr("http://b.example:8080/x")}, func(c *Config) { c.CallbackURL = "http://b.example:8080/x" }},
		{"callback cleared", SiteSettings{CallbackURL: ptr("")}, func(c *Config) { c.CallbackURL = "" }},
		{"hostedPage off", SiteSettings{HostedPage: ptr(false)}, func(c *Config) { c.HostedPage = false }},
		{"ttl only", SiteSettings{DepositTTLSeconds: ptr(int64(3600))}, func(c *Config) { c.DepositTTLSeconds = 3600 }},
		{"rateLimit to zero", SiteSettings{RateLimit: ptr(int64(0))}, func(c *Config) { c.RateLimit = 0 }},
		{"two fields", SiteSettings{Name: ptr("N2"), RateLimit: ptr(int64(9))}, func(c *Config) { c.Name, c.RateLimit = "N2", 9 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, base)
			require.Equal(t, baseCfg, *f.s.Cfg)
			old := f.s.Cfg
			f.now = t0.Add(time.Minute)
			d := f.do(UpdateSite{Settings: tc.update})
			require.Len(t, d.Events, 1)
			assert.Equal(t, events.SiteUpdatedName, d.Events[0].Name)
			p := d.Events[0].Payload.(*events.SiteUpdated)
			assert.Equal(t, tc.update.Name, p.Name)
			assert.Equal(t, tc.update.RateLimit, p.RateLimit)
			want := baseCfg
			want.IPAllowlist = slices.Clone(baseCfg.IPAllowlist)
			tc.want(&want)
			assert.Equal(t, want, *f.s.Cfg)
			// The published Config is replaced, never modified.
			assert.Equal(t, baseCfg, *old)
		})
	}
	for _, tc := range settingsErrors {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			f := newFixture(t, base)
			before := observe(f.s)
			d, err := f.try(UpdateSite{Settings: tc.st})
			requireErr(t, d, err, ErrInvalidRequest, tc.field)
			assert.Equal(t, before, observe(f.s))
		})
	}
}

func TestRotateSecret(t *testing.T) {
	tests := []struct {
		name      string
		cmd       RotateSecret
		wantEvent string
		check     func(t *testing.T, c *Config, now time.Time)
	}{
		{"signing secret", RotateSecret{Secret: "sec2", Overlap: 24 * time.Hour}, events.SiteSecretRotatedName,
			func(t *testing.T, c *Config, now time.Time) {
				assert.Equal(t, "sec2", c.Secret)
				assert.Equal(t, "sec", c.PrevSecret)
				assert.Equal(t, now.Add(24*time.Hour).UnixMilli(), c.PrevSecretUntil)
				assert.Equal(t, "whsec_x", c.WebhookSecret)
				assert.Equal(t, "", c.PrevWebhookSecret)
				assert.Equal(t, int64(0), c.PrevWebhookSecretUntil)
			}},
		{"signing secret without overlap", RotateSecret{Secret: "sec2"}, events.SiteSecretRotatedName,
			func(t *testing.T, c *Config, now time.Time) {
				assert.Equal(t, "sec2", c.Secret)
				assert.Equal(t, "sec", c.PrevSecret)
				assert.Equal(t, now.UnixMilli(), c.PrevSecretUntil)
			}},
		{"webhook secret", RotateSecret{Webhook: true, Secret: "whsec_y", Overlap: 90 * time.Second}, events.SiteWebhookSecretRotatedName,
			func(t *testing.T, c *Config, now time.Time) {
				assert.Equal(t, "whsec_y", c.WebhookSecret)
				assert.Equal(t, "whsec_x", c.PrevWebhookSecret)
				assert.Equal(t, now.Add(90*time.Second).UnixMilli(), c.PrevWebhookSecretUntil)
				assert.Equal(t, "sec", c.Secret)
				assert.Equal(t, "", c.PrevSecret)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.now = t0.Add(3 * time.Hour)
			d := f.do(tc.cmd)
			require.Len(t, d.Events, 1)
			assert.Equal(t, tc.wantEvent, d.Events[0].Name)
			tc.check(t, f.s.Cfg, f.now)
		})
	}
	t.Run("second rotation keeps only the latest previous", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		f.do(RotateSecret{Secret: "sec2", Overlap: time.Hour})
		f.now = t0.Add(2 * time.Hour)
		f.do(RotateSecret{Secret: "sec3", Overlap: time.Hour})
		assert.Equal(t, "sec3", f.s.Cfg.Secret)
		assert.Equal(t, "sec2", f.s.Cfg.PrevSecret)
		assert.Equal(t, t0.Add(3*time.Hour).UnixMilli(), f.s.Cfg.PrevSecretUntil)
	})
	for _, tc := range []struct {
		name string
		cmd  RotateSecret
	}{
		{"negative overlap", RotateSecret{Secret: "sec2", Overlap: -time.Second}},
		{"negative webhook overlap", RotateSecret{Webhook: true, Secret: "whsec_2", Overlap: -time.Second}},
		{"empty secret", RotateSecret{Overlap: time.Hour}},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			before := observe(f.s)
			d, err := f.try(tc.cmd)
			requireErr(t, d, err, ErrInvalidRequest, "")
			assert.Equal(t, before, observe(f.s))
		})
	}
}

func TestAdjustTreasury(t *testing.T) {
	tests := []struct {
		name    string
		amounts []int64
		want    int64
	}{
		{"credit", []int64{5000}, 5000},
		{"debit below zero", []int64{-700}, -700},
		{"credit then debit", []int64{5000, -1200}, 3800},
		{"largest", []int64{1 << 50}, 1 << 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			for _, a := range tc.amounts {
				below := f.s.Available()+a < 0
				d := f.do(AdjustTreasury{Amount: a, Reason: "top-up", AllowBelowLimit: below})
				require.Len(t, d.Events, 1)
				assert.Equal(t, events.TreasuryAdjustedName, d.Events[0].Name)
				assert.Equal(t, &events.TreasuryAdjusted{Amount: a, Reason: "top-up", AllowBelowLimit: below}, d.Events[0].Payload)
				assert.Equal(t, int32(-1), d.Tx)
			}
			assert.Equal(t, tc.want, f.s.Balance)
			assert.Equal(t, int64(0), f.s.PendingWithdrawals)
			assert.Empty(t, f.s.Txs)
		})
	}
	refused := []struct {
		name  string
		cmd   AdjustTreasury
		field string
	}{
		{"zero amount", AdjustTreasury{Amount: 0, Reason: "r"}, "amount"},
		{"too large", AdjustTreasury{Amount: 1<<50 + 1, Reason: "r"}, "amount"},
		{"too small", AdjustTreasury{Amount: -(1<<50 + 1), Reason: "r"}, "amount"},
		{"no reason", AdjustTreasury{Amount: 10}, "reason"},
		{"blank reason", AdjustTreasury{Amount: 10, Reason: " \n "}, "reason"},
		{"reason too long", AdjustTreasury{Amount: 10, Reason: strings.Repeat("r", 257)}, "reason"},
	}
	for _, tc := range refused {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.fund(100)
			before := observe(f.s)
			d, err := f.try(tc.cmd)
			requireErr(t, d, err, ErrInvalidRequest, tc.field)
			assert.Equal(t, before, observe(f.s))
			assert.Equal(t, int64(100), f.s.Balance)
		})
	}
}

// ---------------------------------------------------------------- deposits

func TestDepositRequested(t *testing.T) {
	tests := []struct {
		name       string
		hosted     bool
		lang       string
		bankName   events.LocalizedName
		wantLang   string
		wantName   string
		wantToken  string
		senderName string
	}{
		{"english", false, "en", events.LocalizedName{En: "Zain", Ar: "زين", Ku: "زەین"}, "en", "Zain", "", ""},
		{"arabic", false, "ar", events.LocalizedName{En: "Zain", Ar: "زين", Ku: "زەین"}, "ar", "زين", "", "Sender A"},
		{"kurdish upper case padded", false, " KU ", events.LocalizedName{En: "Zain", Ar: "زين", Ku: "زەین"}, "ku", "زەین", "", ""},
		{"kurdish falls back to english", false, "ku", events.LocalizedName{En: "Zain", Ar: "زين"}, "ku", "Zain", "", ""},
		{"unknown lang", false, "fr", events.LocalizedName{En: "Zain", Ar: "زين"}, "en", "Zain", "", ""},
		{"missing lang", false, "", events.LocalizedName{En: "Zain", Ar: "زين"}, "en", "Zain", "", ""},
		{"hosted page keeps token", true, "en", events.LocalizedName{En: "Zain"}, "en", "Zain", "tok123", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{HostedPage: ptr(tc.hosted)})
			f.bank.Name = tc.bankName
			f.now = t0.Add(5 * time.Minute)
			req := f.depReq("p1", "u1", 25000)
			req.Lang = tc.lang
			req.HostedToken = "tok123"
			req.SenderName = tc.senderName
			req.Name = "  Ali  Hassan-Jaber "
			d, err := f.try(req)
			require.NoError(t, err)
			assert.Equal(t, int32(0), d.Tx)
			assert.False(t, d.Repeat)
			assert.False(t, d.AlreadyPending)
			require.Len(t, d.Events, 1)
			e := d.Events[0]
			assert.Equal(t, events.DepositRequestedName, e.Name)
			assert.Equal(t, f.now.UnixMilli(), e.Time)
			assert.Equal(t, operator, e.Actor)
			assert.Equal(t, &events.DepositRequested{
				TxID: "s1-1", ProcessID: "p1", BankID: "b1", BankCode: "ZAIN", BankName: tc.wantName,
				IdentifierKind: "PHONE", Amount: 25000, UserID: "u1", UserName: "u1_nick", Name: "  Ali  Hassan-Jaber ",
				ConvertedName: "alihassanjaber", SenderName: tc.senderName, Lang: tc.wantLang, AccountName: "acct-0",
				AccountNumber: "07700000000", ExpiresAt: f.now.Add(1800 * time.Second).UnixMilli(), HostedToken: tc.wantToken,
			}, e.Payload)

			commitEvents(t, f.s, d.Events)
			require.Len(t, f.s.Txs, 1)
			got := f.s.Txs[0]
			assert.Equal(t, "p1", f.s.ProcessID(0))
			assert.Equal(t, KindDeposit, got.Kind)
			assert.Equal(t, StatusPending, got.Status)
			assert.Equal(t, uint16(0), got.EvIdx)
			assert.Equal(t, int64(25000), got.Amount)
			assert.Equal(t, int64(25000), got.Requested)
			assert.Equal(t, Fingerprint(KindDeposit, 25000, "b1", "u1"), got.Fingerprint)
			assert.Equal(t, f.now.Add(30*time.Minute).UnixMilli(), got.ExpiresAt)
			assert.Equal(t, f.now.UnixMilli(), got.UpdatedAt)
			assert.Equal(t, uint64(2), got.Seq)
			assert.Equal(t, []int32{0}, pendingSet(f.s))
			i, ok := f.s.ByProcessID("p1")
			assert.True(t, ok)
			assert.Equal(t, int32(0), i)
			i, ok = f.s.Lookup("s1-1")
			assert.True(t, ok)
			assert.Equal(t, int32(0), i)
			assert.Equal(t, int64(0), f.s.Balance, "a pending deposit does not credit")
			assert.Equal(t, "", f.s.Reason(0))
		})
	}
}

func TestDepositApprove(t *testing.T) {
	tests := []struct {
		name        string
		approve     int64
		wantAmount  int64
		wantBalance int64
	}{
		{"requested amount (0 means requested)", 0, 5000, 5000 + 100},
		{"requested amount given explicitly", 5000, 5000, 5000 + 100},
		{"less was received", 4500, 4500, 4500 + 100},
		{"more was received", 6200, 6200, 6200 + 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.fund(100)
			i := f.deposit("p1", "u1", 5000)
			f.now = t0.Add(10 * time.Minute)
			d := f.do(ApproveDeposit{TxID: tx(i), Amount: tc.approve})
			assert.Equal(t, i, d.Tx)
			require.Len(t, d.Events, 1)
			assert.Equal(t, events.DepositApprovedName, d.Events[0].Name)
			assert.Equal(t, &events.DepositApproved{TxID: "s1-1", Amount: tc.wantAmount, Requested: 5000}, d.Events[0].Payload)
			got := f.s.Txs[i]
			assert.Equal(t, StatusApproved, got.Status)
			assert.Equal(t, tc.wantAmount, got.Amount)
			assert.Equal(t, int64(5000), got.Requested)
			assert.Equal(t, tc.wantBalance, f.s.Balance)
			assert.Equal(t, int64(0), f.s.PendingWithdrawals)
			assert.Equal(t, f.now.UnixMilli(), got.UpdatedAt)
			assert.Empty(t, pendingSet(f.s))
			// The repeat keeps the original fingerprint (requested amount).
			d2, err := f.try(f.depReq("p1", "u1", 5000))
			require.NoError(t, err)
			assert.True(t, d2.Repeat)
		})
	}
	t.Run("more than twice the requested amount needs the admin role", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		i := f.deposit("p1", "u1", 5000)
		before := observe(f.s)
		for _, amt := range []int64{10001, 50000, 1 << 50} {
			d, err := f.try(ApproveDeposit{TxID: tx(i), Amount: amt})
			requireErr(t, d, err, ErrNeedsAdmin, "amount")
			assert.Equal(t, before, observe(f.s))
		}
		d := f.do(ApproveDeposit{TxID: tx(i), Amount: 50000, AnyAmount: true})
		assert.Equal(t, int64(50000), d.Events[0].Payload.(*events.DepositApproved).Amount)
		j := f.deposit("p2", "u2", 5000)
		f.do(ApproveDeposit{TxID: tx(j), Amount: 10000}) // twice: an operator's
		assert.Equal(t, int64(60000), f.s.Balance)
	})
	t.Run("negative amount refused", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		i := f.deposit("p1", "u1", 5000)
		before := observe(f.s)
		for _, amt := range []int64{-1, 1<<50 + 1} {
			d, err := f.try(ApproveDeposit{TxID: tx(i), Amount: amt})
			requireErr(t, d, err, ErrInvalidRequest, "amount")
		}
		assert.Equal(t, before, observe(f.s))
	})
}

func TestDepositReject(t *testing.T) {
	f := newFixture(t, SiteSettings{})
	f.fund(300)
	i := f.deposit("p1", "u1", 5000)
	before := observe(f.s)
	for _, r := range []string{"", "   ", strings.Repeat("x", 257)} {
		d, err := f.try(RejectDeposit{TxID: tx(i), Reason: r})
		requireErr(t, d, err, ErrInvalidRequest, "reason")
		assert.Equal(t, before, observe(f.s))
	}
	f.now = t0.Add(time.Minute)
	d := f.do(RejectDeposit{TxID: tx(i), Reason: "no transfer found"})
	require.Len(t, d.Events, 1)
	assert.Equal(t, &events.DepositRejected{TxID: "s1-1", Reason: "no transfer found"}, d.Events[0].Payload)
	assert.Equal(t, StatusRejected, f.s.Txs[i].Status)
	assert.Equal(t, "no transfer found", f.s.Reason(i))
	assert.Equal(t, int64(300), f.s.Balance)
	assert.Equal(t, int64(5000), f.s.Txs[i].Amount)
	assert.Empty(t, pendingSet(f.s))
}

func TestDepositExpire(t *testing.T) {
	tests := []struct {
		name    string
		after   time.Duration
		wantErr error
	}{
		{"right after creation", time.Second, ErrNotDue},
		{"1ms before expiresAt", 30*time.Minute - time.Millisecond, ErrNotDue},
		{"exactly at expiresAt", 30 * time.Minute, nil},
		{"after expiresAt", 2 * time.Hour, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			i := f.deposit("p1", "u1", 5000)
			f.now = t0.Add(tc.after)
			if tc.wantErr != nil {
				before := observe(f.s)
				d, err := f.try(ExpireDeposit{TxID: tx(i)})
				requireErr(t, d, err, tc.wantErr, "")
				assert.Equal(t, i, d.Tx)
				assert.Equal(t, before, observe(f.s))
				assert.Equal(t, StatusPending, f.s.Txs[i].Status)
				return
			}
			d := f.do(ExpireDeposit{TxID: tx(i)})
			require.Len(t, d.Events, 1)
			assert.Equal(t, events.DepositExpiredName, d.Events[0].Name)
			assert.Equal(t, &events.DepositExpired{TxID: "s1-1"}, d.Events[0].Payload)
			assert.Equal(t, StatusExpired, f.s.Txs[i].Status)
			assert.True(t, f.s.Txs[i].Status.Final())
			assert.Equal(t, int64(0), f.s.Balance)
			assert.Empty(t, pendingSet(f.s))

			// expired → approved: a late transfer still credits.
			f.now = f.now.Add(time.Hour)
			d = f.do(ApproveDeposit{TxID: tx(i)})
			assert.Equal(t, &events.DepositApproved{TxID: "s1-1", Amount: 5000, Requested: 5000}, d.Events[0].Payload)
			assert.Equal(t, StatusApproved, f.s.Txs[i].Status)
			assert.Equal(t, int64(5000), f.s.Balance)
		})
	}
	t.Run("approved past its expiry before the sweep", func(t *testing.T) {
		// The deposit expires first, by the system, as the sweep would
		// have made it: the merchant hears deposit.expired, then
		// deposit.approved, as for any late approval.
		f := newFixture(t, SiteSettings{})
		i := f.deposit("p1", "u1", 5000)
		f.now = t0.Add(30 * time.Minute)
		d := f.do(ApproveDeposit{TxID: tx(i)})
		require.Len(t, d.Events, 2)
		assert.Equal(t, &events.DepositExpired{TxID: "s1-1"}, d.Events[0].Payload)
		assert.Equal(t, events.ActorSystem, d.Events[0].Actor)
		assert.Equal(t, &events.DepositApproved{TxID: "s1-1", Amount: 5000, Requested: 5000}, d.Events[1].Payload)
		assert.Equal(t, operator, d.Events[1].Actor)
		assert.Equal(t, StatusApproved, f.s.Txs[i].Status)
		assert.Equal(t, int64(5000), f.s.Balance)
		// A millisecond before its expiry it is approved alone.
		j := f.deposit("p2", "u2", 5000)
		f.now = f.now.Add(30*time.Minute - time.Millisecond)
		require.Len(t, f.do(ApproveDeposit{TxID: tx(j)}).Events, 1)
	})
	t.Run("late approval with a different amount", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		i := f.deposit("p1", "u1", 5000)
		f.now = t0.Add(time.Hour)
		f.do(ExpireDeposit{TxID: tx(i)})
		f.do(ApproveDeposit{TxID: tx(i), Amount: 4000})
		assert.Equal(t, int64(4000), f.s.Txs[i].Amount)
		assert.Equal(t, int64(5000), f.s.Txs[i].Requested)
		assert.Equal(t, int64(4000), f.s.Balance)
	})
	t.Run("late approval leaves the user's new pending deposit alone", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		old := f.deposit("p1", "u1", 5000)
		f.now = t0.Add(time.Hour)
		d := f.do(f.depReq("p2", "u1", 7000)) // expires p1, creates p2
		require.Len(t, d.Events, 2)
		f.do(ApproveDeposit{TxID: tx(old)})
		assert.Equal(t, []int32{d.Tx}, pendingSet(f.s))
		d3, err := f.try(f.depReq("p3", "u1", 1000))
		require.NoError(t, err)
		assert.True(t, d3.AlreadyPending)
		assert.Equal(t, d.Tx, d3.Tx)
	})
}

// ---------------------------------------------------------------- withdrawals

func TestWithdrawalRequested(t *testing.T) {
	f := newFixture(t, SiteSettings{})
	f.fund(10000)
	f.now = t0.Add(time.Minute)
	req := f.wdReq("w1", "u1", 3000)
	req.Name = "Ali Hassan"
	d, err := f.try(req)
	require.NoError(t, err)
	assert.Equal(t, int32(0), d.Tx)
	require.Len(t, d.Events, 1)
	assert.Equal(t, events.WithdrawalRequestedName, d.Events[0].Name)
	assert.Equal(t, &events.WithdrawalRequested{TxID: "s1-1", ProcessID: "w1", BankID: "b1", BankCode: "ZAIN",
		IdentifierKind: "PHONE", Amount: 3000, UserID: "u1", UserName: "u1_nick", Name: "Ali Hassan",
		ConvertedName: "alihassan", AccountName: "Ali Hassan", IBAN: "07701234567"}, d.Events[0].Payload)
	commitEvents(t, f.s, d.Events)
	got := f.s.Txs[0]
	assert.Equal(t, "w1", f.s.ProcessID(0))
	assert.Equal(t, KindWithdrawal, got.Kind)
	assert.Equal(t, StatusPending, got.Status)
	assert.Equal(t, int64(3000), got.Amount)
	assert.Equal(t, int64(3000), got.Requested)
	assert.Equal(t, Fingerprint(KindWithdrawal, 3000, "b1", "u1"), got.Fingerprint)
	assert.Equal(t, int64(0), got.ExpiresAt)
	assert.Equal(t, f.now.UnixMilli(), got.UpdatedAt)
	assert.Equal(t, uint64(3), got.Seq)
	assert.Equal(t, int64(10000), f.s.Balance)
	assert.Equal(t, int64(3000), f.s.PendingWithdrawals)
	assert.Equal(t, int64(7000), f.s.Available())
	assert.Empty(t, pendingSet(f.s), "a withdrawal is not a pending deposit")
	assert.Empty(t, f.s.rotation, "withdrawals do not rotate deposit accounts")
}

func TestWithdrawalLifecycle(t *testing.T) {
	tests := []struct {
		name        string
		steps       func(f *fixture, i int32) []Decision
		wantStatus  Status
		wantBalance int64
		wantPending int64
		wantReason  string
		wantEvents  []string
	}{
		{"pending → processing", func(f *fixture, i int32) []Decision {
			return []Decision{f.do(ProcessWithdrawal{TxID: tx(i)})}
		}, StatusProcessing, 10000, 3000, "", []string{events.WithdrawalProcessingName}},
		{"pending → processing → paid", func(f *fixture, i int32) []Decision {
			return []Decision{f.do(ProcessWithdrawal{TxID: tx(i)}), f.do(PayWithdrawal{TxID: tx(i), Reference: "TRX-77"})}
		}, StatusPaid, 7000, 0, "TRX-77", []string{events.WithdrawalProcessingName, events.WithdrawalPaidName}},
		{"paid without reference", func(f *fixture, i int32) []Decision {
			return []Decision{f.do(ProcessWithdrawal{TxID: tx(i)}), f.do(PayWithdrawal{TxID: tx(i)})}
		}, StatusPaid, 7000, 0, "", []string{events.WithdrawalProcessingName, events.WithdrawalPaidName}},
		{"pending → rejected", func(f *fixture, i int32) []Decision {
			return []Decision{f.do(RejectWithdrawal{TxID: tx(i), Reason: "wrong wallet"})}
		}, StatusRejected, 10000, 0, "wrong wallet", []string{events.WithdrawalRejectedName}},
		{"processing → rejected", func(f *fixture, i int32) []Decision {
			return []Decision{f.do(ProcessWithdrawal{TxID: tx(i)}), f.do(RejectWithdrawal{TxID: tx(i), Reason: "wallet closed"})}
		}, StatusRejected, 10000, 0, "wallet closed", []string{events.WithdrawalProcessingName, events.WithdrawalRejectedName}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.fund(10000)
			i := f.withdraw("w1", "u1", 3000)
			other := f.withdraw("w2", "u2", 1000) // stays pending throughout
			require.Equal(t, int64(4000), f.s.PendingWithdrawals)
			f.now = t0.Add(time.Minute)
			ds := tc.steps(f, i)
			var names []string
			for _, d := range ds {
				assert.Equal(t, i, d.Tx)
				require.Len(t, d.Events, 1)
				names = append(names, d.Events[0].Name)
				assert.Equal(t, f.now.UnixMilli(), d.Events[0].Time)
			}
			assert.Equal(t, tc.wantEvents, names)
			assert.Equal(t, tc.wantStatus, f.s.Txs[i].Status)
			assert.Equal(t, tc.wantBalance, f.s.Balance)
			assert.Equal(t, tc.wantPending+1000, f.s.PendingWithdrawals)
			assert.Equal(t, tc.wantReason, f.s.Reason(i))
			assert.Equal(t, int64(3000), f.s.Txs[i].Amount)
			assert.Equal(t, f.now.UnixMilli(), f.s.Txs[i].UpdatedAt)
			assert.Equal(t, StatusPending, f.s.Txs[other].Status)
			assert.Equal(t, tc.wantBalance-(tc.wantPending+1000), f.s.Available())
		})
	}
	t.Run("payload of pay and reject", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		f.fund(10000)
		i := f.withdraw("w1", "u1", 3000)
		f.do(ProcessWithdrawal{TxID: tx(i)})
		d, err := f.try(PayWithdrawal{TxID: tx(i), Reference: "R1"})
		require.NoError(t, err)
		assert.Equal(t, &events.WithdrawalPaid{TxID: "s1-1", Reference: "R1"}, d.Events[0].Payload)
		d, err = f.try(RejectWithdrawal{TxID: tx(i), Reason: "nope"})
		require.NoError(t, err)
		assert.Equal(t, &events.WithdrawalRejected{TxID: "s1-1", Reason: "nope"}, d.Events[0].Payload)
		d, err = f.try(ProcessWithdrawal{TxID: tx(i)})
		requireRefusedTransition(t, d, err)
	})
	t.Run("refused inputs", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		f.fund(10000)
		i := f.withdraw("w1", "u1", 3000)
		for _, r := range []string{"", "\t", strings.Repeat("r", 257)} {
			d, err := f.try(RejectWithdrawal{TxID: tx(i), Reason: r})
			requireErr(t, d, err, ErrInvalidRequest, "reason")
		}
		f.do(ProcessWithdrawal{TxID: tx(i)})
		before := observe(f.s)
		d, err := f.try(PayWithdrawal{TxID: tx(i), Reference: strings.Repeat("r", 257)})
		requireErr(t, d, err, ErrInvalidRequest, "reference")
		assert.Equal(t, before, observe(f.s))
	})
}

// A rejection's reason, a payment's reference, an adjustment's reason and a
// site's name follow the rules of every other text (checkText): a NUL, an
// escape sequence or bytes that are not UTF-8 would go into records,
// callbacks and pages as they are. A reference may still be left out.
func TestReasonAndReferenceText(t *testing.T) {
	bad := []string{"a\x00b", "a\x1b[2Jb", "a\xffb", "a\x7fb", "no\ntransfer", "a\rb", "\xc3", "a\u0085b", "a\u009bb",
		"a\u2028b", "a\u2029b", "\ufffe", "a\uffffb", "a\ufdd0b", "a\U0001fffeb"}
	good := []string{"no transfer found", "لم يصل التحويل", `sender "Abu Ali" unknown`}
	f := newFixture(t, SiteSettings{})
	f.fund(100_000)
	dep := f.deposit("p1", "u1", 5000)
	pending := f.withdraw("w1", "u1", 3000)
	processing := f.withdraw("w2", "u2", 3000)
	f.do(ProcessWithdrawal{TxID: tx(processing)})
	before := observe(f.s)
	for _, v := range bad {
		for _, c := range []struct {
			cmd   Command
			field string
		}{
			{RejectDeposit{TxID: tx(dep), Reason: v}, "reason"},
			{RejectWithdrawal{TxID: tx(pending), Reason: v}, "reason"},
			{RejectWithdrawal{TxID: tx(processing), Reason: v}, "reason"},
			{PayWithdrawal{TxID: tx(processing), Reference: v}, "reference"},
			{AdjustTreasury{Amount: 1, Reason: v}, "reason"},
			{UpdateSite{Settings: SiteSettings{Name: &v}}, "name"},
		} {
			d, err := f.try(c.cmd)
			requireErr(t, d, err, ErrInvalidRequest, c.field)
			why := "must not hold control characters"
			if !utf8.ValidString(v) {
				why = "must be valid UTF-8 text"
			}
			assert.Contains(t, err.Error(), why, "%T %q", c.cmd, v)
		}
	}
	assert.Equal(t, before, observe(f.s))
	for _, v := range good {
		for _, cmd := range []Command{RejectDeposit{TxID: tx(dep), Reason: v}, RejectWithdrawal{TxID: tx(pending), Reason: v},
			PayWithdrawal{TxID: tx(processing), Reference: v}, PayWithdrawal{TxID: tx(processing)},
			AdjustTreasury{Amount: 1, Reason: v}, UpdateSite{Settings: SiteSettings{Name: &v}}} {
			_, err := f.try(cmd)
			assert.NoError(t, err, "%T %q", cmd, v)
		}
	}
	// A blank reference (it is optional) is no reference, not a
	// statusReason of spaces.
	for _, v := range []string{"  ", "\u200b", " \u3164 "} {
		d, err := f.try(PayWithdrawal{TxID: tx(processing), Reference: v})
		require.NoError(t, err, "%q", v)
		assert.Equal(t, &events.WithdrawalPaid{TxID: string(tx(processing)), Reference: ""}, d.Events[0].Payload, "%q", v)
	}
}

// ---------------------------------------------------------------- transitions

type txState string

const (
	depPending   txState = "deposit/pending"
	depApproved  txState = "deposit/approved"
	depRejected  txState = "deposit/rejected"
	depExpired   txState = "deposit/expired"
	wdPending    txState = "withdrawal/pending"
	wdProcessing txState = "withdrawal/processing"
	wdPaid       txState = "withdrawal/paid"
	wdRejected   txState = "withdrawal/rejected"
)

const (
	opApprove       = "approve"
	opRejectDep     = "rejectDeposit"
	opExpire        = "expire"
	opProcess       = "process"
	opPay           = "pay"
	opRejectWd      = "rejectWithdrawal"
	transitionAmt   = 2000
	transitionFund  = 10000
	transitionAfter = time.Hour
)

// setupState builds a fixture holding one transaction in state st at index 0
// and moves the clock past its expiry.
func setupState(t *testing.T, st txState) (*fixture, int32) {
	f := newFixture(t, SiteSettings{})
	f.fund(transitionFund)
	var i int32
	switch st {
	case depPending, depApproved, depRejected, depExpired:
		i = f.deposit("p1", "u1", transitionAmt)
	default:
		i = f.withdraw("p1", "u1", transitionAmt)
	}
	f.now = t0.Add(transitionAfter)
	switch st {
	case depApproved:
		f.do(ApproveDeposit{TxID: tx(i)})
	case depRejected:
		f.do(RejectDeposit{TxID: tx(i), Reason: "r"})
	case depExpired:
		f.do(ExpireDeposit{TxID: tx(i)})
	case wdProcessing:
		f.do(ProcessWithdrawal{TxID: tx(i)})
	case wdPaid:
		f.do(ProcessWithdrawal{TxID: tx(i)})
		f.do(PayWithdrawal{TxID: tx(i)})
	case wdRejected:
		f.do(RejectWithdrawal{TxID: tx(i), Reason: "r"})
	}
	return f, i
}

func opCommand(op string, id ids.TxID) Command {
	switch op {
	case opApprove:
		return ApproveDeposit{TxID: id}
	case opRejectDep:
		return RejectDeposit{TxID: id, Reason: "because"}
	case opExpire:
		return ExpireDeposit{TxID: id}
	case opProcess:
		return ProcessWithdrawal{TxID: id}
	case opPay:
		return PayWithdrawal{TxID: id, Reference: "ref"}
	default:
		return RejectWithdrawal{TxID: id, Reason: "because"}
	}
}

// TestTransitionMatrix tries every operator command on a transaction in every
// state: the moves of docs/merchant-api.md "States" succeed with the right event and effect,
// every other one is ErrInvalidTransition with no events and no change.
func TestTransitionMatrix(t *testing.T) {
	type outcome struct {
		event   string
		status  Status
		balance int64
		pending int64
	}
	allowed := map[txState]map[string]outcome{
		depPending: {
			opApprove:   {events.DepositApprovedName, StatusApproved, transitionFund + transitionAmt, 0},
			opRejectDep: {events.DepositRejectedName, StatusRejected, transitionFund, 0},
			opExpire:    {events.DepositExpiredName, StatusExpired, transitionFund, 0},
		},
		depExpired: {
			opApprove: {events.DepositApprovedName, StatusApproved, transitionFund + transitionAmt, 0},
		},
		wdPending: {
			opProcess:  {events.WithdrawalProcessingName, StatusProcessing, transitionFund, transitionAmt},
			opRejectWd: {events.WithdrawalRejectedName, StatusRejected, transitionFund, 0},
		},
		wdProcessing: {
			opPay:      {events.WithdrawalPaidName, StatusPaid, transitionFund - transitionAmt, 0},
			opRejectWd: {events.WithdrawalRejectedName, StatusRejected, transitionFund, 0},
		},
	}
	states := []txState{depPending, depApproved, depRejected, depExpired, wdPending, wdProcessing, wdPaid, wdRejected}
	ops := []string{opApprove, opRejectDep, opExpire, opProcess, opPay, opRejectWd}
	nAllowed, nRefused := 0, 0
	for _, st := range states {
		for _, op := range ops {
			t.Run(string(st)+"/"+op, func(t *testing.T) {
				f, i := setupState(t, st)
				if op != opExpire {
					// Before the expiry: an overdue pending deposit
					// approved expires first (a second event, tested
					// in TestDepositExpire).
					f.now = t0.Add(time.Minute)
				}
				want, ok := allowed[st][op]
				if ok {
					d := f.do(opCommand(op, tx(i)))
					assert.Equal(t, i, d.Tx)
					require.Len(t, d.Events, 1)
					assert.Equal(t, want.event, d.Events[0].Name)
					assert.Equal(t, operator, d.Events[0].Actor)
					assert.Equal(t, want.status, f.s.Txs[i].Status)
					assert.Equal(t, want.balance, f.s.Balance)
					assert.Equal(t, want.pending, f.s.PendingWithdrawals)
					assert.Empty(t, pendingSet(f.s))
					return
				}
				before := observe(f.s)
				d, err := f.try(opCommand(op, tx(i)))
				requireRefusedTransition(t, d, err)
				assert.Equal(t, i, d.Tx)
				assert.Equal(t, before, observe(f.s))
				// An action on the other kind says so, not that the
				// status is to blame.
				depOp := op == opApprove || op == opRejectDep || op == opExpire
				if isDep := f.s.Txs[i].Kind == KindDeposit; isDep != depOp {
					assert.Contains(t, err.Error(), "it is a "+f.s.Txs[i].Kind.String()+", not a ", op)
				} else {
					assert.Contains(t, err.Error(), " that is "+f.s.Txs[i].Status.String(), op)
				}
			})
			if _, ok := allowed[st][op]; ok {
				nAllowed++
			} else {
				nRefused++
			}
		}
	}
	assert.Equal(t, 8, nAllowed)
	assert.Equal(t, 40, nRefused)
}

func TestUnknownTransaction(t *testing.T) {
	unknown := []ids.TxID{"s1-3", "s1-z", "s2-1", "", "s1", "s1-", "-1", "s1-0", "s1-00", "s1-01", "s1-A", "garbage", "*-1", ">-1", "s1.x-1"}
	ops := []string{opApprove, opRejectDep, opExpire, opProcess, opPay, opRejectWd}
	for _, id := range unknown {
		for _, op := range ops {
			t.Run(fmt.Sprintf("%q/%s", id, op), func(t *testing.T) {
				f := newFixture(t, SiteSettings{})
				f.fund(10000)
				f.deposit("p1", "u1", 1000)
				f.withdraw("p2", "u2", 1000)
				before := observe(f.s)
				d, err := f.try(opCommand(op, id))
				requireErr(t, d, err, ErrNotFound, "")
				assert.Equal(t, int32(-1), d.Tx)
				assert.Equal(t, before, observe(f.s))
			})
		}
	}
}

// ---------------------------------------------------------------- treasury

func TestTreasuryRule(t *testing.T) {
	type step struct {
		withdraw int64
		reject   bool // reject the previous withdrawal
		process  bool // process the previous withdrawal
		pay      bool // process and pay the previous withdrawal
	}
	tests := []struct {
		name    string
		limit   int64
		balance int64
		before  []step
		amount  int64
		ok      bool
	}{
		{"1499 of 1000 with limit -500", -500, 1000, nil, 1499, true},
		{"1500 lands exactly on limit", -500, 1000, nil, 1500, false},
		{"1501 beyond limit", -500, 1000, nil, 1501, false},
		{"1 of 1000", -500, 1000, nil, 1, true},
		{"zero limit, zero balance, 1", 0, 0, nil, 1, false},
		{"zero limit, zero balance, 1000", 0, 0, nil, 1000, false},
		{"zero limit, 1000 balance, 999", 0, 1000, nil, 999, true},
		{"zero limit, 1000 balance, 1000", 0, 1000, nil, 1000, false},
		{"zero balance, limit -500, 499", -500, 0, nil, 499, true},
		{"zero balance, limit -500, 500", -500, 0, nil, 500, false},
		{"negative balance, 399", -500, -100, nil, 399, true},
		{"negative balance, 400", -500, -100, nil, 400, false},
		{"pending counts: 499 after 1000 pending", -500, 1000, []step{{withdraw: 1000}}, 499, true},
		{"pending counts: 500 after 1000 pending", -500, 1000, []step{{withdraw: 1000}}, 500, false},
		{"two pending", -500, 1000, []step{{withdraw: 700}, {withdraw: 700}}, 99, true},
		{"two pending, 100 refused", -500, 1000, []step{{withdraw: 700}, {withdraw: 700}}, 100, false},
		{"rejecting frees room", -500, 1000, []step{{withdraw: 1000}, {reject: true}}, 1499, true},
		{"rejecting frees only its room", -500, 1000, []step{{withdraw: 1000}, {reject: true}}, 1500, false},
		{"processing still reserves", -500, 1000, []step{{withdraw: 1000}, {process: true}}, 500, false},
		{"processing, 499", -500, 1000, []step{{withdraw: 1000}, {process: true}}, 499, true},
		{"paid moves reservation to balance", -500, 1000, []step{{withdraw: 1000}, {pay: true}}, 499, true},
		{"paid moves reservation to balance, 500", -500, 1000, []step{{withdraw: 1000}, {pay: true}}, 500, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{NegativeLimit: ptr(tc.limit)})
			if tc.balance != 0 {
				f.fund(tc.balance)
			}
			last := int32(-1)
			for k, st := range tc.before {
				switch {
				case st.withdraw > 0:
					last = f.withdraw(fmt.Sprintf("pre%d", k), "u0", st.withdraw)
				case st.reject:
					f.do(RejectWithdrawal{TxID: tx(last), Reason: "r"})
				case st.process:
					f.do(ProcessWithdrawal{TxID: tx(last)})
				case st.pay:
					f.do(ProcessWithdrawal{TxID: tx(last)})
					f.do(PayWithdrawal{TxID: tx(last)})
				}
			}
			before := observe(f.s)
			avail := f.s.Available()
			d, err := f.try(f.wdReq("w", "u1", tc.amount))
			if tc.ok {
				require.NoError(t, err)
				require.Len(t, d.Events, 1)
				commitEvents(t, f.s, d.Events)
				assert.Equal(t, before.Pending+tc.amount, f.s.PendingWithdrawals)
				assert.Equal(t, before.Balance, f.s.Balance)
				assert.Equal(t, avail-tc.amount, f.s.Available())
				assert.Greater(t, f.s.Balance-f.s.PendingWithdrawals, tc.limit)
				return
			}
			requireErr(t, d, err, ErrInsufficientBalance, "amount")
			assert.Equal(t, int32(-1), d.Tx)
			assert.Equal(t, before, observe(f.s))
			assert.LessOrEqual(t, avail, tc.amount)
		})
	}
	t.Run("deposits do not need room", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		f.deposit("p1", "u1", 5000)
		assert.Equal(t, int64(0), f.s.Available())
	})
}

// ---------------------------------------------------------------- idempotency

func TestProcessIDIdempotency(t *testing.T) {
	b2 := testBank("b2", "ASIA", recipient.Phone, 1)
	tests := []struct {
		name     string
		first    string // "deposit" or "withdrawal"
		approve  bool   // move the first on before the repeat
		repeat   func(f *fixture) Command
		conflict bool
	}{
		{"deposit same params", "deposit", false, func(f *fixture) Command { return f.depReq("p1", "u1", 5000) }, false},
		{"deposit same params, other names and lang", "deposit", false, func(f *fixture) Command {
			r := f.depReq("p1", "u1", 5000)
			r.UserName, r.Name, r.Lang, r.SenderName = "other", "Other Name", "ar", "S"
			return r
		}, false},
		{"deposit same params by code after approval", "deposit", true, func(f *fixture) Command { return f.depReq("p1", "u1", 5000) }, false},
		{"deposit different amount", "deposit", false, func(f *fixture) Command { return f.depReq("p1", "u1", 5001) }, true},
		{"deposit different bank", "deposit", false, func(f *fixture) Command {
			r := f.depReq("p1", "u1", 5000)
			r.Bank, r.BankRef = b2, "ASIA"
			return r
		}, true},
		{"deposit unknown bank", "deposit", false, func(f *fixture) Command {
			r := f.depReq("p1", "u1", 5000)
			r.Bank, r.BankRef = nil, "NOPE"
			return r
		}, true},
		{"deposit different user", "deposit", false, func(f *fixture) Command { return f.depReq("p1", "u2", 5000) }, true},
		{"deposit id sent as withdrawal", "deposit", false, func(f *fixture) Command { return f.wdReq("p1", "u1", 5000) }, true},
		{"withdrawal same params", "withdrawal", false, func(f *fixture) Command { return f.wdReq("p1", "u1", 5000) }, false},
		{"withdrawal same params, other account and iban", "withdrawal", false, func(f *fixture) Command {
			r := f.wdReq("p1", "u1", 5000)
			r.AccountName, r.IBAN = "Someone", "07709999999"
			return r
		}, false},
		{"withdrawal same params after approval", "withdrawal", true, func(f *fixture) Command { return f.wdReq("p1", "u1", 5000) }, false},
		{"withdrawal different amount", "withdrawal", false, func(f *fixture) Command { return f.wdReq("p1", "u1", 4999) }, true},
		{"withdrawal different bank", "withdrawal", false, func(f *fixture) Command {
			r := f.wdReq("p1", "u1", 5000)
			r.Bank = b2
			return r
		}, true},
		{"withdrawal different user", "withdrawal", false, func(f *fixture) Command { return f.wdReq("p1", "u9", 5000) }, true},
		{"withdrawal id sent as deposit", "withdrawal", false, func(f *fixture) Command { return f.depReq("p1", "u1", 5000) }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.fund(100000)
			f.deposit("p0", "u0", 1000) // the repeated one is not at index 0
			var i int32
			if tc.first == "deposit" {
				i = f.deposit("p1", "u1", 5000)
			} else {
				i = f.withdraw("p1", "u1", 5000)
			}
			require.Equal(t, int32(1), i)
			wantStatus := StatusPending
			if tc.approve {
				if tc.first == "deposit" {
					f.do(ApproveDeposit{TxID: tx(i), Amount: 4000})
					wantStatus = StatusApproved
				} else {
					f.do(ProcessWithdrawal{TxID: tx(i)})
					wantStatus = StatusProcessing
				}
			}
			before := observe(f.s)
			f.now = t0.Add(5 * time.Minute)
			d, err := f.try(tc.repeat(f))
			assert.Equal(t, before, observe(f.s))
			assert.Equal(t, i, d.Tx)
			if tc.conflict {
				requireErr(t, d, err, ErrProcessIDConflict, "processId")
				return
			}
			require.NoError(t, err)
			assert.True(t, d.Repeat)
			assert.False(t, d.AlreadyPending)
			assert.Empty(t, d.Events)
			assert.Equal(t, wantStatus, f.s.Txs[d.Tx].Status)
		})
	}
	t.Run("repeat skips validation that would now fail", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		f.fund(5000)
		i := f.withdraw("w1", "u1", 5000-1)
		// The treasury is now full, but the repeat answers the stored one.
		d, err := f.try(f.wdReq("w1", "u1", 4999))
		require.NoError(t, err)
		assert.True(t, d.Repeat)
		assert.Equal(t, i, d.Tx)
	})
}

// ---------------------------------------------------------------- alreadyPending

func TestAlreadyPending(t *testing.T) {
	tests := []struct {
		name string
		// close moves the first deposit out of pending (nil: leave pending).
		close func(f *fixture, i int32)
		// after is how long after t0 the second request arrives.
		after      time.Duration
		second     func(f *fixture) Command
		wantEvents []string // nil: AlreadyPending
	}{
		{"same user while pending", nil, time.Minute, func(f *fixture) Command { return f.depReq("p2", "u1", 9000) }, nil},
		{"same user, other bank, while pending", nil, time.Minute, func(f *fixture) Command {
			r := f.depReq("p2", "u1", 9000)
			r.Bank = testBank("b2", "ASIA", recipient.Phone, 1)
			return r
		}, nil},
		{"same user 1ms before expiry", nil, 30*time.Minute - time.Millisecond, func(f *fixture) Command { return f.depReq("p2", "u1", 9000) }, nil},
		{"other user", nil, time.Minute, func(f *fixture) Command { return f.depReq("p2", "u2", 9000) },
			[]string{events.DepositRequestedName}},
		{"after approval", func(f *fixture, i int32) { f.do(ApproveDeposit{TxID: tx(i)}) }, time.Minute,
			func(f *fixture) Command { return f.depReq("p2", "u1", 9000) }, []string{events.DepositRequestedName}},
		{"after rejection", func(f *fixture, i int32) { f.do(RejectDeposit{TxID: tx(i), Reason: "r"}) }, time.Minute,
			func(f *fixture) Command { return f.depReq("p2", "u1", 9000) }, []string{events.DepositRequestedName}},
		{"after expiry", func(f *fixture, i int32) {
			f.now = t0.Add(31 * time.Minute)
			f.do(ExpireDeposit{TxID: tx(i)})
		}, 32 * time.Minute, func(f *fixture) Command { return f.depReq("p2", "u1", 9000) }, []string{events.DepositRequestedName}},
		{"past expiry, not swept", nil, 45 * time.Minute, func(f *fixture) Command { return f.depReq("p2", "u1", 9000) },
			[]string{events.DepositExpiredName, events.DepositRequestedName}},
		{"exactly at expiry, not swept", nil, 30 * time.Minute, func(f *fixture) Command { return f.depReq("p2", "u1", 9000) },
			[]string{events.DepositExpiredName, events.DepositRequestedName}},
		{"withdrawal by same user is not blocked", nil, time.Minute, func(f *fixture) Command { return f.wdReq("w2", "u1", 9000) },
			[]string{events.WithdrawalRequestedName}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.fund(100000)
			first := f.deposit("p1", "u1", 5000)
			if tc.close != nil {
				tc.close(f, first)
			}
			f.now = t0.Add(tc.after)
			before := observe(f.s)
			cmd := tc.second(f)
			d, err := f.try(cmd)
			require.NoError(t, err)
			assert.False(t, d.Repeat)
			if tc.wantEvents == nil {
				assert.True(t, d.AlreadyPending)
				assert.Equal(t, first, d.Tx)
				// Only the second processId is recorded, as a name of
				// the pending deposit.
				require.Len(t, d.Events, 1)
				alias := d.Events[0].Payload.(*events.DepositAliasAdded)
				assert.Equal(t, "p2", alias.ProcessID)
				assert.Equal(t, string(ids.NewTx(f.s.ID, first)), alias.TxID)
				assert.Equal(t, before, observe(f.s))
				commitEvents(t, f.s, d.Events)
				_, ok := f.s.ByProcessID("p2")
				assert.False(t, ok, "no transaction of its own")
				i, ok := f.s.ByAlias("p2")
				assert.True(t, ok)
				assert.Equal(t, first, i)
				assert.Equal(t, []int32{first}, pendingSet(f.s))
				// A repeat of the request gets the same answer and
				// writes nothing.
				again, err := f.try(cmd)
				require.NoError(t, err)
				assert.True(t, again.AlreadyPending)
				assert.True(t, again.Repeat)
				assert.Equal(t, first, again.Tx)
				assert.Empty(t, again.Events)
				return
			}
			assert.False(t, d.AlreadyPending)
			assert.Equal(t, eventNames(d.Events), tc.wantEvents)
			if d.Events[0].Name == events.DepositExpiredName {
				assert.Equal(t, events.ActorSystem, d.Events[0].Actor, "an expiry is the system's doing, not the merchant's")
			}
			assert.Equal(t, int32(1), d.Tx)
			if len(tc.wantEvents) == 2 {
				assert.Equal(t, &events.DepositExpired{TxID: string(tx(first))}, d.Events[0].Payload)
				assert.Equal(t, f.now.UnixMilli(), d.Events[0].Time)
			}
			prev := f.s.Txs[first].Status
			commitEvents(t, f.s, d.Events)
			require.Len(t, f.s.Txs, 2)
			assert.Equal(t, StatusPending, f.s.Txs[1].Status)
			assert.Equal(t, uint16(len(d.Events)-1), f.s.Txs[1].EvIdx)
			if len(tc.wantEvents) == 2 {
				assert.Equal(t, StatusExpired, f.s.Txs[first].Status)
				assert.Equal(t, []int32{1}, pendingSet(f.s))
			} else {
				assert.Equal(t, prev, f.s.Txs[first].Status)
			}
			wantPID := "p2"
			if _, ok := cmd.(RequestWithdrawal); ok {
				wantPID = "w2"
			}
			j, ok := f.s.ByProcessID(wantPID)
			assert.True(t, ok)
			assert.Equal(t, int32(1), j)
			assert.Equal(t, wantPID, f.s.ProcessID(1))
		})
	}
}

func TestPendingDeposits(t *testing.T) {
	f := newFixture(t, SiteSettings{})
	f.fund(100000)
	a := f.deposit("p1", "u1", 1000)
	b := f.deposit("p2", "u2", 2000)
	c := f.deposit("p3", "u3", 3000)
	f.withdraw("w1", "u4", 500)
	f.do(ApproveDeposit{TxID: tx(b)})
	got := map[int32]int64{}
	f.s.PendingDeposits(func(i int32, tx *Tx) { got[i] = tx.Amount })
	assert.Equal(t, map[int32]int64{a: 1000, c: 3000}, got)
}

// ---------------------------------------------------------------- expiry and rotation

func TestDepositExpiresAt(t *testing.T) {
	tests := []struct {
		name   string
		create *int64
		update *int64
		want   time.Duration
	}{
		{"default", nil, nil, 1800 * time.Second},
		{"custom minimum", ptr(int64(60)), nil, time.Minute},
		{"custom hour", ptr(int64(3600)), nil, time.Hour},
		{"custom week", ptr(int64(604800)), nil, 7 * 24 * time.Hour},
		{"updated later", nil, ptr(int64(900)), 15 * time.Minute},
		{"updated custom", ptr(int64(120)), ptr(int64(7200)), 2 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{DepositTTLSeconds: tc.create})
			if tc.update != nil {
				f.do(UpdateSite{Settings: SiteSettings{DepositTTLSeconds: tc.update}})
			}
			f.now = t0.Add(17*time.Minute + 250*time.Millisecond)
			d := f.do(f.depReq("p1", "u1", 1000))
			want := f.now.Add(tc.want).UnixMilli()
			assert.Equal(t, want, d.Events[0].Payload.(*events.DepositRequested).ExpiresAt)
			assert.Equal(t, want, f.s.Txs[d.Tx].ExpiresAt)
		})
	}
	t.Run("zero ttl in config falls back to default", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		cfg := *f.s.Cfg
		cfg.DepositTTLSeconds = 0 // e.g. a site created before the field existed
		f.s.Cfg = &cfg
		d := f.do(f.depReq("p1", "u1", 1000))
		assert.Equal(t, t0.Add(1800*time.Second).UnixMilli(), f.s.Txs[d.Tx].ExpiresAt)
	})
}

func TestAccountRotation(t *testing.T) {
	tests := []struct {
		name string
		// run performs requests and returns the account names shown.
		run  func(f *fixture) []string
		want []string
	}{
		{"round robin over three accounts", func(f *fixture) []string {
			var out []string
			for k := range 4 {
				d := f.do(f.depReq(fmt.Sprintf("p%d", k), fmt.Sprintf("u%d", k), 1000))
				out = append(out, d.Events[0].Payload.(*events.DepositRequested).AccountName)
			}
			return out
		}, []string{"acct-0", "acct-1", "acct-2", "acct-0"}},
		{"refused, repeated and already pending requests do not advance", func(f *fixture) []string {
			var out []string
			d := f.do(f.depReq("p0", "u0", 1000))
			out = append(out, d.Events[0].Payload.(*events.DepositRequested).AccountName)
			f.do(f.depReq("p0", "u0", 1000))          // repeat
			f.do(f.depReq("p9", "u0", 1000))          // already pending
			_, err := f.try(f.depReq("px", "", 1000)) // invalid
			require.Error(f.t, err)
			f.do(f.wdReq("w0", "u5", 10)) // withdrawal
			d = f.do(f.depReq("p1", "u1", 1000))
			out = append(out, d.Events[0].Payload.(*events.DepositRequested).AccountName)
			return out
		}, []string{"acct-0", "acct-1"}},
		{"each bank rotates on its own", func(f *fixture) []string {
			b2 := testBank("b2", "ASIA", recipient.Phone, 2)
			var out []string
			for k, b := range []*Bank{f.bank, b2, f.bank, b2, b2} {
				r := f.depReq(fmt.Sprintf("p%d", k), fmt.Sprintf("u%d", k), 1000)
				r.Bank = b
				d := f.do(r)
				p := d.Events[0].Payload.(*events.DepositRequested)
				out = append(out, p.BankCode+"/"+p.AccountName)
			}
			return out
		}, []string{"ZAIN/acct-0", "ASIA/acct-0", "ZAIN/acct-1", "ASIA/acct-1", "ASIA/acct-0"}},
		{"closing a deposit does not move rotation", func(f *fixture) []string {
			var out []string
			d := f.do(f.depReq("p0", "u0", 1000))
			out = append(out, d.Events[0].Payload.(*events.DepositRequested).AccountName)
			f.do(ApproveDeposit{TxID: tx(d.Tx)})
			d = f.do(f.depReq("p1", "u0", 1000))
			out = append(out, d.Events[0].Payload.(*events.DepositRequested).AccountName)
			return out
		}, []string{"acct-0", "acct-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.fund(100000)
			assert.Equal(t, tc.want, tc.run(f))
		})
	}
	t.Run("account number follows account", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		for k, want := range []string{"07700000000", "07700000001", "07700000002", "07700000000"} {
			d := f.do(f.depReq(fmt.Sprintf("p%d", k), fmt.Sprintf("u%d", k), 1000))
			assert.Equal(t, want, d.Events[0].Payload.(*events.DepositRequested).AccountNumber)
		}
		assert.Equal(t, uint64(4), f.s.rotation["b1"])
	})
}

// ---------------------------------------------------------------- validation

func TestRequestValidation(t *testing.T) {
	disabled := testBank("b3", "OFF", recipient.Phone, 1)
	disabled.Enabled = false
	withdrawOnly := testBank("b4", "WD", recipient.Phone, 0)
	withdrawOnly.Deposit = false
	depositOnly := testBank("b5", "DEP", recipient.Phone, 1)
	depositOnly.Withdraw = false
	ranged := testBank("b6", "RNG", recipient.Phone, 1)
	ranged.MinAmount, ranged.MaxAmount = 1000, 5000

	type mod func(r *Request)
	common := []struct {
		name  string
		mod   mod
		want  error
		field string
	}{
		{"missing processId", func(r *Request) { r.ProcessID = "" }, ErrInvalidRequest, "processId"},
		{"blank processId", func(r *Request) { r.ProcessID = "  " }, ErrInvalidRequest, "processId"},
		{"processId too long", func(r *Request) { r.ProcessID = strings.Repeat("p", 129) }, ErrInvalidRequest, "processId"},
		{"processId with newline", func(r *Request) { r.ProcessID = "p\n1" }, ErrInvalidRequest, "processId"},
		{"missing userId", func(r *Request) { r.UserID = "" }, ErrInvalidRequest, "userId"},
		{"userId with DEL", func(r *Request) { r.UserID = "u\x7f" }, ErrInvalidRequest, "userId"},
		{"missing userName", func(r *Request) { r.UserName = "" }, ErrInvalidRequest, "userName"},
		{"userName invalid utf-8", func(r *Request) { r.UserName = "a\xffb" }, ErrInvalidRequest, "userName"},
		{"missing name", func(r *Request) { r.Name = "" }, ErrInvalidRequest, "name"},
		{"name too long", func(r *Request) { r.Name = strings.Repeat("n", 257) }, ErrInvalidRequest, "name"},
		{"zero amount", func(r *Request) { r.Amount = 0 }, ErrInvalidRequest, "amount"},
		{"negative amount", func(r *Request) { r.Amount = -5 }, ErrInvalidRequest, "amount"},
		{"huge amount", func(r *Request) { r.Amount = 1<<50 + 1 }, ErrInvalidRequest, "amount"},
		{"unknown bank", func(r *Request) { r.Bank, r.BankRef = nil, "NOPE" }, ErrUnknownBank, "bankId"},
		{"disabled bank", func(r *Request) { r.Bank = disabled }, ErrUnknownBank, "bankId"},
		{"below min", func(r *Request) { r.Bank, r.Amount = ranged, 999 }, ErrAmountOutOfRange, "amount"},
		{"above max", func(r *Request) { r.Bank, r.Amount = ranged, 5001 }, ErrAmountOutOfRange, "amount"},
		{"processId checked before amount", func(r *Request) { r.ProcessID, r.Amount = "", 0 }, ErrInvalidRequest, "processId"},
		{"amount checked before bank", func(r *Request) { r.Bank, r.Amount = nil, 0 }, ErrInvalidRequest, "amount"},
	}
	run := func(t *testing.T, cmd Command, want error, field string) {
		f := newFixture(t, SiteSettings{})
		f.fund(100000)
		before := observe(f.s)
		d, err := f.try(cmd)
		requireErr(t, d, err, want, field)
		assert.Equal(t, int32(-1), d.Tx)
		assert.Equal(t, before, observe(f.s))
	}
	for _, tc := range common {
		t.Run("deposit/"+tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			r := f.depReq("p1", "u1", 2000)
			tc.mod(&r.Request)
			run(t, r, tc.want, tc.field)
		})
		t.Run("withdrawal/"+tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			r := f.wdReq("p1", "u1", 2000)
			tc.mod(&r.Request)
			run(t, r, tc.want, tc.field)
		})
	}
	kindSpecific := []struct {
		name  string
		cmd   func(f *fixture) Command
		want  error
		field string
	}{
		{"deposit on withdraw-only bank", func(f *fixture) Command {
			r := f.depReq("p1", "u1", 2000)
			r.Bank = withdrawOnly
			return r
		}, ErrUnknownBank, "bankId"},
		{"withdrawal on deposit-only bank", func(f *fixture) Command {
			r := f.wdReq("p1", "u1", 2000)
			r.Bank = depositOnly
			return r
		}, ErrUnknownBank, "bankId"},
		{"deposit bad senderName", func(f *fixture) Command {
			r := f.depReq("p1", "u1", 2000)
			r.SenderName = "a\tb"
			return r
		}, ErrInvalidRequest, "senderName"},
		{"withdrawal missing accountName", func(f *fixture) Command {
			r := f.wdReq("p1", "u1", 2000)
			r.AccountName = ""
			return r
		}, ErrInvalidRequest, "accountName"},
		{"withdrawal blank accountName", func(f *fixture) Command {
			r := f.wdReq("p1", "u1", 2000)
			r.AccountName = "   "
			return r
		}, ErrInvalidRequest, "accountName"},
		{"withdrawal missing iban", func(f *fixture) Command {
			r := f.wdReq("p1", "u1", 2000)
			r.IBAN = ""
			return r
		}, ErrInvalidRequest, "iban"},
		{"withdrawal validation before treasury", func(f *fixture) Command {
			r := f.wdReq("p1", "u1", 9_000_000)
			r.IBAN = "123"
			return r
		}, ErrInvalidIdentifier, "iban"},
	}
	for _, tc := range kindSpecific {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			run(t, tc.cmd(f), tc.want, tc.field)
		})
	}
	t.Run("bounds are inclusive", func(t *testing.T) {
		for _, amt := range []int64{1000, 5000} {
			f := newFixture(t, SiteSettings{})
			f.fund(100000)
			r := f.depReq("p1", "u1", amt)
			r.Bank = ranged
			f.do(r)
			w := f.wdReq("w1", "u1", amt)
			w.Bank = ranged
			f.do(w)
			assert.Len(t, f.s.Txs, 2)
		}
	})
}

func TestWithdrawalIdentifiers(t *testing.T) {
	const goodIBAN = "IQ98NBIQ850123456789012"
	tests := []struct {
		kind recipient.Kind
		id   string
		ok   bool
	}{
		{recipient.Phone, "07701234567", true},
		{recipient.Phone, "0770123456", false},
		{recipient.Phone, "077012345678", false},
		{recipient.Phone, "08701234567", false},
		{recipient.Phone, "+9647701234567", false},
		{recipient.Phone, "0770123456a", false},
		{recipient.Phone, " 07701234567", false},
		{recipient.CardNo, "1234567890", true},
		{recipient.CardNo, "1234567890123456789", true},
		{recipient.CardNo, "123456789", false},
		{recipient.CardNo, "12345678901234567890", false},
		{recipient.CardNo, "1234 5678 9012", false},
		{recipient.AccountNo, "123456", true},
		{recipient.AccountNo, "12345678901234567890", true},
		{recipient.AccountNo, "12345", false},
		{recipient.AccountNo, "123456789012345678901", false},
		{recipient.AccountNo, "12345a", false},
		{recipient.IBAN, goodIBAN, true},
		{recipient.IBAN, "IQ97NBIQ850123456789012", false},
		{recipient.IBAN, "iq98nbiq850123456789012", false},
		{recipient.IBAN, "IQ98 NBIQ 8501 2345 6789 012", false},
		{recipient.IBAN, "DE89370400440532013000", false},
		{recipient.IBAN, "07701234567", false},
		{recipient.Username, "ali.h_99-x", true},
		{recipient.Username, "abc", true},
		{recipient.Username, "ab", false},
		{recipient.Username, strings.Repeat("a", 65), false},
		{recipient.Username, "ali hassan", false},
		{recipient.Username, "علي", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%q", tc.kind, tc.id), func(t *testing.T) {
			f := newFixture(t, SiteSettings{})
			f.fund(100000)
			f.bank = testBank("bk", "K", tc.kind, 0)
			f.bank.Deposit = false
			r := f.wdReq("w1", "u1", 1000)
			r.IBAN = tc.id
			before := observe(f.s)
			d, err := f.try(r)
			if tc.ok {
				require.NoError(t, err)
				require.Len(t, d.Events, 1)
				p := d.Events[0].Payload.(*events.WithdrawalRequested)
				assert.Equal(t, tc.id, p.IBAN)
				assert.Equal(t, string(tc.kind), p.IdentifierKind)
				return
			}
			requireErr(t, d, err, ErrInvalidIdentifier, "iban")
			assert.NotErrorIs(t, err, ErrInvalidRequest)
			assert.Contains(t, err.Error(), string(tc.kind))
			assert.Equal(t, before, observe(f.s))
		})
	}
}

// ---------------------------------------------------------------- journal

func TestRollback(t *testing.T) {
	// Under this key u1, u2 and u7 share one user key: u1's pending
	// deposit is indexed by key, u2's by userId.
	colliding := collidingKey("u1", "u2", "u7")
	tests := []struct {
		name string
		// key, when set, is the site's userKey.
		key func(string) uint64
		// batch decides and applies commands inside Begin/Rollback.
		batch []func(f *fixture) Command
	}{
		{"deposit, withdrawal, approval", nil, []func(f *fixture) Command{
			func(f *fixture) Command { return f.depReq("n1", "u7", 3000) },
			func(f *fixture) Command { return f.wdReq("n2", "u8", 2000) },
			func(f *fixture) Command { return ApproveDeposit{TxID: tx(0), Amount: 900} },
		}},
		{"closing old transactions", nil, []func(f *fixture) Command{
			func(f *fixture) Command { return RejectDeposit{TxID: tx(1), Reason: "dup"} },
			func(f *fixture) Command { return PayWithdrawal{TxID: tx(3), Reference: "REF-NEW"} },
			func(f *fixture) Command { return RejectWithdrawal{TxID: tx(2), Reason: "bad wallet"} },
			func(f *fixture) Command { return ApproveDeposit{TxID: tx(4)} },
		}},
		{"new deposit approved in the same batch", nil, []func(f *fixture) Command{
			func(f *fixture) Command { return f.depReq("n1", "u7", 3000) },
			func(f *fixture) Command { return ApproveDeposit{TxID: tx(6)} },
			func(f *fixture) Command { return f.depReq("n2", "u7", 3000) },
			func(f *fixture) Command { return f.wdReq("n3", "u7", 100) },
			func(f *fixture) Command { return ProcessWithdrawal{TxID: tx(8)} },
		}},
		{"implicit expiry of a stale pending deposit", nil, []func(f *fixture) Command{
			func(f *fixture) Command { f.now = t0.Add(3 * time.Hour); return f.depReq("n1", "u1", 1234) },
			func(f *fixture) Command { return ApproveDeposit{TxID: tx(0)} },
		}},
		{"settings, secrets and treasury", nil, []func(f *fixture) Command{
			func(f *fixture) Command {
				return UpdateSite{Settings: SiteSettings{Name: ptr("X"), NegativeLimit: ptr(int64(-9000)), IPAllowlist: ptr([]string{"1.2.3.4"})}}
			},
			func(f *fixture) Command { return RotateSecret{Secret: "s9", Overlap: time.Hour} },
			func(f *fixture) Command { return RotateSecret{Webhook: true, Secret: "w9", Overlap: time.Hour} },
			func(f *fixture) Command { return AdjustTreasury{Amount: -777, Reason: "fee"} },
		}},
		{"keyed adjustments", nil, []func(f *fixture) Command{
			func(f *fixture) Command {
				return AdjustTreasury{Amount: 500, Reason: "r", IdempotencyKey: "k1", RequestHash: "h1"}
			},
			func(f *fixture) Command { return f.wdReq("n1", "u8", 2000) },
			func(f *fixture) Command {
				return AdjustTreasury{Amount: -5, Reason: "r", IdempotencyKey: "k2", RequestHash: "h2"}
			},
		}},
		{"first use of a new bank", nil, []func(f *fixture) Command{
			func(f *fixture) Command {
				r := f.depReq("n1", "u9", 1000)
				r.Bank = testBank("b2", "ASIA", recipient.Phone, 2)
				return r
			},
		}},
		{"colliding users: a third one's first deposit", colliding, []func(f *fixture) Command{
			func(f *fixture) Command { return f.depReq("n1", "u7", 3000) },
		}},
		{"colliding users: both indexes freed and taken again", colliding, []func(f *fixture) Command{
			func(f *fixture) Command { return ApproveDeposit{TxID: tx(0)} },
			func(f *fixture) Command { return RejectDeposit{TxID: tx(1), Reason: "no transfer"} },
			func(f *fixture) Command { return f.depReq("n1", "u7", 3000) },
			func(f *fixture) Command { return f.depReq("n2", "u2", 3000) },
			func(f *fixture) Command { return f.depReq("n3", "u1", 3000) },
			func(f *fixture) Command { return ApproveDeposit{TxID: tx(7)} },
		}},
		{"colliding users: stale deposits expired implicitly", colliding, []func(f *fixture) Command{
			func(f *fixture) Command { f.now = t0.Add(3 * time.Hour); return f.depReq("n1", "u2", 1234) },
			func(f *fixture) Command { return f.depReq("n2", "u1", 1234) },
			func(f *fixture) Command { return ApproveDeposit{TxID: tx(6)} },
			func(f *fixture) Command { return f.depReq("n3", "u2", 99) },
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, SiteSettings{IPAllowlist: ptr([]string{"10.0.0.0/8"})})
			if tc.key != nil {
				f.s.userKey = tc.key
			}
			f.fund(50000)
			f.deposit("p0", "u1", 5000)                                                    // 0 pending
			f.deposit("p1", "u2", 6000)                                                    // 1 pending
			f.withdraw("w0", "u3", 1000)                                                   // 2 pending
			f.withdraw("w1", "u4", 1500)                                                   // 3 processing
			f.do(ProcessWithdrawal{TxID: tx(3)})                                           //
			i := f.deposit("p2", "u5", 7000)                                               // 4 expired
			f.do(RejectDeposit{TxID: tx(f.deposit("p3", "u6", 10)), Reason: "old reason"}) // 5 rejected
			f.now = t0.Add(time.Hour)
			f.do(ExpireDeposit{TxID: tx(i)})

			before := observe(f.s)
			mapsBefore := pendingMaps(f.s)
			snapBefore := decodeSnapshot(t, f.s)
			cfgBefore := f.s.Cfg

			f.s.Begin()
			for _, mk := range tc.batch {
				d, err := f.s.Decide(mk(f), f.now, operator)
				require.NoError(t, err)
				require.NotEmpty(t, d.Events)
				for _, e := range d.Events {
					f.s.Apply(e)
				}
			}
			require.NotEqual(t, before, observe(f.s), "the batch must change something")
			f.s.Rollback()

			assert.Equal(t, before, observe(f.s))
			assert.Equal(t, mapsBefore, pendingMaps(f.s), "the pending index, map by map")
			assert.Equal(t, snapBefore, decodeSnapshot(t, f.s))
			assert.Same(t, cfgBefore, f.s.Cfg)
			assert.Nil(t, f.s.j)

			// The rolled back state decides as before: the same batch
			// gives the same events again.
			f.s.Begin()
			for _, mk := range tc.batch {
				d, err := f.s.Decide(mk(f), f.now, operator)
				require.NoError(t, err)
				for _, e := range d.Events {
					f.s.Apply(e)
				}
			}
			seq := posOf(f.s).Seq + 1
			f.s.Commit(seq)
			for k := len(before.Txs); k < len(f.s.Txs); k++ {
				assert.Equal(t, seq, f.s.Txs[k].Seq)
			}
		})
	}
	t.Run("empty batch", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		f.deposit("p0", "u1", 5000)
		before := observe(f.s)
		f.s.Begin()
		f.s.Rollback()
		assert.Equal(t, before, observe(f.s))
	})
	t.Run("rollback after a commit does not touch committed state", func(t *testing.T) {
		f := newFixture(t, SiteSettings{})
		f.fund(1000)
		f.deposit("p0", "u1", 5000)
		committed := observe(f.s)
		f.s.Begin()
		d, err := f.s.Decide(ApproveDeposit{TxID: tx(0)}, f.now, operator)
		require.NoError(t, err)
		f.s.Apply(d.Events[0])
		assert.Equal(t, int64(6000), f.s.Balance)
		f.s.Rollback()
		assert.Equal(t, committed, observe(f.s))
		assert.Equal(t, int64(1000), f.s.Balance)
		assert.Equal(t, StatusPending, f.s.Txs[0].Status)
	})
}

func TestRollbackRemovesNewRotationKeys(t *testing.T) {
	// A rollback of the first deposit on a bank removes the rotation entry
	// it created, so the state equals the one before the batch exactly.
	f := newFixture(t, SiteSettings{})
	f.s.Begin()
	d, err := f.try(f.depReq("p1", "u1", 1000))
	require.NoError(t, err)
	f.s.Apply(d.Events[0])
	f.s.Rollback()
	_, present := f.s.rotation["b1"]
	assert.False(t, present, "rotation key b1 left behind after rollback")
	d2 := f.do(f.depReq("p1", "u1", 1000))
	assert.Equal(t, "acct-0", d2.Events[0].Payload.(*events.DepositRequested).AccountName)
}

// ---------------------------------------------------------------- ids and enums

func TestLookup(t *testing.T) {
	f := newFixture(t, SiteSettings{})
	f.deposit("p0", "u0", 1000)
	f.deposit("p1", "u1", 1000)
	tests := []struct {
		id   ids.TxID
		want int32
		ok   bool
	}{
		{"s1-1", 0, true},
		{"s1-2", 1, true},
		{"s1-3", 0, false},
		{"s2-1", 0, false},
		{"x-s1-1", 0, false},
		{"s1-0", 0, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.id), func(t *testing.T) {
			i, ok := f.s.Lookup(tc.id)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, i)
		})
	}
	_, ok := f.s.ByProcessID("nope")
	assert.False(t, ok)
}

func TestStatusAndKind(t *testing.T) {
	tests := []struct {
		s     Status
		name  string
		final bool
	}{
		{StatusPending, "pending", false},
		{StatusProcessing, "processing", false},
		{StatusApproved, "approved", true},
		{StatusRejected, "rejected", true},
		{StatusExpired, "expired", true},
		{StatusPaid, "paid", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.name, tc.s.String())
			assert.Equal(t, tc.final, tc.s.Final())
			got, ok := ParseStatus(tc.name)
			assert.True(t, ok)
			assert.Equal(t, tc.s, got)
		})
	}
	for _, bad := range []string{"", "Pending", "unknown", "canceled"} {
		_, ok := ParseStatus(bad)
		assert.False(t, ok, bad)
	}
	assert.Equal(t, "unknown", Status(99).String())
	assert.Equal(t, "deposit", KindDeposit.String())
	assert.Equal(t, "withdrawal", KindWithdrawal.String())
}

func TestFingerprint(t *testing.T) {
	base := Fingerprint(KindDeposit, 1000, "b1", "u1")
	assert.Equal(t, base, Fingerprint(KindDeposit, 1000, "b1", "u1"))
	for name, other := range map[string]uint64{
		"kind":     Fingerprint(KindWithdrawal, 1000, "b1", "u1"),
		"amount":   Fingerprint(KindDeposit, 1001, "b1", "u1"),
		"bank":     Fingerprint(KindDeposit, 1000, "b2", "u1"),
		"user":     Fingerprint(KindDeposit, 1000, "b1", "u2"),
		"boundary": Fingerprint(KindDeposit, 1000, "b1u", "1"),
		"digits":   Fingerprint(KindDeposit, 100, "0b1", "u1"),
	} {
		assert.NotEqual(t, base, other, name)
	}
}

func TestNormalizeLang(t *testing.T) {
	for in, want := range map[string]string{"": "en", "en": "en", "EN": "en", "ar": "ar", " Ar ": "ar", "ku": "ku",
		"KU": "ku", "fr": "en", "ar-IQ": "en"} {
		assert.Equal(t, want, NormalizeLang(in), in)
	}
}

func TestParseAllowEntry(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"10.1.2.3/8", "10.0.0.0/8", true},
		{"192.0.2.7", "192.0.2.7/32", true},
		{"::ffff:192.0.2.7", "192.0.2.7/32", true},
		{"2001:db8::1", "2001:db8::1/128", true},
		{"2001:db8::/32", "2001:db8::/32", true},
		{"10.0.0.0/33", "", false},
		{"", "", false},
		{"example.com", "", false},
		// IPv4-mapped entries become IPv4, the form of the addresses
		// they are matched against.
		{"::ffff:10.0.0.0/104", "10.0.0.0/8", true},
		{"::ffff:10.1.2.3/104", "10.0.0.0/8", true},
		{"::ffff:a00:0/104", "10.0.0.0/8", true},
		{"::ffff:192.0.2.0/120", "192.0.2.0/24", true},
		{"::ffff:192.0.2.7/128", "192.0.2.7/32", true},
		{"::ffff:0.0.0.0/96", "0.0.0.0/0", true},
		{"::ffff:192.0.2.7/129", "", false},
		// Shorter than /96 it has no IPv4 form.
		{"::ffff:10.0.0.0/95", "", false},
		{"::ffff:0:0/80", "", false},
		{"::/0", "::/0", true},
		{"::ffff:0:0:0/96", "::ffff:0:0:0/96", true}, // IPv4-translated (RFC 2765), not mapped
		{"fe80::1%eth0/64", "", false},
		{"fe80::1%eth0", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParseAllowEntry(tc.in)
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, p.String())
		})
	}
}
