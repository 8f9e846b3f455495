package docs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every link from one served page to another, and to a heading of it,
// leads somewhere: the ids are made as GitHub makes them, which the
// documents' links were written against.
func TestPages_linksResolve(t *testing.T) {
	var p Pages
	names := p.Names()
	require.Contains(t, names, "errors")
	require.Contains(t, names, "merchant-api")
	require.NotContains(t, names, "ARCHITECTURE", "about the code, not served")
	idRe := regexp.MustCompile(`\sid="([^"]+)"`)
	hrefRe := regexp.MustCompile(`href="([^"]+)"`)
	ids := map[string]map[string]bool{}
	for _, n := range names {
		pg, ok, err := p.Get(n)
		require.NoError(t, err)
		require.True(t, ok)
		assert.NotContains(t, string(pg.HTML), "<img", "%s shows an image, which is not served", n)
		ids[n] = map[string]bool{}
		for _, m := range idRe.FindAllStringSubmatch(string(pg.HTML), -1) {
			ids[n][m[1]] = true
		}
	}
	links := 0
	for _, n := range names {
		pg, _, _ := p.Get(n)
		for _, m := range hrefRe.FindAllStringSubmatch(string(pg.HTML), -1) {
			href := m[1]
			if strings.HasPrefix(href, "http://") || strings.HasPrefix(href, "https://") {
				continue
			}
			links++
			target, frag, _ := strings.Cut(href, "#")
			switch {
			case target == "":
				target = n
			case strings.HasPrefix(target, "/docs/"):
				target = strings.TrimPrefix(target, "/docs/")
			case target == "/docs":
				continue
			default:
				t.Errorf("%s links to %q, which is not a served page", n, href)
				continue
			}
			require.Contains(t, ids, target, "%s links to %s", n, href)
			if frag != "" {
				assert.True(t, ids[target][frag], "%s links to %s: no such heading", n, href)
			}
		}
	}
	assert.Greater(t, links, 50, "the scan found the links")
	for _, code := range []string{"invalid_request", "insufficient_site_balance", "outcome_unknown"} {
		assert.True(t, ids["errors"][code], "errors has a heading for %s", code)
	}
	assert.True(t, ids["merchant-api"]["response-hash"])
	assert.True(t, ids["callbacks"]["following-callbacks-without-a-public-url"])

	index, ok, err := p.Get("")
	require.NoError(t, err)
	require.True(t, ok)
	for _, n := range names {
		assert.Contains(t, string(index.HTML), `href="/docs/`+n+`"`)
	}
	_, ok, err = p.Get("nope")
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestGithubIDs(t *testing.T) {
	g := &githubIDs{seen: map[string]int{}}
	for _, c := range []struct{ in, want string }{
		{"Response hash", "response-hash"},
		{"invalid_request", "invalid_request"},
		{"Following callbacks without a public URL", "following-callbacks-without-a-public-url"},
		{"Two writers (of one site)", "two-writers-of-one-site"},
		{"Response hash", "response-hash-1"},
		{"Response hash", "response-hash-2"},
		{"Pending deposits (alreadyPending)", "pending-deposits-alreadypending"},
	} {
		assert.Equal(t, c.want, string(g.Generate([]byte(c.in), 0)), c.in)
	}
}
