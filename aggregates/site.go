package aggregates

import (
	"crypto/sha256"
	"encoding/binary"
	"iter"
	"maps"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Kind is the kind of a transaction.
type Kind uint8

// Transaction kinds.
const (
	KindDeposit    Kind = 1
	KindWithdrawal Kind = 2
)

// String returns the record's `type` value.
func (k Kind) String() string {
	if k == KindDeposit {
		return "deposit"
	}
	return "withdrawal"
}

// Status is a transaction state (docs/merchant-api.md "States").
type Status uint8

// Transaction states.
const (
	StatusPending Status = iota + 1
	StatusProcessing
	StatusApproved
	StatusRejected
	StatusExpired
	StatusPaid
)

var statusNames = [...]string{"", "pending", "processing", "approved", "rejected", "expired", "paid"}

// String returns the record's `status` value.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown"
}

// ParseStatus is the inverse of String.
func ParseStatus(s string) (Status, bool) {
	for i, n := range statusNames {
		if i > 0 && n == s {
			return Status(i), true
		}
	}
	return 0, false
}

// Final reports whether the state ends the transaction as far as the merchant
// is told: a final state triggers a callback. An expired deposit is final even
// though an operator may still approve it after a late transfer.
func (s Status) Final() bool {
	return s == StatusApproved || s == StatusRejected || s == StatusExpired || s == StatusPaid
}

// Tx is the compact state of one transaction: what decisions need, plus where
// its creation event is stored so the full record can be read back. Keeping it
// small is what lets a million transactions fit in memory.
//
// Fields the creation event holds and no decision needs (bankId, creation
// time, names, accounts) are not repeated here, and a Tx holds no pointer, so
// the garbage collector never scans the transactions. A deposit's userId,
// which the pending-deposit index compares, is kept in the processId arena.
type Tx struct {
	//lint:ignore U1000 msgpack reads this field's tag: the struct is encoded as an array
	_msgpack struct{} `msgpack:",as_array"`
	// PidOff locates the processId, followed by a deposit's userId, in the
	// site's processId arena.
	PidOff uint32
	Kind   Kind
	Status Status
	// EvIdx is the index of the creation event within its message.
	EvIdx uint16
	// Amount is the current amount: the approved amount once approved.
	Amount int64
	// Requested is the amount the merchant asked for.
	Requested int64
	// Fingerprint identifies the request parameters that must match on an
	// idempotent repeat (type, amount, bankId, userId).
	Fingerprint uint64
	// ExpiresAt is the deposit's expiry in Unix ms (0 for withdrawals).
	ExpiresAt int64
	// UpdatedAt is the time of the last change, in Unix ms.
	UpdatedAt int64
	// Seq is the stream sequence of the message holding the creation event.
	Seq uint64
	// HostedKey is HostedKey of a deposit's hosted page token (0: no
	// hosted page). The page checks a token against it before it reads
	// anything from the store, so guessing tokens costs the gateway no I/O.
	HostedKey uint64
}

// HostedKey is the first 64 bits of the SHA-256 of a hosted page token, never
// 0 for a token ("" has none). It only sorts out wrong tokens: a match is
// confirmed against the whole token, in constant time.
func HostedKey(token string) uint64 {
	if token == "" {
		return 0
	}
	sum := sha256.Sum256([]byte(token))
	return max(binary.BigEndian.Uint64(sum[:8]), 1)
}

// Config is a site's settings. A Config is never modified after it is
// published in a Site: changes replace it, so readers may keep a pointer.
type Config struct {
	Settings `msgpack:",inline"`

	AppKey                 string
	Secret                 string
	PrevSecret             string
	PrevSecretUntil        int64
	WebhookSecret          string
	PrevWebhookSecret      string
	PrevWebhookSecretUntil int64
	CreatedAt              int64
	// Sandbox: a test site whose merchant moves its own transactions;
	// chosen at creation, never changed.
	Sandbox bool
	// OwnMethods: the site offers exactly Methods (site.methods_set);
	// otherwise every enabled method.
	OwnMethods bool
	Methods    []events.SiteMethod
	// IdempotencyKey and RequestHash are those of the request that
	// created the site ("" when it had no Idempotency-Key).
	IdempotencyKey string
	RequestHash    string
}

// DefaultDepositTTLSeconds is the deposit validity when a site sets none.
const DefaultDepositTTLSeconds = 1800

// Site is the aggregate of one merchant site: its settings, its treasury and
// its transactions. All of a site's events live on one subject, so its
// history is totally ordered and every append carries the sequence it was
// decided at; that position is kept by whoever applies the messages (see
// events.Position), not here.
type Site struct {
	// ID is the site id, also the last token of its subject.
	ID ids.SiteID
	// Cfg is nil until the site.created event is applied.
	Cfg *Config
	// Balance is the treasury: adjustments + approved deposits − paid withdrawals.
	Balance int64
	// PendingWithdrawals is the sum of withdrawals pending or processing.
	PendingWithdrawals int64
	// Txs holds every transaction, indexed by creation order.
	Txs []Tx

	pids pidIndex
	// pending finds each end user's pending deposit.
	pending pendingIndex
	// userKey is UserKey; a test replaces it to make userIds collide.
	userKey  func(string) uint64
	rotation map[string]uint64
	reasons  map[int32]string
	intern   map[string]string
	// aliases maps the processIds answered with an earlier pending
	// deposit to it (deposit.alias_added); nil until the first.
	aliases map[string]Alias
	// adjusted holds the answers of keyed treasury adjustments by key;
	// nil until the first (they are rare, and cost nothing per
	// transaction).
	adjusted map[string]AdjustmentAnswer
	// created is Cfg as the site's keyed creation answered it (nil when
	// created without a key); Cfg is replaced, never changed, so the two
	// share one value until the first update.
	created *Config
	j       *journal
}

// NewSite returns the empty state of site id, before its creation event.
func NewSite(id ids.SiteID) *Site {
	return &Site{
		ID:       id,
		pids:     newPidIndex(0),
		pending:  newPendingIndex(),
		userKey:  UserKey,
		rotation: map[string]uint64{},
		reasons:  map[int32]string{},
		intern:   map[string]string{},
	}
}

// Created reports whether the site exists.
func (s *Site) Created() bool { return s.Cfg != nil }

// Lookup returns the index of the transaction with the given id.
func (s *Site) Lookup(txID ids.TxID) (int32, bool) {
	idx, ok := txID.Index()
	if !ok || txID.Site() != s.ID || int(idx) >= len(s.Txs) {
		return 0, false
	}
	return idx, true
}

// ByProcessID returns the index of the transaction with processId.
func (s *Site) ByProcessID(pid string) (int32, bool) {
	return s.pids.lookup(s.Txs, pid)
}

// Alias is a processId that names an earlier pending deposit: the
// transaction, and the fingerprint of the request a repeat must match.
type Alias struct {
	//lint:ignore U1000 msgpack reads this field's tag: the struct is encoded as an array
	_msgpack    struct{} `msgpack:",as_array"`
	Tx          int32
	Fingerprint uint64
}

// Offer is how the site offers method b: its limits and accounts (the
// method's unless the site sets its own); ok is false when the site does
// not offer it.
func (c *Config) Offer(b *Bank) (minAmount, maxAmount int64, accounts []events.Account, ok bool) {
	minAmount, maxAmount, accounts = b.MinAmount, b.MaxAmount, b.Accounts
	if c == nil || !c.OwnMethods {
		return minAmount, maxAmount, accounts, !b.Scoped
	}
	for _, m := range c.Methods {
		if m.BankID != b.ID {
			continue
		}
		if m.MinAmount != 0 {
			minAmount = m.MinAmount
		}
		if m.MaxAmount != 0 {
			maxAmount = m.MaxAmount
		}
		if len(m.Accounts) > 0 {
			accounts = m.Accounts
		}
		return minAmount, maxAmount, accounts, true
	}
	return 0, 0, nil, false
}

// ByAlias returns the deposit a processId names as an alias.
func (s *Site) ByAlias(pid string) (int32, bool) {
	a, ok := s.aliases[pid]
	return a.Tx, ok
}

// Aliases returns every alias by its processId, in no particular order
// (audits compare them; the map is the site's own).
func (s *Site) Aliases() iter.Seq2[string, Alias] {
	return maps.All(s.aliases)
}

// ProcessID returns the processId of transaction i.
func (s *Site) ProcessID(i int32) string {
	return string(s.pids.at(s.Txs[i].PidOff))
}

// UserID returns the userId of deposit i ("" for a withdrawal, whose userId
// only its creation event holds).
func (s *Site) UserID(i int32) string {
	return string(s.pids.user(s.Txs[i].PidOff))
}

// Reason returns the status reason of transaction i ("" when none).
func (s *Site) Reason(i int32) string { return s.reasons[i] }

// Treasury returns the site's treasury as the treasury rule reads it.
func (s *Site) Treasury() Treasury {
	return Treasury{Balance: s.Balance, PendingWithdrawals: s.PendingWithdrawals, NegativeLimit: s.Cfg.NegativeLimit}
}

// Available is what a new withdrawal may still reserve (Treasury.Available).
func (s *Site) Available() int64 { return s.Treasury().Available() }

// PendingDeposits calls fn for every pending deposit, for expiry sweeps.
func (s *Site) PendingDeposits(fn func(i int32, tx *Tx)) {
	for _, i := range s.pending.byKey {
		fn(i, &s.Txs[i])
	}
	for _, i := range s.pending.collide {
		fn(i, &s.Txs[i])
	}
}

// UserKey identifies an end user in the pending-deposit index by a 64-bit
// FNV-1a hash of the userId instead of the string, which keeps a million
// pending deposits small. A hash hit is confirmed against the userId kept in
// the processId arena, and a second user with the same key is indexed by
// its userId apart, so colliding userIds never see each other's pending
// deposit (see pendingIndex).
func UserKey(userID string) uint64 { return hash64(userID) }

func (s *Site) internStr(v string) string {
	if c, ok := s.intern[v]; ok {
		return c
	}
	s.intern[v] = v
	return v
}
