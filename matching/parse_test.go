package matching

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	got, err := Parse("amount,name,time,method,reference\n" +
		"25000,Ali Kareem,2026-03-01 15:04,ZAINCASH,ZC-1\n" +
		"\n" +
		"\"30,000\",\"Hassan, Zaid\",2026-03-01T12:00:00Z,,\n" +
		"٢٥٬٠٠٠,أحمد علي\n")
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, Transfer{Line: 2, Amount: 25000, Name: "Ali Kareem", Time: time.Date(2026, 3, 1, 12, 4, 0, 0, time.UTC),
		Method: "ZAINCASH", Reference: "ZC-1"}, normal(got[0]))
	assert.Equal(t, Transfer{Line: 4, Amount: 30000, Name: "Hassan, Zaid", Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, normal(got[1]))
	assert.Equal(t, Transfer{Line: 5, Amount: 25000, Name: "أحمد علي"}, got[2])

	tsv, err := Parse("25 000\tAli Kareem\t\tQICARD\tQ-9\n1000\tSara\n")
	require.NoError(t, err)
	assert.Equal(t, []Transfer{{Line: 1, Amount: 25000, Name: "Ali Kareem", Method: "QICARD", Reference: "Q-9"}, {Line: 2, Amount: 1000, Name: "Sara"}}, tsv)
}

// A quote inside a name is part of it; lines may end with CR LF.
func TestParse_quotes(t *testing.T) {
	got, err := Parse("25000,Ahmed \"Abu Ali\" Hasan\r\n30000,\"Omar \"\"Abu Zaid\"\"\"\r\n40000,Zainab\r\n")
	require.NoError(t, err)
	assert.Equal(t, []Transfer{{Line: 1, Amount: 25000, Name: `Ahmed "Abu Ali" Hasan`}, {Line: 2, Amount: 30000, Name: `Omar "Abu Zaid"`},
		{Line: 3, Amount: 40000, Name: "Zainab"}}, got)
}

// A byte order mark at the start, as spreadsheets save CSV, and blank rows
// of delimiters before the header are skipped.
func TestParse_spreadsheetFiles(t *testing.T) {
	for _, text := range []string{
		"\ufeff25000,Ahmed Ali\n",
		"\ufeffamount,name\n25000,Ahmed Ali\n",
		",,,\namount,name\n25000,Ahmed Ali\n",
		"\ufeff,,,\n ,\namount,name\n25000,Ahmed Ali\n",
		"\t\t\namount\tname\n25000\tAhmed Ali\n",
		"\n25000\tAhmed Ali\n", // pasted: a blank first line says nothing of the delimiter
		"\r\n \r\n25000\tAhmed Ali\r\n",
		"\ufeff\namount\tname\n25000\tAhmed Ali\n",
	} {
		got, err := Parse(text)
		require.NoError(t, err, "%q", text)
		require.Len(t, got, 1, "%q", text)
		assert.Equal(t, int64(25000), got[0].Amount, "%q", text)
		assert.Equal(t, "Ahmed Ali", got[0].Name, "%q", text)
	}
	// A header is the first line that is not blank, and only that one.
	_, err := Parse(",,\n25000,Ahmed Ali\namount,name\n")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 3, amount")
}

func normal(t Transfer) Transfer {
	t.Time = t.Time.UTC()
	return t
}

func TestParse_refused(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string // in the error, every one
	}{
		{"every bad line is named", "25000,Ali\nabc,Sara\n100,\n1000,Omar,yesterday\n", []string{"line 2, amount", "line 3, name", "line 4, time"}},
		{"a decimal amount", "25000.50,Ali\n", nil},
		{"misplaced separators", "25000,Ali\n\"2,50,00\",Ali\n", []string{"line 2, amount"}},
		{"a first line with a bad amount is no header", "25000.50,Ali\n100,Sara\n", []string{"line 1, amount"}},
		{"zero", "25000,Ali\n0,Ali\n", []string{"line 2, amount"}},
		{"negative", "25000,Ali\n-5,Ali\n", []string{"line 2, amount"}},
		{"too many columns", "1,a,,b,c,d\n", []string{"line 1: 6 columns"}},
		{"a long name", "1," + strings.Repeat("x", 257) + "\n", []string{"line 1, name: longer than 256 bytes"}},
		{"a NUL in a name", "1,Al\x00i\n", []string{"line 1, name: holds a control character"}},
		{"a control byte in a reference", "1,Ali,,,ref\x01x\n", []string{"line 1, reference: holds a control character"}},
		{"not UTF-8", "1,\xff\n", []string{"not UTF-8"}},
		{"a quote never closed is named at its line", "25000,Ali\n30000,\"Omar Hasan\n40000,Zainab Kareem\n50000,Sara\n", []string{"line 2, name: unterminated quote"}},
		{"a quote never closed in TSV", "25000\t\"Ali\n30000\tOmar\n", []string{"line 1, name: unterminated quote"}},
		{"a quote closed lines later", "25000,\"Ali\n30000,Omar\" Hasan\"\n40000,Zainab\n", []string{"line 1, name: unterminated quote"}},
		{"a carriage return alone", "25000,Ali\r30000,Omar\n", []string{"line 1, name: a carriage return"}},
		// The lines an unclosed quote would swallow are read on their own.
		{"a bad line after an unclosed quote is named too", "25000,ok\nxyz,\"unterminated\nqqq,name\n",
			[]string{"line 2, name: unterminated quote", "line 3, amount"}},
		{"two unclosed quotes and a bad time", "1,\"a\n2,b\n3,\"c\n4,d,noon\n",
			[]string{"line 1, name: unterminated quote", "line 3, name: unterminated quote", "line 4, time"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.text)
			require.Error(t, err)
			assert.Nil(t, got)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	for _, empty := range []string{"", "\n\n", "amount,name,time\n", "  ,  \n"} {
		_, err := Parse(empty)
		assert.ErrorIs(t, err, ErrNoLines, "%q", empty)
	}
	_, err := Parse(strings.Repeat("1,a\n", MaxLines+1))
	assert.ErrorIs(t, err, ErrTooMany)
	got, err := Parse(strings.Repeat("1,a\n", MaxLines))
	require.NoError(t, err)
	assert.Len(t, got, MaxLines)
}

func TestParseAmount(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "25000": 25000, "25,000": 25000, "1.234.567": 1234567, "۱۲۳": 123, "1 000 000": 1000000} {
		n, err := ParseAmount(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, n, in)
	}
	for _, in := range []string{"", "1,00", "1000,000,0", ",100", "100,", "1e3", "IQD 100", "99999999999999999999"} {
		_, err := ParseAmount(in)
		assert.Error(t, err, in)
	}
}
