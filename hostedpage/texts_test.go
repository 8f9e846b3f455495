package hostedpage

import (
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every language has every key, none blank, and the page and its error
// pages render in each without a missing key.
func TestTexts(t *testing.T) {
	texts, err := loadTexts(textFS)
	require.NoError(t, err)
	require.Len(t, texts, len(langs))
	for _, l := range langs {
		for _, other := range langs {
			for k := range texts[other] {
				assert.NotEmpty(t, strings.TrimSpace(texts[l][k]), "texts/%s.json: %s (which %s has)", l, k, other)
			}
		}
		for _, k := range codeKeys {
			assert.Contains(t, texts[l], k, l)
		}
	}
}

// loadTexts refuses wording that would leave a hole in a page: a missing
// key, a blank text, a key only one language has, a language without its
// file, a file of a language the page does not offer, and a key the code
// reads that no language has.
func TestLoadTexts(t *testing.T) {
	full := func() map[string]map[string]string {
		out := map[string]map[string]string{}
		for _, l := range langs {
			w := map[string]string{"title": "T " + l}
			for _, k := range codeKeys {
				w[k] = k + " " + l
			}
			for _, s := range errorStatuses {
				w["error."+itoa(s)+".title"], w["error."+itoa(s)+".text"] = "title "+l, "text "+l
			}
			out[l] = w
		}
		return out
	}
	tests := []struct {
		name string
		edit func(map[string]map[string]string, fstest.MapFS)
		// err is what the refusal says ("" for none).
		err string
	}{
		{"complete", func(map[string]map[string]string, fstest.MapFS) {}, ""},
		{"a key missing in one language", func(m map[string]map[string]string, _ fstest.MapFS) { delete(m["ar"], "title") },
			"texts/ar.json: no title"},
		{"a key missing in English", func(m map[string]map[string]string, _ fstest.MapFS) { delete(m["en"], "title") },
			"texts/ar.json: title, which en has not"},
		{"a blank text", func(m map[string]map[string]string, _ fstest.MapFS) { m["ku"]["title"] = " " }, "texts/ku.json: title is blank"},
		{"an empty text", func(m map[string]map[string]string, _ fstest.MapFS) { m["en"]["pending"] = "" }, "texts/en.json: pending is blank"},
		{"a key of one language only", func(m map[string]map[string]string, _ fstest.MapFS) { m["ku"]["extra"] = "x" },
			"texts/ku.json: extra, which en has not"},
		{"a key the code reads, in no language", func(m map[string]map[string]string, _ fstest.MapFS) {
			for _, l := range langs {
				delete(m[l], "currency")
			}
		}, "texts/en.json: no currency"},
		{"an error page's text, in no language", func(m map[string]map[string]string, _ fstest.MapFS) {
			for _, l := range langs {
				delete(m[l], "error.503.text")
			}
		}, "texts/en.json: no error.503.text"},
		{"a language without its file", func(m map[string]map[string]string, _ fstest.MapFS) { delete(m, "ku") }, "texts/ku.json"},
		{"a language the page does not offer", func(_ map[string]map[string]string, fsys fstest.MapFS) {
			fsys["texts/fr.json"] = &fstest.MapFile{Data: []byte(`{}`)}
		}, `"fr" is not one of the page's languages`},
		{"not JSON", func(_ map[string]map[string]string, fsys fstest.MapFS) {
			fsys["texts/ar.json"] = &fstest.MapFile{Data: []byte(`title: x`)}
		}, "texts/ar.json: invalid character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, fsys := full(), fstest.MapFS{}
			tc.edit(m, fsys)
			for l, w := range m {
				if _, ok := fsys["texts/"+l+".json"]; !ok {
					fsys["texts/"+l+".json"] = &fstest.MapFile{Data: jsonOf(t, w)}
				}
			}
			got, err := loadTexts(fsys)
			if tc.err == "" {
				require.NoError(t, err)
				assert.Equal(t, "T ar", got["ar"]["title"])
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

// PickLang: ?lang= first (ckb is Sorani, which the API calls ku; any
// other is the API's own reading of lang), then the first of the page's
// languages the browser lists, then English.
func TestPickLang(t *testing.T) {
	tests := []struct{ query, accept, want string }{
		{"", "", "en"},
		{"", "ar-IQ,ar;q=0.9,en;q=0.5", "ar"},
		{"", "ckb-IQ", "ku"},
		{"", "ku", "ku"},
		{"", "fr-FR,ku;q=0.8,ar;q=0.7", "ku"},
		{"", "en;q=0.2, ar;q=0.9", "ar"},
		{"", "ar;q=0, en", "en"},
		{"", "fr, de", "en"},
		{"ar", "en", "ar"},
		{"CKB", "en", "ku"},
		{"ckb", "ar", "ku"},
		{" AR ", "", "ar"},
		{"fr", "ar", "en"},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("GET", "/pay/x?lang="+strings.ReplaceAll(tc.query, " ", "%20"), nil)
		if tc.query == "" {
			r = httptest.NewRequest("GET", "/pay/x", nil)
		}
		r.Header.Set("Accept-Language", tc.accept)
		assert.Equal(t, tc.want, PickLang(r), "lang=%q Accept-Language %q", tc.query, tc.accept)
	}
}

func TestDepositLang(t *testing.T) {
	for lang, want := range map[string]string{"en": "en", "ar": "ar", "ku": "ku", "": "en", "fr": "en", "ckb": "en", "AR": "en"} {
		assert.Equal(t, want, depositLang(lang), lang)
	}
	assert.Equal(t, "ckb", htmlLang("ku"))
	assert.Equal(t, "rtl", dir("ku"))
	assert.Equal(t, "rtl", dir("ar"))
	assert.Equal(t, "ltr", dir("en"))
}
