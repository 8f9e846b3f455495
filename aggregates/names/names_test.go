package names

import (
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestConvert(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"latin", "Ali Hassan", "alihassan"},
		{"punctuation", "Ali  H. Al-Saadi", "alihalsaadi"},
		{"accents kept", "José Ñúñez", "joséñúñez"},
		{"digits", "Ali 2nd", "ali2nd"},
		{"arabic-indic digits", "علي ٢٣ ۴", "علي234"},
		{"harakat", "مُحَمَّد", "محمد"},
		{"superscript alef", "هٰذا", "هذا"},
		{"tatweel", "عـــلي", "علي"},
		{"alef hamza above", "أحمد", "احمد"},
		{"alef hamza below", "إبراهيم", "ابراهيم"},
		{"alef madda", "آمنة", "امنه"},
		{"alef wasla", "ٱلله", "الله"},
		{"ta marbuta", "فاطمة", "فاطمه"},
		{"alef maqsura", "مُصطفى", "مصطفي"},
		{"full arabic", "فاطِمة الزَّهراء", "فاطمهالزهراء"},
		{"kurdish kept", "ڕێبین کاوە", "ڕێبینکاوە"},
		{"mixed", "Ali علي-2", "aliعلي2"},
		{"empty", "", ""},
		{"only punctuation", " .,-!؟ ", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Convert(c.in))
		})
	}
}

func FuzzConvert(f *testing.F) {
	for _, s := range []string{"Ali Hassan", "فاطِمة الزَّهراء", "عـــلي", "ڕێبین", "٠١٢", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Convert(s)
		if Convert(out) != out {
			t.Fatalf("not idempotent: %q → %q → %q", s, out, Convert(out))
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", s)
		}
		for _, r := range out {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				t.Fatalf("%q kept %q", s, r)
			}
		}
	})
}
