package aggregates

import (
	"fmt"
	"hash/fnv"
	"slices"
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
// the decision is a pure function of its inputs.
func (s *Site) Decide(cmd Command, now time.Time, actor string) (Decision, error) {
	if c, ok := cmd.(CreateSite); ok {
		return s.decideCreate(c, now, actor)
	}
	if !s.Created() {
		return Decision{Tx: -1}, ErrSiteNotFound
	}
	ev := func(p events.Payload) events.Event {
		return events.Event{Name: p.EventName(), Time: now.UnixMilli(), Actor: actor, Payload: p}
	}
	one := func(i int32, p events.Payload) (Decision, error) {
		return Decision{Tx: i, Events: []events.Event{ev(p)}}, nil
	}
	switch c := cmd.(type) {
	case UpdateSite:
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
			evs = append(evs, ev(updatedEvent(c.Settings)))
		}
		if pageChange(c.Settings) {
			evs = append(evs, ev(pageEvent(c.Settings)))
		}
		return Decision{Tx: -1, Events: evs}, nil
	case SetSiteMethods:
		if err := checkSiteMethods(c); err != nil {
			return Decision{Tx: -1}, err
		}
		return one(-1, &events.SiteMethodsSet{All: c.All, Methods: c.Methods})
	case RotateSecret:
		if c.Secret == "" {
			return Decision{Tx: -1}, fieldErr("secret", ErrInvalidRequest, "a new secret is required")
		}
		if c.Overlap < 0 {
			return Decision{Tx: -1}, fieldErr("overlapSeconds", ErrInvalidRequest, "overlapSeconds must not be negative")
		}
		until := now.Add(c.Overlap).UnixMilli()
		if c.Webhook {
			return one(-1, &events.SiteWebhookSecretRotated{Secret: c.Secret, PreviousValidUntil: until})
		}
		return one(-1, &events.SiteSecretRotated{Secret: c.Secret, PreviousValidUntil: until})
	case AdjustTreasury:
		if err := checkKeyed(c.IdempotencyKey, c.RequestHash); err != nil {
			return Decision{Tx: -1}, err
		}
		if d, seen, err := s.decideKeyedAdjustment(c); seen {
			return d, err
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
		return one(-1, &events.TreasuryAdjusted{Amount: c.Amount, Reason: c.Reason,
			IdempotencyKey: c.IdempotencyKey, RequestHash: c.RequestHash, AllowBelowLimit: below})
	case RequestDeposit:
		return s.decideDeposit(c, now, ev)
	case RequestWithdrawal:
		return s.decideWithdrawal(c, ev)
	}

	txID, i, tx, err := s.target(cmd)
	if err != nil {
		return Decision{Tx: -1}, err
	}
	switch cmd.(type) {
	case ApproveDeposit, RejectDeposit, ProcessWithdrawal, PayWithdrawal, RejectWithdrawal:
		// A sandbox's transactions are its merchant's to move, and only
		// a sandbox's (docs/merchant-api.md "Sandbox sites").
		if s.Cfg.Sandbox && actor != events.ActorMerchant {
			return Decision{Tx: i}, ErrSandboxTransaction
		}
		if !s.Cfg.Sandbox && actor == events.ActorMerchant {
			return Decision{Tx: i}, ErrNotSandbox
		}
	}
	switch c := cmd.(type) {
	case ApproveDeposit:
		if tx.Kind != KindDeposit || (tx.Status != StatusPending && tx.Status != StatusExpired) {
			return s.refuse(i, tx, KindDeposit, "approve")
		}
		amt := c.Amount
		if amt == 0 {
			amt = tx.Requested
		}
		if amt < 0 || amt > maxAmount {
			return Decision{Tx: i}, fieldErr("amount", ErrInvalidRequest, "amount must be a positive integer of at most 2^50 (1125899906842624)")
		}
		if !c.AnyAmount && amt > tx.Requested*MaxOverApproval { // Requested ≤ 2^50: no overflow
			return Decision{Tx: i}, fieldErr("amount", ErrNeedsAdmin,
				"approving more than %d times the requested amount (%d IQD) needs the admin role", MaxOverApproval, tx.Requested)
		}
		if err := s.checkBalance(amt); err != nil {
			return Decision{Tx: i}, err
		}
		var out []events.Event
		if tx.Status == StatusPending && now.UnixMilli() >= tx.ExpiresAt {
			// Past its expiry, and the sweep has not reached it yet: it
			// expires first, as the sweep would have made it, so that
			// the merchant hears of it as of any late approval
			// (deposit.expired, then deposit.approved).
			exp := ev(&events.DepositExpired{TxID: txID})
			exp.Actor = events.ActorSystem
			out = append(out, exp)
		}
		out = append(out, ev(&events.DepositApproved{TxID: txID, Amount: amt, Requested: tx.Requested}))
		return Decision{Tx: i, Events: out}, nil
	case RejectDeposit:
		if tx.Kind != KindDeposit || tx.Status != StatusPending {
			return s.refuse(i, tx, KindDeposit, "reject")
		}
		if err := checkText("reason", c.Reason, maxTextLen); err != nil {
			return Decision{Tx: i}, err
		}
		return one(i, &events.DepositRejected{TxID: txID, Reason: c.Reason})
	case ExpireDeposit:
		if tx.Kind != KindDeposit || tx.Status != StatusPending {
			return s.refuse(i, tx, KindDeposit, "expire")
		}
		if c.Now && !s.Cfg.Sandbox {
			return Decision{Tx: i}, ErrNotSandbox
		}
		if c.Now && actor != events.ActorMerchant {
			// Early expiry is the merchant's trial of the flow
			// (docs/merchant-api.md "Sandbox sites"), as the audit
			// holds it.
			return Decision{Tx: i}, ErrSandboxTransaction
		}
		if now.UnixMilli() < tx.ExpiresAt && !c.Now {
			return Decision{Tx: i}, ErrNotDue
		}
		return one(i, &events.DepositExpired{TxID: txID})
	case SandboxCallback:
		if !s.Cfg.Sandbox {
			return Decision{Tx: i}, ErrNotSandbox
		}
		kind, _, _ := strings.Cut(c.Type, ".")
		if !slices.Contains(callbackTypes, c.Type) {
			return Decision{Tx: i}, fieldErr("type", ErrInvalidRequest, "type must be one of %s", strings.Join(callbackTypes, ", "))
		}
		if kind != tx.Kind.String() {
			return Decision{Tx: i}, fieldErr("type", ErrInvalidRequest, "%s is not a callback of a %s", c.Type, tx.Kind)
		}
		return one(i, &events.SandboxCallback{TxID: txID, Type: c.Type})
	case ProcessWithdrawal:
		if tx.Kind != KindWithdrawal || tx.Status != StatusPending {
			return s.refuse(i, tx, KindWithdrawal, "process")
		}
		return one(i, &events.WithdrawalProcessing{TxID: txID})
	case PayWithdrawal:
		if tx.Kind != KindWithdrawal || tx.Status != StatusProcessing {
			return s.refuse(i, tx, KindWithdrawal, "pay")
		}
		ref := c.Reference
		if Blank(ref) {
			ref = "" // shows nothing: not given, rather than a statusReason of spaces
		}
		if err := checkOptionalText("reference", ref, maxTextLen); err != nil {
			return Decision{Tx: i}, err
		}
		return one(i, &events.WithdrawalPaid{TxID: txID, Reference: ref})
	case RejectWithdrawal:
		if tx.Kind != KindWithdrawal || (tx.Status != StatusPending && tx.Status != StatusProcessing) {
			return s.refuse(i, tx, KindWithdrawal, "reject")
		}
		if err := checkText("reason", c.Reason, maxTextLen); err != nil {
			return Decision{Tx: i}, err
		}
		return one(i, &events.WithdrawalRejected{TxID: txID, Reason: c.Reason})
	}
	return Decision{Tx: -1}, ErrInvalidRequest
}

// target resolves the transaction an operator command names.
func (s *Site) target(cmd Command) (string, int32, *Tx, error) {
	var id ids.TxID
	switch c := cmd.(type) {
	case ApproveDeposit:
		id = c.TxID
	case RejectDeposit:
		id = c.TxID
	case ExpireDeposit:
		id = c.TxID
	case SandboxCallback:
		id = c.TxID
	case ProcessWithdrawal:
		id = c.TxID
	case PayWithdrawal:
		id = c.TxID
	case RejectWithdrawal:
		id = c.TxID
	}
	i, ok := s.Lookup(id)
	if !ok {
		return "", 0, nil, ErrNotFound
	}
	return string(id), i, &s.Txs[i], nil
}

// refuse is an action the transaction's kind or status does not allow;
// want is the kind the action is for.
func (s *Site) refuse(i int32, tx *Tx, want Kind, action string) (Decision, error) {
	// No Field: the request is not to blame, the transaction's status is.
	msg := "cannot " + action + " a " + tx.Kind.String() + " that is " + tx.Status.String()
	if tx.Kind != want {
		// "cannot reject a deposit that is pending" would read as if no
		// pending deposit could be rejected.
		msg = "cannot " + action + " this transaction: it is a " + tx.Kind.String() + ", not a " + want.String()
	}
	return Decision{Tx: i}, &FieldError{Err: ErrInvalidTransition, Msg: msg}
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

// callbackTypes are the callbacks a sandbox site may ask a test of.
var callbackTypes = []string{"deposit.approved", "deposit.rejected", "deposit.expired", "withdrawal.paid", "withdrawal.rejected"}

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

func (s *Site) decideDeposit(c RequestDeposit, now time.Time, ev func(events.Payload) events.Event) (Decision, error) {
	if d, ok, err := s.taken(KindDeposit, c.Request); ok {
		return d, err
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
			return Decision{Tx: i, AlreadyPending: true, Events: []events.Event{ev(&events.DepositAliasAdded{
				TxID: string(ids.NewTx(s.ID, i)), ProcessID: c.ProcessID, Amount: c.Amount,
				BankID: bankIDOf(c.Request), UserID: c.UserID})}}, nil
		}
		// The pending deposit is past its expiry but the sweep has not
		// reached it yet: expire it now so the user is not blocked.
		exp := ev(&events.DepositExpired{TxID: string(ids.NewTx(s.ID, i))})
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
	out = append(out, ev(p))
	return Decision{Tx: int32(len(s.Txs)), Events: out}, nil
}

func (s *Site) decideWithdrawal(c RequestWithdrawal, ev func(events.Payload) events.Event) (Decision, error) {
	if d, ok, err := s.taken(KindWithdrawal, c.Request); ok {
		return d, err
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
	return Decision{Tx: int32(len(s.Txs)), Events: []events.Event{ev(p)}}, nil
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
