package recipient

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeIBAN returns a valid Iraqi IBAN for a bank code and 15-digit account by
// computing its check digits (98 − mod97 of the number with "00").
func makeIBAN(bank, acct string) string {
	check := 98 - Mod97(bank+acct+"IQ00")
	return fmt.Sprintf("IQ%02d%s%s", check, bank, acct)
}

func TestValidate(t *testing.T) {
	good := makeIBAN("NBIQ", "850123456789012")
	bad := good[:2] + fmt.Sprintf("%02d", (int(good[2]-'0')*10+int(good[3]-'0')+1)%100) + good[4:]
	cases := []struct {
		kind Kind
		id   string
		ok   bool
	}{
		{Phone, "07701234567", true},
		{Phone, "0770123456", false},
		{Phone, "077012345678", false},
		{Phone, "08701234567", false},
		{Phone, "0770123456a", false},
		{Phone, " 07701234567", false},
		{Phone, "07٧01234567", false},
		{CardNo, "123456789", false},
		{CardNo, "1234567890", true},
		{CardNo, "1234567890123456789", true},
		{CardNo, "12345678901234567890", false},
		{CardNo, "1234 5678 9012", false},
		{AccountNo, "12345", false},
		{AccountNo, "123456", true},
		{AccountNo, "12345678901234567890", true},
		{AccountNo, "123456789012345678901", false},
		{IBAN, good, true},
		{IBAN, bad, false},
		{IBAN, strings.ToLower(good), false},
		{IBAN, good[:22], false},
		{IBAN, good + "0", false},
		{IBAN, "GB" + good[2:], false},
		{IBAN, "IQ98NBI1850123456789012", false},
		{Username, "ab", false},
		{Username, "abc", true},
		{Username, "a.b_c-9", true},
		{Username, strings.Repeat("a", 64), true},
		{Username, strings.Repeat("a", 65), false},
		{Username, "ab c", false},
		{Username, "علي", false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%q", c.kind, c.id), func(t *testing.T) {
			err := Validate(c.kind, c.id)
			if c.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidIdentifier)
			var fe *FormatError
			require.True(t, errors.As(err, &fe))
			assert.Contains(t, err.Error(), Expected(c.kind))
		})
	}
}

func TestValidate_knownIBAN(t *testing.T) {
	// The published example Iraqi IBAN.
	assert.NoError(t, Validate(IBAN, "IQ98NBIQ850123456789012"))
}

func TestParseKind(t *testing.T) {
	for _, k := range []Kind{Phone, CardNo, AccountNo, IBAN, Username} {
		got, err := ParseKind(string(k))
		require.NoError(t, err)
		assert.Equal(t, k, got)
	}
	for _, s := range []string{"", "phone", "EMAIL"} {
		_, err := ParseKind(s)
		assert.ErrorIs(t, err, ErrUnknownKind)
	}
	assert.ErrorIs(t, Validate("EMAIL", "x@y"), ErrUnknownKind)
}

var patterns = map[Kind]*regexp.Regexp{
	Phone:     regexp.MustCompile(`^07[0-9]{9}$`),
	CardNo:    regexp.MustCompile(`^[0-9]{10,19}$`),
	AccountNo: regexp.MustCompile(`^[0-9]{6,20}$`),
	IBAN:      regexp.MustCompile(`^IQ[0-9]{2}[A-Z]{4}[0-9]{15}$`),
	Username:  regexp.MustCompile(`^[A-Za-z0-9._-]{3,64}$`),
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{"07701234567", "1234567890", "IQ98NBIQ850123456789012", "user.name", "", "٠٧٧"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		for k, re := range patterns {
			err := Validate(k, id)
			if err == nil && !re.MatchString(id) {
				t.Fatalf("%s accepted %q", k, id)
			}
			if err != nil && re.MatchString(id) && k != IBAN {
				t.Fatalf("%s refused %q: %v", k, id, err)
			}
		}
	})
}
