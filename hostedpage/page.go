// Package hostedpage renders the hosted payment page, the page a
// deposit's customer pays from (/pay/{transactionId}), and its error
// pages, in English, Arabic and Sorani Kurdish (docs/merchant-api.md
// "Hosted payment page", docs/console.md "Hosted payment page").
//
// As the console's, the page's template, style and script (templates/)
// and its wording (texts/, one JSON file a language) are files embedded
// in the binary. The style and the script are written into the page
// itself: its Content-Security-Policy allows inline styles and the one
// script that carries the page's nonce, and nothing from elsewhere.
// httpapi routes the page, checks its token, finds the deposit and sets
// the headers; this package turns the deposit into the page.
package hostedpage

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"strconv"

	"github.com/iqdgateway/gateway/records"
)

//go:embed templates/*.html templates/*.css templates/*.js
var templateFS embed.FS

// Page renders the hosted page and its error pages. New builds it once,
// when the server starts.
type Page struct {
	page, errorPage *template.Template
	// texts is the wording of each language.
	texts map[string]wording
}

// New parses the embedded templates and loads the wording of every
// language, checked complete (loadTexts). Its files are embedded, so only
// a broken build fails here, and the package's tests call it.
func New() (*Page, error) {
	texts, err := loadTexts(textFS)
	if err != nil {
		return nil, fmt.Errorf("hosted page wording: %w", err)
	}
	// A key the wording lacks fails the page instead of leaving a hole in
	// it.
	page, err := template.New("page.html").Option("missingkey=error").
		ParseFS(templateFS, "templates/page.html", "templates/page.css", "templates/page.js")
	if err != nil {
		return nil, fmt.Errorf("hosted page template: %w", err)
	}
	errorPage, err := template.New("error.html").ParseFS(templateFS, "templates/error.html")
	if err != nil {
		return nil, fmt.Errorf("hosted error page template: %w", err)
	}
	return &Page{page: page, errorPage: errorPage, texts: texts}, nil
}

// Deposit is what one deposit's page is rendered from.
type Deposit struct {
	// Rec is the deposit; its lang is the page's language (English for
	// one the page has no wording for).
	Rec records.Record
	// Merchant is the site's name; ReturnURL and Support its link back
	// and its support contact ("" for none; docs/operator-api.md).
	Merchant, ReturnURL, Support string
	// Sandbox: the site is a sandbox, and the page says it is a test.
	Sandbox bool
	// StatusURL is where the page's script asks for the deposit's status.
	StatusURL string
	// Nonce lets the page's own script run, and no other: the nonce of
	// the Content-Security-Policy the page is sent with.
	Nonce string
}

// pageData is what page.html is executed with.
type pageData struct {
	Lang, Dir string
	T         wording
	Rec       records.Record
	// Amount is the amount as the page writes it, with the currency;
	// Requested the amount asked for.
	Amount, RawAmount, Requested string
	Status                       string
	// State says the status to the customer.
	State string
	// Digits are the page's digits: arab (Arabic-Indic) or latn.
	Digits             string
	ExpiresUnixMs      int64
	BankName, AcctName string
	// AcctNum is the number to pay to as it is copied; AcctShown as it is
	// read (a card number in groups of four).
	AcctNum, AcctShown  string
	Merchant, StatusURL string
	// ReturnURL and Support are the site's; "" for none.
	ReturnURL, Support string
	Sandbox            bool
	Nonce              string
}

// Render writes d's page.
func (p *Page) Render(w io.Writer, d Deposit) error {
	rec := d.Rec
	lang := depositLang(rec.Deposit.Lang)
	data := pageData{Lang: htmlLang(lang), Dir: dir(lang), T: p.texts[lang], Rec: rec, Amount: p.money(rec.Amount, lang),
		RawAmount: strconv.FormatInt(rec.Amount, 10), Requested: p.money(rec.RequestedAmount, lang), Status: rec.Status,
		State: p.stateText(rec, lang), Digits: pageDigits(lang), ExpiresUnixMs: rec.ExpiresAtMs(),
		BankName: rec.Deposit.BankName, AcctName: rec.Deposit.BankAccountName, AcctNum: rec.Deposit.BankAccountIban,
		AcctShown: readableNumber(rec.Deposit.BankAccountIban, rec.IdentifierKind),
		Merchant:  d.Merchant, StatusURL: d.StatusURL, ReturnURL: d.ReturnURL, Support: d.Support, Sandbox: d.Sandbox,
		Nonce: d.Nonce}
	if err := p.page.Execute(w, data); err != nil {
		return fmt.Errorf("hosted page of %s: %w", rec.TransactionID, err)
	}
	return nil
}

// AmountText is rec's amount as its page writes it (25,000 IQD; ٢٥٬٠٠٠
// د.ع): the status the page polls carries it, so that an approval for
// another amount shows without a reload.
func (p *Page) AmountText(rec records.Record) string {
	return p.money(rec.Amount, depositLang(rec.Deposit.Lang))
}

// errorStatuses are the statuses the hosted page has an error page for,
// each with its wording (error.<status>.title and .text).
var errorStatuses = []int{404, 429, 431, 503}

// RenderError writes the error page of status in lang (PickLang's).
func (p *Page) RenderError(w io.Writer, status int, lang string) error {
	t, ok := p.texts[lang]
	key := "error." + strconv.Itoa(status)
	title, text := t[key+".title"], t[key+".text"]
	if !ok || title == "" {
		return fmt.Errorf("no hosted error page for status %d in %q", status, lang)
	}
	data := struct{ Lang, Dir, Title, Text string }{htmlLang(lang), dir(lang), title, text}
	if err := p.errorPage.Execute(w, data); err != nil {
		return fmt.Errorf("hosted error page %d: %w", status, err)
	}
	return nil
}
