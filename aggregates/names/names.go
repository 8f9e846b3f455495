// Package names derives convertedName, the normalized form of an end user's
// full name that operators use to match an incoming transfer to a deposit.
//
// A bank or wallet statement rarely spells a name exactly as the merchant
// sent it: spacing, punctuation, case, Arabic vowel marks and the choice
// between look-alike Arabic letters vary. convertedName removes exactly those
// differences, and nothing more, so two spellings of the same name compare
// equal while different names stay different.
//
// The rule is published and applied rune by rune, in this order:
//
//  1. Arabic-Indic digits ٠–٩ (U+0660–U+0669) and Extended Arabic-Indic
//     digits ۰–۹ (U+06F0–U+06F9) become ASCII 0–9.
//  2. Arabic diacritics are removed: U+064B–U+065F (harakat: fathatan to
//     wavy hamza below, including shadda and sukun), superscript alef U+0670
//     and the Quranic marks U+06D6–U+06ED. Tatweel U+0640 is removed.
//  3. The alef forms أ U+0623, إ U+0625, آ U+0622 and ٱ U+0671 become ا
//     U+0627; ta marbuta ة U+0629 becomes ه U+0647; alef maqsura ى U+0649
//     becomes ي U+064A.
//  4. Any other letter (unicode.IsLetter) is lower-cased with
//     unicode.ToLower and kept; accents on precomposed Latin letters are kept
//     (é stays é).
//  5. Any other decimal digit (unicode.IsDigit) is kept as it is.
//  6. Everything else is removed: spaces and all other white space,
//     punctuation, symbols, control and format characters (such as the
//     zero-width non-joiner), combining marks outside the ranges of step 2,
//     non-decimal numbers (², ½, Ⅳ) and bytes that are not valid UTF-8.
//
// No Unicode normalization (NFC/NFKC) is applied. A name sent in decomposed
// form therefore loses its combining accents in step 6 ("e" + U+0301 becomes
// "e"), while the precomposed "é" is kept; senders that want accents kept
// should send NFC text.
//
// Persian and Kurdish letters are deliberately left alone: Farsi yeh ی
// U+06CC, keheh ک U+06A9, and Kurdish letters such as ڕ, ێ, ۆ and ە are kept
// as they are, because Kurdish writes them distinctly from their Arabic
// look-alikes and folding them would merge different names.
//
// The result is idempotent: converting a convertedName returns it unchanged.
package names

import (
	"strings"
	"unicode"
)

// Convert returns the convertedName of name under the rule in the package
// documentation. It never fails: a name with nothing left to match on yields
// the empty string, and the caller decides whether that is acceptable.
func Convert(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if r, keep := fold(r); keep {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// fold applies the rule to one rune and reports whether it is kept. The
// Arabic cases come first because the Arabic-Indic digits and the removed
// marks are not all caught by the generic letter and digit tests below
// (U+06E5 and U+06E6 are letters, for instance).
func fold(r rune) (rune, bool) {
	switch {
	case r >= 0x0660 && r <= 0x0669:
		return '0' + r - 0x0660, true
	case r >= 0x06F0 && r <= 0x06F9:
		return '0' + r - 0x06F0, true
	case r >= 0x064B && r <= 0x065F, r == 0x0670, r >= 0x06D6 && r <= 0x06ED, r == 0x0640:
		return 0, false
	case r == 0x0623, r == 0x0625, r == 0x0622, r == 0x0671:
		return 0x0627, true
	case r == 0x0629:
		return 0x0647, true
	case r == 0x0649:
		return 0x064A, true
	case unicode.IsLetter(r):
		return unicode.ToLower(r), true
	case unicode.IsDigit(r):
		return r, true
	}
	return 0, false
}
