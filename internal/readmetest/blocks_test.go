package readmetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		md    string
		want  []Block
		error string
	}{
		{"a plain block runs", "text\n```sh\necho a\necho b\n```\n",
			[]Block{{File: "R.md", Line: 2, Text: "echo a\necho b\n", Mode: Run}}, ""},
		{"skip with its reason", "<!-- not run by the README test: needs docker -->\n```sh\ndocker ps\n```\n",
			[]Block{{File: "R.md", Line: 2, Text: "docker ps\n", Mode: Skip, Reason: "needs docker"}}, ""},
		{"after the gateway stops", "<!-- run by the README test after the gateway stops -->\n```sh\nls\n```\n",
			[]Block{{File: "R.md", Line: 2, Text: "ls\n", Mode: AfterStop}}, ""},
		{"an annotation counts only right before the fence", "<!-- not run by the README test: x -->\n\n```sh\nls\n```\n",
			[]Block{{File: "R.md", Line: 3, Text: "ls\n", Mode: Run}}, ""},
		{"other languages are not examples", "```go\nx := 1\n```\n```\nplain\n```\n```json\n{}\n```\n", nil, ""},
		{"a fence inside another language's block", "```text\n```sh\n```\n```sh\necho\n```\n",
			[]Block{{File: "R.md", Line: 4, Text: "echo\n", Mode: Run}}, ""},
		{"skip without a reason", "<!-- not run by the README test:  -->\n```sh\nls\n```\n", nil, "must say why"},
		{"a misspelt annotation", "<!-- skipped by the README test -->\n```sh\nls\n```\n", nil, "unknown annotation"},
		{"unterminated", "```sh\nls\n", nil, "not closed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("R.md", strings.NewReader(tc.md))
			if tc.error != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.error)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
