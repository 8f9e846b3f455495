// Package console renders the operator console: the pages an operator
// works in all day (the deposit and withdrawal queues with search, the
// matching of a statement's transfers, treasuries, callback deliveries and
// a transaction's history), in English, Arabic and Sorani Kurdish.
//
// Pages are server-rendered templates with a small plain script, all
// embedded in the binary (no build step, no CDN). The console reads
// through the same records the operator API answers with, and every
// action is an operator API call made by the script with the session
// cookie (httpapi serves both), so the console can do nothing the API
// would refuse (docs/console.md).
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"strings"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/matching"
	"github.com/iqdgateway/gateway/records"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Static is the console's script and style sheet, served under
// /console/static/.
func Static() fs.FS {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	return sub
}

// Baghdad is the time zone the console shows times in (Iraq keeps UTC+3
// all year).
var Baghdad = matching.Baghdad

// Who is the signed-in operator, as pages show them.
type Who struct {
	Name, Role string
	// CanAct: the role may move transactions (operator or admin);
	// IsAdmin: it may also adjust treasuries.
	CanAct, IsAdmin bool
}

// Lang is one language of the switch: URL is the current page, with its
// filters and cursor, in that language.
type Lang struct{ Code, Name, URL string }

// Page is what every page is rendered from.
type Page struct {
	T         T
	Lang, Dir string
	Langs     []Lang
	Who       Who
	CSRF      string
	// Nav is the current section; Title the page's heading.
	Nav, Title string
	// Query is the current query without lang and fragment, encoded: the
	// language links keep it.
	Query string
	// Body is the page's own data (one of the *Body types).
	Body any
	// JSTexts are the texts the script shows, in the page's language.
	JSTexts map[string]string
}

// NewPage starts a page in lang.
func NewPage(lang string, who Who, csrf, nav, titleKey, query string, body any) Page {
	t := T{lang: lang}
	p := Page{T: t, Lang: lang, Dir: Dir(lang), Who: who, CSRF: csrf, Nav: nav, Title: t.Get(titleKey), Query: query, Body: body,
		JSTexts: map[string]string{}}
	for _, l := range Langs {
		p.Langs = append(p.Langs, Lang{l, LangNames[l], langURL(query, l)})
	}
	for _, k := range jsKeys {
		p.JSTexts[k] = t.Get(k)
	}
	for k := range texts {
		if strings.HasPrefix(k, "err.") {
			p.JSTexts[k] = t.Get(k)
		}
	}
	for field := range fieldLabels {
		p.JSTexts["field."+field] = t.Label(field)
	}
	return p
}

// langURL is the current page in lang: query (already encoded) with lang
// added. It is a whole relative URL, not a query spliced into the
// template, so that html/template does not escape its & and = away.
func langURL(query, lang string) string {
	if query == "" {
		return "?lang=" + lang
	}
	return "?" + query + "&lang=" + lang
}

// jsKeys are the texts console.js shows.
var jsKeys = []string{"amount", "confirmApprove", "confirmReject", "confirmTake", "confirmPay", "resend", "adjust", "amountReceived",
	"reason", "reference", "adjustAmount", "done", "conflict", "error", "expired", "iqd",
	"status.pending", "status.processing", "status.approved", "status.rejected", "status.expired", "status.paid",
	"status.delivered", "status.failed"}

// JS keys also include every error code's text (the "err." keys) and
// every field's label ("field." and the API's parameter), so that the
// script states an API error as Failure does.

// Site is a site as the console names it.
type Site struct{ ID, Name string }

// TxBody is the deposit or withdrawal queue and search.
type TxBody struct {
	// Kind is deposit or withdrawal.
	Kind string
	// F holds the filters as given (parameter → value).
	F        map[string]string
	Statuses []string
	Sites    []Site
	Methods  []string
	Rows     []records.OpsRecord
	// Next is the next page's URL ("" on the last); LiveURL the rows'.
	Next, LiveURL string
	// Error is a filter the search refused.
	Error *Failure
	// Now is the render time in Unix ms (time left is counted from it).
	Now int64
}

// LoginBody is the sign-in form.
type LoginBody struct {
	Next  string
	Error bool
}

// MatchBody is the matching form and its proposals.
type MatchBody struct {
	Text, Site string
	Sites      []Site
	Results    []matching.Result
	Error      *Failure
}

// TreasuryRow is one site's treasury.
type TreasuryRow struct {
	ID, Name                                   string
	Balance, Pending, Available, NegativeLimit int64
}

// TreasuriesBody lists every site's treasury; LiveURL is the rows', which
// refresh themselves like every list (an adjustment shows at once).
type TreasuriesBody struct {
	Sites   []TreasuryRow
	LiveURL string
}

// CallbacksBody lists callback deliveries, of one site or of all.
type CallbacksBody struct {
	Enabled bool
	// Status and Site are the filters as given ("" for any).
	Status, Site string
	Statuses     []string
	Sites        []Site
	Items        []callbacks.Delivery
	// Next is the next page's URL ("" on the last); LiveURL the rows'.
	Next, LiveURL string
	// Error is a filter the listing refused.
	Error *Failure
}

// TxDetailBody is one transaction and its history.
type TxDetailBody struct {
	Rec      records.OpsRecord
	Sites    []Site
	Items    []records.HistoryItem
	Complete bool
	// Last names who made the last change ("" for the creation).
	Last string
	// Names are the people the history's actors stand for (actor →
	// name), where they have one: a named operator's id is not for
	// people.
	Names map[string]string
}

// Actor is who an event's actor is, for people: their name where the
// history has one, else the actor as recorded (admin, merchant, system).
func (b TxDetailBody) Actor(actor string) string {
	if n := b.Names[actor]; n != "" {
		return n
	}
	return actor
}

var funcs = template.FuncMap{
	"expiresMs": func(r records.OpsRecord) int64 {
		return r.ExpiresAtMs()
	},
	"left": func(r records.OpsRecord, now int64) string {
		s := max(0, (r.ExpiresAtMs()-now)/1000)
		return fmt.Sprintf("%d:%02d", s/60, s%60)
	},
	"siteName": func(sites []Site, id ids.SiteID) string {
		for _, s := range sites {
			if s.ID == string(id) {
				return s.Name
			}
		}
		return string(id)
	},
	"lastAnswer": LastAnswer,
	"when":       whenHTML,
	"zone":       func() string { return Zone },
}

// LastAnswer says what the last attempt of a callback delivery came to,
// once. The dispatcher writes an HTTP answer's error as "HTTP 500"
// already, so the status code is shown only when there is no error (a
// 2xx); an error that is not an HTTP answer (no answer within the
// timeout, a parked delivery whose site has no callbackUrl) goes without
// the code, which is then a former attempt's, not this one's.
func LastAnswer(d callbacks.Delivery) string {
	if d.LastError != nil && *d.LastError != "" {
		return *d.LastError
	}
	if d.LastStatusCode != nil {
		return fmt.Sprintf("HTTP %d", *d.LastStatusCode)
	}
	return ""
}

// Reason says why a deposit was proposed for a transfer of amount
// received, in the page's language (matching.Proposal's own Reason is
// English, for the API).
func (t T) Reason(p matching.Proposal, received int64) string {
	var why []string
	if p.AmountMatch == matching.Exact {
		why = append(why, t.Get("why.amount"))
	}
	switch p.NameMatch {
	case matching.Exact:
		why = append(why, t.Get("why.name"))
	case matching.Partial:
		why = append(why, fmt.Sprintf(t.Get("why.namePart"), p.NameShare))
	}
	if p.AmountMatch != matching.Exact {
		why = append(why, fmt.Sprintf(t.Get("why.amountDiffers"), Group(received), Group(p.Deposit.Amount)))
	}
	switch p.MethodMatch {
	case matching.Exact:
		why = append(why, t.Get("why.method"))
	case matching.Different:
		why = append(why, t.Get("why.otherMethod")+" ("+p.Deposit.Bank+")")
	}
	if p.TransferFirst {
		why = append(why, t.Get("why.transferFirst"))
	}
	if p.Deposit.Status == "expired" {
		why = append(why, t.Get("why.expired"))
	}
	if p.Deposit.Sandbox {
		why = append(why, t.Get("why.sandbox"))
	}
	sep := "; "
	if t.lang != "en" {
		sep = "؛ "
	}
	return strings.Join(why, sep)
}

// pages are the page templates, each with the layout.
var pages = func() map[string]*template.Template {
	layout := template.Must(template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	out := map[string]*template.Template{}
	for _, name := range []string{"login", "transactions", "match", "treasuries", "callbacks", "tx", "error"} {
		out[name] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, "templates/"+name+".html"))
	}
	return out
}()

// Render writes page name.
func Render(w io.Writer, name string, p Page) error {
	t, ok := pages[name]
	if !ok {
		return fmt.Errorf("no console page %q", name)
	}
	return t.ExecuteTemplate(w, "layout", p)
}

// ErrNoList is RenderRows' answer for a page that has no list to refresh:
// the request's mistake (a hand-made ?fragment=rows), not the server's.
var ErrNoList = errors.New("this page has no list to refresh")

// HasRows reports whether page name has a list that refreshes itself
// (?fragment=rows).
func HasRows(name string) bool {
	t, ok := pages[name]
	return ok && t.Lookup("rows") != nil
}

// RenderRows writes only the list of page name (transactions, treasuries
// or callbacks), for the live refresh.
func RenderRows(w io.Writer, name string, p Page) error {
	if !HasRows(name) {
		return fmt.Errorf("console page %q: %w", name, ErrNoList)
	}
	return pages[name].ExecuteTemplate(w, "rows", p)
}
