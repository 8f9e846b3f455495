package httpapi

import (
	"errors"
	"html/template"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/aggregates/recipient"
	"github.com/iqdgateway/gateway/console"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// pageText is the hosted page's wording in one language.
type pageText struct {
	Title, PayTo, Method, Recipient, Number, Amount, Copy, Copied, ExpiresIn, Expired string
	Exact, Approved, Rejected, ExpiredFinal, Pending, Currency, Merchant, Order       string
	Back, Support                                                                     string
	// ApprovedFor is an approval for another amount than the one asked
	// for: {amount} is the amount received, {requested} the request's.
	ApprovedFor string
	// Test marks a sandbox site's page: nothing on it is paid or credited.
	Test string
}

var pageTexts = map[string]pageText{
	"en": {Title: "Deposit", PayTo: "Send exactly this amount in one transfer from your own wallet", Method: "Method",
		Recipient: "Recipient name", Number: "Recipient number", Amount: "Amount", Copy: "Copy", Copied: "Copied",
		ExpiresIn: "Time left", Expired: "Time is up", Exact: "The amount must match exactly.",
		Approved: "Your deposit was received and approved.", Rejected: "This deposit was rejected.",
		ApprovedFor:  "Approved for {amount}: the amount received ({requested} was requested).",
		ExpiredFinal: "This deposit request has expired. If you already paid, contact support.",
		Pending:      "Waiting for your transfer…", Currency: "IQD", Merchant: "Paying", Order: "Order reference",
		Back: "Back to the shop", Support: "Help",
		Test: "Test payment (sandbox): do not send money. Nothing on this page is paid or credited."},
	"ar": {Title: "إيداع", PayTo: "أرسل هذا المبلغ بالضبط في تحويل واحد من محفظتك الخاصة", Method: "طريقة الدفع",
		Recipient: "اسم المستلم", Number: "رقم المستلم", Amount: "المبلغ", Copy: "نسخ", Copied: "تم النسخ",
		ExpiresIn: "الوقت المتبقي", Expired: "انتهى الوقت", Exact: "يجب أن يطابق المبلغ تماماً.",
		Approved: "تم استلام إيداعك والموافقة عليه.", Rejected: "تم رفض هذا الإيداع.",
		ApprovedFor:  "تمت الموافقة على {amount}: المبلغ الذي استُلم (كان المطلوب {requested}).",
		ExpiredFinal: "انتهت صلاحية طلب الإيداع هذا. إذا كنت قد دفعت بالفعل، فاتصل بالدعم.",
		Pending:      "بانتظار تحويلك…", Currency: "د.ع", Merchant: "الدفع إلى", Order: "رقم الطلب",
		Back: "العودة إلى المتجر", Support: "المساعدة",
		Test: "دفعة تجريبية (بيئة اختبار): لا ترسل أي أموال. لا يُدفع أو يُضاف أي شيء من هذه الصفحة."},
	"ku": {Title: "پارەدانان", PayTo: "ئەم بڕە بە تەواوی لە یەک گواستنەوەدا لە جزدانی خۆتەوە بنێرە", Method: "ڕێگای پارەدان",
		Recipient: "ناوی وەرگر", Number: "ژمارەی وەرگر", Amount: "بڕ", Copy: "لەبەرگرتنەوە", Copied: "لەبەرگیرایەوە",
		ExpiresIn: "کاتی ماوە", Expired: "کات تەواو بوو", Exact: "بڕەکە دەبێت وەک خۆی بێت.",
		Approved: "پارەکەت گەیشت و پەسەند کرا.", Rejected: "ئەم پارەدانانە ڕەتکرایەوە.",
		ApprovedFor:  "پەسەند کرا بە {amount}: ئەو بڕەی گەیشت ({requested} داواکرابوو).",
		ExpiredFinal: "ماوەی ئەم داواکارییە بەسەرچوو. ئەگەر پارەت داوە، پەیوەندی بە پشتگیرییەوە بکە.",
		Pending:      "چاوەڕێی گواستنەوەکەتین…", Currency: "د.ع", Merchant: "پارەدان بۆ", Order: "ژمارەی داواکاری",
		Back: "گەڕانەوە بۆ فرۆشگا", Support: "یارمەتی",
		Test: "پارەدانی تاقیکاری (سەندبۆکس): هیچ پارەیەک مەنێرە. لەم پەڕەیەوە هیچ شتێک نادرێت و زیاد ناکرێت."},
}

type pageData struct {
	Lang, Dir string
	T         pageText
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
	// ReturnURL and Support are the site's (docs/console.md "Hosted
	// payment page"); "" for none.
	ReturnURL, Support string
	// Sandbox: the site is a sandbox, and the page says it is a test.
	Sandbox bool
	// Nonce lets the page's own script run, and no other
	// (Content-Security-Policy).
	Nonce string
}

var pageTmpl = template.Must(template.New("pay").Parse(`<!doctype html>
<html lang="{{.Lang}}" dir="{{.Dir}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{if .Sandbox}}TEST · {{end}}{{.T.Title}} · {{.Amount}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans Arabic",Tahoma,sans-serif;background:#f4f5f7;margin:0;padding:16px;color:#1d2330}
main{max-width:440px;margin:0 auto;background:#fff;border-radius:12px;padding:20px;box-shadow:0 1px 4px #0002}
h1{font-size:1.2rem;margin:0 0 4px}.merchant{color:#5b6475;margin:0 0 12px}
.row{display:flex;justify-content:space-between;align-items:center;gap:8px;padding:10px 0;border-bottom:1px solid #eee}
.label{color:#5b6475;font-size:.9rem}.value,#merchant{font-weight:600;word-break:break-all;unicode-bidi:isolate}.ltr{direction:ltr;unicode-bidi:isolate}
button{border:1px solid #3461c1;background:#fff;color:#3461c1;border-radius:6px;padding:4px 10px;cursor:pointer;font:inherit}
button:focus-visible{outline:3px solid #f0b429;outline-offset:2px}
.note{font-size:.9rem;color:#5b6475;margin-top:12px}.state{font-size:1.05rem;font-weight:600;margin:12px 0}
.ok{color:#17803d}.bad{color:#b42318}.timer{font-variant-numeric:tabular-nums}
.wrap{flex-wrap:wrap}.pair{flex:1 0 auto;display:flex;align-items:center;gap:8px;max-width:100%}
#number{margin-inline:auto;word-break:normal;overflow-wrap:anywhere}
.test{background:#fff4cc;border:2px solid #b7791f;color:#5c3d00;border-radius:8px;padding:8px 10px;font-weight:600;margin:0 0 12px}
</style>
</head>
<body>
<main data-status="{{.Status}}" data-status-url="{{.StatusURL}}" data-digits="{{.Digits}}">
{{if .Sandbox}}<p class="test" id="test" role="note">{{.T.Test}}</p>{{end}}
<h1>{{.T.Title}}</h1>
<p class="merchant">{{.T.Merchant}} <b id="merchant">{{.Merchant}}</b></p>
<div class="row"><span class="label">{{.T.Order}}</span><span class="value ltr" id="order">{{.Rec.ProcessID}}</span></div>
<div class="row"><span class="label">{{.T.Amount}}</span><span class="value" id="amount" data-value="{{.RawAmount}}" data-requested="{{.Rec.RequestedAmount}}" data-requested-text="{{.Requested}}">{{.Amount}}</span>{{if eq .Status "pending"}}<button type="button" class="pending-only" data-copy="amount">{{.T.Copy}}</button>{{end}}</div>
{{if eq .Status "pending"}}
<div class="pending-only">
<p>{{.T.PayTo}}</p>
<div class="row"><span class="label">{{.T.Method}}</span><span class="value">{{.BankName}}</span></div>
<div class="row"><span class="label">{{.T.Recipient}}</span><span class="value" id="name">{{.AcctName}}</span><button type="button" data-copy="name">{{.T.Copy}}</button></div>
<div class="row wrap"><span class="label">{{.T.Number}}</span><span class="pair"><span class="value ltr" id="number" data-value="{{.AcctNum}}">{{.AcctShown}}</span><button type="button" data-copy="number">{{.T.Copy}}</button></span></div>
<div class="row"><span class="label">{{.T.ExpiresIn}}</span><span class="value timer ltr" id="timer" data-expires="{{.ExpiresUnixMs}}">–</span></div>
<p class="note">{{.T.Exact}}</p>
</div>
{{end}}
<p id="state" role="status" aria-live="polite" class="state{{if eq .Status "approved"}} ok{{else if ne .Status "pending"}} bad{{end}}"
 data-pending="{{.T.Pending}}" data-approved="{{.T.Approved}}" data-approved-for="{{.T.ApprovedFor}}" data-rejected="{{.T.Rejected}}" data-expired="{{.T.ExpiredFinal}}">{{.State}}</p>
{{if .Support}}<p class="note">{{.T.Support}}: <span id="support" dir="auto">{{.Support}}</span></p>{{end}}
{{if .ReturnURL}}<p><a id="return" href="{{.ReturnURL}}" rel="noreferrer">{{.T.Back}}</a></p>{{end}}
</main>
<script nonce="{{.Nonce}}">
(function(){
var main=document.querySelector("main"),state=document.getElementById("state");
// Copy buttons work on plain HTTP too, where the Clipboard API is missing.
function copy(text){
 if(navigator.clipboard&&window.isSecureContext){return navigator.clipboard.writeText(text);}
 return new Promise(function(ok,fail){var ta=document.createElement("textarea");ta.value=text;ta.setAttribute("readonly","");
  ta.style.position="fixed";ta.style.opacity="0";document.body.appendChild(ta);ta.select();
  var done=false;try{done=document.execCommand("copy");}catch(e){}document.body.removeChild(ta);done?ok():fail();});
}
document.querySelectorAll("[data-copy]").forEach(function(b){b.addEventListener("click",function(){
 var el=document.getElementById(b.dataset.copy);var t=el.dataset.value||el.textContent;var label=b.textContent;
 copy(t).then(function(){b.textContent={{.T.Copied}};setTimeout(function(){b.textContent=label},1500)},function(){});});});
// Numbers in the page's digits, as the server writes the amount.
function digits(s){return main.dataset.digits==="arab"?s.replace(/[0-9]/g,function(d){return "٠١٢٣٤٥٦٧٨٩"[d];}):s;}
var el=document.getElementById("timer");
if(el){var end=+el.dataset.expires;(function tick(){var s=Math.max(0,Math.floor((end-Date.now())/1000));
 el.textContent=s>0?digits(Math.floor(s/60)+":"+String(s%60).padStart(2,"0")):{{.T.Expired}};if(s>0)setTimeout(tick,1000);})();}
// The status changes without a reload: approved, rejected or expired.
function show(st,text){
 main.dataset.status=st;state.textContent=text||state.dataset[st]||state.textContent;
 state.className="state"+(st==="approved"?" ok":st==="pending"?"":" bad");
 if(st!=="pending"){document.querySelectorAll(".pending-only").forEach(function(n){n.remove();});}
}
(function poll(){
 if(main.dataset.status!=="pending")return;
 setTimeout(function(){fetch(main.dataset.statusUrl,{cache:"no-store"}).then(function(r){return r.ok?r.json():null;})
  .then(function(j){if(j&&j.data&&j.data.status&&j.data.status!==main.dataset.status){
   // An approval may be for the amount received: show what was credited,
   // and why it is not what was asked for.
   var a=document.getElementById("amount"),text="";
   if(j.data.amountText){a.textContent=j.data.amountText;a.dataset.value=String(j.data.amount);}
   if(j.data.status==="approved"&&j.data.amountText&&String(j.data.amount)!==a.dataset.requested){
    text=state.dataset.approvedFor.replace("{amount}",j.data.amountText).replace("{requested}",a.dataset.requestedText);}
   show(j.data.status,text);}poll();},poll);},3000);
})();
})();
</script>
</body>
</html>
`))

// groupAmount writes an amount as the page's language does: 25,000 in
// English, ٢٥٬٠٠٠ in Arabic and Kurdish.
func groupAmount(n int64, lang string) string {
	g := records.Group(n)
	if pageDigits(lang) == "latn" {
		return g
	}
	return arabicDigits.Replace(g)
}

// money is an amount with its currency, as the page's language writes it.
func money(n int64, lang string) string { return groupAmount(n, lang) + " " + pageTexts[lang].Currency }

// pageDigits are the digits the page writes its numbers in (the amount,
// the countdown): Arabic-Indic (arab) in Arabic and Kurdish, latn in
// English.
func pageDigits(lang string) string {
	if lang == "en" {
		return "latn"
	}
	return "arab"
}

// stateText says the deposit's status to the customer: an approval for
// another amount than the one asked for says which it was credited with,
// and why.
func stateText(rec records.Record, lang string) string {
	t := pageTexts[lang]
	switch rec.Status {
	case "pending":
		return t.Pending
	case "approved":
		if rec.Amount != rec.RequestedAmount {
			return strings.NewReplacer("{amount}", money(rec.Amount, lang), "{requested}", money(rec.RequestedAmount, lang)).Replace(t.ApprovedFor)
		}
		return t.Approved
	case "rejected":
		return t.Rejected
	}
	return t.ExpiredFinal
}

// readableNumber is the number to pay to as people read it: a card number
// or an IBAN in groups of four (6375 0000 1234 5678), which the copy button
// copies without the spaces. Another kind (a phone number, a username),
// or a number already written with spaces, is shown as it is.
func readableNumber(num, kind string) string {
	if kind != string(recipient.CardNo) && kind != string(recipient.IBAN) {
		return num
	}
	var b strings.Builder
	for i, r := range num {
		if !(r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return num
		}
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// arabicDigits writes digits and the group separator in Arabic-Indic form.
var arabicDigits = strings.NewReplacer("0", "٠", "1", "١", "2", "٢", "3", "٣", "4", "٤", "5", "٥", "6", "٦", "7", "٧", "8", "٨", "9", "٩", ",", "٬")

// htmlLang is the page's language tag: Sorani Kurdish is ckb (the
// merchant API's lang=ku).
func htmlLang(lang string) string {
	if lang == "ku" {
		return "ckb"
	}
	return lang
}

// hostedPage serves the deposit's payment page (docs/merchant-api.md "Hosted payment page"). It needs no
// login, so it is built to cost nothing to whoever guesses: each client
// address is rate limited, and a token is checked against the state in
// memory before anything is read from the store (records.Reader.Hosted).
// Anything but the exact token of an existing deposit is the page's own
// "not found", which neither confirms nor denies that a transaction exists.
func (s *Server) hostedPage(w http.ResponseWriter, r *http.Request) {
	h := s.hostedRecord(r)
	if h.status != http.StatusOK {
		if h.wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(h.wait))
		}
		s.hostedError(w, r, h.status)
		return
	}
	id, tok, rec := h.id, h.tok, h.rec
	lang := depositLang(rec.Deposit.Lang)
	d := pageData{Lang: htmlLang(lang), Dir: dir(lang), T: pageTexts[lang], Rec: rec, Amount: money(rec.Amount, lang),
		RawAmount: strconv.FormatInt(rec.Amount, 10), Requested: money(rec.RequestedAmount, lang), Status: rec.Status,
		State: stateText(rec, lang), Digits: pageDigits(lang), BankName: rec.Deposit.BankName,
		AcctName: rec.Deposit.BankAccountName, AcctNum: rec.Deposit.BankAccountIban,
		AcctShown: readableNumber(rec.Deposit.BankAccountIban, rec.IdentifierKind),
		StatusURL: "/pay/" + string(id) + "/status?t=" + url.QueryEscape(tok)}
	if cfg, ok := s.cfg.Ledger.SiteConfig(id.Site()); ok {
		d.Merchant, d.ReturnURL, d.Support, d.Sandbox = cfg.Name, cfg.ReturnURL, cfg.SupportContact, cfg.Sandbox
	}
	d.ExpiresUnixMs = rec.ExpiresAtMs()
	d.Nonce = newToken()
	pageHeaders(w, d.Nonce)
	if err := pageTmpl.Execute(w, d); err != nil {
		s.log.ErrorContext(r.Context(), "hosted page", "tx", id, "err", err)
	}
}

// hosted is the deposit a hosted page request names.
type hosted struct {
	id  ids.TxID
	tok string
	rec records.Record
	// status is 200, or the error page's: 404 for anything but the exact
	// token of an existing deposit, 429 past the client's rate (wait
	// seconds), 503 when the store does not answer.
	status, wait int
}

// hostedRecord finds the deposit of a hosted page request.
func (s *Server) hostedRecord(r *http.Request) hosted {
	ip, err := s.clientIP(r)
	if err != nil {
		// A trusted proxy sent an X-Forwarded-For nobody can read.
		return hosted{status: http.StatusNotFound}
	}
	if ok, wait := s.limiter.allow(clientKey(ip), s.cfg.HostedRateLimit); !ok {
		return hosted{status: http.StatusTooManyRequests, wait: wait}
	}
	id, err := ids.ParseTx(chi.URLParam(r, "txId"))
	tok := r.URL.Query().Get("t")
	if err != nil || tok == "" || len(tok) > 64 {
		return hosted{status: http.StatusNotFound}
	}
	rec, err := s.cfg.Reader.Hosted(r.Context(), id, tok)
	if err != nil {
		if !errors.Is(err, aggregates.ErrNotFound) {
			s.log.WarnContext(r.Context(), "hosted page", "tx", id, "err", err)
			return hosted{status: http.StatusServiceUnavailable}
		}
		return hosted{status: http.StatusNotFound}
	}
	return hosted{id: id, tok: tok, rec: rec, status: http.StatusOK}
}

// hostedState is what the page polls for.
type hostedState struct {
	Status string `json:"status"`
	Amount int64  `json:"amount"`
	// AmountText is the amount as the page writes it, in its language.
	AmountText string `json:"amountText"`
}

// depositLang is the language a deposit's pages are in: its lang when
// they have texts for it, English otherwise.
func depositLang(lang string) string {
	if _, ok := pageTexts[lang]; !ok {
		return "en"
	}
	return lang
}

// hostedStatus serves GET /pay/{txId}/status?t=: the deposit's status and
// amount, which the page asks for every few seconds while it is pending.
func (s *Server) hostedStatus(w http.ResponseWriter, r *http.Request) {
	h := s.hostedRecord(r)
	w.Header().Set("Cache-Control", "no-store")
	switch h.status {
	case http.StatusOK:
		// The amount too: an operator may approve the amount actually
		// received, and the page then shows it without a reload.
		lang := depositLang(h.rec.Deposit.Lang)
		s.writeData(w, r, hostedState{Status: h.rec.Status, Amount: h.rec.Amount, AmountText: money(h.rec.Amount, lang)})
	case http.StatusTooManyRequests:
		s.writeErr(w, r, &apiError{status: h.status, code: "rate_limited", message: "too many requests", retryAfter: h.wait})
	case http.StatusServiceUnavailable:
		s.writeErr(w, r, &apiError{status: h.status, code: "unavailable", message: "the status cannot be read right now"})
	default:
		s.writeErr(w, r, &apiError{status: http.StatusNotFound, code: "not_found", message: "no such payment page"})
	}
}

func dir(lang string) string {
	if lang == "ar" || lang == "ku" {
		return "rtl"
	}
	return "ltr"
}

// pageHeaders are the hosted pages' headers: never cached, never framed,
// no referrer leaking the token, styles only inline, and no script but the
// page's own, which carries nonce ("" for a page without a script): one
// escaping slip that let a merchant's text into the page would still not
// run.
func pageHeaders(w http.ResponseWriter, nonce string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	script := "'none'"
	if nonce != "" {
		script = "'nonce-" + nonce + "'"
	}
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src "+script+"; connect-src 'self'; base-uri 'none'; form-action 'none'")
}

// errorTexts are the hosted page's error pages, by status and language.
var errorTexts = map[int]map[string][2]string{
	http.StatusNotFound: {
		"en": {"Payment page not found", "This link is not valid. Open the payment page again from the shop."},
		"ar": {"صفحة الدفع غير موجودة", "هذا الرابط غير صالح. افتح صفحة الدفع مرة أخرى من المتجر."},
		"ku": {"پەڕەی پارەدان نەدۆزرایەوە", "ئەم بەستەرە دروست نییە. پەڕەی پارەدان دووبارە لە فرۆشگاکەوە بکەرەوە."},
	},
	http.StatusTooManyRequests: {
		"en": {"Too many requests", "Please wait a moment and reload the page."},
		"ar": {"طلبات كثيرة جداً", "يرجى الانتظار قليلاً ثم إعادة تحميل الصفحة."},
		"ku": {"داواکاری زۆر", "تکایە کەمێک چاوەڕێ بکە و پەڕەکە نوێ بکەرەوە."},
	},
	http.StatusRequestHeaderFieldsTooLarge: {
		"en": {"Link too long", "This link is too long to open. Open the payment page again from the shop."},
		"ar": {"الرابط طويل جداً", "هذا الرابط أطول من أن يُفتح. افتح صفحة الدفع مرة أخرى من المتجر."},
		"ku": {"بەستەرەکە زۆر درێژە", "ئەم بەستەرە زۆر درێژە بۆ کردنەوە. پەڕەی پارەدان دووبارە لە فرۆشگاکەوە بکەرەوە."},
	},
	http.StatusServiceUnavailable: {
		"en": {"Temporarily unavailable", "The payment page cannot be shown right now. Please reload it in a minute."},
		"ar": {"غير متاح مؤقتاً", "لا يمكن عرض صفحة الدفع الآن. يرجى إعادة تحميلها بعد دقيقة."},
		"ku": {"بە کاتی بەردەست نییە", "ئێستا پەڕەی پارەدان نیشان نادرێت. تکایە دوای خولەکێک نوێی بکەرەوە."},
	},
}

var errorTmpl = template.Must(template.New("err").Parse(`<!doctype html>
<html lang="{{.Lang}}" dir="{{.Dir}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Tahoma,sans-serif;background:#f4f5f7;margin:0;padding:16px;color:#1d2330}
main{max-width:440px;margin:0 auto;background:#fff;border-radius:12px;padding:20px;box-shadow:0 1px 4px #0002}
h1{font-size:1.2rem;margin:0 0 12px}p{color:#5b6475}
</style>
</head>
<body><main><h1>{{.Title}}</h1><p>{{.Text}}</p></main></body>
</html>
`))

// hostedError answers one of the hosted page's error pages, in the language
// the browser asks for: the deposit's own language is unknown (or must not
// be revealed) here.
func (s *Server) hostedError(w http.ResponseWriter, r *http.Request, status int) {
	lang := pageLang(r)
	t := errorTexts[status][lang]
	pageHeaders(w, "")
	w.WriteHeader(status)
	if err := errorTmpl.Execute(w, struct{ Lang, Dir, Title, Text string }{htmlLang(lang), dir(lang), t[0], t[1]}); err != nil {
		s.log.ErrorContext(r.Context(), "hosted error page", "err", err)
	}
}

// pageLang picks en, ar or ku from ?lang= or Accept-Language (the first of
// the three the browser lists), en otherwise.
func pageLang(r *http.Request) string {
	if l := r.URL.Query().Get("lang"); l != "" {
		if strings.EqualFold(l, "ckb") {
			return "ku" // Sorani's own tag, which the page itself carries
		}
		return aggregates.NormalizeLang(l)
	}
	for _, base := range console.Preferred(r.Header.Get("Accept-Language")) {
		switch base {
		case "en", "ar", "ku", "ckb":
			if base == "ckb" {
				return "ku"
			}
			return base
		}
	}
	return "en"
}

// clientKey is the rate-limit key of a client address: an IPv6 client gets
// a /64 (one subscriber's whole network), an IPv4 one its address.
func clientKey(ip netip.Addr) string {
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return "ip:" + p.String()
	}
	return "ip:" + ip.String()
}
