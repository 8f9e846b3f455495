// Package ids holds the identifiers that reach the gateway from outside, in
// URLs, query strings and bodies: sites, transactions, methods, operators
// and callback events. Each is a type, made only by parsing a string in the
// format the gateway mints (or by minting one), so code below the HTTP edge
// takes a type and never an arbitrary string.
//
// Ids become JetStream subject tokens (a site id is the last token of its
// subject), where '*' and '>' are wildcards and '.' separates tokens. The
// grammar here admits none of them: letters, digits, '_' and '-' only.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every parse error.
var ErrInvalid = errors.New("invalid id")

// MaxLen is the longest id of any kind (a transaction id is its site id,
// '-', and up to 6 base-36 digits).
const MaxLen = 64

// SiteID names a merchant site and its subject (events.SiteSubject).
type SiteID string

// TxID names a transaction: its site id, '-', and its 1-based position in
// the site's history in base 36. The site is part of the id so an operator
// action finds its aggregate without another index.
type TxID string

// OperatorID names a named operator.
type OperatorID string

// BankID is a method's _id.
type BankID string

// EventID names one event of the ledger stream: the sequence of the message
// holding it and its index within the message. It is the callbacks'
// webhook-id ("<seq>-<index>").
type EventID struct {
	Seq   uint64
	Index int
}

// Token reports whether s is 1 to max letters, digits, '_' or '-', starting
// with a letter or a digit.
func Token(s string, max int) bool {
	if s == "" || len(s) > max || s[0] == '_' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// maxSiteLen leaves room in a TxID for the '-' and the index.
const maxSiteLen = MaxLen - 8

func invalid(kind, s string) error {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Errorf("%w: %s %q", ErrInvalid, kind, s)
}

// ParseSite parses a site id.
func ParseSite(s string) (SiteID, error) {
	if !Token(s, maxSiteLen) {
		return "", invalid("site id", s)
	}
	return SiteID(s), nil
}

// ParseOperator parses an operator id.
func ParseOperator(s string) (OperatorID, error) {
	if !Token(s, MaxLen) {
		return "", invalid("operator id", s)
	}
	return OperatorID(s), nil
}

// ParseBank parses a method _id.
func ParseBank(s string) (BankID, error) {
	if !Token(s, MaxLen) {
		return "", invalid("method id", s)
	}
	return BankID(s), nil
}

// maxTxIndex bounds a site's transactions (and the index part of a TxID).
const maxTxIndex = 1<<31 - 1

// NewTx returns the id of site's i-th transaction (0-based).
func NewTx(site SiteID, i int32) TxID {
	return TxID(string(site) + "-" + strconv.FormatUint(uint64(i)+1, 36))
}

// ParseTx parses a transaction id. The index must be written as NewTx
// writes it (no leading zeros, lower case), so each transaction has exactly
// one id.
func ParseTx(s string) (TxID, error) {
	if _, _, ok := splitTx(s); !ok {
		return "", invalid("transaction id", s)
	}
	return TxID(s), nil
}

func splitTx(s string) (SiteID, int32, bool) {
	k := strings.LastIndexByte(s, '-')
	if k <= 0 || k == len(s)-1 || len(s) > MaxLen || !Token(s[:k], maxSiteLen) {
		return "", 0, false
	}
	n, err := strconv.ParseUint(s[k+1:], 36, 31)
	if err != nil || n == 0 || n > maxTxIndex || strconv.FormatUint(n, 36) != s[k+1:] {
		return "", 0, false
	}
	return SiteID(s[:k]), int32(n - 1), true
}

// Site returns the site the transaction belongs to ("" when t was not made
// by NewTx or ParseTx).
func (t TxID) Site() SiteID {
	s, _, _ := splitTx(string(t))
	return s
}

// Index returns the transaction's 0-based position in its site, and false
// when t was not made by NewTx or ParseTx.
func (t TxID) Index() (int32, bool) {
	_, i, ok := splitTx(string(t))
	return i, ok
}

// String returns the id as it is shown.
func (e EventID) String() string {
	return strconv.FormatUint(e.Seq, 10) + "-" + strconv.Itoa(e.Index)
}

// MaxEventIndex is the highest index of an event in a message (the index
// of an event id).
const MaxEventIndex = 1 << 16

// ParseEvent parses "<seq>-<index>", both in canonical decimal.
func ParseEvent(s string) (EventID, error) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return EventID{}, invalid("event id", s)
	}
	seq, err := strconv.ParseUint(a, 10, 64)
	if err != nil || seq == 0 || strconv.FormatUint(seq, 10) != a {
		return EventID{}, invalid("event id", s)
	}
	n, err := strconv.Atoi(b)
	if err != nil || n < 0 || n > MaxEventIndex || strconv.Itoa(n) != b {
		return EventID{}, invalid("event id", s)
	}
	return EventID{Seq: seq, Index: n}, nil
}

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

// NewSite mints a site id: "s" and 64 random bits in lower-case base32.
func NewSite() SiteID { return SiteID("s" + lowerBase32.EncodeToString(random(8))) }

// SiteForKey derives the id of the site created with Idempotency-Key key:
// "s" and the first 64 bits of SHA-256("site:" + key) in lower-case base32,
// the shape NewSite mints. Every request that carries the key, through any
// gateway process, addresses the same site subject, so the subject's
// expected sequence lets exactly one of them create it.
func SiteForKey(key string) SiteID {
	sum := sha256.Sum256([]byte("site:" + key))
	return SiteID("s" + lowerBase32.EncodeToString(sum[:8]))
}

// NewOperator mints an operator id: "o" and 64 random bits.
func NewOperator() OperatorID { return OperatorID("o" + lowerBase32.EncodeToString(random(8))) }

// NewAppKey mints a site's application key: "ak_" and 120 random bits in
// lower-case base32. It is looked up, never made into a subject.
func NewAppKey() string { return "ak_" + lowerBase32.EncodeToString(random(15)) }

// NewBank mints a method _id: 96 random bits in hex.
func NewBank() BankID { return BankID(hex.EncodeToString(random(12))) }

// BankForKey derives the _id of the method created with Idempotency-Key
// key: the first 96 bits of SHA-256("bank:" + key) in hex, the shape NewBank
// mints, so a repeat of the key names the method the first request created.
func BankForKey(key string) BankID {
	sum := sha256.Sum256([]byte("bank:" + key))
	return BankID(hex.EncodeToString(sum[:12]))
}
