package httpapi

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every code the API can answer has its section in docs/errors.md, which
// docUrl points at: the codes of the error table and every code written
// in this package's source.
func TestDocURL_everyCodeDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/errors.md")
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^## `([a-z_]+)`$").FindAllStringSubmatch(string(doc), -1) {
		anchors[m[1]] = true
	}
	codes := map[string]bool{"internal": true}
	for _, rule := range errorTable {
		codes[rule.code] = true
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	lit := regexp.MustCompile(`code: +"([a-z_]+)"|errBad\("([a-z_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			codes[m[1]+m[2]] = true
		}
	}
	require.Greater(t, len(codes), 15, "the scan found the codes")
	for c := range codes {
		assert.True(t, anchors[c], "docs/errors.md has no section for %s", c)
		assert.Equal(t, "docs/errors.md#"+c, DocURL(c))
	}
	for a := range anchors {
		assert.True(t, codes[a], "docs/errors.md documents %s, which nothing answers", a)
	}
}
