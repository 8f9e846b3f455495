package httpapi

import (
	"crypto/subtle"
	"html/template"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"gateway/ids"
	"gateway/projections"
)

// pageText is the hosted page's wording in one language.
type pageText struct {
	Title, PayTo, Method, Recipient, Number, Amount, Copy, Copied, ExpiresIn, Expired string
	Exact, Approved, Rejected, ExpiredFinal, Pending, Currency                        string
}

var pageTexts = map[string]pageText{
	"en": {Title: "Deposit", PayTo: "Send exactly this amount in one transfer from your own wallet", Method: "Method",
		Recipient: "Recipient name", Number: "Recipient number", Amount: "Amount", Copy: "Copy", Copied: "Copied",
		ExpiresIn: "Time left", Expired: "Time is up", Exact: "The amount must match exactly.",
		Approved: "Your deposit was received and approved.", Rejected: "This deposit was rejected.",
		ExpiredFinal: "This deposit request has expired. If you already paid, contact support.",
		Pending:      "Waiting for your transfer…", Currency: "IQD"},
	"ar": {Title: "إيداع", PayTo: "أرسل هذا المبلغ بالضبط في تحويل واحد من محفظتك الخاصة", Method: "طريقة الدفع",
		Recipient: "اسم المستلم", Number: "رقم المستلم", Amount: "المبلغ", Copy: "نسخ", Copied: "تم النسخ",
		ExpiresIn: "الوقت المتبقي", Expired: "انتهى الوقت", Exact: "يجب أن يطابق المبلغ تماماً.",
		Approved: "تم استلام إيداعك والموافقة عليه.", Rejected: "تم رفض هذا الإيداع.",
		ExpiredFinal: "انتهت صلاحية طلب الإيداع هذا. إذا كنت قد دفعت بالفعل، فاتصل بالدعم.",
		Pending:      "بانتظار تحويلك…", Currency: "د.ع"},
	"ku": {Title: "پارەدانان", PayTo: "ئەم بڕە بە تەواوی لە یەک گواستنەوەدا لە جزدانی خۆتەوە بنێرە", Method: "ڕێگای پارەدان",
		Recipient: "ناوی وەرگر", Number: "ژمارەی وەرگر", Amount: "بڕ", Copy: "لەبەرگرتنەوە", Copied: "لەبەرگیرایەوە",
		ExpiresIn: "کاتی ماوە", Expired: "کات تەواو بوو", Exact: "بڕەکە دەبێت وەک خۆی بێت.",
		Approved: "پارەکەت گەیشت و پەسەند کرا.", Rejected: "ئەم پارەدانانە ڕەتکرایەوە.",
		ExpiredFinal: "ماوەی ئەم داواکارییە بەسەرچوو. ئەگەر پارەت داوە، پەیوەندی بە پشتگیرییەوە بکە.",
		Pending:      "چاوەڕێی گواستنەوەکەتین…", Currency: "د.ع"},
}

type pageData struct {
	Lang, Dir                   string
	T                           pageText
	Rec                         projections.Record
	Amount                      string
	Status                      string
	ExpiresUnixMs               int64
	BankName, AcctName, AcctNum string
}

var pageTmpl = template.Must(template.New("pay").Parse(`<!doctype html>
<html lang="{{.Lang}}" dir="{{.Dir}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if eq .Status "pending"}}<meta http-equiv="refresh" content="20">{{end}}
<title>{{.T.Title}} · {{.Amount}} {{.T.Currency}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Tahoma,sans-serif;background:#f4f5f7;margin:0;padding:16px;color:#1d2330}
main{max-width:440px;margin:0 auto;background:#fff;border-radius:12px;padding:20px;box-shadow:0 1px 4px #0002}
h1{font-size:1.2rem;margin:0 0 12px}
.row{display:flex;justify-content:space-between;align-items:center;gap:8px;padding:10px 0;border-bottom:1px solid #eee}
.label{color:#5b6475;font-size:.9rem}.value{font-weight:600;word-break:break-all;direction:ltr;unicode-bidi:embed}
button{border:1px solid #3461c1;background:#fff;color:#3461c1;border-radius:6px;padding:4px 10px;cursor:pointer}
.note{font-size:.9rem;color:#5b6475;margin-top:12px}.state{font-size:1.05rem;font-weight:600;margin:12px 0}
.ok{color:#17803d}.bad{color:#b42318}.timer{font-variant-numeric:tabular-nums}
</style>
</head>
<body>
<main>
<h1>{{.T.Title}}</h1>
{{if eq .Status "pending"}}
<p>{{.T.PayTo}}</p>
<div class="row"><span class="label">{{.T.Method}}</span><span class="value">{{.BankName}}</span></div>
<div class="row"><span class="label">{{.T.Recipient}}</span><span class="value" id="name">{{.AcctName}}</span><button type="button" data-copy="name">{{.T.Copy}}</button></div>
<div class="row"><span class="label">{{.T.Number}}</span><span class="value" id="number">{{.AcctNum}}</span><button type="button" data-copy="number">{{.T.Copy}}</button></div>
<div class="row"><span class="label">{{.T.Amount}}</span><span class="value" id="amount">{{.Amount}}</span><button type="button" data-copy="amount">{{.T.Copy}}</button></div>
<div class="row"><span class="label">{{.T.ExpiresIn}}</span><span class="value timer" id="timer" data-expires="{{.ExpiresUnixMs}}">–</span></div>
<p class="note">{{.T.Exact}}</p>
<p class="state">{{.T.Pending}}</p>
{{else if eq .Status "approved"}}<p class="state ok">{{.T.Approved}}</p>
{{else if eq .Status "rejected"}}<p class="state bad">{{.T.Rejected}}</p>
{{else}}<p class="state bad">{{.T.ExpiredFinal}}</p>{{end}}
</main>
<script>
document.querySelectorAll("[data-copy]").forEach(function(b){b.addEventListener("click",function(){
 var t=document.getElementById(b.dataset.copy).textContent;var label=b.textContent;
 navigator.clipboard.writeText(t).then(function(){b.textContent={{.T.Copied}};setTimeout(function(){b.textContent=label},1500)});});});
var el=document.getElementById("timer");
if(el){var end=+el.dataset.expires;(function tick(){var s=Math.max(0,Math.floor((end-Date.now())/1000));
 el.textContent=s>0?Math.floor(s/60)+":"+String(s%60).padStart(2,"0"):{{.T.Expired}};if(s>0)setTimeout(tick,1000);})();}
</script>
</body>
</html>
`))

// hostedPage serves the deposit's payment page (CONTRACT §1). Anything but
// the exact token of an existing deposit is a plain 404, so the page neither
// confirms nor denies that a transaction exists.
func (s *Server) hostedPage(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "txId")
	notFound := func() {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("404 page not found\n"))
	}
	tok := r.URL.Query().Get("t")
	txID, err := ids.ParseTx(id)
	if err != nil || tok == "" {
		notFound()
		return
	}
	rec, err := s.cfg.Reader.ByID(r.Context(), txID.Site(), txID)
	if err != nil || rec.Deposit == nil || rec.HostedToken == "" ||
		subtle.ConstantTimeCompare([]byte(tok), []byte(rec.HostedToken)) != 1 {
		notFound()
		return
	}
	lang := rec.Deposit.Lang
	if _, ok := pageTexts[lang]; !ok {
		lang = "en"
	}
	d := pageData{Lang: lang, Dir: "ltr", T: pageTexts[lang], Rec: rec, Amount: strconv.FormatInt(rec.Amount, 10),
		Status: rec.Status, BankName: rec.Deposit.BankName, AcctName: rec.Deposit.BankAccountName, AcctNum: rec.Deposit.BankAccountIban}
	if lang == "ar" || lang == "ku" {
		d.Dir = "rtl"
	}
	d.ExpiresUnixMs = rec.ExpiresAtMs()
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")
	if err := pageTmpl.Execute(w, d); err != nil {
		s.log.Error("hosted page", "requestId", info(r).id, "tx", id, "err", err)
	}
}
