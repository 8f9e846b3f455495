package recipient

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigMod97 is an independent oracle for mod97: it builds the whole ISO 7064
// digit string and reduces it with math/big.
func bigMod97(t testing.TB, s string) int {
	t.Helper()
	var digits strings.Builder
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits.WriteRune(c)
		case c >= 'A' && c <= 'Z':
			fmt.Fprintf(&digits, "%d", c-'A'+10)
		default:
			t.Fatalf("bigMod97: unexpected %q in %q", c, s)
		}
	}
	n, ok := new(big.Int).SetString(digits.String(), 10)
	require.True(t, ok)
	return int(new(big.Int).Mod(n, big.NewInt(97)).Int64())
}

// makeIBAN returns a valid Iraqi IBAN for a bank code and a 15-digit account,
// computing the check digits with the big-integer oracle so the test does not
// trust the code under test: check = 98 − (BBAN + "IQ00") mod 97.
func makeIBAN(t testing.TB, bank, acct string) string {
	t.Helper()
	require.Len(t, bank, 4)
	require.Len(t, acct, 15)
	return fmt.Sprintf("IQ%02d%s%s", 98-bigMod97(t, bank+acct+"IQ00"), bank, acct)
}

// withCheck replaces the check digits of an IBAN.
func withCheck(iban string, check int) string {
	return fmt.Sprintf("%s%02d%s", iban[:2], check, iban[4:])
}

type validateCase struct {
	name string
	id   string
	ok   bool
}

// runValidate checks every case against kind, and for refusals that the
// error is a *FormatError naming kind and its format.
func runValidate(t *testing.T, kind Kind, cases []validateCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(kind, c.id)
			if c.ok {
				assert.NoError(t, err, "id %q", c.id)
				return
			}
			require.Error(t, err, "id %q", c.id)
			assert.ErrorIs(t, err, ErrInvalidIdentifier)
			assert.NotErrorIs(t, err, ErrUnknownKind)
			var fe *FormatError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, kind, fe.Kind)
			assert.Equal(t, Expected(kind), fe.Expected)
		})
	}
}

func TestParseKind_known(t *testing.T) {
	for _, k := range []Kind{Phone, CardNo, AccountNo, IBAN, Username} {
		t.Run(string(k), func(t *testing.T) {
			got, err := ParseKind(string(k))
			require.NoError(t, err)
			assert.Equal(t, k, got)
			assert.True(t, got.Valid())
		})
	}
}

func TestParseKind_unknown(t *testing.T) {
	for _, s := range []string{"", "phone", "Phone", " PHONE", "PHONE ", "CARD-NO", "EMAIL", "IBAN\x00"} {
		t.Run(fmt.Sprintf("%q", s), func(t *testing.T) {
			got, err := ParseKind(s)
			require.ErrorIs(t, err, ErrUnknownKind)
			assert.NotErrorIs(t, err, ErrInvalidIdentifier)
			assert.Empty(t, got)
			assert.False(t, Kind(s).Valid())
		})
	}
}

func TestValidate_Phone(t *testing.T) {
	runValidate(t, Phone, []validateCase{
		{"valid", "07701234567", true},
		{"valid other operator", "07901234567", true},
		{"8 digits after 07", "0770123456", false},
		{"10 digits after 07", "077012345678", false},
		{"wrong prefix", "08701234567", false},
		{"missing leading zero", "7701234567", false},
		{"international form", "+9647701234567", false},
		{"letter", "0770123456a", false},
		{"leading space", " 07701234567", false},
		{"trailing newline", "07701234567\n", false},
		{"inner space", "0770 1234567", false},
		{"arabic-indic digit", "07٧01234567", false},
		{"all arabic-indic", "٠٧٧٠١٢٣٤٥٦٧", false},
		{"empty", "", false},
	})
}

func TestValidate_CardNo(t *testing.T) {
	runValidate(t, CardNo, []validateCase{
		{"9 digits", "123456789", false},
		{"10 digits", "1234567890", true},
		{"16 digits", "4111111111111111", true},
		{"19 digits", "1234567890123456789", true},
		{"20 digits", "12345678901234567890", false},
		{"grouped with spaces", "4111 1111 1111 1111", false},
		{"grouped with dashes", "4111-1111-1111-1111", false},
		{"extended arabic-indic digits", "۴۱۱۱۱۱۱۱۱۱۱۱", false},
		{"trailing space", "1234567890 ", false},
		{"empty", "", false},
	})
}

func TestValidate_AccountNo(t *testing.T) {
	runValidate(t, AccountNo, []validateCase{
		{"5 digits", "12345", false},
		{"6 digits", "123456", true},
		{"20 digits", "12345678901234567890", true},
		{"21 digits", "123456789012345678901", false},
		{"leading zeros kept", "000123", true},
		{"letter", "12345A", false},
		{"arabic-indic digits", "١٢٣٤٥٦", false},
		{"tab", "123456\t", false},
		{"empty", "", false},
	})
}

func TestValidate_IBAN(t *testing.T) {
	runValidate(t, IBAN, []validateCase{
		{"published example", "IQ98NBIQ850123456789012", true},
		{"generated rafidain", makeIBAN(t, "RAFB", "000000000000001"), true},
		{"generated rasheed", makeIBAN(t, "RSHB", "123456789012345"), true},
		{"generated all zeros", makeIBAN(t, "AAAA", "000000000000000"), true},
		{"generated all nines", makeIBAN(t, "ZZZZ", "999999999999999"), true},
	})
}

func TestValidate_IBAN_badChecksum(t *testing.T) {
	good := makeIBAN(t, "NBIQ", "850123456789012")
	check := 98 - bigMod97(t, "NBIQ850123456789012IQ00")
	swapped := []byte(good)
	swapped[10], swapped[11] = swapped[11], swapped[10]
	require.NotEqual(t, good, string(swapped), "the swap must change the IBAN")
	runValidate(t, IBAN, []validateCase{
		{"check digits plus one", withCheck(good, (check+1)%100), false},
		{"check digits 00", withCheck(good, 0), false},
		{"check digits 99", withCheck(good, 99), false},
		{"published example off by one", "IQ97NBIQ850123456789012", false},
		{"account digit changed", good[:22] + string('0'+(good[22]-'0'+1)%10), false},
		{"transposed account digits", string(swapped), false},
	})
}

func TestValidate_IBAN_badLayout(t *testing.T) {
	good := makeIBAN(t, "NBIQ", "850123456789012")
	runValidate(t, IBAN, []validateCase{
		{"lowercase", strings.ToLower(good), false},
		{"lowercase country", "iq" + good[2:], false},
		{"lowercase bank code", good[:4] + "nbiq" + good[8:], false},
		{"22 characters", good[:22], false},
		{"24 characters", good + "0", false},
		{"other country", "GB" + good[2:], false},
		{"digit in bank code", "IQ98NBI1850123456789012", false},
		{"letter in account", "IQ98NBIQ85012345678901A", false},
		{"letter in check digits", "IQ9XNBIQ850123456789012", false},
		{"printed with spaces", "IQ98 NBIQ 8501 2345 6789 012", false},
		{"leading space", " " + good[:22], false},
		{"arabic-indic digit", good[:22] + "٢", false},
		{"empty", "", false},
	})
}

func TestValidate_Username(t *testing.T) {
	runValidate(t, Username, []validateCase{
		{"2 chars", "ab", false},
		{"3 chars", "abc", true},
		{"64 chars", strings.Repeat("a", 64), true},
		{"65 chars", strings.Repeat("a", 65), false},
		{"all allowed punctuation", "a.b_c-9", true},
		{"only punctuation", "._-", true},
		{"mixed case and digits", "Ali_Hassan.92", true},
		{"inner space", "ali hassan", false},
		{"leading space", " ali", false},
		{"at sign", "ali@example", false},
		{"plus", "ali+1", false},
		{"arabic letters", "علي", false},
		{"accented letter", "josé", false},
		{"arabic-indic digits", "ali٢٣", false},
		{"empty", "", false},
	})
}

func TestValidate_unknownKind(t *testing.T) {
	for _, k := range []Kind{"", "EMAIL", "phone"} {
		t.Run(fmt.Sprintf("%q", k), func(t *testing.T) {
			err := Validate(k, "07701234567")
			require.ErrorIs(t, err, ErrUnknownKind)
			assert.NotErrorIs(t, err, ErrInvalidIdentifier)
			var fe *FormatError
			assert.False(t, errors.As(err, &fe))
		})
	}
}

func TestFormatError_message(t *testing.T) {
	cases := []struct {
		kind Kind
		id   string
		want string
	}{
		{Phone, "123", "PHONE must be 07 followed by 9 digits"},
		{CardNo, "123", "CARD_NO must be 10 to 19 digits"},
		{AccountNo, "123", "ACCOUNT_NO must be 6 to 20 digits"},
		{IBAN, "123", "IBAN must be an Iraqi IBAN: IQ, 2 check digits, 4 capital letters and 15 digits (23 characters) with valid check digits"},
		{Username, "!", "USERNAME must be 3 to 64 letters, digits, '.', '_' or '-'"},
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			err := Validate(c.kind, c.id)
			require.Error(t, err)
			assert.EqualError(t, err, c.want)
			wrapped := fmt.Errorf("withdraw: %w", err)
			assert.ErrorIs(t, wrapped, ErrInvalidIdentifier)
		})
	}
}

func TestMod97_matchesBigInt(t *testing.T) {
	cases := []string{
		"0", "96", "97", "98", "A", "Z", "IQ00",
		"NBIQ850123456789012IQ98",
		"ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ",
		strings.Repeat("9", 200),
		"RAFB000000000000001IQ00",
	}
	for _, s := range cases {
		t.Run(s[:min(len(s), 24)], func(t *testing.T) {
			assert.Equal(t, bigMod97(t, s), mod97(s))
		})
	}
	assert.Equal(t, -1, mod97("IQ98 NBIQ"), "a character outside 0-9A-Z must not yield a remainder")
}

// patterns restate the contract's formats as regular expressions, a second
// implementation for the fuzz target to compare against.
var patterns = []struct {
	kind Kind
	re   *regexp.Regexp
}{
	{Phone, regexp.MustCompile(`^07[0-9]{9}$`)},
	{CardNo, regexp.MustCompile(`^[0-9]{10,19}$`)},
	{AccountNo, regexp.MustCompile(`^[0-9]{6,20}$`)},
	{IBAN, regexp.MustCompile(`^IQ[0-9]{2}[A-Z]{4}[0-9]{15}$`)},
	{Username, regexp.MustCompile(`^[A-Za-z0-9._-]{3,64}$`)},
}

// alnum selects fuzz inputs mod97 is defined on, to compare it with bigMod97
// on strings far from the IBAN layout as well.
var alnum = regexp.MustCompile(`^[0-9A-Z]+$`)

// FuzzValidate checks Validate against the regular expressions above (and
// math/big for the IBAN checksum) on arbitrary input.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		"07701234567", "0770123456", "1234567890", "12345678901234567890", "123456",
		"IQ98NBIQ850123456789012", "IQ97NBIQ850123456789012", "iq98nbiq850123456789012",
		"user.name", "a b", "", "٠٧٧٠١٢٣٤٥٦٧", "\xff\xfe", strings.Repeat("a", 65),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if alnum.MatchString(id) {
			if got, want := mod97(id), bigMod97(t, id); got != want {
				t.Fatalf("mod97(%q) = %d, want %d", id, got, want)
			}
		}
		for _, p := range patterns {
			want := p.re.MatchString(id)
			if want && p.kind == IBAN {
				want = bigMod97(t, id[4:]+id[:4]) == 1
			}
			err := Validate(p.kind, id)
			switch {
			case want && err != nil:
				t.Fatalf("%s refused %q: %v", p.kind, id, err)
			case !want && err == nil:
				t.Fatalf("%s accepted %q", p.kind, id)
			case err != nil && !errors.Is(err, ErrInvalidIdentifier):
				t.Fatalf("%s: %q gave %v, not an invalid identifier", p.kind, id, err)
			}
		}
	})
}
