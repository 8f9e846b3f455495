package aggregates

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/aggregates/names"
	"github.com/iqdgateway/gateway/aggregates/recipient"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Decision is what Decide concluded.
type Decision struct {
	// Events to append; empty for an idempotent repeat.
	Events []events.Event
	// Tx is the index of the transaction concerned, or -1.
	Tx int32
	// Repeat is true when a processId was repeated with the same
	// parameters (the stored transaction is the answer), or an
	// Idempotency-Key with the same body (the first answer, kept in the
	// state, is the answer: see KeyedAdjustment and CreatedAs).
	Repeat bool
	// AlreadyPending is true when the end user already had a pending
	// deposit, which is the answer.
	AlreadyPending bool
}

// Field length limits: generous for real names, small enough that one
// request cannot bloat the ledger.
const (
	maxIDLen   = 128
	maxTextLen = 256
	maxAmount  = 1 << 50
)

// MaxBalance bounds a site's balance either way: the largest integer a
// JSON number carries exactly to every client (JavaScript's
// Number.MAX_SAFE_INTEGER). With amounts and the negative limit at most
// 2^50, every sum of a treasury (available, pending withdrawals) then stays
// far inside int64: nothing wraps around.
const MaxBalance = 1<<53 - 1

// checkBalance refuses to move the balance by delta (at most 2^50 either
// way) beyond ±MaxBalance. A debit counts the pending withdrawals too:
// paying them takes the balance down by as much later, without a check.
func (s *Site) checkBalance(delta int64) error {
	// A credit keeps the available amount (the balance above the negative
	// limit, which is at most 0) within the bound too: every figure of
	// the treasury stays exact in a JSON number.
	if delta > 0 && s.Balance-s.Cfg.NegativeLimit > MaxBalance-delta || delta < 0 && s.Balance-s.PendingWithdrawals < -MaxBalance-delta {
		return &FieldError{Field: "amount", Err: ErrTreasuryBound, Msg: fmt.Sprintf(
			"the balance (%d IQD) cannot move by %d IQD: a treasury's balance stays within ±%d IQD", s.Balance, delta, int64(MaxBalance))}
	}
	return nil
}

// Decide checks cmd against the current state and returns the events that
// carry it out. It does not change the state: the caller applies the events
// once they are (or are about to be) appended. now and actor are passed in so
// the decision is a pure function of its inputs. Each command is decided by
// a method of its own.
func (s *Site) Decide(cmd Command, now time.Time, actor string) (Decision, error) {
	if c, ok := cmd.(CreateSite); ok {
		return s.decideCreate(c, now, actor)
	}
	if !s.Created() {
		return Decision{Tx: -1}, ErrSiteNotFound
	}
	d := decision{now: now, actor: actor}
	switch c := cmd.(type) {
	case UpdateSite:
		return s.decideUpdate(c, d)
	case SetSiteMethods:
		return s.decideSiteMethods(c, d)
	case RotateSecret:
		return s.decideRotation(c, d)
	case AdjustTreasury:
		return s.decideAdjustment(c, d)
	case RequestDeposit:
		return s.decideDeposit(c, d)
	case RequestWithdrawal:
		return s.decideWithdrawal(c, d)
	case ApproveDeposit:
		return s.decideApprove(c, d)
	case RejectDeposit:
		return s.decideRejectDeposit(c, d)
	case ExpireDeposit:
		return s.decideExpire(c, d)
	case SandboxCallback:
		return s.decideSandboxCallback(c, d)
	case ProcessWithdrawal:
		return s.decideProcess(c, d)
	case PayWithdrawal:
		return s.decidePay(c, d)
	case RejectWithdrawal:
		return s.decideRejectWithdrawal(c, d)
	}
	return Decision{Tx: -1}, ErrInvalidRequest
}

// decision is what every decision is made with: the clock and the actor,
// which its events carry.
type decision struct {
	now   time.Time
	actor string
}

// ev makes the event of p.
func (d decision) ev(p events.Payload) events.Event {
	return events.Event{Name: p.EventName(), Time: d.now.UnixMilli(), Actor: d.actor, Payload: p}
}

// one is a decision of one event about transaction i (-1 for none).
func (d decision) one(i int32, p events.Payload) (Decision, error) {
	return Decision{Tx: i, Events: []events.Event{d.ev(p)}}, nil
}

func (s *Site) decideUpdate(c UpdateSite, d decision) (Decision, error) {
	if err := validateSettings(c.Settings); err != nil {
		return Decision{Tx: -1}, err
	}
	if c.Settings.Sandbox != nil {
		return Decision{Tx: -1}, fieldErr("sandbox", ErrInvalidRequest, "sandbox is chosen when the site is created; create another site")
	}
	if l := c.Settings.NegativeLimit; l != nil && s.Balance-*l > MaxBalance {
		return Decision{Tx: -1}, &FieldError{Field: "negativeLimit", Err: ErrTreasuryBound, Msg: fmt.Sprintf(
			"with a balance of %d IQD, a negative limit of %d IQD would make the available amount exceed %d IQD", s.Balance, *l, int64(MaxBalance))}
	}
	var evs []events.Event
	if coreChange(c.Settings) || !pageChange(c.Settings) {
		ev := updatedEvent(c.Settings)
		if l := c.Settings.NegativeLimit; l != nil {
			left, _ := s.Treasury().Debit(*l-s.Cfg.NegativeLimit, LimitChange)
			ev.Available = &left
		}
		evs = append(evs, d.ev(ev))
	}
	if pageChange(c.Settings) {
		evs = append(evs, d.ev(pageEvent(c.Settings)))
	}
	return Decision{Tx: -1, Events: evs}, nil
}

func (s *Site) decideSiteMethods(c SetSiteMethods, d decision) (Decision, error) {
	if err := checkSiteMethods(c); err != nil {
		return Decision{Tx: -1}, err
	}
	return d.one(-1, &events.SiteMethodsSet{All: c.All, Methods: c.Methods})
}

func (s *Site) decideRotation(c RotateSecret, d decision) (Decision, error) {
	if c.Secret == "" {
		return Decision{Tx: -1}, fieldErr("secret", ErrInvalidRequest, "a new secret is required")
	}
	if c.Overlap < 0 {
		return Decision{Tx: -1}, fieldErr("overlapSeconds", ErrInvalidRequest, "overlapSeconds must not be negative")
	}
	until := d.now.Add(c.Overlap).UnixMilli()
	if c.Webhook {
		return d.one(-1, &events.SiteWebhookSecretRotated{Secret: c.Secret, PreviousValidUntil: until})
	}
	return d.one(-1, &events.SiteSecretRotated{Secret: c.Secret, PreviousValidUntil: until})
}

func (s *Site) decideAdjustment(c AdjustTreasury, d decision) (Decision, error) {
	if err := checkKeyed(c.IdempotencyKey, c.RequestHash); err != nil {
		return Decision{Tx: -1}, err
	}
	if dd, seen, err := s.decideKeyedAdjustment(c); seen {
		return dd, err
	}
	if c.Amount == 0 || c.Amount > maxAmount || c.Amount < -maxAmount {
		return Decision{Tx: -1}, fieldErr("amount", ErrInvalidRequest, "amount must be a non-zero integer of at most 2^50 (1125899906842624) either way")
	}
	if err := checkText("reason", c.Reason, maxTextLen); err != nil {
		return Decision{Tx: -1}, err
	}
	if err := s.checkBalance(c.Amount); err != nil {
		return Decision{Tx: -1}, err
	}
	after, below := s.Available()+c.Amount, false
	if c.Amount < 0 {
		var ok bool
		after, ok = s.Treasury().Debit(-c.Amount, OperatorDebit)
		below = !ok
	}
	if below && !c.AllowBelowLimit {
		return Decision{Tx: -1}, &FieldError{Field: "amount", Err: ErrBelowLimit, Msg: fmt.Sprintf(
			"the adjustment would take the treasury %d IQD below its negative limit (available is %d); send allowBelowLimit: true to apply it anyway",
			-after, s.Available())}
	}
	// The stored flag says the debit went below the limit
	// (docs/events.md "treasury.adjusted.v3"), not that the operator
	// sent it, which a credit or a debit within the limit may do to
	// no effect.
	return d.one(-1, &events.TreasuryAdjusted{Amount: c.Amount, Reason: c.Reason,
		IdempotencyKey: c.IdempotencyKey, RequestHash: c.RequestHash, AllowBelowLimit: below})
}

func (s *Site) decideCreate(c CreateSite, now time.Time, actor string) (Decision, error) {
	if err := s.checkKeyedSite(c); err != nil {
		return Decision{Tx: -1}, err
	}
	if s.Created() {
		return s.decideCreateAgain(c)
	}
	st := c.Settings
	if st.Name == nil || strings.TrimSpace(*st.Name) == "" {
		return Decision{Tx: -1}, fieldErr("name", ErrInvalidRequest, "name is required")
	}
	if err := validateSettings(st); err != nil {
		return Decision{Tx: -1}, err
	}
	p := createdEvent(string(s.ID), defaultSettings.With(st), c)
	evs := []events.Event{{Name: p.EventName(), Time: now.UnixMilli(), Actor: actor, Payload: p}}
	if pageChange(st) {
		pp := pageEvent(st)
		pp.AtCreation = true
		evs = append(evs, events.Event{Name: pp.EventName(), Time: now.UnixMilli(), Actor: actor, Payload: pp})
	}
	if st.Sandbox != nil && *st.Sandbox {
		sb := &events.SiteSandbox{Sandbox: true}
		evs = append(evs, events.Event{Name: sb.EventName(), Time: now.UnixMilli(), Actor: actor, Payload: sb})
	}
	return Decision{Tx: -1, Events: evs}, nil
}

// Fingerprint hashes the parameters an idempotent repeat must match.
func Fingerprint(k Kind, amount int64, bankID, userID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte{byte(k)})
	h.Write([]byte(strconv.FormatInt(amount, 10)))
	h.Write([]byte{0})
	h.Write([]byte(bankID))
	h.Write([]byte{0})
	h.Write([]byte(userID))
	return h.Sum64()
}

// bankIDOf is the _id of the request's method ("" when it named none).
func bankIDOf(r Request) string {
	if r.Bank != nil {
		return r.Bank.ID
	}
	return ""
}

// repeat answers a processId that is already taken by transaction i, whose
// request had fingerprint fp: the transaction when the parameters match, a
// conflict otherwise.
func repeat(i int32, fp uint64, k Kind, r Request) (Decision, error) {
	if fp != Fingerprint(k, r.Amount, bankIDOf(r), r.UserID) {
		return Decision{Tx: i}, fieldErr("processId", ErrProcessIDConflict,
			"processId %q was already used with a different type, amount, bankId or userId", r.ProcessID)
	}
	return Decision{Tx: i, Repeat: true}, nil
}

// taken answers a request of kind k whose processId the site already
// knows, the one check of processId idempotency for both kinds
// (docs/merchant-api.md "Idempotency (processId)"): a transaction's own
// processId, or another name of a pending deposit (an alias) that a
// deposit request was answered with before, which a repeat is answered
// with again, alreadyPending. ok is false for a processId not taken. An
// alias is a deposit's: a withdrawal's fingerprint never matches it.
func (s *Site) taken(k Kind, r Request) (d Decision, ok bool, err error) {
	if i, found := s.ByProcessID(r.ProcessID); found {
		d, err = repeat(i, s.Txs[i].Fingerprint, k, r)
		return d, true, err
	}
	if a, found := s.aliases[r.ProcessID]; found {
		d, err = repeat(a.Tx, a.Fingerprint, k, r)
		d.AlreadyPending = err == nil
		return d, true, err
	}
	return Decision{}, false, nil
}

func (s *Site) decideDeposit(c RequestDeposit, d decision) (Decision, error) {
	now := d.now
	if dd, ok, err := s.taken(KindDeposit, c.Request); ok {
		return dd, err
	}
	if err := s.validateRequest(c.Request, KindDeposit); err != nil {
		return Decision{Tx: -1}, err
	}
	if c.SenderName != "" {
		if err := checkText("senderName", c.SenderName, maxTextLen); err != nil {
			return Decision{Tx: -1}, err
		}
	}
	var out []events.Event
	if i, ok := s.pendingOf(c.UserID); ok {
		tx := &s.Txs[i]
		if now.UnixMilli() < tx.ExpiresAt {
			// The new processId becomes a name of the pending deposit.
			return Decision{Tx: i, AlreadyPending: true, Events: []events.Event{d.ev(&events.DepositAliasAdded{
				TxID: string(ids.NewTx(s.ID, i)), ProcessID: c.ProcessID, Amount: c.Amount,
				BankID: bankIDOf(c.Request), UserID: c.UserID})}}, nil
		}
		// The pending deposit is past its expiry but the sweep has not
		// reached it yet: expire it now so the user is not blocked.
		exp := d.ev(&events.DepositExpired{TxID: string(ids.NewTx(s.ID, i))})
		exp.Actor = events.ActorSystem
		out = append(out, exp)
	}
	b := c.Bank
	_, _, accounts, _ := s.Cfg.Offer(b)
	acct := accounts[s.rotation[b.ID]%uint64(len(accounts))]
	ttl := s.Cfg.DepositTTLSeconds
	if ttl <= 0 {
		ttl = DefaultDepositTTLSeconds
	}
	lang := NormalizeLang(c.Lang)
	p := &events.DepositRequested{
		TxID: string(ids.NewTx(s.ID, int32(len(s.Txs)))), ProcessID: c.ProcessID, BankID: b.ID, BankCode: b.Code,
		BankName: b.LocalName(lang), IdentifierKind: string(b.IdentifierKind), Amount: c.Amount,
		UserID: c.UserID, UserName: c.UserName, Name: c.Name, ConvertedName: names.Convert(c.Name),
		SenderName: c.SenderName, Lang: lang, AccountName: acct.AccountName, AccountNumber: acct.AccountNumber,
		ExpiresAt: now.Add(time.Duration(ttl) * time.Second).UnixMilli(),
	}
	if s.Cfg.HostedPage {
		p.HostedToken = c.HostedToken
	}
	out = append(out, d.ev(p))
	return Decision{Tx: int32(len(s.Txs)), Events: out}, nil
}

func (s *Site) decideWithdrawal(c RequestWithdrawal, d decision) (Decision, error) {
	if dd, ok, err := s.taken(KindWithdrawal, c.Request); ok {
		return dd, err
	}
	if err := s.validateRequest(c.Request, KindWithdrawal); err != nil {
		return Decision{Tx: -1}, err
	}
	if err := checkText("accountName", c.AccountName, maxTextLen); err != nil {
		return Decision{Tx: -1}, err
	}
	if c.IBAN == "" {
		return Decision{Tx: -1}, fieldErr("iban", ErrInvalidRequest, "iban is required")
	}
	if err := recipient.Validate(c.Bank.IdentifierKind, c.IBAN); err != nil {
		return Decision{Tx: -1}, fieldErr("iban", ErrInvalidIdentifier, "%s", err.Error())
	}
	if _, ok := s.Treasury().Debit(c.Amount, Reservation); !ok {
		return Decision{Tx: -1}, fieldErr("amount", ErrInsufficientBalance,
			"the site treasury cannot cover %d (available %d)", c.Amount, s.Available())
	}
	p := &events.WithdrawalRequested{
		TxID: string(ids.NewTx(s.ID, int32(len(s.Txs)))), ProcessID: c.ProcessID, BankID: c.Bank.ID, BankCode: c.Bank.Code,
		IdentifierKind: string(c.Bank.IdentifierKind), Amount: c.Amount, UserID: c.UserID, UserName: c.UserName,
		Name: c.Name, ConvertedName: names.Convert(c.Name), AccountName: c.AccountName, IBAN: c.IBAN,
	}
	return Decision{Tx: int32(len(s.Txs)), Events: []events.Event{d.ev(p)}}, nil
}

// NormalizeLang maps a request lang to en, ar or ku (unknown → en).
func NormalizeLang(l string) string {
	switch strings.ToLower(strings.TrimSpace(l)) {
	case "ar":
		return "ar"
	case "ku":
		return "ku"
	}
	return "en"
}
