// Package recipient validates the identifier a withdrawal is paid to (a
// wallet phone number, a card number, an account number, an Iraqi IBAN or a
// username) against the identifierKind its method declares.
//
// Identifiers are checked exactly as sent: nothing is trimmed, reformatted or
// case-folded, and only ASCII digits count as digits. What passes is then
// stored and shown to the operator who pays it, so an identifier that needed
// cleaning up is refused rather than silently changed into something the
// merchant did not send.
//
// The formats are those of the contract:
//
//   - PHONE: "07" followed by exactly 9 digits (11 characters);
//   - CARD_NO: 10 to 19 digits;
//   - ACCOUNT_NO: 6 to 20 digits;
//   - IBAN: an Iraqi IBAN, "IQ", 2 check digits, 4 upper-case letters (the
//     bank code) and 15 digits (23 characters), whose ISO 13616 mod-97
//     remainder is 1;
//   - USERNAME: 3 to 64 ASCII letters, digits, '.', '_' or '-'.
package recipient

import (
	"errors"
	"fmt"
)

// Kind is a method's identifierKind. It is a string so that it travels
// unchanged through JSON and events; use ParseKind at the edges to keep
// unknown values out.
type Kind string

// The five identifier kinds of the contract, spelled as merchants send and
// receive them.
const (
	Phone     Kind = "PHONE"
	CardNo    Kind = "CARD_NO"
	AccountNo Kind = "ACCOUNT_NO"
	IBAN      Kind = "IBAN"
	Username  Kind = "USERNAME"
)

// ErrInvalidIdentifier is matched (with errors.Is) by every FormatError, so a
// caller can map any malformed identifier to the invalid_identifier code
// without caring which kind failed.
var ErrInvalidIdentifier = errors.New("invalid identifier")

// ErrUnknownKind is returned by ParseKind and Validate for a kind outside the
// contract's five. It is kept apart from ErrInvalidIdentifier because it
// signals a bad method definition, not a bad identifier from a merchant.
var ErrUnknownKind = errors.New("unknown identifier kind")

// FormatError reports an identifier that does not fit its kind. It carries
// the kind and the expected format in words so that the API can tell the
// merchant what to send instead of only that something was wrong.
type FormatError struct {
	Kind     Kind
	Expected string
}

// Error names the kind and its format in plain English, for example
// "PHONE must be 07 followed by 9 digits"; the message is meant to be shown
// to merchants as is.
func (e *FormatError) Error() string { return fmt.Sprintf("%s must be %s", e.Kind, e.Expected) }

// Is lets errors.Is(err, ErrInvalidIdentifier) recognise a FormatError
// without callers needing errors.As.
func (e *FormatError) Is(target error) bool { return target == ErrInvalidIdentifier }

// ParseKind converts a kind name into a Kind. It is exact and case-sensitive,
// because the kind is echoed back to merchants and must match the contract's
// spelling; anything else yields an error wrapping ErrUnknownKind.
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if !k.Valid() {
		return "", fmt.Errorf("%w: %q", ErrUnknownKind, s)
	}
	return k, nil
}

// Valid reports whether k is one of the five kinds, so that a Kind built by
// conversion rather than ParseKind can still be checked.
func (k Kind) Valid() bool {
	switch k {
	case Phone, CardNo, AccountNo, IBAN, Username:
		return true
	}
	return false
}

// Expected describes the format of k in plain English. It is the text of a
// FormatError and is exposed so that documentation and listings can show the
// same wording the errors use.
func Expected(k Kind) string {
	switch k {
	case Phone:
		return "07 followed by 9 digits"
	case CardNo:
		return "10 to 19 digits"
	case AccountNo:
		return "6 to 20 digits"
	case IBAN:
		return "an Iraqi IBAN: IQ, 2 check digits, 4 capital letters and 15 digits (23 characters) with valid check digits"
	case Username:
		return "3 to 64 letters, digits, '.', '_' or '-'"
	}
	return "one of PHONE, CARD_NO, ACCOUNT_NO, IBAN or USERNAME"
}

// Validate checks id against the format of k. It returns nil when id fits, a
// *FormatError (matching ErrInvalidIdentifier) when it does not, and an error
// wrapping ErrUnknownKind when k is not a known kind.
func Validate(k Kind, id string) error {
	var ok bool
	switch k {
	case Phone:
		ok = len(id) == 11 && id[:2] == "07" && digits(id[2:])
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

// digits works on bytes, not runes, so that any non-ASCII digit (whose UTF-8
// bytes are all >= 0x80) is refused.
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func upperLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

func usernameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// validIBAN checks the Iraqi layout first, so that mod97 only ever sees ASCII
// digits and capitals, then the ISO 13616 check: the number rearranged with
// its first four characters at the end must leave 1 modulo 97.
func validIBAN(s string) bool {
	if len(s) != 23 || s[:2] != "IQ" || !digits(s[2:4]) || !upperLetters(s[4:8]) || !digits(s[8:]) {
		return false
	}
	return mod97(s[4:]+s[:4]) == 1
}

// mod97 returns the remainder modulo 97 of s read as the ISO 7064 number in
// which each letter stands for two digits (A=10 … Z=35). It folds the
// remainder in digit by digit, so no big integers are needed. s must hold
// only ASCII digits and capitals; anything else gives -1.
func mod97(s string) int {
	r := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			r = (r*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			r = (r*100 + int(c-'A') + 10) % 97
		default:
			return -1
		}
	}
	return r
}
