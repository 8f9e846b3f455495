package hostedpage

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/console"
	"github.com/iqdgateway/gateway/records"
)

//go:embed texts/*.json
var textFS embed.FS

// langs are the page's languages as a deposit's lang names them (Sorani
// Kurdish is ku there, ckb on the page: htmlLang); English first, the
// language every other is checked against.
var langs = []string{"en", "ar", "ku"}

// wording is the page's texts in one language, by key: texts/<lang>.json.
type wording map[string]string

// codeKeys are the keys the package's code reads itself (page.html's are
// checked by executing it: missingkey=error).
var codeKeys = []string{"currency", "pending", "approved", "approvedFor", "rejected", "expiredFinal"}

// loadTexts reads texts/<lang>.json of every language in fsys: each must
// have every key English has and no other, none of them blank, and every
// key the code reads and every error page's; a file of a language the
// page does not offer is refused too, rather than silently never shown.
func loadTexts(fsys fs.FS) (map[string]wording, error) {
	files, err := fs.Glob(fsys, "texts/*.json")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if l := strings.TrimSuffix(path.Base(f), ".json"); !slices.Contains(langs, l) {
			return nil, fmt.Errorf("%s: %q is not one of the page's languages %v", f, l, langs)
		}
	}
	out := map[string]wording{}
	for _, l := range langs {
		f := "texts/" + l + ".json"
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var w wording
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for k, v := range w {
			if strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("%s: %s is blank", f, k)
			}
		}
		out[l] = w
	}
	want := slices.Clone(codeKeys)
	for _, s := range errorStatuses {
		want = append(want, fmt.Sprintf("error.%d.title", s), fmt.Sprintf("error.%d.text", s))
	}
	for k := range out[langs[0]] {
		want = append(want, k)
	}
	for _, l := range langs {
		for _, k := range want {
			if _, ok := out[l][k]; !ok {
				return nil, fmt.Errorf("texts/%s.json: no %s", l, k)
			}
		}
		if len(out[l]) != len(out[langs[0]]) {
			for k := range out[l] {
				if _, ok := out[langs[0]][k]; !ok {
					return nil, fmt.Errorf("texts/%s.json: %s, which %s has not", l, k, langs[0])
				}
			}
		}
	}
	return out, nil
}

// depositLang is the language a deposit's page is in: its lang when the
// page has wording for it, English otherwise.
func depositLang(lang string) string {
	if !slices.Contains(langs, lang) {
		return "en"
	}
	return lang
}

// PickLang is the language of an error page, where the deposit's own is
// unknown (or must not be revealed): en, ar or ku from ?lang= or
// Accept-Language (the first of the three the browser lists), en
// otherwise.
func PickLang(r *http.Request) string {
	if l := r.URL.Query().Get("lang"); l != "" {
		if strings.EqualFold(l, "ckb") {
			return "ku" // Sorani's own tag, which the page itself carries
		}
		return aggregates.NormalizeLang(l)
	}
	for _, base := range console.Preferred(r.Header.Get("Accept-Language")) {
		if base == "ckb" {
			return "ku"
		}
		if slices.Contains(langs, base) {
			return base
		}
	}
	return "en"
}

// htmlLang is the page's language tag: Sorani Kurdish is ckb (the
// merchant API's lang=ku).
func htmlLang(lang string) string {
	if lang == "ku" {
		return "ckb"
	}
	return lang
}

func dir(lang string) string {
	if lang == "ar" || lang == "ku" {
		return "rtl"
	}
	return "ltr"
}

// money is an amount with its currency, as the page's language writes it.
func (p *Page) money(n int64, lang string) string {
	return groupAmount(n, lang) + " " + p.texts[lang]["currency"]
}

// stateText says the deposit's status to the customer: an approval for
// another amount than the one asked for says which it was credited with,
// and why.
func (p *Page) stateText(rec records.Record, lang string) string {
	t := p.texts[lang]
	switch rec.Status {
	case "pending":
		return t["pending"]
	case "approved":
		if rec.Amount != rec.RequestedAmount {
			return strings.NewReplacer("{amount}", p.money(rec.Amount, lang), "{requested}", p.money(rec.RequestedAmount, lang)).Replace(t["approvedFor"])
		}
		return t["approved"]
	case "rejected":
		return t["rejected"]
	}
	return t["expiredFinal"]
}
