package console

import (
	"fmt"
	"html"
	"html/template"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/records"
)

// Group writes an amount with thousands separators (25,000).
func Group(n int64) string { return records.Group(n) }

// Money writes an amount as every list and detail shows it: grouped, with
// the currency in the page's language (25,000 IQD; 25,000 د.ع). The
// number is isolated left to right, so that a minus sign stays in front of
// it on a right-to-left page; the whole does not break across lines.
func (t T) Money(n int64) template.HTML {
	return template.HTML(`<span class="money"><bdi dir="ltr">` + Group(n) + `</bdi> ` + html.EscapeString(t.Get("iqd")) + `</span>`)
}

// MoneyText is Money as plain text (25,000 IQD).
func (t T) MoneyText(n int64) string { return Group(n) + " " + t.Get("iqd") }

// Zone names the time zone the console shows times in (Baghdad's, which
// has no daylight saving time): every time carries it.
var Zone = zoneName(time.Now().In(Baghdad))

// zoneName is t's zone as an offset from UTC: UTC+3, UTC+5:30.
func zoneName(t time.Time) string {
	_, off := t.Zone()
	h, m := off/3600, off%3600/60
	if m < 0 {
		m = -m
	}
	if m != 0 {
		return fmt.Sprintf("UTC%+d:%02d", h, m)
	}
	return fmt.Sprintf("UTC%+d", h)
}

// When writes an RFC 3339 time as Baghdad time, to the minute, with the
// zone: 2026-03-01 15:04 UTC+3. A value that is no time is written as it
// is.
func When(rfc string) string {
	t, err := time.Parse(time.RFC3339Nano, rfc)
	if err != nil {
		return rfc
	}
	return stamp(t)
}

func stamp(t time.Time) string {
	t = t.In(Baghdad)
	return t.Format("2006-01-02 15:04") + " " + zoneName(t)
}

// whenHTML is When for a page: the date and the time (with its zone) each
// kept on one line, so that a narrow column breaks between them and never
// inside a date.
func whenHTML(rfc string) template.HTML {
	s := When(rfc)
	date, rest, ok := strings.Cut(s, " ")
	if !ok {
		return template.HTML(`<span class="nw">` + html.EscapeString(s) + `</span>`)
	}
	return template.HTML(`<span class="nw">` + html.EscapeString(date) + `</span> <span class="nw">` + html.EscapeString(rest) + `</span>`)
}

// Detail is one field of an event's payload, as the history shows it: the
// label the console gives the field, in the page's language, and its
// value written for people.
type Detail struct {
	Key, Label string
	// Value is the value as text (an amount grouped with its currency, a
	// time with its zone), escaped; it is the merchant's or an
	// operator's text (a name, a reason), which the page isolates.
	Value template.HTML
}

// detailOrder is the order of a history's fields: what an operator looks
// for first (the money, why, who), then how it was paid, then the rest in
// key order.
var detailOrder = []string{"amount", "requested", "reason", "reference", "type", "processId", "userId", "userName", "name",
	"convertedName", "senderName", "bank", "bankName", "kind", "accountName", "accountNumber", "iban", "expiresAt", "lang"}

// detailLabels are the text keys of the payload fields' labels; a field
// without one is labelled by its key.
var detailLabels = map[string]string{
	"amount": "amount", "requested": "requested", "reason": "reason", "reference": "reference", "type": "type",
	"processId": "processId", "userId": "userId", "userName": "d.userName", "name": "name", "convertedName": "convertedName",
	"senderName": "senderName", "bank": "method", "bankName": "d.bankName", "bankId": "d.bankId", "kind": "d.kind",
	"accountName": "accountName", "accountNumber": "d.accountNumber", "iban": "account", "expiresAt": "d.expiresAt",
	"lang": "language", "hostedToken": "d.hostedToken",
}

// redacted is a secret's value in a history (records.Readable).
const redacted = "[redacted]"

// moneyFields are amounts (IQD); msFields are times in Unix milliseconds.
var (
	moneyFields = map[string]bool{"amount": true, "requested": true}
	msFields    = map[string]bool{"expiresAt": true}
)

// Details are an event's payload fields as the history shows them, each
// labelled and written for people: amounts grouped with the currency,
// times as dates with the zone. The transaction's own id (tx) is the page
// it is on, and is left out.
func (t T) Details(data map[string]any) []Detail {
	keys := slices.Collect(maps.Keys(data))
	rank := func(k string) int {
		if i := slices.Index(detailOrder, k); i >= 0 {
			return i
		}
		return len(detailOrder)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	out := make([]Detail, 0, len(keys))
	for _, k := range keys {
		if k == "tx" {
			continue
		}
		label := k
		if tk, ok := detailLabels[k]; ok {
			label = t.Get(tk)
		}
		out = append(out, Detail{Key: k, Label: label, Value: t.detailValue(k, data[k])})
	}
	return out
}

// detailValue writes one payload value for people.
func (t T) detailValue(key string, v any) template.HTML {
	if n, ok := integer(v); ok {
		switch {
		case moneyFields[key]:
			return t.Money(n)
		case msFields[key]:
			return template.HTML(`<span dir="ltr">` + html.EscapeString(stamp(time.UnixMilli(n))) + `</span>`)
		}
	}
	s := fmt.Sprint(v)
	switch {
	case s == redacted:
		s = t.Get("redacted")
	case key == "lang":
		if l := known(s); l != "" {
			s = LangNames[l]
		}
	}
	return template.HTML(html.EscapeString(s))
}

// integer reads a decoded payload number (msgpack gives the smallest type
// that holds it).
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		if n <= 1<<63-1 {
			return int64(n), true
		}
	}
	return 0, false
}

// fieldLabels are the text keys of the labels an operator sees for the
// API parameters an error may name (docs/errors.md, "field"): the search
// form's fields, the matching form's and the dialogs'.
var fieldLabels = map[string]string{
	"status": "status", "site": "site", "method": "method", "processId": "processId", "transactionId": "transactionId",
	"userId": "userId", "name": "name", "minAmount": "minAmount", "maxAmount": "maxAmount", "from": "from", "to": "to",
	"order": "order", "text": "lines", "amount": "amount", "reason": "reason", "reference": "reference", "eventId": "eventId",
}

// partners are the other field of a pair an error names together
// ("maxAmount is below minAmount", "to must be after from").
var partners = map[string]string{"minAmount": "maxAmount", "maxAmount": "minAmount", "from": "to", "to": "from"}

// Label is the label the operator sees for an API parameter, "" for a
// parameter that has none.
func (t T) Label(field string) string {
	if k, ok := fieldLabels[field]; ok {
		return t.Get(k)
	}
	return ""
}

// worded is an API message (English) that names the operator's fields by
// their labels instead of the API's parameters: the field it starts with
// and the other field of its pair ("maxAmount is below minAmount" is
// "“Amount to” is below “Amount from”"). Only those: the same words
// elsewhere are English ("no such site", "to apply it"). Each label is
// written by quote(label). named reports whether the message named the
// field.
func (t T) worded(msg, field string, quote func(string) string) (out string, named bool) {
	label := t.Label(field)
	if label == "" {
		return html.EscapeString(msg), strings.Contains(msg, field)
	}
	lead := regexp.MustCompile(`^` + regexp.QuoteMeta(field) + `\b`)
	if !lead.MatchString(msg) {
		return html.EscapeString(msg), false
	}
	var b strings.Builder
	rest := msg[len(field):]
	b.WriteString(quote(label))
	if p, ok := partners[field]; ok {
		pat := regexp.MustCompile(`\b` + regexp.QuoteMeta(p) + `\b`)
		last := 0
		for _, m := range pat.FindAllStringIndex(rest, -1) {
			b.WriteString(html.EscapeString(rest[last:m[0]]))
			b.WriteString(quote(t.Label(p)))
			last = m[1]
		}
		rest = rest[last:]
	}
	b.WriteString(html.EscapeString(rest))
	return b.String(), true
}

// quoted writes a label in quotation marks, isolated (it may be right to
// left inside an English sentence).
func quoted(label string) string { return "“<bdi>" + html.EscapeString(label) + "</bdi>”" }

// NormalizeAmount is an amount field of a form as the API takes it: the
// digits of an amount typed grouped or in Arabic-Indic digits (25,000,
// ٢٥٬٠٠٠), or the text as it is when it is no such amount, for the API to
// refuse in its own words.
func NormalizeAmount(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r >= '٠' && r <= '٩':
			b.WriteRune('0' + r - '٠')
		case r >= '۰' && r <= '۹':
			b.WriteRune('0' + r - '۰')
		case r == ',' || r == '٬' || r == ' ' || r == '\u00a0':
		default:
			return s
		}
	}
	if _, err := strconv.ParseInt(b.String(), 10, 64); err != nil {
		return s
	}
	return b.String()
}
