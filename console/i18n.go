package console

import (
	"cmp"
	"html"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Langs are the console's languages: English, Arabic and Sorani Kurdish
// (ckb), the last two right to left.
var Langs = []string{"en", "ar", "ckb"}

// LangNames name each language in itself, for the language switch.
var LangNames = map[string]string{"en": "English", "ar": "العربية", "ckb": "کوردی"}

// Dir is the text direction of lang.
func Dir(lang string) string {
	if lang == "ar" || lang == "ckb" {
		return "rtl"
	}
	return "ltr"
}

// LangCookie keeps the language an operator chose.
const LangCookie = "gw_console_lang"

// PickLang chooses the page's language: ?lang=, then the cookie, then the
// first of the console's languages the browser lists (ku and ckb are
// Sorani), then English.
func PickLang(r *http.Request) string {
	if l := known(r.URL.Query().Get("lang")); l != "" {
		return l
	}
	if c, err := r.Cookie(LangCookie); err == nil {
		if l := known(c.Value); l != "" {
			return l
		}
	}
	for _, base := range Preferred(r.Header.Get("Accept-Language")) {
		if l := known(base); l != "" {
			return l
		}
	}
	return "en"
}

// Preferred lists the primary language subtags of an Accept-Language
// header, lower case, most wanted first (by q, then as listed); a language
// given q=0 ("not acceptable") or an unreadable q is left out.
func Preferred(header string) []string {
	type pref struct {
		base string
		q    float64
	}
	var ps []pref
	for _, part := range strings.Split(header, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f <= 1) {
				continue
			}
			q = f
		}
		base, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(tag)), "-")
		if q > 0 && base != "" {
			ps = append(ps, pref{base, q})
		}
	}
	slices.SortStableFunc(ps, func(a, b pref) int { return cmp.Compare(b.q, a.q) })
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.base
	}
	return out
}

func known(l string) string {
	switch l {
	case "en", "ar", "ckb":
		return l
	case "ku":
		return "ckb"
	}
	return ""
}

// T is the console's wording in one language.
type T struct {
	lang string
}

// Get returns the text of key in the language (English when the key has
// no translation; the key itself when it has none at all, which a test
// forbids).
func (t T) Get(key string) string {
	m, ok := texts[key]
	if !ok {
		return key
	}
	if s := m[t.lang]; s != "" {
		return s
	}
	return m["en"]
}

// texts holds every key in en, ar and ckb (TestTexts checks all three).
var texts = map[string]map[string]string{
	"console":                       {"en": "Operator console", "ar": "لوحة المشغّل", "ckb": "داشبۆردی کارمەند"},
	"deposits":                      {"en": "Deposits", "ar": "الإيداعات", "ckb": "پارەدانانەکان"},
	"withdrawals":                   {"en": "Withdrawals", "ar": "السحوبات", "ckb": "پارەکێشانەکان"},
	"match":                         {"en": "Match transfers", "ar": "مطابقة التحويلات", "ckb": "هاوتاکردنی گواستنەوەکان"},
	"treasuries":                    {"en": "Treasuries", "ar": "الخزائن", "ckb": "گەنجینەکان"},
	"callbacks":                     {"en": "Callbacks", "ar": "الإشعارات", "ckb": "ئاگادارکردنەوەکان"},
	"signIn":                        {"en": "Sign in", "ar": "تسجيل الدخول", "ckb": "چوونەژوورەوە"},
	"signOut":                       {"en": "Sign out", "ar": "تسجيل الخروج", "ckb": "چوونەدەرەوە"},
	"token":                         {"en": "Operator token", "ar": "رمز المشغّل", "ckb": "تۆکنی کارمەند"},
	"badToken":                      {"en": "This token is not valid.", "ar": "هذا الرمز غير صالح.", "ckb": "ئەم تۆکنە دروست نییە."},
	"signedInAs":                    {"en": "Signed in as", "ar": "مسجّل الدخول باسم", "ckb": "چوویتە ژوورەوە وەک"},
	"role.admin":                    {"en": "administrator", "ar": "مدير", "ckb": "بەڕێوەبەر"},
	"role.operator":                 {"en": "operator", "ar": "مشغّل", "ckb": "کارمەند"},
	"role.auditor":                  {"en": "auditor", "ar": "مدقّق", "ckb": "وردبین"},
	"language":                      {"en": "Language", "ar": "اللغة", "ckb": "زمان"},
	"created":                       {"en": "Created", "ar": "أُنشئ", "ckb": "دروستکرا"},
	"timeLeft":                      {"en": "Time left", "ar": "الوقت المتبقي", "ckb": "کاتی ماوە"},
	"site":                          {"en": "Site", "ar": "الموقع", "ckb": "ماڵپەڕ"},
	"method":                        {"en": "Method", "ar": "طريقة الدفع", "ckb": "ڕێگای پارەدان"},
	"amount":                        {"en": "Amount", "ar": "المبلغ", "ckb": "بڕ"},
	"requested":                     {"en": "Requested", "ar": "المطلوب", "ckb": "داواکراو"},
	"convertedName":                 {"en": "Converted name", "ar": "الاسم الموحّد", "ckb": "ناوی یەکخراو"},
	"name":                          {"en": "Name", "ar": "الاسم", "ckb": "ناو"},
	"senderName":                    {"en": "Sender name", "ar": "اسم المرسل", "ckb": "ناوی نێرەر"},
	"accountName":                   {"en": "Account name", "ar": "اسم الحساب", "ckb": "ناوی هەژمار"},
	"account":                       {"en": "Account", "ar": "الحساب", "ckb": "هەژمار"},
	"status":                        {"en": "Status", "ar": "الحالة", "ckb": "دۆخ"},
	"processId":                     {"en": "Process ID", "ar": "معرّف الطلب", "ckb": "ناسنامەی داواکاری"},
	"transactionId":                 {"en": "Transaction", "ar": "المعاملة", "ckb": "مامەڵە"},
	"userId":                        {"en": "User ID", "ar": "معرّف المستخدم", "ckb": "ناسنامەی بەکارهێنەر"},
	"actions":                       {"en": "Actions", "ar": "الإجراءات", "ckb": "کردارەکان"},
	"reference":                     {"en": "Reference", "ar": "المرجع", "ckb": "ژمارەی ئاماژە"},
	"any":                           {"en": "Any", "ar": "الكل", "ckb": "هەموو"},
	"from":                          {"en": "From", "ar": "من", "ckb": "لە"},
	"to":                            {"en": "To", "ar": "إلى", "ckb": "بۆ"},
	"minAmount":                     {"en": "Amount from", "ar": "المبلغ من", "ckb": "بڕ لە"},
	"maxAmount":                     {"en": "Amount to", "ar": "المبلغ إلى", "ckb": "بڕ بۆ"},
	"order":                         {"en": "Order", "ar": "الترتيب", "ckb": "ڕیزبەندی"},
	"oldest":                        {"en": "Oldest first", "ar": "الأقدم أولاً", "ckb": "کۆنترین سەرەتا"},
	"newest":                        {"en": "Newest first", "ar": "الأحدث أولاً", "ckb": "نوێترین سەرەتا"},
	"search":                        {"en": "Search", "ar": "بحث", "ckb": "گەڕان"},
	"clear":                         {"en": "Clear", "ar": "مسح", "ckb": "پاککردنەوە"},
	"approve":                       {"en": "Approve", "ar": "موافقة", "ckb": "پەسەندکردن"},
	"reject":                        {"en": "Reject", "ar": "رفض", "ckb": "ڕەتکردنەوە"},
	"take":                          {"en": "Take", "ar": "استلام", "ckb": "وەرگرتن"},
	"pay":                           {"en": "Pay", "ar": "دفع", "ckb": "پارەدان"},
	"confirm":                       {"en": "Confirm", "ar": "تأكيد", "ckb": "دڵنیاکردنەوە"},
	"cancel":                        {"en": "Cancel", "ar": "إلغاء", "ckb": "هەڵوەشاندنەوە"},
	"reason":                        {"en": "Reason", "ar": "السبب", "ckb": "هۆکار"},
	"amountReceived":                {"en": "Amount received (IQD)", "ar": "المبلغ المستلم (د.ع)", "ckb": "بڕی وەرگیراو (د.ع)"},
	"confirmApprove":                {"en": "Approve this deposit?", "ar": "الموافقة على هذا الإيداع؟", "ckb": "ئەم پارەدانانە پەسەند بکرێت؟"},
	"confirmReject":                 {"en": "Reject this transaction?", "ar": "رفض هذه المعاملة؟", "ckb": "ئەم مامەڵەیە ڕەت بکرێتەوە؟"},
	"confirmTake":                   {"en": "Take this withdrawal to pay it?", "ar": "استلام هذا السحب لدفعه؟", "ckb": "ئەم پارەکێشانە وەربگریت بۆ پارەدانی؟"},
	"confirmPay":                    {"en": "Mark this withdrawal paid?", "ar": "تأكيد دفع هذا السحب؟", "ckb": "ئەم پارەکێشانە وەک دراو دیاری بکرێت؟"},
	"done":                          {"en": "Done", "ar": "تم", "ckb": "تەواو بوو"},
	"conflict":                      {"en": "Another operator was first", "ar": "سبقك مشغّل آخر", "ckb": "کارمەندێکی تر پێشتر کردی"},
	"by":                            {"en": "by", "ar": "بواسطة", "ckb": "لەلایەن"},
	"nothing":                       {"en": "Nothing here.", "ar": "لا يوجد شيء هنا.", "ckb": "هیچ شتێک لێرە نییە."},
	"sandbox":                       {"en": "sandbox: moved by its merchant", "ar": "تجريبي: يحرّكه التاجر", "ckb": "تاقیکاری: بازرگانەکە دەیجوڵێنێت"},
	"next":                          {"en": "Next page", "ar": "الصفحة التالية", "ckb": "پەڕەی دواتر"},
	"first":                         {"en": "First page", "ar": "الصفحة الأولى", "ckb": "پەڕەی یەکەم"},
	"live":                          {"en": "Updated live", "ar": "يُحدَّث مباشرة", "ckb": "ڕاستەوخۆ نوێ دەکرێتەوە"},
	"history":                       {"en": "History", "ar": "السجل", "ckb": "مێژوو"},
	"event":                         {"en": "Event", "ar": "الحدث", "ckb": "ڕووداو"},
	"actor":                         {"en": "By", "ar": "بواسطة", "ckb": "لەلایەن"},
	"time":                          {"en": "Time", "ar": "الوقت", "ckb": "کات"},
	"details":                       {"en": "Details", "ar": "التفاصيل", "ckb": "وردەکاری"},
	"incomplete":                    {"en": "Only the first part of this history is shown.", "ar": "يظهر الجزء الأول فقط من هذا السجل.", "ckb": "تەنها بەشی یەکەمی ئەم مێژووە پیشان دراوە."},
	"expired":                       {"en": "expired", "ar": "منتهي", "ckb": "بەسەرچوو"},
	"pasteLines":                    {"en": "Transfer lines: amount, name, time, method, reference (CSV or TSV)", "ar": "أسطر التحويلات: المبلغ، الاسم، الوقت، الطريقة، المرجع (CSV أو TSV)", "ckb": "هێڵەکانی گواستنەوە: بڕ، ناو، کات، ڕێگا، ئاماژە (CSV یان TSV)"},
	"uploadFile":                    {"en": "Or choose a statement file", "ar": "أو اختر ملف كشف الحساب", "ckb": "یان فایلی کەشفی هەژمار هەڵبژێرە"},
	"propose":                       {"en": "Propose matches", "ar": "اقتراح المطابقات", "ckb": "پێشنیاری هاوتاکان"},
	"line":                          {"en": "Line", "ar": "السطر", "ckb": "هێڵ"},
	"transfer":                      {"en": "Transfer", "ar": "التحويل", "ckb": "گواستنەوە"},
	"proposals":                     {"en": "Proposed deposits", "ar": "الإيداعات المقترحة", "ckb": "پارەدانانە پێشنیارکراوەکان"},
	"score":                         {"en": "Score", "ar": "الدرجة", "ckb": "نمرە"},
	"noCandidate":                   {"en": "No pending deposit matches this transfer.", "ar": "لا يوجد إيداع معلّق يطابق هذا التحويل.", "ckb": "هیچ پارەدانانێکی چاوەڕوان لەگەڵ ئەم گواستنەوەیە ناگونجێت."},
	"balance":                       {"en": "Balance", "ar": "الرصيد", "ckb": "باڵانس"},
	"pendingW":                      {"en": "Pending withdrawals", "ar": "سحوبات معلّقة", "ckb": "پارەکێشانی چاوەڕوان"},
	"available":                     {"en": "Available", "ar": "المتاح", "ckb": "بەردەست"},
	"negativeLimit":                 {"en": "Negative limit", "ar": "الحد السالب", "ckb": "سنووری نەرێنی"},
	"adjust":                        {"en": "Adjust", "ar": "تعديل", "ckb": "ڕێکخستن"},
	"adjustAmount":                  {"en": "Adjustment (IQD, − to take out)", "ar": "التعديل (د.ع، − للسحب)", "ckb": "ڕێکخستن (د.ع، − بۆ دەرهێنان)"},
	"eventId":                       {"en": "Event", "ar": "الحدث", "ckb": "ڕووداو"},
	"type":                          {"en": "Type", "ar": "النوع", "ckb": "جۆر"},
	"attempts":                      {"en": "Attempts", "ar": "المحاولات", "ckb": "هەوڵەکان"},
	"lastAnswer":                    {"en": "Last answer", "ar": "آخر استجابة", "ckb": "دوایین وەڵام"},
	"nextAttempt":                   {"en": "Next attempt", "ar": "المحاولة التالية", "ckb": "هەوڵی داهاتوو"},
	"resends":                       {"en": "Resends", "ar": "مرات الإعادة", "ckb": "ناردنەوەکان"},
	"resend":                        {"en": "Resend", "ar": "إعادة الإرسال", "ckb": "دووبارە ناردنەوە"},
	"noDispatcher":                  {"en": "This process does not deliver callbacks.", "ar": "هذه العملية لا تُرسل الإشعارات.", "ckb": "ئەم پرۆسەیە ئاگادارکردنەوە ناگەیەنێت."},
	"status.pending":                {"en": "pending", "ar": "معلّق", "ckb": "چاوەڕوان"},
	"status.processing":             {"en": "processing", "ar": "قيد المعالجة", "ckb": "لە جێبەجێکردندا"},
	"status.approved":               {"en": "approved", "ar": "مقبول", "ckb": "پەسەندکراو"},
	"status.rejected":               {"en": "rejected", "ar": "مرفوض", "ckb": "ڕەتکراوە"},
	"status.expired":                {"en": "expired", "ar": "منتهي", "ckb": "بەسەرچوو"},
	"status.paid":                   {"en": "paid", "ar": "مدفوع", "ckb": "دراوە"},
	"status.delivered":              {"en": "delivered", "ar": "تم التسليم", "ckb": "گەیەنرا"},
	"status.failed":                 {"en": "failed", "ar": "فشل", "ckb": "سەرکەوتوو نەبوو"},
	"why.amount":                    {"en": "amount matches exactly", "ar": "المبلغ مطابق تماماً", "ckb": "بڕەکە تەواو وەک خۆیەتی"},
	"why.name":                      {"en": "name matches exactly", "ar": "الاسم مطابق تماماً", "ckb": "ناوەکە تەواو وەک خۆیەتی"},
	"why.namePart":                  {"en": "name matches in part (%d%% of the words)", "ar": "الاسم مطابق جزئياً (%d%% من الكلمات)", "ckb": "ناوەکە بەشێکی وەک خۆیەتی (%d%%ی وشەکان)"},
	"why.amountDiffers":             {"en": "amount differs: %s received, %s requested", "ar": "المبلغ مختلف: استُلم %s وطُلب %s", "ckb": "بڕەکە جیاوازە: %s وەرگیرا، %s داواکرا"},
	"why.method":                    {"en": "same method", "ar": "نفس طريقة الدفع", "ckb": "هەمان ڕێگای پارەدان"},
	"why.otherMethod":               {"en": "another method", "ar": "طريقة دفع أخرى", "ckb": "ڕێگایەکی تری پارەدان"},
	"why.transferFirst":             {"en": "the transfer is older than the deposit", "ar": "التحويل أقدم من الإيداع", "ckb": "گواستنەوەکە لە پارەدانانەکە کۆنترە"},
	"why.expired":                   {"en": "the deposit has expired (it can still be approved)", "ar": "انتهت صلاحية الإيداع (ولا يزال بالإمكان قبوله)", "ckb": "ماوەی پارەدانانەکە بەسەرچووە (هێشتا دەتوانرێت پەسەند بکرێت)"},
	"why.sandbox":                   {"en": "a sandbox site's test deposit (only its merchant moves it)", "ar": "إيداع تجريبي لموقع اختبار (لا يحرّكه إلا التاجر)", "ckb": "پارەدانانی تاقیکاری ماڵپەڕێکی سەندبۆکس (تەنها بازرگانەکە دەیجوڵێنێت)"},
	"deposit":                       {"en": "deposit", "ar": "إيداع", "ckb": "پارەدانان"},
	"withdrawal":                    {"en": "withdrawal", "ar": "سحب", "ckb": "پارەکێشان"},
	"iqd":                           {"en": "IQD", "ar": "د.ع", "ckb": "د.ع"},
	"d.userName":                    {"en": "User name", "ar": "اسم المستخدم", "ckb": "ناوی بەکارهێنەر"},
	"d.bankName":                    {"en": "Method as shown", "ar": "اسم الطريقة المعروض", "ckb": "ناوی ڕێگاکە وەک پیشاندراوە"},
	"d.bankId":                      {"en": "Method ID", "ar": "معرّف الطريقة", "ckb": "ناسنامەی ڕێگا"},
	"d.kind":                        {"en": "Identifier kind", "ar": "نوع المعرّف", "ckb": "جۆری ناسێنەر"},
	"d.accountNumber":               {"en": "Account number", "ar": "رقم الحساب", "ckb": "ژمارەی هەژمار"},
	"d.expiresAt":                   {"en": "Expires", "ar": "ينتهي في", "ckb": "بەسەردەچێت لە"},
	"d.hostedToken":                 {"en": "Payment page token", "ar": "رمز صفحة الدفع", "ckb": "تۆکنی پەڕەی پارەدان"},
	"redacted":                      {"en": "hidden", "ar": "مخفي", "ckb": "شاراوە"},
	"lines":                         {"en": "Transfer lines", "ar": "أسطر التحويلات", "ckb": "هێڵەکانی گواستنەوە"},
	"notFound":                      {"en": "Not found", "ar": "غير موجود", "ckb": "نەدۆزرایەوە"},
	"error":                         {"en": "Something went wrong", "ar": "حدث خطأ", "ckb": "هەڵەیەک ڕوویدا"},
	"err.invalid_request":           {"en": "The request is not valid", "ar": "الطلب غير صالح", "ckb": "داواکارییەکە دروست نییە"},
	"err.amount_out_of_range":       {"en": "The amount is outside the allowed range", "ar": "المبلغ خارج النطاق المسموح", "ckb": "بڕەکە لە دەرەوەی سنووری ڕێگەپێدراوە"},
	"err.unknown_bank":              {"en": "No such payment method", "ar": "طريقة الدفع غير موجودة", "ckb": "ئەم ڕێگای پارەدانە نییە"},
	"err.invalid_identifier":        {"en": "An identifier is not valid", "ar": "أحد المعرّفات غير صالح", "ckb": "ناسنامەیەک دروست نییە"},
	"err.unknown_app_key":           {"en": "Unknown appKey", "ar": "مفتاح التطبيق غير معروف", "ckb": "appKey ـەکە نەناسراوە"},
	"err.invalid_signature":         {"en": "The signature does not match", "ar": "التوقيع غير مطابق", "ckb": "واژووەکە ناگونجێت"},
	"err.unauthorized":              {"en": "Sign in again", "ar": "يرجى تسجيل الدخول مجدداً", "ckb": "تکایە دووبارە بچۆ ژوورەوە"},
	"err.insufficient_site_balance": {"en": "The site's treasury cannot cover this", "ar": "رصيد خزينة الموقع لا يكفي لهذا", "ckb": "گەنجینەی ماڵپەڕەکە بەشی ئەمە ناکات"},
	"err.not_authorized":            {"en": "This address is not on the site's allowlist", "ar": "هذا العنوان غير مدرج في قائمة العناوين المسموحة للموقع", "ckb": "ئەم ناونیشانە لە لیستی ڕێگەپێدراوی ماڵپەڕەکەدا نییە"},
	"err.forbidden":                 {"en": "Your role does not allow this, or it was refused", "ar": "دورك لا يسمح بهذا، أو تم رفضه", "ckb": "ڕۆڵەکەت ڕێگە بەمە نادات، یان ڕەتکرایەوە"},
	"err.not_found":                 {"en": "Not found", "ar": "غير موجود", "ckb": "نەدۆزرایەوە"},
	"err.method_not_allowed":        {"en": "Not allowed here", "ar": "غير مسموح هنا", "ckb": "لێرە ڕێگەپێدراو نییە"},
	"err.process_id_conflict":       {"en": "This processId is already used", "ar": "معرّف الطلب مستخدم مسبقاً", "ckb": "ئەم processId ـە پێشتر بەکارهاتووە"},
	"err.idempotency_key_conflict":  {"en": "This Idempotency-Key was used for another request", "ar": "مفتاح Idempotency-Key استُخدم لطلب آخر", "ckb": "ئەم Idempotency-Key ـە بۆ داواکارییەکی تر بەکارهاتووە"},
	"err.invalid_transition":        {"en": "The current state does not allow this", "ar": "الحالة الحالية لا تسمح بهذا", "ckb": "دۆخی ئێستا ڕێگە بەمە نادات"},
	"err.conflict":                  {"en": "This conflicts with what exists", "ar": "يتعارض هذا مع ما هو موجود", "ckb": "ئەمە لەگەڵ ئەوەی هەیە ناکۆکە"},
	"err.body_too_large":            {"en": "Too much was sent at once", "ar": "البيانات المرسلة كبيرة جداً", "ckb": "داتای نێردراو زۆر گەورەیە"},
	"err.rate_limited":              {"en": "Too many requests: wait a moment", "ar": "طلبات كثيرة جداً: انتظر قليلاً", "ckb": "داواکاری زۆرە: کەمێک چاوەڕێ بکە"},
	"err.internal":                  {"en": "Internal error", "ar": "خطأ داخلي", "ckb": "هەڵەی ناوخۆیی"},
	"err.unavailable":               {"en": "Unavailable for a moment: try again", "ar": "غير متاح مؤقتاً: حاول مجدداً", "ckb": "بۆ ماوەیەک بەردەست نییە: دووبارە هەوڵ بدەوە"},
	"err.outcome_unknown":           {"en": "The outcome is not known yet: look the transaction up before repeating", "ar": "النتيجة غير معروفة بعد: راجع المعاملة قبل التكرار", "ckb": "ئەنجامەکە هێشتا نەزانراوە: پێش دووبارەکردنەوە مامەڵەکە بپشکنە"},
}

// Failure is an error answer of the operator API (docs/errors.md) as a
// console page or script states it.
type Failure struct {
	Code, Field, Message string
}

// Failure states f in the page's language, naming the field by the label
// the operator sees ("Amount from", not minAmount). The API's messages are
// English: in English the message is shown (it names what is wrong most
// precisely), with the field's label for the API's parameter; in another
// language the code's text comes first, with the field's label, and the
// message after it, isolated, as the detail.
func (t T) Failure(f Failure) template.HTML {
	label := t.Label(f.Field)
	if label == "" {
		label = f.Field
	}
	msg, named := t.worded(f.Message, f.Field, quoted)
	what, ok := texts["err."+f.Code]
	if t.lang == "en" || !ok {
		if f.Field != "" && !named {
			msg = html.EscapeString(label) + ": " + msg
		}
		return template.HTML(msg)
	}
	var b strings.Builder
	b.WriteString(html.EscapeString(what[t.lang]))
	if f.Field != "" {
		b.WriteString(" (<bdi>" + html.EscapeString(label) + "</bdi>)")
	}
	b.WriteString(`: <bdi dir="ltr">` + msg + "</bdi>")
	return template.HTML(b.String())
}
