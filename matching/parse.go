package matching

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxLines bounds the transfers of one request.
const MaxLines = 1000

// Baghdad is the time zone of a statement's times written without one
// (Iraq keeps UTC+3 all year).
var Baghdad = time.FixedZone("Asia/Baghdad", 3*60*60)

// LineError is a line of pasted text that could not be read.
type LineError struct {
	Line   int    `json:"line"`
	Column string `json:"column,omitempty"`
	Reason string `json:"reason"`
}

func (e *LineError) Error() string {
	if e.Column != "" {
		return fmt.Sprintf("line %d, %s: %s", e.Line, e.Column, e.Reason)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
}

// ErrTooMany is returned for more than MaxLines transfers.
var ErrTooMany = fmt.Errorf("more than %d transfers", MaxLines)

// ErrNoLines is returned for a text without a transfer line (empty, or a
// header alone).
var ErrNoLines = errors.New("no transfer lines: give amount, name, time, method, reference")

// Parse reads transfer lines pasted from a statement or uploaded as a file:
// CSV or TSV (tab-separated when the first line that is not blank holds a tab), one transfer a
// line, in the columns amount, sender name, time, method, reference; the
// last three may be left out or empty. A first line whose amount is not a
// number, and has no digit, is a header and is skipped (blank lines before
// it do not count); blank lines, and delimiters alone, are skipped, and so
// is a byte order mark at the start. A field may hold quotes (Ahmed "Abu
// Ali" Hasan) but no line break: a quote that opens a field and is not
// closed on its line is an error on that line, not a field holding the lines
// after it. The amount is a whole number of IQD, with ',', '٬', '.' or
// spaces between groups of three digits and Arabic-Indic digits allowed
// (statements write "25,000" and "٢٥٬٠٠٠"). The time is RFC 3339, or
// "2006-01-02 15:04[:05]" in Baghdad time. Every line that cannot be read is
// reported, and then nothing is matched: a statement read in part would look
// like a statement matched in full.
func Parse(text string) ([]Transfer, error) {
	if !utf8.ValidString(text) {
		return nil, &LineError{Line: 1, Reason: "the text is not UTF-8"}
	}
	// Spreadsheets save CSV with a byte order mark, which is no part of
	// the first amount or header.
	text = strings.TrimPrefix(text, "\ufeff")
	p := parser{comma: ','}
	if strings.Contains(firstLine(text), "\t") {
		p.comma = '\t'
	}
	// A field that runs on past its line ends the reading of the lines
	// it swallowed: they are read again from the line after it, so every
	// unreadable line after it is named too.
	for rest, base, more := text, 0, true; more; {
		var err error
		if rest, base, more, err = p.read(rest, base); err != nil {
			return nil, err
		}
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	if len(p.out) == 0 {
		return nil, ErrNoLines
	}
	return p.out, nil
}

// parser gathers the transfers and the unreadable lines of one text.
type parser struct {
	comma rune
	// records counts the records that are not blank: a row of
	// delimiters alone before the header leaves it the first.
	records int
	out     []Transfer
	errs    []error
}

// read reads text, whose first line is line base+1 of the whole, until
// its end, or until a field that runs on past the end of its line; then it
// returns the text after that line and its base, with more set. err is
// only ErrTooMany.
func (p *parser) read(text string, base int) (rest string, restBase int, more bool, err error) {
	r := csv.NewReader(strings.NewReader(text))
	r.Comma = p.comma
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return "", 0, false, nil
		}
		line, _ := r.FieldPos(0)
		if err != nil {
			p.errs = append(p.errs, &LineError{Line: base + line, Reason: err.Error()})
			return "", 0, false, nil
		}
		if lerr := runOn(r, text, rec); lerr != nil {
			at := lerr.Line
			lerr.Line += base
			p.errs = append(p.errs, lerr)
			if after, ok := afterLine(text, at); ok {
				return after, base + at, true, nil
			}
			return "", 0, false, nil
		}
		if blank(rec) {
			continue
		}
		p.records++
		t, lerr := parseLine(base+line, rec)
		if lerr != nil {
			if p.records == 1 && lerr.Column == "amount" && !strings.ContainsFunc(col0(rec), unicode.IsDigit) {
				continue // a header
			}
			p.errs = append(p.errs, lerr)
			continue
		}
		if len(p.out) == MaxLines {
			return "", 0, false, ErrTooMany
		}
		p.out = append(p.out, t)
	}
}

// afterLine returns what follows line n (counted from 1 by line feeds) of
// text; ok is false when nothing does.
func afterLine(text string, n int) (string, bool) {
	for ; n > 0; n-- {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			return "", false
		}
		text = text[i+1:]
	}
	return text, text != ""
}

// columns are the columns' names, in their order.
var columns = []string{"amount", "name", "time", "method", "reference"}

// runOn finds a field that goes on past the end of its line. LazyQuotes
// lets a name hold a quote (Ahmed "Abu Ali" Hasan), but a field that opens
// with a quote and never closes it takes every following line into itself:
// those transfers would be missing from a statement that looks read in
// full. No column holds a line break, so any field with one is refused, at
// the line where it began.
func runOn(r *csv.Reader, text string, rec []string) *LineError {
	for i, f := range rec {
		if !strings.ContainsAny(f, "\r\n") {
			continue
		}
		line, col := r.FieldPos(i)
		e := &LineError{Line: line, Reason: "unterminated quote: the field runs on past the end of its line"}
		if i < len(columns) {
			e.Column = columns[i]
		}
		if !strings.Contains(f, "\n") && !quotedAt(text, line, col) {
			e.Reason = "a carriage return inside the field: end lines with a line feed"
		}
		return e
	}
	return nil
}

// quotedAt reports whether the field at line and col (encoding/csv's
// FieldPos: lines counted by line feeds, columns in bytes, both from 1)
// opens with a quote.
func quotedAt(text string, line, col int) bool {
	for ; line > 1; line-- {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			return false
		}
		text = text[i+1:]
	}
	return col >= 1 && col <= len(text) && text[col-1] == '"'
}

func col0(rec []string) string {
	if len(rec) == 0 {
		return ""
	}
	return rec[0]
}

func blank(rec []string) bool {
	for _, f := range rec {
		if strings.TrimSpace(f) != "" {
			return false
		}
	}
	return true
}

func parseLine(line int, rec []string) (Transfer, *LineError) {
	col := func(i int) string {
		if i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	if len(rec) > 5 {
		return Transfer{}, &LineError{Line: line, Reason: fmt.Sprintf("%d columns; the columns are amount, name, time, method, reference", len(rec))}
	}
	amount, err := ParseAmount(col(0))
	if err != nil {
		return Transfer{}, &LineError{Line: line, Column: "amount", Reason: err.Error()}
	}
	t := Transfer{Line: line, Amount: amount, Name: col(1), Method: col(3), Reference: col(4)}
	if t.Name == "" {
		return Transfer{}, &LineError{Line: line, Column: "name", Reason: "the sender's name is missing"}
	}
	for _, f := range []struct{ name, v string }{{"name", t.Name}, {"method", t.Method}, {"reference", t.Reference}} {
		if why := CheckText(f.v); why != "" {
			return Transfer{}, &LineError{Line: line, Column: f.name, Reason: why}
		}
	}
	if v := col(2); v != "" {
		if t.Time, err = ParseTime(v); err != nil {
			return Transfer{}, &LineError{Line: line, Column: "time", Reason: err.Error()}
		}
	}
	return t, nil
}

// MaxText bounds a transfer's name, method and reference, in bytes.
const MaxText = 256

// CheckText says what is wrong with a transfer's name, method or reference
// ("" when nothing): longer than MaxText bytes, or holding a control
// character (a NUL or a line break pasted in would be matched against
// names and shown as it is).
func CheckText(v string) string {
	if len(v) > MaxText {
		return fmt.Sprintf("longer than %d bytes", MaxText)
	}
	if strings.ContainsFunc(v, unicode.IsControl) {
		return "holds a control character"
	}
	return ""
}

// ParseAmount reads a statement's amount (see Parse).
func ParseAmount(s string) (int64, error) {
	var digits strings.Builder
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits.WriteRune(r)
		case r >= '٠' && r <= '٩':
			digits.WriteRune('0' + r - '٠')
		case r >= '۰' && r <= '۹':
			digits.WriteRune('0' + r - '۰')
		case r == ',' || r == '٬' || r == '.' || r == ' ' || r == '\u00a0' || r == '\u202f':
			digits.WriteRune(',')
		default:
			return 0, fmt.Errorf("%q is not a whole number of IQD", s)
		}
	}
	d := digits.String()
	groups := strings.Split(d, ",")
	for i, g := range groups {
		if g == "" || i > 0 && len(g) != 3 || i == 0 && len(groups) > 1 && len(g) > 3 {
			return 0, fmt.Errorf("%q is not a whole number of IQD (separators go between groups of three digits)", s)
		}
	}
	n, err := strconv.ParseInt(strings.Join(groups, ""), 10, 64)
	if err != nil || n <= 0 || n > 1<<50 {
		return 0, fmt.Errorf("%q is not a positive whole number of IQD", s)
	}
	return n, nil
}

// ParseTime reads a statement's time (see Parse).
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, s, Baghdad); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: write 2026-01-02 15:04 (Baghdad time) or RFC 3339", s)
}

// firstLine is the text's first line that is not blank: a statement
// pasted from a spreadsheet often starts with an empty one, which says
// nothing of the delimiter.
func firstLine(text string) string {
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) != "" {
			return line
		}
	}
	return ""
}
