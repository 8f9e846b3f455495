package hostedpage

import (
	"strings"

	"github.com/iqdgateway/gateway/aggregates/recipient"
	"github.com/iqdgateway/gateway/records"
)

// groupAmount writes an amount as the page's language does: 25,000 in
// English, ٢٥٬٠٠٠ in Arabic and Kurdish.
func groupAmount(n int64, lang string) string {
	g := records.Group(n)
	if pageDigits(lang) == "latn" {
		return g
	}
	return arabicDigits.Replace(g)
}

// pageDigits are the digits the page writes its numbers in (the amount,
// the countdown): Arabic-Indic (arab) in Arabic and Kurdish, latn in
// English.
func pageDigits(lang string) string {
	if lang == "en" {
		return "latn"
	}
	return "arab"
}

// arabicDigits writes digits and the group separator in Arabic-Indic form.
var arabicDigits = strings.NewReplacer("0", "٠", "1", "١", "2", "٢", "3", "٣", "4", "٤", "5", "٥", "6", "٦", "7", "٧", "8", "٨", "9", "٩", ",", "٬")

// readableNumber is the number to pay to as people read it: a card number
// or an IBAN in groups of four (6375 0000 1234 5678), which the copy button
// copies without the spaces. Another kind (a phone number, a username),
// or a number already written with spaces, is shown as it is.
func readableNumber(num, kind string) string {
	if kind != string(recipient.CardNo) && kind != string(recipient.IBAN) {
		return num
	}
	var b strings.Builder
	for i, r := range num {
		if !(r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return num
		}
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}
