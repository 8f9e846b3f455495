package aggregates

import (
	"fmt"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/aggregates/recipient"
	"github.com/iqdgateway/gateway/events"
)

// Bank is a payment method (wallet, card or bank) merchants choose with
// bankId, by its _id or its code. A Bank value is immutable once published in
// a Catalog: updates replace it, so readers may keep a pointer.
type Bank struct {
	ID             string
	Code           string
	Name           events.LocalizedName
	IdentifierKind recipient.Kind
	MinAmount      int64
	MaxAmount      int64
	Deposit        bool
	Withdraw       bool
	Enabled        bool
	// Scoped: only sites that list the method in their methods offer it
	// (bank.scoped).
	Scoped   bool
	Accounts []events.Account
	// IdempotencyKey and RequestHash are those of the request that
	// created the method ("" when it had no Idempotency-Key).
	IdempotencyKey string
	RequestHash    string

	// created is the method as its keyed creation answered it (nil when
	// created without a key); an update copies the pointer along.
	created *Bank
}

// LocalName returns the display name in lang (en, ar or ku), falling back to
// English when that translation is empty.
func (b *Bank) LocalName(lang string) string {
	switch lang {
	case "ar":
		if b.Name.Ar != "" {
			return b.Name.Ar
		}
	case "ku":
		if b.Name.Ku != "" {
			return b.Name.Ku
		}
	}
	return b.Name.En
}

// Supports reports whether the method is enabled for kind.
func (b *Bank) Supports(k Kind) bool {
	if !b.Enabled {
		return false
	}
	if k == KindDeposit {
		return b.Deposit
	}
	return b.Withdraw
}

// Catalog is the aggregate of all payment methods. It lives on its own
// subject; sites refer to its methods by id. Its contract is every
// aggregate's (see aggregate.go).
type Catalog struct {
	banks  []*Bank
	byID   map[string]*Bank
	byCode map[string]*Bank
	// creating is the method created by the message being applied, so
	// that the message's other events about it count as its creation.
	creating string
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{byID: map[string]*Bank{}, byCode: map[string]*Bank{}}
}

// Banks returns the methods in creation order.
func (c *Catalog) Banks() []*Bank { return c.banks }

// Resolve finds an enabled or disabled method by _id or code.
func (c *Catalog) Resolve(idOrCode string) (*Bank, bool) {
	if b, ok := c.byID[idOrCode]; ok {
		return b, true
	}
	b, ok := c.byCode[idOrCode]
	return b, ok
}

// CreateBank adds a method. ID is chosen by the caller (ids are passed in):
// with an IdempotencyKey it must be ids.BankForKey(IdempotencyKey), and
// RequestHash is the SHA-256 (hex) of the request body.
type CreateBank struct {
	ID             string
	Code           string
	Name           events.LocalizedName
	IdentifierKind string
	MinAmount      int64
	MaxAmount      int64
	Deposit        bool
	Withdraw       bool
	Accounts       []events.Account
	// Scoped: offered only by the sites that list it (bank.scoped).
	Scoped         bool
	IdempotencyKey string
	RequestHash    string
}

// CatalogCommand is implemented by every catalog command.
type CatalogCommand interface{ catalogCommand() }

func (CreateBank) catalogCommand() {}
func (UpdateBank) catalogCommand() {}

// UpdateBank changes some of a method's settings; nil fields are unchanged.
type UpdateBank struct {
	ID        string
	Name      *events.LocalizedName
	MinAmount *int64
	MaxAmount *int64
	Deposit   *bool
	Withdraw  *bool
	Accounts  *[]events.Account
	Enabled   *bool
	Scoped    *bool
}

const maxCodeLen = 32

// Decide decides a catalog command against the catalog, which it does not
// change: the events it returns are applied once stored.
func (c *Catalog) Decide(cmd CatalogCommand, now time.Time, actor string) (Decision, error) {
	var evs []events.Event
	var err error
	switch cmd := cmd.(type) {
	case CreateBank:
		evs, err = c.decideCreateBank(cmd, now, actor)
	case UpdateBank:
		evs, err = c.decideUpdateBank(cmd, now, actor)
	default:
		err = fmt.Errorf("%w: %T is no catalog command", ErrInvalidRequest, cmd)
	}
	return Decision{Events: evs, Tx: -1, Repeat: err == nil && len(evs) == 0}, err
}

// decideCreateBank validates a new method. A repeat of a keyed creation
// (the method exists with this key and request hash) decides no events and
// no error: the method as created is the answer (Bank.AsCreated). It is
// recognised before anything else, so the method's own code does not
// refuse it.
func (c *Catalog) decideCreateBank(cmd CreateBank, now time.Time, actor string) ([]events.Event, error) {
	if cmd.IdempotencyKey != "" {
		if err := checkKeyed(cmd.IdempotencyKey, cmd.RequestHash); err != nil {
			return nil, err
		}
		if seen, err := c.decideKeyedBank(cmd); seen || err != nil {
			return nil, err
		}
	}
	if cmd.Code == "" || len(cmd.Code) > maxCodeLen || strings.IndexFunc(cmd.Code, notCodeRune) >= 0 {
		return nil, fieldErr("code", ErrInvalidRequest, "code must be 1 to %d letters, digits, '_' or '-'", maxCodeLen)
	}
	if _, ok := c.Resolve(cmd.Code); ok {
		return nil, fieldErr("code", ErrBankExists, "a method with code %q already exists", cmd.Code)
	}
	if err := checkBankName(cmd.Name); err != nil {
		return nil, err
	}
	if _, err := recipient.ParseKind(cmd.IdentifierKind); err != nil {
		return nil, fieldErr("identifierKind", ErrInvalidRequest, "identifierKind must be one of PHONE, CARD_NO, ACCOUNT_NO, IBAN, USERNAME")
	}
	if err := checkLimits(cmd.MinAmount, cmd.MaxAmount); err != nil {
		return nil, err
	}
	if !cmd.Deposit && !cmd.Withdraw {
		return nil, fieldErr("deposit", ErrInvalidRequest, "a method must allow deposit, withdraw or both")
	}
	if err := checkAccounts("accounts", cmd.Deposit, cmd.Accounts); err != nil {
		return nil, err
	}
	if err := checkAccountTexts("accounts", cmd.Accounts); err != nil {
		return nil, err
	}
	evs := []events.Event{{Name: events.BankCreatedName, Time: now.UnixMilli(), Actor: actor, Payload: &events.BankCreated{
		BankID: cmd.ID, Code: cmd.Code, Name: cmd.Name, IdentifierKind: cmd.IdentifierKind,
		MinAmount: cmd.MinAmount, MaxAmount: cmd.MaxAmount, Deposit: cmd.Deposit, Withdraw: cmd.Withdraw,
		Accounts: cmd.Accounts, IdempotencyKey: cmd.IdempotencyKey, RequestHash: cmd.RequestHash,
	}}}
	if cmd.Scoped {
		// In the creation's message: the method is never offered to
		// every site, not even for a moment.
		evs = append(evs, events.Event{Name: events.BankScopedName, Time: now.UnixMilli(), Actor: actor,
			Payload: &events.BankScoped{BankID: cmd.ID, Scoped: true}})
	}
	return evs, nil
}

// decideUpdateBank validates a change to an existing method.
func (c *Catalog) decideUpdateBank(cmd UpdateBank, now time.Time, actor string) ([]events.Event, error) {
	b, ok := c.byID[cmd.ID]
	if !ok {
		return nil, fieldErr("id", ErrUnknownBank, "no method with id %q", cmd.ID)
	}
	minA, maxA := b.MinAmount, b.MaxAmount
	if cmd.MinAmount != nil {
		minA = *cmd.MinAmount
	}
	if cmd.MaxAmount != nil {
		maxA = *cmd.MaxAmount
	}
	if err := checkLimits(minA, maxA); err != nil {
		return nil, err
	}
	if cmd.Name != nil {
		if err := checkBankName(*cmd.Name); err != nil {
			return nil, err
		}
	}
	dep, wd, accts := b.Deposit, b.Withdraw, b.Accounts
	if cmd.Deposit != nil {
		dep = *cmd.Deposit
	}
	if cmd.Withdraw != nil {
		wd = *cmd.Withdraw
	}
	if !dep && !wd {
		return nil, fieldErr("deposit", ErrInvalidRequest, "a method must allow deposit, withdraw or both; disable it with enabled false")
	}
	if cmd.Accounts != nil {
		accts = *cmd.Accounts
		// Only accounts given now are held to the text rules: a method
		// stored before them can still have its limits changed.
		if err := checkAccountTexts("accounts", accts); err != nil {
			return nil, err
		}
	}
	if err := checkAccounts("accounts", dep, accts); err != nil {
		return nil, err
	}
	var evs []events.Event
	up := &events.BankUpdated{
		BankID: cmd.ID, Name: cmd.Name, MinAmount: cmd.MinAmount, MaxAmount: cmd.MaxAmount,
		Deposit: cmd.Deposit, Withdraw: cmd.Withdraw, Accounts: cmd.Accounts, Enabled: cmd.Enabled,
	}
	if cmd.Scoped == nil || *up != (events.BankUpdated{BankID: cmd.ID}) {
		evs = append(evs, events.Event{Name: events.BankUpdatedName, Time: now.UnixMilli(), Actor: actor, Payload: up})
	}
	if cmd.Scoped != nil {
		evs = append(evs, events.Event{Name: events.BankScopedName, Time: now.UnixMilli(), Actor: actor,
			Payload: &events.BankScoped{BankID: cmd.ID, Scoped: *cmd.Scoped}})
	}
	return evs, nil
}

func checkLimits(minA, maxA int64) error {
	if minA < 1 {
		return fieldErr("minAmount", ErrInvalidRequest, "minAmount must be a positive integer")
	}
	if maxA < minA {
		return fieldErr("maxAmount", ErrInvalidRequest, "maxAmount must be at least minAmount")
	}
	if maxA > maxAmount {
		// No amount above it can be asked for (docs/merchant-api.md).
		return fieldErr("maxAmount", ErrInvalidRequest, "maxAmount must be at most 2^50 (1125899906842624)")
	}
	return nil
}

// checkBankName checks a method's names, which the hosted page and every
// record show end users: English required, each a text by the rules of
// every other (no control character, bounded; docs/errors.md
// "invalid_request").
func checkBankName(n events.LocalizedName) error {
	if strings.TrimFunc(n.En, blankRune) == "" {
		return fieldErr("name", ErrInvalidRequest, "name.en is required")
	}
	for _, l := range []struct{ lang, v string }{{"en", n.En}, {"ar", n.Ar}, {"ku", n.Ku}} {
		if err := checkOptionalText("name", l.v, maxTextLen); err != nil {
			return fieldErr("name", ErrInvalidRequest, "name.%s must be valid text of at most %d bytes, without control characters", l.lang, maxTextLen)
		}
	}
	return nil
}

// checkAccounts checks the recipient accounts given as field: each
// complete, and at least one for a deposit method.
func checkAccounts(field string, deposit bool, accts []events.Account) error {
	if deposit && len(accts) == 0 {
		return fieldErr(field, ErrInvalidRequest, "a deposit method needs at least one recipient account")
	}
	for i, a := range accts {
		if strings.TrimFunc(a.AccountName, blankRune) == "" || strings.TrimFunc(a.AccountNumber, blankRune) == "" {
			return fieldErr(field, ErrInvalidRequest, "account %d needs accountName and accountNumber", i)
		}
	}
	return nil
}

// checkAccountTexts holds accounts to the text rules: end users read the
// name and copy the number from the hosted page.
func checkAccountTexts(field string, accts []events.Account) error {
	for i, a := range accts {
		for _, t := range []struct{ name, v string }{{"accountName", a.AccountName}, {"accountNumber", a.AccountNumber}} {
			if checkOptionalText(t.name, t.v, maxTextLen) != nil {
				return fieldErr(field, ErrInvalidRequest, "account %d: %s must be valid text of at most %d bytes, without control characters", i, t.name, maxTextLen)
			}
		}
	}
	return nil
}

func notCodeRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
}

// ApplyMessage folds a stored message into the catalog. A message holding
// any event that is not the catalog's is refused whole, the catalog
// unchanged.
func (c *Catalog) ApplyMessage(seq uint64, evs []events.Event) error {
	c.creating = ""
	defer func() { c.creating = "" }()
	return applyOwn(seq, evs, "catalog", isCatalogPayload, c.Apply)
}

// isCatalogPayload reports whether p is a catalog event.
func isCatalogPayload(p events.Payload) bool {
	switch p.(type) {
	case *events.BankCreated, *events.BankUpdated, *events.BankScoped:
		return true
	}
	return false
}

// applyOwn applies evs, stored in the message at seq, with apply when own
// accepts every one of them, and refuses the whole message otherwise: an
// aggregate never applies half a message.
func applyOwn(seq uint64, evs []events.Event, aggregate string, own func(events.Payload) bool, apply func(events.Event)) error {
	for i, e := range evs {
		if !own(e.Payload) {
			return fmt.Errorf("%w: message %d event %d is a %s, not a %s event", ErrForeignEvent, seq, i, e.Name, aggregate)
		}
	}
	for _, e := range evs {
		apply(e)
	}
	return nil
}

// Apply folds one catalog event into the catalog. It never fails: events in
// the stream were valid when decided.
func (c *Catalog) Apply(e events.Event) {
	switch p := e.Payload.(type) {
	case *events.BankCreated:
		kind, _ := recipient.ParseKind(p.IdentifierKind)
		b := &Bank{ID: p.BankID, Code: p.Code, Name: p.Name, IdentifierKind: kind, MinAmount: p.MinAmount,
			MaxAmount: p.MaxAmount, Deposit: p.Deposit, Withdraw: p.Withdraw, Enabled: true, Accounts: p.Accounts,
			IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash}
		if p.IdempotencyKey != "" {
			b.created = b
		}
		c.banks = append(c.banks, b)
		c.byID[b.ID] = b
		c.byCode[b.Code] = b
		c.creating = b.ID
	case *events.BankScoped:
		old, ok := c.byID[p.BankID]
		if !ok {
			return
		}
		b := *old
		b.Scoped = p.Scoped
		if c.creating == b.ID && old.created == old {
			// Part of a keyed creation: its repeats answer with it.
			b.created = &b
		}
		c.replace(old, &b)
	case *events.BankUpdated:
		old, ok := c.byID[p.BankID]
		if !ok {
			return
		}
		b := *old
		if p.Name != nil {
			b.Name = *p.Name
		}
		if p.MinAmount != nil {
			b.MinAmount = *p.MinAmount
		}
		if p.MaxAmount != nil {
			b.MaxAmount = *p.MaxAmount
		}
		if p.Deposit != nil {
			b.Deposit = *p.Deposit
		}
		if p.Withdraw != nil {
			b.Withdraw = *p.Withdraw
		}
		if p.Accounts != nil {
			b.Accounts = *p.Accounts
		}
		if p.Enabled != nil {
			b.Enabled = *p.Enabled
		}
		c.replace(old, &b)
	}
}

// replace publishes nb in place of old: Bank values are immutable once
// published, so readers holding old keep a consistent method.
func (c *Catalog) replace(old, nb *Bank) {
	for i := range c.banks {
		if c.banks[i] == old {
			c.banks[i] = nb
		}
	}
	c.byID[nb.ID] = nb
	c.byCode[nb.Code] = nb
}

// Clone returns a copy that shares the immutable Bank values, so a reader can
// keep using it while the original is updated.
func (c *Catalog) Clone() *Catalog {
	n := &Catalog{banks: append([]*Bank(nil), c.banks...),
		byID: make(map[string]*Bank, len(c.byID)), byCode: make(map[string]*Bank, len(c.byCode))}
	for k, v := range c.byID {
		n.byID[k] = v
	}
	for k, v := range c.byCode {
		n.byCode[k] = v
	}
	return n
}

// String is for logs.
func (b *Bank) String() string { return fmt.Sprintf("%s(%s)", b.Code, b.ID) }
