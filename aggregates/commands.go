package aggregates

// The commands a site decides (Site.Decide).

import (
	"time"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Command is implemented by every site command.
type Command interface{ siteCommand() }

// CreateSite opens a site. Ids and secrets are chosen by the caller. With
// an IdempotencyKey the site must be the one ids.SiteForKey derives, and
// RequestHash is the SHA-256 (hex) of the request body: a repeat of the
// key finds the site and answers as the first request did.
type CreateSite struct {
	AppKey         string
	Secret         string
	WebhookSecret  string
	Settings       SiteSettings
	IdempotencyKey string
	RequestHash    string
}

// UpdateSite changes settings.
type UpdateSite struct{ Settings SiteSettings }

// RotateSecret replaces the signing secret (or the webhook secret), keeping
// the old one valid for Overlap.
type RotateSecret struct {
	Webhook bool
	Secret  string
	Overlap time.Duration
}

// AdjustTreasury credits or debits the treasury. With an IdempotencyKey
// (RequestHash is the SHA-256, hex, of the request body) a repeat of the key
// moves nothing and is answered with the first adjustment's balance.
type AdjustTreasury struct {
	Amount         int64
	Reason         string
	IdempotencyKey string
	RequestHash    string
	// AllowBelowLimit takes the treasury below its negative limit on
	// purpose; without it such an adjustment is refused.
	AllowBelowLimit bool
}

// Request holds the fields common to deposits and withdrawals.
type Request struct {
	ProcessID string
	Amount    int64
	UserID    string
	UserName  string
	Name      string
	// Bank is the method resolved from bankId; nil when bankId matched none.
	Bank *Bank
	// BankRef is bankId as the merchant sent it, for error messages.
	BankRef string
}

// RequestDeposit asks for a pay-in.
type RequestDeposit struct {
	Request
	SenderName string
	Lang       string
	// HostedToken is a fresh random token for the hosted page, used only
	// when the site has hostedPage enabled.
	HostedToken string
}

// RequestWithdrawal asks for a pay-out.
type RequestWithdrawal struct {
	Request
	AccountName string
	IBAN        string
}

// ApproveDeposit credits a matched deposit; Amount 0 means the requested one.
type ApproveDeposit struct {
	TxID   ids.TxID
	Amount int64
	// AnyAmount lets the caller approve more than MaxOverApproval times
	// the requested amount: an administrator (or a sandbox's merchant,
	// whose treasury is play money).
	AnyAmount bool
}

// MaxOverApproval is how many times a deposit's requested amount an
// operator may approve. A transfer of more than that is rare (a digit too
// many), and approving it credits the treasury like an adjustment, which is
// an administrator's to make (docs/operator-api.md "Transaction actions").
const MaxOverApproval = 2

// RejectDeposit closes a deposit without money.
type RejectDeposit struct {
	TxID   ids.TxID
	Reason string
}

// ExpireDeposit closes a pending deposit whose expiry has passed.
type ExpireDeposit struct {
	TxID ids.TxID
	// Now expires the deposit before its expiresAt: a sandbox site's
	// merchant trying the flow (refused on any other site).
	Now bool
}

// ProcessWithdrawal records that an operator has taken a withdrawal.
type ProcessWithdrawal struct{ TxID ids.TxID }

// PayWithdrawal records that a withdrawal was paid out.
type PayWithdrawal struct {
	TxID      ids.TxID
	Reference string
}

// SetSiteMethods sets the methods a site offers (events.SiteMethodsSet):
// every enabled one (All), or exactly Methods, their BankIDs resolved.
type SetSiteMethods struct {
	All     bool
	Methods []events.SiteMethod
}

// SandboxCallback asks for a test callback of Type about a transaction of
// a sandbox site.
type SandboxCallback struct {
	TxID ids.TxID
	Type string
}

// RejectWithdrawal releases a withdrawal's reservation.
type RejectWithdrawal struct {
	TxID   ids.TxID
	Reason string
}

func (CreateSite) siteCommand()        {}
func (SandboxCallback) siteCommand()   {}
func (SetSiteMethods) siteCommand()    {}
func (UpdateSite) siteCommand()        {}
func (RotateSecret) siteCommand()      {}
func (AdjustTreasury) siteCommand()    {}
func (RequestDeposit) siteCommand()    {}
func (RequestWithdrawal) siteCommand() {}
func (ApproveDeposit) siteCommand()    {}
func (RejectDeposit) siteCommand()     {}
func (ExpireDeposit) siteCommand()     {}
func (ProcessWithdrawal) siteCommand() {}
func (PayWithdrawal) siteCommand()     {}
func (RejectWithdrawal) siteCommand()  {}
