package aggregates

// The decisions about one transaction: an operator's (or a sandbox
// merchant's) approve, reject, expire, process, pay, and a sandbox's test
// callback.

import (
	"slices"
	"strings"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// target is the transaction a command names.
type target struct {
	id string
	i  int32
	tx *Tx
}

// targetOf finds the transaction id names. moving says the command moves
// it as an operator does (approve, reject, process, pay): on a sandbox site
// only its merchant may, on a live site only an operator
// (docs/merchant-api.md "Sandbox sites"). A refusal comes with the
// Decision to answer.
func (s *Site) targetOf(id ids.TxID, actor string, moving bool) (target, Decision, error) {
	i, ok := s.Lookup(id)
	if !ok {
		return target{}, Decision{Tx: -1}, ErrNotFound
	}
	t := target{id: string(id), i: i, tx: &s.Txs[i]}
	if moving && s.Cfg.Sandbox && actor != events.ActorMerchant {
		return t, Decision{Tx: i}, ErrSandboxTransaction
	}
	if moving && !s.Cfg.Sandbox && actor == events.ActorMerchant {
		return t, Decision{Tx: i}, ErrNotSandbox
	}
	return t, Decision{}, nil
}

func (s *Site) decideApprove(c ApproveDeposit, d decision) (Decision, error) {
	t, refused, err := s.targetOf(c.TxID, d.actor, true)
	if err != nil {
		return refused, err
	}
	i, tx := t.i, t.tx
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
	if tx.Status == StatusPending && d.now.UnixMilli() >= tx.ExpiresAt {
		// Past its expiry, and the sweep has not reached it yet: it
		// expires first, as the sweep would have made it, so that
		// the merchant hears of it as of any late approval
		// (deposit.expired, then deposit.approved).
		exp := d.ev(&events.DepositExpired{TxID: t.id})
		exp.Actor = events.ActorSystem
		out = append(out, exp)
	}
	out = append(out, d.ev(&events.DepositApproved{TxID: t.id, Amount: amt, Requested: tx.Requested}))
	return Decision{Tx: i, Events: out}, nil
}

func (s *Site) decideRejectDeposit(c RejectDeposit, d decision) (Decision, error) {
	t, refused, err := s.targetOf(c.TxID, d.actor, true)
	if err != nil {
		return refused, err
	}
	if t.tx.Kind != KindDeposit || t.tx.Status != StatusPending {
		return s.refuse(t.i, t.tx, KindDeposit, "reject")
	}
	if err := checkText("reason", c.Reason, maxTextLen); err != nil {
		return Decision{Tx: t.i}, err
	}
	return d.one(t.i, &events.DepositRejected{TxID: t.id, Reason: c.Reason})
}

func (s *Site) decideExpire(c ExpireDeposit, d decision) (Decision, error) {
	t, refused, err := s.targetOf(c.TxID, d.actor, false)
	if err != nil {
		return refused, err
	}
	if t.tx.Kind != KindDeposit || t.tx.Status != StatusPending {
		return s.refuse(t.i, t.tx, KindDeposit, "expire")
	}
	if c.Now && !s.Cfg.Sandbox {
		return Decision{Tx: t.i}, ErrNotSandbox
	}
	if c.Now && d.actor != events.ActorMerchant {
		// Early expiry is the merchant's trial of the flow
		// (docs/merchant-api.md "Sandbox sites"), as the audit
		// holds it.
		return Decision{Tx: t.i}, ErrSandboxTransaction
	}
	if d.now.UnixMilli() < t.tx.ExpiresAt && !c.Now {
		return Decision{Tx: t.i}, ErrNotDue
	}
	return d.one(t.i, &events.DepositExpired{TxID: t.id})
}

// callbackTypes are the callbacks a sandbox site may ask a test of.
var callbackTypes = []string{"deposit.approved", "deposit.rejected", "deposit.expired", "withdrawal.paid", "withdrawal.rejected"}

func (s *Site) decideSandboxCallback(c SandboxCallback, d decision) (Decision, error) {
	t, refused, err := s.targetOf(c.TxID, d.actor, false)
	if err != nil {
		return refused, err
	}
	if !s.Cfg.Sandbox {
		return Decision{Tx: t.i}, ErrNotSandbox
	}
	kind, _, _ := strings.Cut(c.Type, ".")
	if !slices.Contains(callbackTypes, c.Type) {
		return Decision{Tx: t.i}, fieldErr("type", ErrInvalidRequest, "type must be one of %s", strings.Join(callbackTypes, ", "))
	}
	if kind != t.tx.Kind.String() {
		return Decision{Tx: t.i}, fieldErr("type", ErrInvalidRequest, "%s is not a callback of a %s", c.Type, t.tx.Kind)
	}
	return d.one(t.i, &events.SandboxCallback{TxID: t.id, Type: c.Type})
}

func (s *Site) decideProcess(c ProcessWithdrawal, d decision) (Decision, error) {
	t, refused, err := s.targetOf(c.TxID, d.actor, true)
	if err != nil {
		return refused, err
	}
	if t.tx.Kind != KindWithdrawal || t.tx.Status != StatusPending {
		return s.refuse(t.i, t.tx, KindWithdrawal, "process")
	}
	return d.one(t.i, &events.WithdrawalProcessing{TxID: t.id})
}

func (s *Site) decidePay(c PayWithdrawal, d decision) (Decision, error) {
	t, refused, err := s.targetOf(c.TxID, d.actor, true)
	if err != nil {
		return refused, err
	}
	if t.tx.Kind != KindWithdrawal || t.tx.Status != StatusProcessing {
		return s.refuse(t.i, t.tx, KindWithdrawal, "pay")
	}
	ref := c.Reference
	if Blank(ref) {
		ref = "" // shows nothing: not given, rather than a statusReason of spaces
	}
	if err := checkOptionalText("reference", ref, maxTextLen); err != nil {
		return Decision{Tx: t.i}, err
	}
	return d.one(t.i, &events.WithdrawalPaid{TxID: t.id, Reference: ref})
}

func (s *Site) decideRejectWithdrawal(c RejectWithdrawal, d decision) (Decision, error) {
	t, refused, err := s.targetOf(c.TxID, d.actor, true)
	if err != nil {
		return refused, err
	}
	if t.tx.Kind != KindWithdrawal || (t.tx.Status != StatusPending && t.tx.Status != StatusProcessing) {
		return s.refuse(t.i, t.tx, KindWithdrawal, "reject")
	}
	if err := checkText("reason", c.Reason, maxTextLen); err != nil {
		return Decision{Tx: t.i}, err
	}
	return d.one(t.i, &events.WithdrawalRejected{TxID: t.id, Reason: c.Reason})
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
