package aggregates

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates/recipient"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

func validCreateBank() CreateBank {
	return CreateBank{ID: "bk_zain", Code: "ZAIN_CASH", Name: events.LocalizedName{En: "Zain Cash", Ar: "زين كاش", Ku: "زەین کاش"},
		IdentifierKind: "PHONE", MinAmount: 1000, MaxAmount: 5_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{{AccountName: "Shop LLC", AccountNumber: "07701112222"}}}
}

// catalogWith applies the creation of each bank.
func catalogWith(t *testing.T, cmds ...CreateBank) *Catalog {
	t.Helper()
	c := NewCatalog()
	for _, cmd := range cmds {
		evs, err := evsOf(c.Decide(cmd, t0, operator))
		require.NoError(t, err)
		for _, e := range evs {
			c.Apply(e)
		}
	}
	return c
}

func TestDecideCreateBank(t *testing.T) {
	existing := validCreateBank()
	tests := []struct {
		name  string
		mod   func(c *CreateBank)
		want  error
		field string
	}{
		{"valid", func(*CreateBank) {}, nil, ""},
		{"withdraw only without accounts", func(c *CreateBank) { c.Deposit, c.Accounts = false, nil }, nil, ""},
		{"min equals max", func(c *CreateBank) { c.MinAmount, c.MaxAmount = 5000, 5000 }, nil, ""},
		{"code with dash and digits", func(c *CreateBank) { c.Code = "fast-pay-2" }, nil, ""},
		{"code of 32", func(c *CreateBank) { c.Code = strings.Repeat("A", 32) }, nil, ""},
		{"every kind: CARD_NO", func(c *CreateBank) { c.IdentifierKind = "CARD_NO" }, nil, ""},
		{"every kind: ACCOUNT_NO", func(c *CreateBank) { c.IdentifierKind = "ACCOUNT_NO" }, nil, ""},
		{"every kind: IBAN", func(c *CreateBank) { c.IdentifierKind = "IBAN" }, nil, ""},
		{"every kind: USERNAME", func(c *CreateBank) { c.IdentifierKind = "USERNAME" }, nil, ""},
		{"empty code", func(c *CreateBank) { c.Code = "" }, ErrInvalidRequest, "code"},
		{"code too long", func(c *CreateBank) { c.Code = strings.Repeat("A", 33) }, ErrInvalidRequest, "code"},
		{"code with space", func(c *CreateBank) { c.Code = "ZAIN CASH" }, ErrInvalidRequest, "code"},
		{"code with slash", func(c *CreateBank) { c.Code = "a/b" }, ErrInvalidRequest, "code"},
		{"code non-ascii", func(c *CreateBank) { c.Code = "زين" }, ErrInvalidRequest, "code"},
		{"duplicate code", func(c *CreateBank) { c.ID = "bk_other" }, ErrBankExists, "code"},
		{"code equal to an existing id", func(c *CreateBank) { c.ID, c.Code = "bk_other", "bk_existing" }, ErrBankExists, "code"},
		{"missing english name", func(c *CreateBank) { c.Name.En = "" }, ErrInvalidRequest, "name"},
		{"blank english name", func(c *CreateBank) { c.Name.En = "  " }, ErrInvalidRequest, "name"},
		{"bad identifierKind", func(c *CreateBank) { c.IdentifierKind = "EMAIL" }, ErrInvalidRequest, "identifierKind"},
		{"lower-case identifierKind", func(c *CreateBank) { c.IdentifierKind = "phone" }, ErrInvalidRequest, "identifierKind"},
		{"empty identifierKind", func(c *CreateBank) { c.IdentifierKind = "" }, ErrInvalidRequest, "identifierKind"},
		{"min zero", func(c *CreateBank) { c.MinAmount = 0 }, ErrInvalidRequest, "minAmount"},
		{"min negative", func(c *CreateBank) { c.MinAmount = -10 }, ErrInvalidRequest, "minAmount"},
		{"min above max", func(c *CreateBank) { c.MinAmount, c.MaxAmount = 5001, 5000 }, ErrInvalidRequest, "maxAmount"},
		{"max above 2^50", func(c *CreateBank) { c.MaxAmount = 1<<50 + 1 }, ErrInvalidRequest, "maxAmount"},
		{"max of 2^50", func(c *CreateBank) { c.MaxAmount = 1 << 50 }, nil, ""},
		{"neither deposit nor withdraw", func(c *CreateBank) { c.Deposit, c.Withdraw = false, false }, ErrInvalidRequest, "deposit"},
		{"deposit without accounts", func(c *CreateBank) { c.Accounts = nil }, ErrInvalidRequest, "accounts"},
		{"deposit with empty accounts", func(c *CreateBank) { c.Accounts = []events.Account{} }, ErrInvalidRequest, "accounts"},
		{"account without number", func(c *CreateBank) {
			c.Accounts = append(c.Accounts, events.Account{AccountName: "x", AccountNumber: " "})
		}, ErrInvalidRequest, "accounts"},
		{"account without name", func(c *CreateBank) {
			c.Accounts = []events.Account{{AccountNumber: "0770"}}
		}, ErrInvalidRequest, "accounts"},
		{"withdraw-only with a blank account", func(c *CreateBank) {
			c.Deposit, c.Accounts = false, []events.Account{{}}
		}, ErrInvalidRequest, "accounts"},
		// The names and accounts end users read and copy on the hosted page.
		{"english name of only a zero-width space", func(c *CreateBank) { c.Name.En = "\u200b" }, ErrInvalidRequest, "name"},
		{"name with a newline", func(c *CreateBank) { c.Name.En = "Ctl\nBank" }, ErrInvalidRequest, "name"},
		{"arabic name with a bell", func(c *CreateBank) { c.Name.Ar = "زين\a" }, ErrInvalidRequest, "name"},
		{"kurdish name not UTF-8", func(c *CreateBank) { c.Name.Ku = "\xff" }, ErrInvalidRequest, "name"},
		{"name over 256 bytes", func(c *CreateBank) { c.Name.En = strings.Repeat("n", 257) }, ErrInvalidRequest, "name"},
		{"name of 256 bytes", func(c *CreateBank) { c.Name.En = strings.Repeat("n", 256) }, nil, ""},
		{"account name with a NUL", func(c *CreateBank) {
			c.Accounts = []events.Account{{AccountName: "Line1\x00", AccountNumber: "0770"}}
		}, ErrInvalidRequest, "accounts"},
		{"account number with a newline", func(c *CreateBank) {
			c.Accounts = []events.Account{{AccountName: "Store", AccountNumber: "0780\n1234567"}}
		}, ErrInvalidRequest, "accounts"},
		{"account number over 256 bytes", func(c *CreateBank) {
			c.Accounts = []events.Account{{AccountName: "Store", AccountNumber: strings.Repeat("7", 257)}}
		}, ErrInvalidRequest, "accounts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := existing
			ex.ID = "bk_existing"
			c := catalogWith(t, ex)
			cmd := validCreateBank()
			cmd.ID, cmd.Code = "bk_new", "NEW"
			if strings.HasPrefix(tc.name, "duplicate") {
				cmd.Code = existing.Code
			}
			tc.mod(&cmd)
			evs, err := evsOf(c.Decide(cmd, t0, operator))
			if tc.want != nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, tc.want)
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tc.field, fe.Field)
				assert.Empty(t, evs)
				assert.Len(t, c.Banks(), 1)
				return
			}
			require.NoError(t, err)
			require.Len(t, evs, 1)
			e := evs[0]
			assert.Equal(t, events.BankCreatedName, e.Name)
			assert.Equal(t, t0.UnixMilli(), e.Time)
			assert.Equal(t, operator, e.Actor)
			assert.Equal(t, &events.BankCreated{BankID: cmd.ID, Code: cmd.Code, Name: cmd.Name, IdentifierKind: cmd.IdentifierKind,
				MinAmount: cmd.MinAmount, MaxAmount: cmd.MaxAmount, Deposit: cmd.Deposit, Withdraw: cmd.Withdraw,
				Accounts: cmd.Accounts}, e.Payload)
			assert.Len(t, c.Banks(), 1, "Decide does not change the catalog")
		})
	}
}

func TestCatalogApplyAndResolve(t *testing.T) {
	card := validCreateBank()
	card.ID, card.Code, card.IdentifierKind, card.Deposit, card.Accounts = "bk_card", "CARD", "CARD_NO", false, nil
	c := catalogWith(t, validCreateBank(), card)

	require.Len(t, c.Banks(), 2)
	assert.Equal(t, "bk_zain", c.Banks()[0].ID)
	assert.Equal(t, "bk_card", c.Banks()[1].ID)

	tests := []struct {
		ref    string
		wantID string
		ok     bool
	}{
		{"bk_zain", "bk_zain", true},
		{"ZAIN_CASH", "bk_zain", true},
		{"bk_card", "bk_card", true},
		{"CARD", "bk_card", true},
		{"zain_cash", "", false},
		{"", "", false},
		{"bk_other", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			b, ok := c.Resolve(tc.ref)
			assert.Equal(t, tc.ok, ok)
			if !tc.ok {
				assert.Nil(t, b)
				return
			}
			assert.Equal(t, tc.wantID, b.ID)
		})
	}
	b, _ := c.Resolve("ZAIN_CASH")
	byID, _ := c.Resolve("bk_zain")
	assert.Same(t, b, byID)
	assert.Equal(t, &Bank{ID: "bk_zain", Code: "ZAIN_CASH", Name: validCreateBank().Name, IdentifierKind: recipient.Phone,
		MinAmount: 1000, MaxAmount: 5_000_000, Deposit: true, Withdraw: true, Enabled: true,
		Accounts: []events.Account{{AccountName: "Shop LLC", AccountNumber: "07701112222"}}}, b)
	cb, _ := c.Resolve("CARD")
	assert.Equal(t, recipient.CardNo, cb.IdentifierKind)
	assert.False(t, cb.Supports(KindDeposit))
	assert.True(t, cb.Supports(KindWithdrawal))
	assert.Equal(t, "ZAIN_CASH(bk_zain)", b.String())
}

func TestLocalName(t *testing.T) {
	full := &Bank{Name: events.LocalizedName{En: "Zain Cash", Ar: "زين كاش", Ku: "زەین کاش"}}
	enOnly := &Bank{Name: events.LocalizedName{En: "Zain Cash"}}
	tests := []struct {
		name string
		b    *Bank
		lang string
		want string
	}{
		{"en", full, "en", "Zain Cash"},
		{"ar", full, "ar", "زين كاش"},
		{"ku", full, "ku", "زەین کاش"},
		{"unknown lang", full, "fr", "Zain Cash"},
		{"empty lang", full, "", "Zain Cash"},
		{"ar falls back", enOnly, "ar", "Zain Cash"},
		{"ku falls back", enOnly, "ku", "Zain Cash"},
		{"ku missing, ar present", &Bank{Name: events.LocalizedName{En: "E", Ar: "A"}}, "ku", "E"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.b.LocalName(tc.lang))
		})
	}
}

func TestSupports(t *testing.T) {
	tests := []struct {
		name                        string
		deposit, withdraw, enabled  bool
		wantDeposit, wantWithdrawal bool
	}{
		{"both enabled", true, true, true, true, true},
		{"deposit only", true, false, true, true, false},
		{"withdraw only", false, true, true, false, true},
		{"disabled", true, true, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &Bank{Deposit: tc.deposit, Withdraw: tc.withdraw, Enabled: tc.enabled}
			assert.Equal(t, tc.wantDeposit, b.Supports(KindDeposit))
			assert.Equal(t, tc.wantWithdrawal, b.Supports(KindWithdrawal))
		})
	}
}

func TestDecideUpdateBank(t *testing.T) {
	wdOnly := validCreateBank()
	wdOnly.ID, wdOnly.Code, wdOnly.Deposit, wdOnly.Accounts = "bk_wd", "WD", false, nil
	tests := []struct {
		name  string
		cmd   UpdateBank
		want  error
		field string
		check func(t *testing.T, b *Bank)
	}{
		{"disable", UpdateBank{ID: "bk_zain", Enabled: ptr(false)}, nil, "", func(t *testing.T, b *Bank) {
			assert.False(t, b.Enabled)
			assert.False(t, b.Supports(KindDeposit))
			assert.False(t, b.Supports(KindWithdrawal))
			assert.Equal(t, int64(1000), b.MinAmount)
		}},
		{"disable by code is not allowed", UpdateBank{ID: "ZAIN_CASH", Enabled: ptr(false)}, ErrUnknownBank, "id", nil},
		{"unknown id", UpdateBank{ID: "bk_nope"}, ErrUnknownBank, "id", nil},
		{"limits", UpdateBank{ID: "bk_zain", MinAmount: ptr(int64(500)), MaxAmount: ptr(int64(600))}, nil, "", func(t *testing.T, b *Bank) {
			assert.Equal(t, int64(500), b.MinAmount)
			assert.Equal(t, int64(600), b.MaxAmount)
			assert.True(t, b.Enabled)
		}},
		{"max below existing min", UpdateBank{ID: "bk_zain", MaxAmount: ptr(int64(999))}, ErrInvalidRequest, "maxAmount", nil},
		{"max above 2^50", UpdateBank{ID: "bk_zain", MaxAmount: ptr(int64(1<<50 + 1))}, ErrInvalidRequest, "maxAmount", nil},
		{"min above existing max", UpdateBank{ID: "bk_zain", MinAmount: ptr(int64(5_000_001))}, ErrInvalidRequest, "maxAmount", nil},
		{"min zero", UpdateBank{ID: "bk_zain", MinAmount: ptr(int64(0))}, ErrInvalidRequest, "minAmount", nil},
		{"blank name", UpdateBank{ID: "bk_zain", Name: &events.LocalizedName{Ar: "x"}}, ErrInvalidRequest, "name", nil},
		{"rename", UpdateBank{ID: "bk_zain", Name: &events.LocalizedName{En: "Zain", Ar: "زين"}}, nil, "", func(t *testing.T, b *Bank) {
			assert.Equal(t, "زين", b.LocalName("ar"))
			assert.Equal(t, "Zain", b.LocalName("ku"))
		}},
		{"turn off both kinds", UpdateBank{ID: "bk_zain", Deposit: ptr(false), Withdraw: ptr(false)}, ErrInvalidRequest, "deposit", nil},
		{"remove accounts of deposit method", UpdateBank{ID: "bk_zain", Accounts: &[]events.Account{}}, ErrInvalidRequest, "accounts", nil},
		{"blank account", UpdateBank{ID: "bk_zain", Accounts: &[]events.Account{{AccountName: "a"}}}, ErrInvalidRequest, "accounts", nil},
		{"account with a control character", UpdateBank{ID: "bk_zain", Accounts: &[]events.Account{{AccountName: "a\x1b[2J", AccountNumber: "1"}}},
			ErrInvalidRequest, "accounts", nil},
		{"rename with a control character", UpdateBank{ID: "bk_zain", Name: &events.LocalizedName{En: "Zain", Ku: "x\u0085"}}, ErrInvalidRequest, "name", nil},
		{"enable deposit without accounts", UpdateBank{ID: "bk_wd", Deposit: ptr(true)}, ErrInvalidRequest, "accounts", nil},
		{"enable deposit with accounts", UpdateBank{ID: "bk_wd", Deposit: ptr(true),
			Accounts: &[]events.Account{{AccountName: "n", AccountNumber: "1"}, {AccountName: "m", AccountNumber: "2"}}}, nil, "",
			func(t *testing.T, b *Bank) {
				assert.True(t, b.Supports(KindDeposit))
				assert.Len(t, b.Accounts, 2)
			}},
		{"deposit off then accounts may go", UpdateBank{ID: "bk_zain", Deposit: ptr(false), Accounts: &[]events.Account{}}, nil, "",
			func(t *testing.T, b *Bank) {
				assert.False(t, b.Supports(KindDeposit))
				assert.True(t, b.Supports(KindWithdrawal))
				assert.Empty(t, b.Accounts)
			}},
		{"withdraw off", UpdateBank{ID: "bk_zain", Withdraw: ptr(false)}, nil, "", func(t *testing.T, b *Bank) {
			assert.True(t, b.Supports(KindDeposit))
			assert.False(t, b.Supports(KindWithdrawal))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := catalogWith(t, validCreateBank(), wdOnly)
			old, _ := c.Resolve(tc.cmd.ID)
			var oldCopy Bank
			if old != nil {
				oldCopy = *old
			}
			snapshot := c.Clone()
			evs, err := evsOf(c.Decide(tc.cmd, t0, operator))
			if tc.want != nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, tc.want)
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tc.field, fe.Field)
				assert.Empty(t, evs)
				return
			}
			require.NoError(t, err)
			require.Len(t, evs, 1)
			assert.Equal(t, events.BankUpdatedName, evs[0].Name)
			assert.Equal(t, tc.cmd.ID, evs[0].Payload.(*events.BankUpdated).BankID)
			c.Apply(evs[0])
			byID, ok := c.Resolve(tc.cmd.ID)
			require.True(t, ok)
			byCode, ok := c.Resolve(oldCopy.Code)
			require.True(t, ok)
			assert.Same(t, byID, byCode)
			assert.NotSame(t, old, byID, "an update publishes a new Bank")
			assert.Equal(t, oldCopy, *old, "the published Bank is never modified")
			assert.Len(t, c.Banks(), 2)
			found := false
			for _, b := range c.Banks() {
				if b == byID {
					found = true
				}
				assert.NotSame(t, old, b)
			}
			assert.True(t, found)
			// A clone taken before the update still sees the old method.
			sb, _ := snapshot.Resolve(tc.cmd.ID)
			assert.Same(t, old, sb)
			tc.check(t, byID)
		})
	}
}

func TestCatalogApplyIgnoresUnknownUpdate(t *testing.T) {
	c := catalogWith(t, validCreateBank())
	c.Apply(events.Event{Name: events.BankUpdatedName, Payload: &events.BankUpdated{BankID: "ghost", Enabled: ptr(false)}})
	assert.Len(t, c.Banks(), 1)
	_, ok := c.Resolve("ghost")
	assert.False(t, ok)
	b, _ := c.Resolve("bk_zain")
	assert.True(t, b.Enabled)
}

// TestDisabledBankRefusedBySite ties the catalog to the site decision: a
// method disabled in the catalog is an unknown bank for new requests.
func TestDisabledBankRefusedBySite(t *testing.T) {
	c := catalogWith(t, validCreateBank())
	evs, err := evsOf(c.Decide(UpdateBank{ID: "bk_zain", Enabled: ptr(false)}, t0, operator))
	require.NoError(t, err)
	c.Apply(evs[0])
	b, ok := c.Resolve("ZAIN_CASH")
	require.True(t, ok)

	f := newFixture(t, SiteSettings{})
	f.fund(1_000_000)
	f.bank = b
	for _, cmd := range []Command{f.depReq("p1", "u1", 2000), f.wdReq("w1", "u1", 2000)} {
		d, err := f.try(cmd)
		requireErr(t, d, err, ErrUnknownBank, "bankId")
	}
}

// evsOf is a Decide's events, for tests of commands that concern no
// transaction.
func evsOf(d Decision, err error) ([]events.Event, error) { return d.Events, err }

// TestBankScoped: a scoped method is offered only by the sites that list
// it; its creation's message scopes it, so no site ever sees it before.
func TestBankScoped(t *testing.T) {
	scoped := validCreateBank()
	scoped.Scoped, scoped.IdempotencyKey, scoped.RequestHash = true, "k-1", strings.Repeat("a", 64)
	scoped.ID = string(ids.BankForKey("k-1"))
	c := NewCatalog()
	evs, err := evsOf(c.Decide(scoped, t0, operator))
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, events.BankCreatedName, evs[0].Name)
	assert.Equal(t, &events.BankScoped{BankID: scoped.ID, Scoped: true}, evs[1].Payload)
	require.NoError(t, c.ApplyMessage(1, evs))
	b, ok := c.Resolve(scoped.Code)
	require.True(t, ok)
	assert.True(t, b.Scoped)
	assert.True(t, b.AsCreated().Scoped, "a repeat of the creation answers it scoped")

	offers := func(cfg *Config, b *Bank) bool { _, _, _, ok := cfg.Offer(b); return ok }
	listing := &Config{OwnMethods: true, Methods: []events.SiteMethod{{BankID: b.ID}}}
	other := &Config{OwnMethods: true, Methods: []events.SiteMethod{{BankID: "bk_other"}}}
	assert.False(t, offers(nil, b), "a site with every method does not see a scoped one")
	assert.False(t, offers(&Config{}, b))
	assert.True(t, offers(listing, b), "a site that lists it offers it")
	assert.False(t, offers(other, b))

	tests := []struct {
		name   string
		cmd    UpdateBank
		names  []string
		scoped bool
	}{
		{"unscope alone writes only the scope", UpdateBank{ID: b.ID, Scoped: ptr(false)}, []string{events.BankScopedName}, false},
		{"limits and scope", UpdateBank{ID: b.ID, MaxAmount: ptr(int64(9000)), Scoped: ptr(false)},
			[]string{events.BankUpdatedName, events.BankScopedName}, false},
		{"limits alone keep the scope", UpdateBank{ID: b.ID, MaxAmount: ptr(int64(9000))}, []string{events.BankUpdatedName}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := c.Clone()
			evs, err := evsOf(c.Decide(tc.cmd, t0, operator))
			require.NoError(t, err)
			var names []string
			for _, e := range evs {
				names = append(names, e.Name)
			}
			assert.Equal(t, tc.names, names)
			require.NoError(t, c.ApplyMessage(2, evs))
			nb, _ := c.Resolve(b.ID)
			assert.Equal(t, tc.scoped, nb.Scoped)
			assert.True(t, nb.AsCreated().Scoped, "what the creation answered does not change")
			assert.True(t, b.Scoped, "the published Bank is never modified")
			assert.Equal(t, !tc.scoped, offers(nil, nb))
		})
	}

	// Scoping a method later is not part of its creation.
	plain := validCreateBank()
	plain.ID, plain.Code, plain.IdempotencyKey, plain.RequestHash = string(ids.BankForKey("k-2")), "PLAIN", "k-2", strings.Repeat("b", 64)
	evs, err = evsOf(c.Decide(plain, t0, operator))
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.NoError(t, c.ApplyMessage(2, evs))
	evs, err = evsOf(c.Decide(UpdateBank{ID: plain.ID, Scoped: ptr(true)}, t0, operator))
	require.NoError(t, err)
	require.NoError(t, c.ApplyMessage(3, evs))
	pb, _ := c.Resolve("PLAIN")
	assert.True(t, pb.Scoped)
	assert.False(t, pb.AsCreated().Scoped)
}
