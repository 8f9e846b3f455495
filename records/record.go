// Package records builds what the APIs show from the ledger's state and the
// stored events: transaction records, balances, listings and a site's
// readable history. It is not a projection with a checkpoint of its own:
// the ledger's in-memory state, kept equal to the stream, is the read
// model, and a record joins it with the transaction's creation event.
//
// The in-memory site state holds only what decisions need (status, amounts,
// where the creation event is stored). A record joins that with the creation
// event, read back from the stream, so what a merchant was shown when the
// transaction was created is exactly what every later lookup shows.
package records

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Common holds the fields every transaction record has (seed 2.2).
type Common struct {
	TransactionID   string  `json:"transactionId"`
	BankID          string  `json:"bankId"`
	Bank            string  `json:"bank"`
	Amount          int64   `json:"amount"`
	RequestedAmount int64   `json:"requestedAmount"`
	UserID          string  `json:"userId"`
	Name            string  `json:"name"`
	UserName        string  `json:"userName"`
	ProcessID       string  `json:"processId"`
	Type            string  `json:"type"`
	ConvertedName   string  `json:"convertedName"`
	Status          string  `json:"status"`
	StatusReason    *string `json:"statusReason"`
	IdentifierKind  string  `json:"identifierKind"`
	Hash            string  `json:"hash"`
	CreatedAt       string  `json:"createdAt"`
	UpdatedAt       string  `json:"updatedAt"`
}

// DepositFields are the deposit record's own fields (seed 2.3).
type DepositFields struct {
	BankName        string  `json:"bankName"`
	BankAccountName string  `json:"bankAccountName"`
	BankAccountIban string  `json:"bankAccountIban"`
	SenderName      *string `json:"senderName"`
	Lang            string  `json:"lang"`
	ExpiresAt       *string `json:"expiresAt"`
	URL             *string `json:"url"`
	AlreadyPending  bool    `json:"alreadyPending"`
}

// WithdrawalFields are the withdrawal record's own fields (seed 2.4).
type WithdrawalFields struct {
	AccountName string `json:"accountName"`
	IBAN        string `json:"iban"`
}

// Record is one transaction as the merchant API returns it.
type Record struct {
	Common
	// Exactly one of Deposit and Withdrawal is set.
	Deposit    *DepositFields
	Withdrawal *WithdrawalFields
	// HostedToken is the hosted page token of a deposit ("" when none).
	HostedToken string
	// Sandbox marks a sandbox site's transaction: "sandbox": true ends
	// its JSON (absent for a live site's).
	Sandbox bool
	// updatedMs and expiresMs are UpdatedAt and ExpiresAt in Unix ms.
	updatedMs, expiresMs int64
	// hashedWith is the secret Hash was made with.
	hashedWith string
}

// HashedWith returns the record with its hash made with secret: the
// secret a merchant's request was signed with, which during a rotation's
// overlap may not be the one it was read with (docs/merchant-api.md
// "Response hash"). The hash is computed again only when it differs.
func (r Record) HashedWith(secret string) Record {
	if secret != r.hashedWith {
		r.Hash, r.hashedWith = ResponseHash(secret, r.TransactionID, r.BankID, r.Amount), secret
	}
	return r
}

// UpdatedAtMs returns the record's last change in Unix ms.
func (r *Record) UpdatedAtMs() int64 { return r.updatedMs }

// ExpiresAtMs returns a deposit's expiry in Unix ms (0 for withdrawals).
func (r *Record) ExpiresAtMs() int64 { return r.expiresMs }

// MarshalJSON flattens the record into the seed's field set for its type
// (see AppendJSON).
func (r Record) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(make([]byte, 0, 1024)), nil
}

// OpsRecord is a record in an operator listing: the merchant record plus the
// site it belongs to.
type OpsRecord struct {
	SiteID ids.SiteID `json:"siteId"`
	Record
}

// MarshalJSON adds siteId to the merchant record's fields.
func (r OpsRecord) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(make([]byte, 0, 1024)), nil
}

// AppendJSON appends the record as MarshalJSON writes it.
func (r OpsRecord) AppendJSON(b []byte) []byte {
	b = appendKey(b, '{', "siteId")
	b = AppendJSONString(b, string(r.SiteID))
	n := len(b)
	b = r.Record.AppendJSON(b)
	b[n] = ','
	return b
}

// ResponseHash is seed 5.3: base64(HMAC-SHA256(secret, transactionId +
// bankId + amount)), the amount written in decimal.
func ResponseHash(secret, txID, bankID string, amount int64) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(txID))
	m.Write([]byte(bankID))
	m.Write(strconv.AppendInt(nil, amount, 10))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Group writes an amount with thousands separators (25,000), as people
// read amounts.
func Group(n int64) string {
	s := strconv.FormatInt(n, 10)
	b := make([]byte, 0, len(s)+len(s)/3)
	if n < 0 {
		b, s = append(b, '-'), s[1:]
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}

// FormatTime renders Unix ms as RFC 3339 UTC with milliseconds.
func FormatTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// Fields are everything a transaction's record is made of: what its
// creation event stored and what its later events changed. Both the write
// model's transactions (build) and the read models
// (projections/transactions) make records through New, the one place a
// record is put together.
type Fields struct {
	TxID      ids.TxID
	Kind      aggregates.Kind
	Status    aggregates.Status
	Amount    int64
	Requested int64
	// Reason is the status reason ("" when none).
	Reason string
	// CreatedAt, UpdatedAt and ExpiresAt (deposits only) are Unix ms.
	CreatedAt, UpdatedAt, ExpiresAt int64

	BankID, BankCode, IdentifierKind                 string
	ProcessID, UserID, UserName, Name, ConvertedName string
	// AccountName and AccountNumber are the account paid to (a deposit's
	// method account) or paid out to (a withdrawal's accountName and
	// iban).
	AccountName, AccountNumber string
	// Deposits only: the method's name shown, the sender's name, the
	// page's language and the hosted page token ("" when none).
	BankName, SenderName, Lang, HostedToken string
	// Sandbox: the site is a sandbox.
	Sandbox bool
}

// New makes the record of f, its hash signed with secret; publicURL is the
// base of hosted page links.
func New(f Fields, secret, publicURL string) Record {
	txID := string(f.TxID)
	r := Record{Common: Common{
		TransactionID: txID, BankID: f.BankID, Bank: f.BankCode, Amount: f.Amount, RequestedAmount: f.Requested,
		UserID: f.UserID, Name: f.Name, UserName: f.UserName, ProcessID: f.ProcessID, Type: f.Kind.String(),
		ConvertedName: f.ConvertedName, Status: f.Status.String(), IdentifierKind: f.IdentifierKind,
		CreatedAt: FormatTime(f.CreatedAt), UpdatedAt: FormatTime(f.UpdatedAt),
	}, Sandbox: f.Sandbox, updatedMs: f.UpdatedAt}
	if f.Reason != "" {
		reason := f.Reason
		r.StatusReason = &reason
	}
	if f.Kind == aggregates.KindDeposit {
		exp := FormatTime(f.ExpiresAt)
		r.expiresMs = f.ExpiresAt
		d := &DepositFields{BankName: f.BankName, BankAccountName: f.AccountName, BankAccountIban: f.AccountNumber,
			Lang: f.Lang, ExpiresAt: &exp}
		if f.SenderName != "" {
			sender := f.SenderName
			d.SenderName = &sender
		}
		if f.HostedToken != "" {
			u := publicURL + "/pay/" + txID + "?t=" + f.HostedToken
			d.URL = &u
			r.HostedToken = f.HostedToken
		}
		r.Deposit = d
	} else {
		r.Withdrawal = &WithdrawalFields{AccountName: f.AccountName, IBAN: f.AccountNumber}
	}
	r.Hash, r.hashedWith = ResponseHash(secret, txID, r.BankID, f.Amount), secret
	return r
}

// build joins the compact state of a transaction with its creation event.
// publicURL is the base of hosted page links; secret signs the hash.
func build(tx aggregates.Tx, reason string, created events.Event, id ids.TxID, secret, publicURL string) (Record, bool) {
	f := Fields{TxID: id, Kind: tx.Kind, Status: tx.Status, Amount: tx.Amount, Requested: tx.Requested, Reason: reason,
		CreatedAt: created.Time, UpdatedAt: tx.UpdatedAt}
	switch p := created.Payload.(type) {
	case *events.DepositRequested:
		if tx.Kind != aggregates.KindDeposit || p.TxID != string(id) {
			return Record{}, false
		}
		f.BankID, f.BankCode, f.IdentifierKind = p.BankID, p.BankCode, p.IdentifierKind
		f.ProcessID, f.UserID, f.UserName, f.Name, f.ConvertedName = p.ProcessID, p.UserID, p.UserName, p.Name, p.ConvertedName
		f.AccountName, f.AccountNumber, f.ExpiresAt = p.AccountName, p.AccountNumber, p.ExpiresAt
		f.BankName, f.SenderName, f.Lang, f.HostedToken = p.BankName, p.SenderName, p.Lang, p.HostedToken
	case *events.WithdrawalRequested:
		if tx.Kind != aggregates.KindWithdrawal || p.TxID != string(id) {
			return Record{}, false
		}
		f.BankID, f.BankCode, f.IdentifierKind = p.BankID, p.BankCode, p.IdentifierKind
		f.ProcessID, f.UserID, f.UserName, f.Name, f.ConvertedName = p.ProcessID, p.UserID, p.UserName, p.Name, p.ConvertedName
		f.AccountName, f.AccountNumber = p.AccountName, p.IBAN
	default:
		return Record{}, false
	}
	return New(f, secret, publicURL), true
}
