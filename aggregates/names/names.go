// Package names derives convertedName, the normalized form of an end user's
// full name that operators use to match an incoming transfer to a deposit.
//
// The rule, applied rune by rune:
//   - letters are lower-cased (unicode.ToLower); accents are kept;
//   - Arabic-Indic digits (٠–٩, U+0660–0669) and Extended Arabic-Indic
//     digits (۰–۹, U+06F0–06F9) become ASCII 0–9; other digits are kept;
//   - Arabic diacritics are removed: harakat and other combining marks
//     U+064B–U+065F, superscript alef U+0670 and Quranic marks
//     U+06D6–U+06ED; tatweel U+0640 is removed;
//   - alef forms أ U+0623, إ U+0625, آ U+0622, ٱ U+0671 become ا U+0627;
//     ta marbuta ة U+0629 becomes ه U+0647; alef maqsura ى U+0649 becomes
//     ي U+064A;
//   - everything that is not then a letter or a digit (spaces, punctuation,
//     symbols, control characters, other marks) is removed.
//
// Kurdish letters such as ڕ, ێ, ۆ, ی and ک are kept as they are: Kurdish
// writes them distinctly from their Arabic look-alikes.
package names

import (
	"strings"
	"unicode"
)

// Convert returns the convertedName of name.
func Convert(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if r = fold(r); r >= 0 {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// fold maps one rune, returning -1 for a rune that is dropped.
func fold(r rune) rune {
	switch {
	case r >= 0x0660 && r <= 0x0669:
		return '0' + (r - 0x0660)
	case r >= 0x06F0 && r <= 0x06F9:
		return '0' + (r - 0x06F0)
	case r >= 0x064B && r <= 0x065F, r == 0x0670, r >= 0x06D6 && r <= 0x06ED, r == 0x0640:
		return -1
	case r == 0x0623, r == 0x0625, r == 0x0622, r == 0x0671:
		return 0x0627
	case r == 0x0629:
		return 0x0647
	case r == 0x0649:
		return 0x064A
	}
	if unicode.IsLetter(r) {
		return unicode.ToLower(r)
	}
	if unicode.IsDigit(r) {
		return r
	}
	return -1
}
