package names

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

type convertCase struct {
	name, in, want string
}

func runConvert(t *testing.T, cases []convertCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Convert(c.in), "Convert(%q)", c.in)
		})
	}
}

func TestConvert_seedExamples(t *testing.T) {
	runConvert(t, []convertCase{
		{"latin", "Ali Hassan", "alihassan"},
		{"latin with initial and hyphen", "Ali  H. Al-Saadi", "alihalsaadi"},
		{"arabic with harakat and ta marbuta", "فاطِمة الزَّهراء", "فاطمهالزهراء"},
		{"damma and alef maqsura", "مُصطفى", "مصطفي"},
		{"alef with hamza above", "أحمد", "احمد"},
		{"tatweel", "عـــلي", "علي"},
	})
}

func TestConvert_Latin(t *testing.T) {
	runConvert(t, []convertCase{
		{"upper case", "ALI HASSAN", "alihassan"},
		{"accents kept", "José Ñúñez", "joséñúñez"},
		{"apostrophe", "O'Brien", "obrien"},
		{"tabs and newlines", "Ali\tHassan\r\n", "alihassan"},
		{"no-break and ideographic space", "Ali\u00a0Hassan\u3000Jr", "alihassanjr"},
		{"symbols", "Ali & Sons © ™ $", "alisons"},
		{"decomposed accent dropped", "Jose\u0301", "jose"},
		{"turkish dotted capital I", "İ", "i"},
	})
}

func TestConvert_Arabic(t *testing.T) {
	runConvert(t, []convertCase{
		{"fatha kasra damma", "مَحِمُد", "محمد"},
		{"shadda", "محمّد", "محمد"},
		{"sukun", "مْ", "م"},
		{"tanwin", "كتابًا كتابٌ كتابٍ", "كتاباكتابكتاب"},
		{"upper end of harakat U+065F", "ب\u065f", "ب"},
		{"superscript alef", "هٰذا", "هذا"},
		{"quranic marks U+06D6 and U+06ED", "ب\u06d6ت\u06ed", "بت"},
		{"tatweel alone", "ـ", ""},
		{"alef with hamza above", "أ", "ا"},
		{"alef with hamza below", "إبراهيم", "ابراهيم"},
		{"alef with madda", "آمنة", "امنه"},
		{"alef wasla", "ٱلله", "الله"},
		{"ta marbuta", "فاطمة", "فاطمه"},
		{"alef maqsura", "موسى", "موسي"},
		{"hamza on waw and yeh kept", "مؤمن هائل", "مؤمنهائل"},
		{"lone hamza kept", "ماء", "ماء"},
		{"arabic punctuation", "علي، حسن؛ محمد؟", "عليحسنمحمد"},
		{"zero-width non-joiner", "علي\u200cحسن", "عليحسن"},
	})
}

func TestConvert_Kurdish(t *testing.T) {
	runConvert(t, []convertCase{
		{"letters kept", "ڕێبین", "ڕێبین"},
		{"name with ae and keheh", "ڕێبین کاوە", "ڕێبینکاوە"},
		{"farsi yeh not folded", "ی", "ی"},
		{"keheh not folded", "ک", "ک"},
		{"waw with v kept", "ۆ", "ۆ"},
	})
}

func TestConvert_digits(t *testing.T) {
	runConvert(t, []convertCase{
		{"ascii", "Ali 2nd", "ali2nd"},
		{"arabic-indic", "٠١٢٣٤٥٦٧٨٩", "0123456789"},
		{"extended arabic-indic", "۰۱۲۳۴۵۶۷۸۹", "0123456789"},
		{"mixed scripts of digits", "علي ٢٣ ۴", "علي234"},
		{"other decimal digits kept", "१२", "१२"},
		{"non-decimal numbers dropped", "x² ½ Ⅳ", "x"},
	})
}

func TestConvert_mixedAndEmpty(t *testing.T) {
	runConvert(t, []convertCase{
		{"latin and arabic", "Ali علي-2", "aliعلي2"},
		{"empty", "", ""},
		{"only white space", " \t\n", ""},
		{"only punctuation", " .,-!؟ ", ""},
		{"emoji", "Ali 🙂", "ali"},
		{"invalid utf-8 dropped", "Al\xffi", "ali"},
	})
}

// TestConvert_everyRune checks the fuzz invariants on every code point, so
// they hold for rare letters the fuzzer may never reach.
func TestConvert_everyRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		in := string(r)
		out := Convert(in)
		if again := Convert(out); again != out {
			t.Fatalf("not idempotent for U+%04X: %q → %q", r, out, again)
		}
		if n := utf8.RuneCountInString(out); n > 1 {
			t.Fatalf("U+%04X became %d runes", r, n)
		}
		for _, o := range out {
			if !unicode.IsLetter(o) && !unicode.IsDigit(o) {
				t.Fatalf("U+%04X gave U+%04X, neither letter nor digit", r, o)
			}
		}
	}
}

// folded are runes the rule always replaces or removes, so they must never
// appear in a result.
const folded = "أإآٱةىـ\u0670٠١٢٣٤٥٦٧٨٩۰۱۲۳۴۵۶۷۸۹"

// FuzzConvert checks that Convert never panics, is idempotent, yields valid
// UTF-8, and leaves only lower-case letters and digits the rule does not fold.
func FuzzConvert(f *testing.F) {
	for _, s := range []string{
		"Ali Hassan", "Ali  H. Al-Saadi", "فاطِمة الزَّهراء", "مُصطفى", "أحمد", "عـــلي",
		"ڕێبین", "٠١٢۴", "José", "Jose\u0301", "İ", "\x00\xff", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Convert(s)
		if again := Convert(out); again != out {
			t.Fatalf("not idempotent: %q → %q → %q", s, out, again)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q: %q", s, out)
		}
		for _, r := range out {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				t.Fatalf("%q kept U+%04X", s, r)
			}
			if unicode.ToLower(r) != r {
				t.Fatalf("%q kept upper-case U+%04X", s, r)
			}
			if r >= 0x064B && r <= 0x065F || r >= 0x06D6 && r <= 0x06ED || strings.ContainsRune(folded, r) {
				t.Fatalf("%q kept U+%04X, which the rule replaces or removes", s, r)
			}
		}
	})
}
