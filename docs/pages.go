// Package docs holds the product's documentation (the Markdown files
// beside this one) and renders its pages as HTML, so that a gateway
// serves the documents its answers link to (docLink, docs/errors.md)
// from its own binary, at the version it runs.
package docs

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// served are the pages, by name: the documents of the APIs.
// ARCHITECTURE.md is about the code, not its use; console.md is about the
// console, which the gateway serves, and shows it in screenshots, which
// are not embedded.
//
//go:embed callbacks.md errors.md events.md merchant-api.md metrics.md operator-api.md
var served embed.FS

// Page is a rendered document.
type Page struct {
	Name  string
	Title string
	HTML  []byte
}

// Pages renders the documents once, on first use.
type Pages struct {
	once  sync.Once
	pages map[string]Page
	index []byte
	err   error
}

// Get returns the page name ("errors" for errors.md) and whether there is
// one; "" is the index of every page. Pages link to one another under
// /docs, where the gateway serves them.
func (p *Pages) Get(name string) (Page, bool, error) {
	p.once.Do(p.render)
	if p.err != nil {
		return Page{}, false, p.err
	}
	if name == "" {
		return Page{Name: "", Title: "Documentation", HTML: p.index}, true, nil
	}
	pg, ok := p.pages[name]
	return pg, ok, nil
}

// Names lists the pages.
func (p *Pages) Names() []string {
	p.once.Do(p.render)
	out := make([]string, 0, len(p.pages))
	for n := range p.pages {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (p *Pages) render() {
	files, err := served.ReadDir(".")
	if err != nil {
		p.err = fmt.Errorf("docs: %w", err)
		return
	}
	names := map[string]bool{}
	for _, f := range files {
		names[strings.TrimSuffix(f.Name(), ".md")] = true
	}
	md := goldmark.New(
		goldmark.WithExtensions(extension.Table, extension.Strikethrough),
		goldmark.WithParserOptions(parser.WithAutoHeadingID(), parser.WithASTTransformers(util.Prioritized(links{names}, 100))),
	)
	p.pages = map[string]Page{}
	var toc []Page
	for _, f := range files {
		src, err := served.ReadFile(f.Name())
		if err != nil {
			p.err = fmt.Errorf("docs %s: %w", f.Name(), err)
			return
		}
		var body bytes.Buffer
		ctx := parser.NewContext(parser.WithIDs(&githubIDs{seen: map[string]int{}}))
		if err := md.Convert(src, &body, parser.WithContext(ctx)); err != nil {
			p.err = fmt.Errorf("docs %s: %w", f.Name(), err)
			return
		}
		name := strings.TrimSuffix(f.Name(), ".md")
		title := titleOf(src, name)
		// The Markdown is the repository's own, not anyone's input.
		html, err := layout(title, template.HTML(body.String()))
		if err != nil {
			p.err = err
			return
		}
		pg := Page{Name: name, Title: title, HTML: html}
		p.pages[name] = pg
		toc = append(toc, pg)
	}
	sort.Slice(toc, func(i, j int) bool { return toc[i].Name < toc[j].Name })
	var list strings.Builder
	list.WriteString("<h1>Documentation</h1>\n<ul>\n")
	for _, pg := range toc {
		fmt.Fprintf(&list, "<li><a href=\"/docs/%s\">%s</a></li>\n", template.HTMLEscapeString(pg.Name), template.HTMLEscapeString(pg.Title))
	}
	list.WriteString("</ul>\n")
	p.index, p.err = layout("Documentation", template.HTML(list.String()))
}

// titleOf is a document's first heading, without Markdown's marks.
func titleOf(src []byte, fallback string) string {
	for _, line := range strings.Split(string(src), "\n") {
		if t, ok := strings.CutPrefix(line, "# "); ok {
			return strings.ReplaceAll(strings.TrimSpace(t), "`", "")
		}
	}
	return fallback
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font:16px/1.55 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:52rem;margin:0 auto;padding:1rem 1.25rem 4rem;color:#1b1f24}
nav{font-size:.9rem;margin-bottom:1rem}nav a{margin-right:.75rem}
h1,h2,h3{line-height:1.25;margin-top:2rem}h2{border-bottom:1px solid #d8dee4;padding-bottom:.3rem}
:target{background:#fff8c5}
code{font:.9em ui-monospace,SFMono-Regular,Menlo,monospace;background:#f3f4f6;padding:.1em .3em;border-radius:4px}
pre{background:#f6f8fa;padding:.8rem;overflow-x:auto;border-radius:6px}pre code{background:none;padding:0}
table{border-collapse:collapse;display:block;overflow-x:auto;margin:1rem 0}th,td{border:1px solid #d8dee4;padding:.35rem .6rem;vertical-align:top;text-align:left}
a{color:#0b5cad}
</style></head><body>
<nav><a href="/docs">Documentation</a><a href="/docs/merchant-api">Merchant API</a><a href="/docs/callbacks">Callbacks</a><a href="/docs/errors">Errors</a><a href="/docs/operator-api">Operator API</a></nav>
<main>{{.Body}}</main>
</body></html>
`))

func layout(title string, body template.HTML) ([]byte, error) {
	var b bytes.Buffer
	if err := page.Execute(&b, struct {
		Title string
		Body  template.HTML
	}{title, body}); err != nil {
		return nil, fmt.Errorf("docs page %s: %w", title, err)
	}
	return b.Bytes(), nil
}

// links rewrites a link to another document ("merchant-api.md#x") into
// the page that serves it ("/docs/merchant-api#x"). A link to a file that
// is not served is left as written.
type links struct{ names map[string]bool }

func (l links) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		link, ok := n.(*ast.Link)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		dest := string(link.Destination)
		file, frag, _ := strings.Cut(dest, "#")
		if name, ok := strings.CutSuffix(file, ".md"); ok && !strings.Contains(name, "/") && l.names[name] {
			out := "/docs/" + name
			if frag != "" {
				out += "#" + frag
			}
			link.Destination = []byte(out)
		}
		return ast.WalkContinue, nil
	})
}

// githubIDs makes headings' ids as GitHub does, which is what the links
// between the documents (and docUrl) name: lower case, spaces to "-",
// everything but letters, digits, "-" and "_" dropped, a repeat numbered.
type githubIDs struct{ seen map[string]int }

func (g *githubIDs) Generate(value []byte, _ ast.NodeKind) []byte {
	var b strings.Builder
	for _, r := range strings.ToLower(string(value)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	id := b.String()
	if n := g.seen[id]; n > 0 {
		g.seen[id] = n + 1
		id += "-" + strconv.Itoa(n)
	} else {
		g.seen[id] = 1
	}
	return []byte(id)
}

func (g *githubIDs) Put(value []byte) { g.seen[string(value)]++ }
