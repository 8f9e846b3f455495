// Package recipient validates the identifier a withdrawal is paid to (a
// wallet phone number, a card number, an account number, an Iraqi IBAN or a
// username) against the kind its method declares.
//
// Identifiers are checked exactly as sent: no trimming, no reformatting, and
// only ASCII digits count as digits, so what is stored is what an operator
// pays to.
package recipient

import (
	"errors"
	"fmt"
)

// Kind is a method's identifierKind.
type Kind string

// The identifier kinds of the contract.
const (
	Phone     Kind = "PHONE"
	CardNo    Kind = "CARD_NO"
	AccountNo Kind = "ACCOUNT_NO"
	IBAN      Kind = "IBAN"
	Username  Kind = "USERNAME"
)

// ErrInvalidIdentifier matches every FormatError.
var ErrInvalidIdentifier = errors.New("invalid identifier")

// ErrUnknownKind is returned for a kind outside the contract's five.
var ErrUnknownKind = errors.New("unknown identifier kind")

// FormatError says which format an identifier failed.
type FormatError struct {
	Kind     Kind
	Expected string
}

func (e *FormatError) Error() string { return fmt.Sprintf("%s must be %s", e.Kind, e.Expected) }

// Is makes errors.Is(err, ErrInvalidIdentifier) true.
func (e *FormatError) Is(target error) bool { return target == ErrInvalidIdentifier }

// ParseKind accepts exactly one of the five kind names.
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if !k.Valid() {
		return "", fmt.Errorf("%w: %q", ErrUnknownKind, s)
	}
	return k, nil
}

// Valid reports whether k is one of the five kinds.
func (k Kind) Valid() bool {
	switch k {
	case Phone, CardNo, AccountNo, IBAN, Username:
		return true
	}
	return false
}

// Expected describes the format of k in words, for error messages.
func Expected(k Kind) string {
	switch k {
	case Phone:
		return "07 followed by 9 digits"
	case CardNo:
		return "10 to 19 digits"
	case AccountNo:
		return "6 to 20 digits"
	case IBAN:
		return "an Iraqi IBAN: IQ, 2 check digits, 4 letters and 15 digits (23 characters) with valid check digits"
	case Username:
		return "3 to 64 letters, digits, '.', '_' or '-'"
	}
	return "a known identifier kind"
}

// Validate checks id against the format of k.
func Validate(k Kind, id string) error {
	ok := false
	switch k {
	case Phone:
		ok = len(id) == 11 && id[0] == '0' && id[1] == '7' && digits(id[2:])
	case CardNo:
		ok = len(id) >= 10 && len(id) <= 19 && digits(id)
	case AccountNo:
		ok = len(id) >= 6 && len(id) <= 20 && digits(id)
	case IBAN:
		ok = validIBAN(id)
	case Username:
		ok = len(id) >= 3 && len(id) <= 64 && usernameChars(id)
	default:
		return fmt.Errorf("%w: %q", ErrUnknownKind, k)
	}
	if !ok {
		return &FormatError{Kind: k, Expected: Expected(k)}
	}
	return nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func upper(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

func usernameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validIBAN checks the Iraqi layout and the ISO 13616 mod-97 check.
func validIBAN(s string) bool {
	if len(s) != 23 || s[:2] != "IQ" || !digits(s[2:4]) || !upper(s[4:8]) || !digits(s[8:]) {
		return false
	}
	return Mod97(s[4:]+s[:4]) == 1
}

// Mod97 computes the ISO 7064 mod-97 remainder of an IBAN rearranged with its
// first four characters moved to the end, letters counting A=10 … Z=35. It
// works digit by digit, so any length fits in an int.
func Mod97(rearranged string) int {
	r := 0
	for i := 0; i < len(rearranged); i++ {
		c := rearranged[i]
		switch {
		case c >= '0' && c <= '9':
			r = (r*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			v := int(c-'A') + 10
			r = (r*100 + v) % 97
		default:
			return -1
		}
	}
	return r
}
