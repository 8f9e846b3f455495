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
