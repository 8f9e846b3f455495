package events

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/iqdgateway/gateway/ids"
)

// SiteCreated opens a merchant site's history. Secrets are kept in the stream
// because every replica must verify request signatures with them (HMAC is
// symmetric); access to the stream is access to the secrets. Written as
// site.created.v2; site.created.v1 decodes into it without a key.
type SiteCreated struct {
	SiteID            string   `msgpack:"id"`
	Name              string   `msgpack:"name"`
	AppKey            string   `msgpack:"appKey"`
	Secret            string   `msgpack:"secret"`
	WebhookSecret     string   `msgpack:"webhookSecret"`
	NegativeLimit     int64    `msgpack:"negativeLimit"`
	IPAllowlist       []string `msgpack:"ipAllowlist"`
	CallbackURL       string   `msgpack:"callbackUrl"`
	HostedPage        bool     `msgpack:"hostedPage"`
	DepositTTLSeconds int64    `msgpack:"depositTtl"`
	RateLimit         int64    `msgpack:"rateLimit"`
	// IdempotencyKey is the Idempotency-Key the operator sent with the
	// request ("" when none, and always in a v1 event): a repeat of the
	// key is answered with this event's outcome, never carried out again.
	IdempotencyKey string `msgpack:"idempotencyKey,omitempty"`
	// RequestHash is the SHA-256 (hex) of the request body that came with
	// IdempotencyKey: a repeat must send the same body.
	RequestHash string `msgpack:"requestHash,omitempty"`
}

// EventName implements Payload.
func (*SiteCreated) EventName() string { return SiteCreatedName }

func (p *SiteCreated) upcastV1() { p.IdempotencyKey, p.RequestHash = "", "" }

// SiteUpdated changes some of a site's settings; a nil field is unchanged.
// Written as site.updated.v2; site.updated.v1 decodes into it without
// Available.
type SiteUpdated struct {
	Name              *string   `msgpack:"name,omitempty"`
	NegativeLimit     *int64    `msgpack:"negativeLimit,omitempty"`
	IPAllowlist       *[]string `msgpack:"ipAllowlist,omitempty"`
	CallbackURL       *string   `msgpack:"callbackUrl,omitempty"`
	HostedPage        *bool     `msgpack:"hostedPage,omitempty"`
	DepositTTLSeconds *int64    `msgpack:"depositTtl,omitempty"`
	RateLimit         *int64    `msgpack:"rateLimit,omitempty"`
	// Available is what the treasury rule left available right after a
	// change of NegativeLimit (balance − pending withdrawals − the new
	// limit; negative when the limit was tightened below what is
	// reserved). Set exactly when NegativeLimit is, from v2 on.
	Available *int64 `msgpack:"available,omitempty"`
}

// EventName implements Payload.
func (*SiteUpdated) EventName() string { return SiteUpdatedName }

// SitePageUpdated changes what a site's hosted payment page offers the
// customer besides the deposit; a nil field is unchanged, "" removes it.
// It follows site.created in the creation's message when the creation sets
// either.
type SitePageUpdated struct {
	// ReturnURL is the merchant's page the customer goes back to.
	ReturnURL *string `msgpack:"returnUrl,omitempty"`
	// Support is how the customer reaches the merchant's support.
	Support *string `msgpack:"support,omitempty"`
	// AtCreation marks the one written by the site's creation: a repeat
	// of a keyed creation answers with it.
	AtCreation bool `msgpack:"atCreation,omitempty"`
}

// EventName implements Payload.
func (*SitePageUpdated) EventName() string { return SitePageUpdatedName }

// SiteSandbox makes the site a sandbox: a test site whose merchant moves
// its own transactions (docs/merchant-api.md "Sandbox sites"). It follows
// site.created in the creation's message, and nothing undoes it.
type SiteSandbox struct {
	Sandbox bool `msgpack:"sandbox"`
}

// EventName implements Payload.
func (*SiteSandbox) EventName() string { return SiteSandboxName }

// SiteMethodsSet sets the methods a site offers: All (every enabled
// method, with its own limits and accounts, as before any setting), or
// exactly Methods, each optionally with the site's own limits (0: the
// method's) and recipient accounts (none: the method's).
type SiteMethodsSet struct {
	All     bool         `msgpack:"all"`
	Methods []SiteMethod `msgpack:"methods,omitempty"`
}

// SiteMethod is one method as a site offers it.
type SiteMethod struct {
	BankID    string    `msgpack:"bankId"`
	MinAmount int64     `msgpack:"min,omitempty"`
	MaxAmount int64     `msgpack:"max,omitempty"`
	Accounts  []Account `msgpack:"accounts,omitempty"`
}

// EventName implements Payload.
func (*SiteMethodsSet) EventName() string { return SiteMethodsSetName }

// DepositAliasAdded records a request for a new deposit that was answered
// with the end user's pending one (alreadyPending): its processId becomes
// another name of that deposit, so that the merchant finds what it was
// given, and a repeat of the request gets the same answer. Amount, BankID
// and UserID are the request's, which a repeat must match.
type DepositAliasAdded struct {
	TxID      string `msgpack:"tx"`
	ProcessID string `msgpack:"processId"`
	Amount    int64  `msgpack:"amount"`
	BankID    string `msgpack:"bankId"`
	UserID    string `msgpack:"userId"`
}

// EventName implements Payload.
func (*DepositAliasAdded) EventName() string { return DepositAliasAddedName }

// SandboxCallback asks, on a sandbox site, for a test callback of Type
// about a transaction, delivered like the real ones (and marked test). It
// changes no state.
type SandboxCallback struct {
	TxID string `msgpack:"tx"`
	// Type is a callback type: deposit.approved, deposit.rejected,
	// deposit.expired, withdrawal.paid or withdrawal.rejected.
	Type string `msgpack:"type"`
}

// EventName implements Payload.
func (*SandboxCallback) EventName() string { return SandboxCallbackName }

// SiteSecretRotated replaces the request-signing secret; the previous one
// stays valid until PreviousValidUntil (Unix ms).
type SiteSecretRotated struct {
	Secret             string `msgpack:"secret"`
	PreviousValidUntil int64  `msgpack:"prevUntil"`
}

// EventName implements Payload.
func (*SiteSecretRotated) EventName() string { return SiteSecretRotatedName }

// SiteWebhookSecretRotated replaces the callback-signing secret; callbacks are
// signed with both until PreviousValidUntil (Unix ms).
type SiteWebhookSecretRotated struct {
	Secret             string `msgpack:"secret"`
	PreviousValidUntil int64  `msgpack:"prevUntil"`
}

// EventName implements Payload.
func (*SiteWebhookSecretRotated) EventName() string { return SiteWebhookSecretRotatedName }

// TreasuryAdjusted credits (positive) or debits (negative) the site
// treasury. Written as treasury.adjusted.v3 (v2 is v3 without
// allowBelowLimit); treasury.adjusted.v1 decodes
// into it without a key.
type TreasuryAdjusted struct {
	Amount int64  `msgpack:"amount"`
	Reason string `msgpack:"reason"`
	// IdempotencyKey is the Idempotency-Key the operator sent with the
	// request ("" when none, and always in a v1 event): a repeat of the
	// key is answered with this event's outcome, never carried out again.
	IdempotencyKey string `msgpack:"idempotencyKey,omitempty"`
	// RequestHash is the SHA-256 (hex) of the request body that came with
	// IdempotencyKey: a repeat must send the same body.
	RequestHash string `msgpack:"requestHash,omitempty"`
	// AllowBelowLimit: the operator took the treasury below its negative
	// limit on purpose (false in v1 and v2, which never checked).
	AllowBelowLimit bool `msgpack:"allowBelowLimit,omitempty"`
}

// EventName implements Payload.
func (*TreasuryAdjusted) EventName() string { return TreasuryAdjustedName }

func (p *TreasuryAdjusted) upcastV1() { p.IdempotencyKey, p.RequestHash = "", "" }

// DepositRequested records a new pending deposit and everything the merchant
// was shown for it, so the record can be served again exactly.
type DepositRequested struct {
	TxID           string `msgpack:"tx"`
	ProcessID      string `msgpack:"processId"`
	BankID         string `msgpack:"bankId"`
	BankCode       string `msgpack:"bank"`
	BankName       string `msgpack:"bankName"`
	IdentifierKind string `msgpack:"kind"`
	Amount         int64  `msgpack:"amount"`
	UserID         string `msgpack:"userId"`
	UserName       string `msgpack:"userName"`
	Name           string `msgpack:"name"`
	ConvertedName  string `msgpack:"convertedName"`
	SenderName     string `msgpack:"senderName,omitempty"`
	Lang           string `msgpack:"lang"`
	AccountName    string `msgpack:"accountName"`
	AccountNumber  string `msgpack:"accountNumber"`
	ExpiresAt      int64  `msgpack:"expiresAt"`
	// HostedToken is the unguessable token of the hosted payment page; empty
	// when the site had no hosted page when the deposit was created.
	HostedToken string `msgpack:"hostedToken,omitempty"`
}

// EventName implements Payload.
func (*DepositRequested) EventName() string { return DepositRequestedName }

// DepositApproved credits the treasury with Amount, the amount actually
// received; Requested is the amount originally asked for.
type DepositApproved struct {
	TxID      string `msgpack:"tx"`
	Amount    int64  `msgpack:"amount"`
	Requested int64  `msgpack:"requested"`
}

// EventName implements Payload.
func (*DepositApproved) EventName() string { return DepositApprovedName }

// DepositRejected closes a deposit without money moving.
type DepositRejected struct {
	TxID   string `msgpack:"tx"`
	Reason string `msgpack:"reason"`
}

// EventName implements Payload.
func (*DepositRejected) EventName() string { return DepositRejectedName }

// DepositExpired closes a pending deposit whose expiresAt has passed; an
// operator may still approve it later.
type DepositExpired struct {
	TxID string `msgpack:"tx"`
}

// EventName implements Payload.
func (*DepositExpired) EventName() string { return DepositExpiredName }

// WithdrawalRequested records a pay-out and reserves Amount from the treasury.
type WithdrawalRequested struct {
	TxID           string `msgpack:"tx"`
	ProcessID      string `msgpack:"processId"`
	BankID         string `msgpack:"bankId"`
	BankCode       string `msgpack:"bank"`
	IdentifierKind string `msgpack:"kind"`
	Amount         int64  `msgpack:"amount"`
	UserID         string `msgpack:"userId"`
	UserName       string `msgpack:"userName"`
	Name           string `msgpack:"name"`
	ConvertedName  string `msgpack:"convertedName"`
	AccountName    string `msgpack:"accountName"`
	IBAN           string `msgpack:"iban"`
}

// EventName implements Payload.
func (*WithdrawalRequested) EventName() string { return WithdrawalRequestedName }

// WithdrawalProcessing records that an operator has taken the withdrawal.
type WithdrawalProcessing struct {
	TxID string `msgpack:"tx"`
}

// EventName implements Payload.
func (*WithdrawalProcessing) EventName() string { return WithdrawalProcessingName }

// WithdrawalPaid debits the treasury and releases the reservation.
type WithdrawalPaid struct {
	TxID      string `msgpack:"tx"`
	Reference string `msgpack:"reference,omitempty"`
}

// EventName implements Payload.
func (*WithdrawalPaid) EventName() string { return WithdrawalPaidName }

// WithdrawalRejected releases the reservation without paying.
type WithdrawalRejected struct {
	TxID   string `msgpack:"tx"`
	Reason string `msgpack:"reason"`
}

// EventName implements Payload.
func (*WithdrawalRejected) EventName() string { return WithdrawalRejectedName }

// LocalizedName is a display name in the three supported languages.
type LocalizedName struct {
	En string `msgpack:"en" json:"en"`
	Ar string `msgpack:"ar" json:"ar"`
	Ku string `msgpack:"ku" json:"ku"`
}

// Account is a recipient account that end users pay deposits into.
type Account struct {
	AccountName   string `msgpack:"accountName" json:"accountName"`
	AccountNumber string `msgpack:"accountNumber" json:"accountNumber"`
}

// BankCreated adds a payment method to the catalog. Written as
// bank.created.v2; bank.created.v1 decodes into it without a key.
type BankCreated struct {
	BankID         string        `msgpack:"id"`
	Code           string        `msgpack:"code"`
	Name           LocalizedName `msgpack:"name"`
	IdentifierKind string        `msgpack:"kind"`
	MinAmount      int64         `msgpack:"min"`
	MaxAmount      int64         `msgpack:"max"`
	Deposit        bool          `msgpack:"deposit"`
	Withdraw       bool          `msgpack:"withdraw"`
	Accounts       []Account     `msgpack:"accounts"`
	// IdempotencyKey is the Idempotency-Key the operator sent with the
	// request ("" when none, and always in a v1 event): a repeat of the
	// key is answered with this event's outcome, never carried out again.
	IdempotencyKey string `msgpack:"idempotencyKey,omitempty"`
	// RequestHash is the SHA-256 (hex) of the request body that came with
	// IdempotencyKey: a repeat must send the same body.
	RequestHash string `msgpack:"requestHash,omitempty"`
}

// EventName implements Payload.
func (*BankCreated) EventName() string { return BankCreatedName }

func (p *BankCreated) upcastV1() { p.IdempotencyKey, p.RequestHash = "", "" }

// BankUpdated changes some of a method's settings; a nil field is unchanged.
// Enabled false takes the method out of listings and new requests.
type BankUpdated struct {
	BankID    string         `msgpack:"id"`
	Name      *LocalizedName `msgpack:"name,omitempty"`
	MinAmount *int64         `msgpack:"min,omitempty"`
	MaxAmount *int64         `msgpack:"max,omitempty"`
	Deposit   *bool          `msgpack:"deposit,omitempty"`
	Withdraw  *bool          `msgpack:"withdraw,omitempty"`
	Accounts  *[]Account     `msgpack:"accounts,omitempty"`
	Enabled   *bool          `msgpack:"enabled,omitempty"`
}

// EventName implements Payload.
func (*BankUpdated) EventName() string { return BankUpdatedName }

// BankScoped makes a method offered only by the sites that list it in their
// methods (site.methods_set), or, Scoped false, by every site again. A
// scoped method never appears to a site that offers every method, so a
// method made for some sites (a load test's, a pilot's) is not seen by
// the others. Its own event, not a field of bank.created or bank.updated:
// a build that does not know it refuses the message instead of offering
// the method to every site.
type BankScoped struct {
	BankID string `msgpack:"id"`
	Scoped bool   `msgpack:"scoped"`
}

// EventName implements Payload.
func (*BankScoped) EventName() string { return BankScopedName }

// OperatorCreated adds a named operator with a role. Only the SHA-256 of the
// operator's bearer token is stored (hex): the token itself is shown once,
// to the admin who created it, and is never written anywhere.
type OperatorCreated struct {
	ID        string `msgpack:"id"`
	Name      string `msgpack:"name"`
	Role      string `msgpack:"role"`
	TokenHash string `msgpack:"tokenHash"`
}

// EventName implements Payload.
func (*OperatorCreated) EventName() string { return OperatorCreatedName }

// OperatorRevoked disables an operator's token for good; the event time is
// when it stopped being accepted.
type OperatorRevoked struct {
	ID string `msgpack:"id"`
}

// EventName implements Payload.
func (*OperatorRevoked) EventName() string { return OperatorRevokedName }

// Subjects. One subject per site keeps its history totally ordered; the
// catalog of methods and the operators each have a subject of their own.
const (
	// StreamName is the ledger stream.
	StreamName = "LEDGER"
	// SubjectPrefix is the common prefix of every ledger subject.
	SubjectPrefix = "ledger."
	// SitePrefix prefixes a site subject; the rest is the site id.
	SitePrefix = "ledger.site."
	// CatalogSubject holds the methods (banks) shared by all sites.
	CatalogSubject = "ledger.catalog"
	// OperatorsSubject holds the named operators and their roles.
	OperatorsSubject = "ledger.operators"
)

// ErrBadSubjectToken is returned for a subject token that is empty or holds
// a wildcard, a separator, whitespace or a control character.
var ErrBadSubjectToken = errors.New("not a subject token")

// SubjectToken checks that tok is one literal subject token. Subjects are
// addresses with wildcards ('*', '>') and separators ('.'): a string from
// outside that became a token could read or write other sites' histories.
// Every site subject is built through SiteSubject, which calls this, so no
// caller can get around it.
func SubjectToken(tok string) error {
	if tok == "" {
		return fmt.Errorf("%w: empty", ErrBadSubjectToken)
	}
	for _, r := range tok {
		if r == '*' || r == '>' || r == '.' || unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("%w: %q", ErrBadSubjectToken, tok)
		}
	}
	return nil
}

// SiteSubject returns the subject of a site's history, refusing an id that
// is not one literal token.
func SiteSubject(siteID ids.SiteID) (string, error) {
	if err := SubjectToken(string(siteID)); err != nil {
		return "", fmt.Errorf("site subject: %w", err)
	}
	return SitePrefix + string(siteID), nil
}

// SiteOf returns the site whose subject is subject; false for any other
// subject, including a site subject whose last token is not a valid site id
// (which only a writer that went around SiteSubject could have stored).
func SiteOf(subject string) (ids.SiteID, bool) {
	rest, ok := strings.CutPrefix(subject, SitePrefix)
	if !ok {
		return "", false
	}
	id, err := ids.ParseSite(rest)
	return id, err == nil
}
