package client

import "encoding/json"

// Transaction is a deposit or withdrawal record (seed 2.2 to 2.4): the
// fields of both kinds, those of the other kind empty. Type says which.
type Transaction struct {
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

	// A deposit's.
	BankName        string  `json:"bankName,omitempty"`
	BankAccountName string  `json:"bankAccountName,omitempty"`
	BankAccountIban string  `json:"bankAccountIban,omitempty"`
	SenderName      *string `json:"senderName,omitempty"`
	Lang            string  `json:"lang,omitempty"`
	ExpiresAt       *string `json:"expiresAt,omitempty"`
	URL             *string `json:"url,omitempty"`
	AlreadyPending  bool    `json:"alreadyPending,omitempty"`

	// A withdrawal's.
	AccountName string `json:"accountName,omitempty"`
	IBAN        string `json:"iban,omitempty"`

	// Sandbox marks a sandbox site's transaction.
	Sandbox bool `json:"sandbox,omitempty"`
}

// MarshalJSON writes the record as the gateway does (docs/merchant-api.md
// "Records"): the fields of its type only, each of them present, so a
// deposit's senderName, expiresAt and url are null when it has none and
// its alreadyPending is false rather than left out.
func (t Transaction) MarshalJSON() ([]byte, error) {
	type fields Transaction // its fields, without this method
	switch t.Type {
	case TypeDeposit:
		// The outer fields are written, where the embedded ones of the
		// same name would be left out when empty.
		return json.Marshal(struct {
			fields
			BankName        string  `json:"bankName"`
			BankAccountName string  `json:"bankAccountName"`
			BankAccountIban string  `json:"bankAccountIban"`
			SenderName      *string `json:"senderName"`
			Lang            string  `json:"lang"`
			ExpiresAt       *string `json:"expiresAt"`
			URL             *string `json:"url"`
			AlreadyPending  bool    `json:"alreadyPending"`
			Sandbox         bool    `json:"sandbox,omitempty"`
		}{fields(t), t.BankName, t.BankAccountName, t.BankAccountIban, t.SenderName, t.Lang, t.ExpiresAt, t.URL, t.AlreadyPending, t.Sandbox})
	case TypeWithdrawal:
		return json.Marshal(struct {
			fields
			AccountName string `json:"accountName"`
			IBAN        string `json:"iban"`
			Sandbox     bool   `json:"sandbox,omitempty"`
		}{fields(t), t.AccountName, t.IBAN, t.Sandbox})
	}
	return json.Marshal(fields(t))
}

// Transaction types and statuses.
const (
	TypeDeposit    = "deposit"
	TypeWithdrawal = "withdrawal"

	StatusPending    = "pending"
	StatusProcessing = "processing"
	StatusApproved   = "approved"
	StatusRejected   = "rejected"
	StatusExpired    = "expired"
	StatusPaid       = "paid"
)

// Final reports whether the transaction is in a final state (a callback
// was sent for it).
func (t *Transaction) Final() bool {
	switch t.Status {
	case StatusApproved, StatusRejected, StatusExpired, StatusPaid:
		return true
	}
	return false
}

// Balance is the site's treasury.
type Balance struct {
	Balance            int64  `json:"balance"`
	PendingWithdrawals int64  `json:"pendingWithdrawals"`
	NegativeLimit      int64  `json:"negativeLimit"`
	Available          int64  `json:"available"`
	Currency           string `json:"currency"`
}

// Method is an enabled payment method.
type Method struct {
	ID             string `json:"_id"`
	Code           string `json:"code"`
	Name           string `json:"name"`
	IdentifierKind string `json:"identifierKind"`
	MinAmount      int64  `json:"minAmount"`
	MaxAmount      int64  `json:"maxAmount"`
	Deposit        bool   `json:"deposit"`
	Withdraw       bool   `json:"withdraw"`
}
