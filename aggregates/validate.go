package aggregates

// The checks of what a command carries, before anything is decided: site
// settings, merchant requests, texts and a site's own methods.

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// validateSettings checks the settings that are present.
func validateSettings(st SiteSettings) error {
	if st.Name != nil {
		if err := checkText("name", *st.Name, maxTextLen); err != nil {
			return err
		}
	}
	if st.NegativeLimit != nil && (*st.NegativeLimit > 0 || *st.NegativeLimit < -maxAmount) {
		return fieldErr("negativeLimit", ErrInvalidRequest, "negativeLimit must be zero or negative, and at least -2^50 (-1125899906842624)")
	}
	if st.IPAllowlist != nil {
		for _, c := range *st.IPAllowlist {
			if _, err := ParseAllowEntry(c); err != nil {
				return fieldErr("ipAllowlist", ErrInvalidRequest, "%q is not an IP address or CIDR", c)
			}
		}
	}
	if st.CallbackURL != nil && *st.CallbackURL != "" {
		if err := ValidateCallbackURL(*st.CallbackURL); err != nil {
			return err
		}
	}
	if st.DepositTTLSeconds != nil && (*st.DepositTTLSeconds < 60 || *st.DepositTTLSeconds > 7*24*3600) {
		return fieldErr("depositTtlSeconds", ErrInvalidRequest, "depositTtlSeconds must be 60 to 604800")
	}
	if st.RateLimit != nil && (*st.RateLimit < 0 || *st.RateLimit > 1_000_000) {
		return fieldErr("rateLimit", ErrInvalidRequest, "rateLimit must be 0 (no limit) to 1000000 requests per second")
	}
	if st.ReturnURL != nil && *st.ReturnURL != "" {
		if why := webURL(*st.ReturnURL); why != "" {
			return fieldErr("returnUrl", ErrInvalidRequest, "returnUrl %s (\"\" removes it)", why)
		}
	}
	if st.SupportContact != nil && *st.SupportContact != "" {
		if err := checkText("supportContact", *st.SupportContact, maxTextLen); err != nil {
			return err
		}
	}
	return nil
}

// ParseAllowEntry parses one allowlist entry (a site's IP allowlist or a
// trusted proxy): a CIDR or a single address. IPv4-mapped IPv6 entries
// become IPv4 ("::ffff:10.0.0.0/104" is 10.0.0.0/8, "::ffff:1.2.3.4" is
// 1.2.3.4/32), because the addresses they are matched against are
// unmapped: written as IPv6 they would match nothing. A mapped prefix
// shorter than /96 reaches beyond the mapped range and has no IPv4 form;
// it is refused rather than silently widened or narrowed.
func ParseAllowEntry(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		if !p.Addr().Is4In6() {
			return p.Masked(), nil
		}
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("IPv4-mapped prefix %s is shorter than /96 and has no IPv4 form", s)
		}
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		// A zone may hold any character ("fe80::1%x/64" parses), and
		// matched addresses carry none: refuse it as ParsePrefix does.
		return netip.Prefix{}, fmt.Errorf("address %s has a zone, which an allowlist cannot match", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ValidateCallbackURL requires an absolute http or https URL with a host.
func ValidateCallbackURL(raw string) error {
	if why := webURL(raw); why != "" {
		return fieldErr("callbackUrl", ErrInvalidRequest, "callbackUrl %s", why)
	}
	return nil
}

// webURL says what keeps raw from being an absolute http or https URL with
// a host, a port (if any) that exists, no user information, no white space,
// control or invisible character, at most 2048 bytes: one that can be
// called (or followed) as it is written, and read as it will be called.
// "" is a usable URL.
func webURL(raw string) string {
	if len(raw) > 2048 {
		return "must be at most 2048 bytes"
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return isControl(r) || blankRune(r) }) {
		return "must not hold white space, control or invisible characters"
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "" {
		return "must be an absolute http or https URL"
	}
	if u.User != nil {
		return "must not hold a user name or password"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "must have a port from 1 to 65535"
		}
	}
	return ""
}

func (s *Site) validateRequest(r Request, k Kind) error {
	if err := checkText("processId", r.ProcessID, maxIDLen); err != nil {
		return err
	}
	if err := checkText("userId", r.UserID, maxIDLen); err != nil {
		return err
	}
	if err := checkText("userName", r.UserName, maxTextLen); err != nil {
		return err
	}
	if err := checkText("name", r.Name, maxTextLen); err != nil {
		return err
	}
	if r.Amount <= 0 || r.Amount > maxAmount {
		return fieldErr("amount", ErrInvalidRequest, "amount must be a positive integer of at most 2^50 (1125899906842624)")
	}
	if r.Bank == nil || !r.Bank.Supports(k) {
		return fieldErr("bankId", ErrUnknownBank, "bankId %q is not an enabled %s method", r.BankRef, k)
	}
	minAmount, maxAmount, _, ok := s.Cfg.Offer(r.Bank)
	if !ok {
		return fieldErr("bankId", ErrUnknownBank, "bankId %q is not a %s method of this site", r.BankRef, k)
	}
	if r.Amount < minAmount || r.Amount > maxAmount {
		return fieldErr("amount", ErrAmountOutOfRange, "amount must be between %d and %d for %s", minAmount, maxAmount, r.Bank.Code)
	}
	return nil
}

// Blank reports whether v shows nothing: empty, or only white space and
// invisible characters (blankRune). An optional text that is blank counts
// as not given.
func Blank(v string) bool { return strings.TrimFunc(v, blankRune) == "" }

// checkText refuses a blank text, and one over max bytes, not UTF-8 or
// holding a control character: records, callbacks and the console carry a
// text as it was given (docs/errors.md "invalid_request").
func checkText(field, v string, max int) error {
	if Blank(v) {
		return fieldErr(field, ErrInvalidRequest, "%s is required", field)
	}
	return checkOptionalText(field, v, max)
}

// checkOptionalText is checkText for a field that may be left empty (a
// payment's reference).
func checkOptionalText(field, v string, max int) error {
	switch {
	case len(v) > max:
		return fieldErr(field, ErrInvalidRequest, "%s must be valid text of at most %d bytes", field, max)
	case !utf8.ValidString(v):
		return fieldErr(field, ErrInvalidRequest, "%s must be valid UTF-8 text", field)
	case strings.ContainsFunc(v, isControl):
		return fieldErr(field, ErrInvalidRequest, "%s must not hold control characters", field)
	}
	return nil
}

// blankRune is white space, an invisible format character (a zero-width
// space or joiner, a bidi mark, a byte order mark), another character
// Unicode says to show as nothing (a Hangul filler, the combining grapheme
// joiner, a variation selector) or the blank Braille pattern: a text of
// nothing else shows nothing. Inside a text they stay (a zero-width
// non-joiner is part of Persian and Kurdish spelling).
func blankRune(r rune) bool {
	return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r) || r == '\u2800'
}

// isControl is a C0 or C1 control character (DEL included), a line or
// paragraph separator (a line break, as a newline is), or a noncharacter
// (U+FFFE and its kin, which Unicode keeps out of interchange).
func isControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == '\u2028' || r == '\u2029' ||
		(r >= 0xfdd0 && r <= 0xfdef) || r&0xfffe == 0xfffe
}

// checkSiteMethods checks a site's methods: All alone, or at least one
// method, each once, its own limits positive and in order, its accounts
// complete.
func checkSiteMethods(c SetSiteMethods) error {
	if c.All {
		if len(c.Methods) > 0 {
			return fieldErr("methods", ErrInvalidRequest, "give all: true or methods, not both")
		}
		return nil
	}
	if len(c.Methods) == 0 {
		return fieldErr("methods", ErrInvalidRequest, "methods must list at least one method (all: true offers every enabled one)")
	}
	seen := map[string]bool{}
	for i, m := range c.Methods {
		field := fmt.Sprintf("methods[%d]", i)
		if seen[m.BankID] {
			return fieldErr(field+".bank", ErrInvalidRequest, "the method is listed twice")
		}
		seen[m.BankID] = true
		if m.MinAmount < 0 || m.MaxAmount < 0 || m.MaxAmount > maxAmount || m.MinAmount != 0 && m.MaxAmount != 0 && m.MinAmount > m.MaxAmount {
			return fieldErr(field+".minAmount", ErrInvalidRequest, "minAmount and maxAmount must be positive whole IQD, minAmount not above maxAmount (0: the method's)")
		}
		// None: the method's own.
		if err := checkAccounts(field+".accounts", false, m.Accounts); err != nil {
			return err
		}
		if err := checkAccountTexts(field+".accounts", m.Accounts); err != nil {
			return err
		}
	}
	return nil
}
