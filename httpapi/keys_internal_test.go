package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDuplicateKey(t *testing.T) {
	many := func(n int, repeat string) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(`"` + repeat + `":0}`)
		return b.String()
	}
	for body, want := range map[string]string{
		`{}`:                                      "",
		`{"a":1,"b":{"a":1},"c":[{"a":1}]}`:       "",
		`{"a":1,"a":1}`:                           "a",
		`{"a":{"b":1,"c":{"b":1},"b":2}}`:         "a.b",
		`{"a":[{"b":1},{"c":1,"c":2}]}`:           "a[1].c",
		`{"a":[[1,2],[{"x":1}],[{"x":1,"x":1}]]}`: "a[2][0].x",
		`{"a":{"b":[]},"a":1}`:                    "a",
		`{"a":"\"a\"","b":"a"}`:                   "",
		`{"a\u0062":1,"ab":2}`:                    "ab",
		many(40, "k33"):                           "k33",
		many(40, "k3"):                            "k3",
		many(40, "other"):                         "",
		`{"a":1,"a"`:                              "a",
		`{"a":1,,"a":2}`:                          "",
		`not json`:                                "",
	} {
		assert.Equal(t, want, duplicateKey([]byte(body)), "%s", body)
	}
}

func TestLoneSurrogate(t *testing.T) {
	for body, want := range map[string]bool{
		`{"reason":"no transfer"}`:           false,
		`{"reason":"\ud83d\ude00 paid"}`:     false, // a pair: one character
		`{"reason":"\u00e9\n\"\\"}`:          false,
		`{"reason":"\\ud800"}`:               false, // a backslash, then text
		`{"reason":"\\\ud83d\ude00"}`:        false,
		`{"reason":"\ud800"}`:                true,
		`{"reason":"\uDBFF"}`:                true,
		`{"reason":"\udc00"}`:                true, // a low half alone
		`{"reason":"\ud800x\udc00"}`:         true,
		`{"reason":"\ud800\u0041"}`:          true,
		`{"reason":"\ud800\ud800\udc00"}`:    true,
		`{"reason":"\\\ud800"}`:              true,
		`{"a":"x","\udfff":1}`:               true, // in a key too
		`{"reason":"\ud800`:                  true,
		`{"reason":"\ud8`:                    false, // cut short: the decoder says so
		`{"reason":"\ud83d\ude00","b":"\\"}`: false,
	} {
		assert.Equal(t, want, loneSurrogate([]byte(body)), "%s", body)
	}
}
