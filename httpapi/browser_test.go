package httpapi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/console"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// The browser tests drive headless Chromium (Debian's chromium package)
// through the console and the hosted page as people use them. Where
// Chromium is missing, .ci/setup-browser installs it; set
// GATEWAY_BROWSER_TESTS=skip on a machine where that cannot be done.

// chromium finds the browser, installing it where it is missing.
func chromium(t *testing.T) string {
	t.Helper()
	if os.Getenv("GATEWAY_BROWSER_TESTS") == "skip" {
		t.Skip("GATEWAY_BROWSER_TESTS=skip")
	}
	find := func() string {
		for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(b); err == nil {
				return p
			}
		}
		return ""
	}
	if p := find(); p != "" {
		return p
	}
	out, err := exec.Command("../.ci/setup-browser").CombinedOutput()
	require.NoError(t, err, "installing chromium (.ci/setup-browser): %s", out)
	p := find()
	require.NotEmpty(t, p, "chromium is still missing after .ci/setup-browser")
	return p
}

// The browser's window: a desktop's.
const desktopWidth, desktopHeight = 1366, 900

// browser starts a headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.WindowSize(desktopWidth, desktopHeight), chromedp.Flag("lang", "en-US"))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	return ctx
}

// person is another person at the same browser: a browser context of
// their own, with their own cookies.
func person(t *testing.T, b context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	return ctx
}

// steps runs browser steps with a deadline.
func steps(t *testing.T, ctx context.Context, a ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(tctx, a...))
}

// eval evaluates a script in the page.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err, js)
	return v
}

// waitFor polls a script until it is true; a page that is loading
// meanwhile is polled again.
func waitFor(t *testing.T, ctx context.Context, js, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(tctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("waiting for %s (%s): %v", what, js, last)
}

// visible waits until the page has an element matching sel.
func visible(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf(`!!document.querySelector(%q)`, sel), sel)
}

// text is an element's text.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%q).textContent`, sel))
}

// shot writes a screenshot of the page to the screenshot folder
// (GATEWAY_SCREENSHOTS, or build/screenshots at the module's root).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("GATEWAY_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join("..", "build", "screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

func signIn(t *testing.T, ctx context.Context, base, token, name string) {
	t.Helper()
	steps(t, ctx, chromedp.Navigate(base+"/console/login"), chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", token), chromedp.Click("#signin"), chromedp.WaitVisible("#whoami"))
	require.Contains(t, text(t, ctx, "#whoami"), name)
}

// act clicks an action button of a row and confirms its dialog with the
// fields given, typed into them.
func act(t *testing.T, ctx context.Context, action, id string, fields map[string]string) {
	t.Helper()
	clickRow(t, ctx, action, id)
	steps(t, ctx, chromedp.WaitVisible("#dialog-ok"))
	for k, v := range fields {
		typeInto(t, ctx, "#dialog-"+k, v)
	}
	steps(t, ctx, chromedp.Click("#dialog-ok"))
}

// typeInto replaces the value of the input sel with v, typed key by key as
// a person does (an amount field groups its digits as they come).
func typeInto(t *testing.T, ctx context.Context, sel, v string) {
	t.Helper()
	require.True(t, eval[bool](t, ctx, fmt.Sprintf(`(() => { document.querySelector(%q).value = ""; return true })()`, sel)))
	steps(t, ctx, chromedp.SendKeys(sel, v))
}

// clickRow clicks a row's action button. The lists refresh themselves
// every two seconds, replacing their rows, so a button found a moment
// before may be gone: the click is the page's own, on the button there
// now, tried again until one is there.
func clickRow(t *testing.T, ctx context.Context, action, id string) {
	t.Helper()
	sel := fmt.Sprintf(`button[data-action=%q][data-id=%q]`, action, id)
	waitFor(t, ctx, fmt.Sprintf(`(() => { const b = document.querySelector(%q); if (!b) return false; b.click(); return true })()`, sel), sel)
}

// status is a transaction's status as the operator API reads it.
func (s *stack) status(t *testing.T, id string) record {
	t.Helper()
	return rec(t, s.opsT(t, "GET", "/ops/v1/transactions/"+id, nil))
}

func TestConsole_browser(t *testing.T) {
	b := browser(t)
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	shop := s.newSite(map[string]any{"name": "Babylon Games", "hostedPage": true, "returnUrl": "https://babylon.example/account",
		"supportContact": "support@babylon.example"}, 5_000_000)
	omar := s.newOperator(t, "Omar Operator", "operator").Token
	huda := s.newOperator(t, "Huda Operator", "operator").Token
	aya := s.newOperator(t, "Aya Auditor", "auditor").Token
	dep := func(pid, user, name, lang string, amount int64) record {
		f := depositForm("ZAINCASH", pid, user, amount)
		f.Set("name", name)
		if lang != "" {
			f.Set("lang", lang)
		}
		return rec(t, s.post(shop, pathDeposit, f))
	}
	d1 := dep("order-1001", "u1", "Ali Kareem", "en", 25000)
	d2 := dep("order-1002", "u2", "Sara Ahmed", "", 40000)
	d3 := dep("order-1003", "u3", "زينب حسن", "ar", 15000)
	d4 := dep("order-1004", "u4", "Ali Hassan", "", 30000)
	d5 := dep("order-1005", "u5", "Noor Jabbar", "ku", 12000)
	w1 := rec(t, s.post(shop, pathWithdraw, withdrawForm("ZAINCASH", "pay-2001", "u9", 10000, "07712345678")))

	op := person(t, b)
	signIn(t, op, s.URL, omar, "Omar Operator")
	require.Equal(t, "operator", text(t, op, "#role"))
	waitFor(t, op, `document.querySelectorAll("#tx-table tr[data-tx]").length === 5`, "the pending queue")
	// Every amount with its currency, every time with its zone.
	require.Equal(t, "25,000 IQD", text(t, op, "#tx-"+d1.TransactionID+" td.amount"))
	require.Regexp(t, `^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\+3$`, text(t, op, "#tx-"+d1.TransactionID+" time"))
	shot(t, op, "console-deposits-en")

	t.Run("find a deposit by processId", func(t *testing.T) {
		steps(t, op, chromedp.SetValue("#f-processId", "order-1001"), chromedp.Click("#f-search"))
		waitFor(t, op, `location.search.includes("processId=order-1001") && document.querySelectorAll("#tx-table tr[data-tx]").length === 1`, "the search")
		visible(t, op, "#tx-"+d1.TransactionID)
		require.Contains(t, text(t, op, "#tx-"+d1.TransactionID), "25,000")
	})

	customer := person(t, b)
	t.Run("approve with the amount received; the hosted page follows without a reload", func(t *testing.T) {
		steps(t, customer, chromedp.Navigate(*d1.URL), chromedp.WaitVisible("#state"))
		require.Equal(t, "Waiting for your transfer…", text(t, customer, "#state"))
		require.Equal(t, "Babylon Games", text(t, customer, "#merchant"))
		require.Equal(t, "order-1001", text(t, customer, "#order"))
		require.Equal(t, "25,000 IQD", text(t, customer, "#amount"))
		require.Equal(t, "https://babylon.example/account", eval[string](t, customer, `document.getElementById("return").href`))
		require.Equal(t, "support@babylon.example", text(t, customer, "#support"))
		eval[string](t, customer, `window.loadedOnce = "yes"`)
		shot(t, customer, "hosted-pending-en")

		clickRow(t, op, "approve", d1.TransactionID)
		steps(t, op, chromedp.WaitVisible("#dialog-amount"))
		require.Equal(t, "25,000", eval[string](t, op, `document.getElementById("dialog-amount").value`), "the requested amount by default, grouped")
		// The ids it names are isolated: a processId is the merchant's text.
		require.Equal(t, []string{d1.TransactionID, "order-1001"}, eval[[]string](t, op, `[...document.querySelectorAll("#dialog-text bdi")].map(b => b.textContent)`))
		// Confirm is the dialog's one filled button; Cancel does not look
		// like it.
		style := func(sel string) map[string]string {
			return eval[map[string]string](t, op, fmt.Sprintf(`(() => { const s = getComputedStyle(document.querySelector(%q));
				return {bg: s.backgroundColor, color: s.color, border: s.borderTopColor, weight: s.fontWeight} })()`, sel))
		}
		ok, cancel := style("#dialog-ok"), style("#dialog-cancel")
		require.Equal(t, "rgb(47, 91, 183)", ok["bg"], "Confirm is filled with the accent")
		require.Equal(t, "rgb(255, 255, 255)", cancel["bg"], "Cancel is plain")
		require.NotEqual(t, ok["color"], cancel["color"])
		require.NotEqual(t, ok["border"], cancel["border"])
		require.Equal(t, "600", ok["weight"])
		// The amount is shown grouped as it is typed, and sent as the
		// plain integer.
		typeInto(t, op, "#dialog-amount", "24000")
		require.Equal(t, "24,000", eval[string](t, op, `document.getElementById("dialog-amount").value`))
		shot(t, op, "console-approve-en")
		require.True(t, eval[bool](t, op, `(() => { const f = window.fetch; window.sent = [];
			window.fetch = function (u, o) { if (o && o.body) window.sent.push(o.body); return f.apply(this, arguments) }; return true })()`))
		steps(t, op, chromedp.Click("#dialog-ok"))
		waitFor(t, op, `document.getElementById("flash").textContent.includes("approved")`, "the result")
		require.Contains(t, text(t, op, "#flash"), "24,000 IQD")
		require.Equal(t, []string{`{"amount":24000}`}, eval[[]string](t, op, `window.sent`))
		got := s.status(t, d1.TransactionID)
		require.Equal(t, "approved", got.Status)
		require.Equal(t, int64(24000), got.Amount)

		// The customer is told what was credited, and why it is not what
		// was asked for.
		waitFor(t, customer, `document.getElementById("state").textContent === "Approved for 24,000 IQD: the amount received (25,000 IQD was requested)."`, "the hosted page's new status")
		require.Equal(t, "yes", eval[string](t, customer, `window.loadedOnce`), "the page did not reload")
		require.Equal(t, 0, eval[int](t, customer, `document.querySelectorAll("#number").length`), "no more transfer details")
		require.Equal(t, "24,000 IQD", text(t, customer, "#amount"), "the amount received, without a reload")
		shot(t, customer, "hosted-approved-en")
	})

	t.Run("reject a deposit; every operator's queue updates", func(t *testing.T) {
		other := person(t, b)
		signIn(t, other, s.URL, huda, "Huda Operator")
		steps(t, op, chromedp.Navigate(s.URL+"/console/deposits"), chromedp.WaitVisible("#tx-"+d2.TransactionID))
		steps(t, other, chromedp.WaitVisible("#tx-"+d2.TransactionID))
		act(t, op, "reject", d2.TransactionID, map[string]string{"reason": "no transfer arrived"})
		waitFor(t, op, `document.getElementById("flash").textContent.includes("rejected")`, "the result")
		require.Equal(t, "rejected", s.status(t, d2.TransactionID).Status)
		// Gone from both pending queues without a reload.
		waitFor(t, other, fmt.Sprintf(`!document.getElementById(%q)`, "tx-"+d2.TransactionID), "the other operator's queue")
		waitFor(t, op, fmt.Sprintf(`!document.getElementById(%q)`, "tx-"+d2.TransactionID), "the queue")

		// Two operators on one deposit: the second sees who was first.
		clickRow(t, other, "approve", d4.TransactionID)
		steps(t, other, chromedp.WaitVisible("#dialog-ok"))
		act(t, op, "approve", d4.TransactionID, nil)
		waitFor(t, op, `document.getElementById("flash").textContent.includes("approved")`, "the first approval")
		steps(t, other, chromedp.Click("#dialog-ok"))
		waitFor(t, other, `document.getElementById("flash").className === "error"`, "the second one's answer")
		require.Equal(t, "Another operator was first: approved by Omar Operator", text(t, other, "#flash"))
		require.Equal(t, "approved", s.status(t, d4.TransactionID).Status)
	})

	t.Run("take and pay a withdrawal", func(t *testing.T) {
		steps(t, op, chromedp.Navigate(s.URL+"/console/withdrawals"), chromedp.WaitVisible("#tx-"+w1.TransactionID))
		shot(t, op, "console-withdrawals-en")
		act(t, op, "take", w1.TransactionID, nil)
		waitFor(t, op, `document.getElementById("flash").textContent.includes("processing")`, "taken")
		steps(t, op, chromedp.Navigate(s.URL+"/console/withdrawals?status=processing"), chromedp.WaitVisible("#tx-"+w1.TransactionID))
		act(t, op, "pay", w1.TransactionID, map[string]string{"reference": "ZC-777"})
		waitFor(t, op, `document.getElementById("flash").textContent.includes("paid")`, "paid")
		require.Equal(t, "paid", s.status(t, w1.TransactionID).Status)
		steps(t, op, chromedp.Navigate(s.URL+"/console/tx/"+w1.TransactionID), chromedp.WaitVisible("#tx-history"))
		require.Contains(t, text(t, op, "#tx-history"), "withdrawal.paid.v1")
		// Each event's fields are labelled, the amount grouped with its
		// currency, no key=value.
		require.Equal(t, "ZC-777", text(t, op, `#tx-history dd[data-key=reference]`))
		require.Equal(t, "10,000 IQD", text(t, op, `#tx-history dd[data-key=amount]`))
		labels := eval[[]string](t, op, `[...document.querySelectorAll("#tx-history .kv dt")].map(e => e.textContent)`)
		require.Contains(t, labels, "Reference")
		require.Contains(t, labels, "Amount")
		require.NotContains(t, text(t, op, "#tx-history"), "=")
		require.Regexp(t, `^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\+3$`, text(t, op, "#tx-history tbody time"))
		require.Equal(t, "Omar Operator", text(t, op, "#tx-history tbody tr:last-child td.actor"))
		wholeWords(t, op, "#tx-history td.actor bdi", "#tx-history time")
		shot(t, op, "console-history-en")
		// On a phone too: the names and the times break between their
		// words, never inside one.
		narrow(t, op, func() {
			wholeWords(t, op, "#tx-history td.actor bdi", "#tx-history time")
			shot(t, op, "console-history-390-en")
		})
	})

	t.Run("paste transfer lines and approve a proposal", func(t *testing.T) {
		// The statement comes as a file, read into the form.
		statement := filepath.Join(t.TempDir(), "statement.tsv")
		require.NoError(t, os.WriteFile(statement,
			[]byte("amount\tname\ttime\tmethod\treference\n15,000\tزينب  حسن\t\tZAINCASH\tBANK-9\n99999\tNobody\n"), 0o644))
		steps(t, op, chromedp.Navigate(s.URL+"/console/match"), chromedp.WaitVisible("#lines"),
			chromedp.SetUploadFiles("#file", []string{statement}))
		waitFor(t, op, `document.getElementById("lines").value.includes("BANK-9")`, "the file in the form")
		steps(t, op, chromedp.Click("#propose"), chromedp.WaitVisible(fmt.Sprintf(`tr.proposal[data-tx=%q]`, d3.TransactionID)))
		require.Contains(t, text(t, op, fmt.Sprintf(`tr.proposal[data-tx=%q]`, d3.TransactionID)), "amount matches exactly; name matches exactly")
		require.Contains(t, text(t, op, "main"), "No pending deposit matches this transfer.")
		shot(t, op, "console-match-en")
		act(t, op, "approve", d3.TransactionID, nil)
		waitFor(t, op, `document.getElementById("flash").textContent.includes("approved")`, "approved")
		got := s.status(t, d3.TransactionID)
		require.Equal(t, "approved", got.Status)
		require.Equal(t, int64(15000), got.Amount)
	})

	t.Run("an auditor sees no actions and is refused anyway", func(t *testing.T) {
		aud := person(t, b)
		signIn(t, aud, s.URL, aya, "Aya Auditor")
		require.Equal(t, "auditor", text(t, aud, "#role"))
		steps(t, aud, chromedp.WaitVisible("#tx-"+d5.TransactionID))
		require.Equal(t, 0, eval[int](t, aud, `document.querySelectorAll("button[data-action]").length`))
		code := eval[int](t, aud, fmt.Sprintf(`fetch("/console/api/deposits/%s/approve", {method: "POST",
			headers: {"Content-Type": "application/json", "X-CSRF-Token": document.querySelector('meta[name="csrf"]').content},
			body: "{}"}).then(r => r.status)`, d5.TransactionID))
		require.Equal(t, 403, code)
		// Without the CSRF token even an operator is refused.
		code = eval[int](t, op, fmt.Sprintf(`fetch("/console/api/deposits/%s/approve", {method: "POST",
			headers: {"Content-Type": "application/json"}, body: "{}"}).then(r => r.status)`, d5.TransactionID))
		require.Equal(t, 403, code)
		require.Equal(t, "pending", s.status(t, d5.TransactionID).Status)
	})

	t.Run("an admin adjusts a treasury", func(t *testing.T) {
		admin := person(t, b)
		signIn(t, admin, s.URL, adminToken, "admin")
		steps(t, admin, chromedp.Navigate(s.URL+"/console/treasuries"), chromedp.WaitVisible("#site-"+shop.ID))
		before := s.balanceOf(t, shop).Balance
		// A field the API refuses is named by the dialog's label.
		act(t, admin, "adjust", shop.ID, map[string]string{"amount": "0", "reason": "nothing"})
		waitFor(t, admin, `document.getElementById("flash").className === "error"`, "the refusal of 0")
		require.True(t, strings.HasPrefix(text(t, admin, "#flash"), "“Adjustment (IQD, − to take out)” must be a non-zero integer"), text(t, admin, "#flash"))
		// A minus typed in front of a grouped amount.
		clickRow(t, admin, "adjust", shop.ID)
		steps(t, admin, chromedp.WaitVisible("#dialog-amount"))
		typeInto(t, admin, "#dialog-amount", "-250000")
		typeInto(t, admin, "#dialog-reason", "settlement to the merchant")
		require.Equal(t, "-250,000", eval[string](t, admin, `document.getElementById("dialog-amount").value`))
		steps(t, admin, chromedp.Click("#dialog-ok"))
		waitFor(t, admin, `document.getElementById("flash").className === "ok"`, "the adjustment")
		require.Equal(t, before-250000, s.balanceOf(t, shop).Balance)
		// The row shows the new balance without a reload.
		waitFor(t, admin, fmt.Sprintf(`document.querySelector("#site-%s [data-field=balance]").textContent === %q`,
			shop.ID, console.Group(before-250000)+" IQD"), "the new balance in the list")

		// A refusal that is no race is said as the API says it, and
		// nobody is asked who was first.
		recordFetches(t, admin)
		act(t, admin, "adjust", shop.ID, map[string]string{"amount": strconv.FormatInt(-(before + 1_000_000), 10), "reason": "too much"})
		waitFor(t, admin, `document.getElementById("flash").className === "error"`, "the refusal")
		require.Contains(t, text(t, admin, "#flash"), "send allowBelowLimit: true to apply it anyway")
		require.NotContains(t, text(t, admin, "#flash"), "Another operator")
		require.Empty(t, whoFetches(t, admin))
		require.Equal(t, before-250000, s.balanceOf(t, shop).Balance)
		// An operator has no adjust button.
		steps(t, op, chromedp.Navigate(s.URL+"/console/treasuries"), chromedp.WaitVisible("#site-"+shop.ID))
		require.Equal(t, 0, eval[int](t, op, `document.querySelectorAll("button[data-action=adjust]").length`))
	})

	t.Run("the console in Arabic and Sorani, right to left", func(t *testing.T) {
		for _, c := range []struct{ lang, title string }{{"ar", "الإيداعات"}, {"ckb", "پارەدانانەکان"}} {
			steps(t, op, chromedp.Navigate(s.URL+"/console/deposits?lang="+c.lang), chromedp.WaitVisible("#tx-table"))
			require.Equal(t, c.lang, eval[string](t, op, `document.documentElement.lang`))
			require.Equal(t, "rtl", eval[string](t, op, `document.documentElement.dir`))
			require.Equal(t, c.title, text(t, op, "h1"))
			require.Equal(t, "12,000 د.ع", text(t, op, "#tx-"+d5.TransactionID+" td.amount"), "the currency in the page's language")
			shot(t, op, "console-deposits-"+c.lang)
		}
		// The choice is kept.
		steps(t, op, chromedp.Navigate(s.URL+"/console/treasuries"), chromedp.WaitVisible("#treasuries"))
		require.Equal(t, "ckb", eval[string](t, op, `document.documentElement.lang`))
		steps(t, op, chromedp.Navigate(s.URL+"/console/treasuries?lang=en"), chromedp.WaitVisible("#treasuries"))
		require.Contains(t, text(t, op, "#site-"+shop.ID), "Babylon Games")
		shot(t, op, "console-treasuries-en")
	})

	t.Run("the hosted page in ar, ckb and en", func(t *testing.T) {
		for _, c := range []struct {
			d                 record
			lang, dir, amount string
		}{{d5, "ckb", "rtl", "١٢٬٠٠٠ د.ع"}, {d3, "ar", "rtl", "١٥٬٠٠٠ د.ع"}, {d1, "en", "ltr", "24,000 IQD"}} {
			steps(t, customer, chromedp.Navigate(*c.d.URL), chromedp.WaitVisible("#state"))
			require.Equal(t, c.lang, eval[string](t, customer, `document.documentElement.lang`))
			require.Equal(t, c.dir, eval[string](t, customer, `document.documentElement.dir`))
			require.Equal(t, c.amount, text(t, customer, "#amount"))
			shot(t, customer, "hosted-"+c.lang)
		}
		// Copy buttons work where the Clipboard API is missing (plain
		// HTTP): the page falls back to selecting and copying.
		steps(t, customer, chromedp.Navigate(*d5.URL))
		visible(t, customer, "#number")
		require.True(t, eval[bool](t, customer, `Object.defineProperty(navigator, "clipboard", {value: undefined}); navigator.clipboard === undefined`))
		steps(t, customer, chromedp.Click(`button[data-copy="number"]`))
		waitFor(t, customer, `document.querySelector('button[data-copy="number"]').textContent === "لەبەرگیرایەوە"`, "the copy")

		// A bad token is the page's own not-found, in the browser's language.
		bad := strings.Replace(*d1.URL, "?t=", "?t=x", 1)
		steps(t, customer, chromedp.Navigate(bad+"&lang=ar"))
		visible(t, customer, "h1")
		require.Equal(t, "صفحة الدفع غير موجودة", text(t, customer, "h1"))
		shot(t, customer, "hosted-not-found-ar")
	})

	t.Run("a very long name wraps, in every list and right to left too", func(t *testing.T) {
		long := strings.Repeat("Abdulrahman", 22) // 242 letters, no space
		site := s.newSite(map[string]any{"name": long}, 100_000)
		f := depositForm("ZAINCASH", "long-1", "u7", 25000)
		f.Set("name", long)
		f.Set("senderName", long)
		d := rec(t, s.post(site, pathDeposit, f))
		w := rec(t, s.post(site, pathWithdraw, with(withdrawForm("ZAINCASH", "long-2", "u8", 5000, "07712345678"), "accountName", ptr(long))))
		// fits: the element is on the screen, and its list no wider than
		// its place (no sideways scrolling to reach it).
		fits := func(ctx context.Context, sel string) {
			t.Helper()
			waitFor(t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false;
				const r = e.getBoundingClientRect(), box = e.closest(".scroll") || document.documentElement;
				return r.left >= 0 && r.right <= innerWidth && box.scrollWidth <= box.clientWidth })()`, sel), sel+" on the screen")
		}
		for _, lang := range []string{"en", "ar"} {
			steps(t, op, chromedp.Navigate(s.URL+"/console/deposits?lang="+lang))
			fits(op, fmt.Sprintf(`button[data-action=approve][data-id=%q]`, d.TransactionID))
			fits(op, fmt.Sprintf(`#tx-%s .badge`, d.TransactionID))
			shot(t, op, "console-long-name-"+lang)
			steps(t, op, chromedp.Navigate(s.URL+"/console/withdrawals?lang="+lang))
			fits(op, fmt.Sprintf(`button[data-action=take][data-id=%q]`, w.TransactionID))
			steps(t, op, chromedp.Navigate(s.URL+"/console/treasuries?lang="+lang))
			fits(op, fmt.Sprintf(`#site-%s [data-field=negativeLimit]`, site.ID))
			steps(t, op, chromedp.Navigate(s.URL+"/console/tx/"+d.TransactionID+"?lang="+lang))
			fits(op, "#tx-status")
			fits(op, "#tx-history tbody tr td:last-child")
			steps(t, op, chromedp.Navigate(s.URL+"/console/match?lang="+lang), chromedp.WaitVisible("#lines"),
				chromedp.SetValue("#lines", "25000,"+long), chromedp.Click("#propose"))
			fits(op, fmt.Sprintf(`tr.proposal[data-tx=%q] button[data-action=approve]`, d.TransactionID))
		}
		steps(t, op, chromedp.Navigate(s.URL+"/console/deposits?lang=en"), chromedp.WaitVisible("#tx-table"))
	})

	t.Run("sign out", func(t *testing.T) {
		steps(t, op, chromedp.Navigate(s.URL+"/console/deposits"), chromedp.WaitVisible("#signout"), chromedp.Click("#signout"),
			chromedp.WaitVisible("#token"))
		steps(t, op, chromedp.Navigate(s.URL+"/console/deposits"), chromedp.WaitVisible("#token"))
		shot(t, op, "console-sign-in-en")
	})
}

// recordFetches makes the page note every URL its script fetches (in
// window.fetched), to see which requests an action made.
func recordFetches(t *testing.T, ctx context.Context) {
	t.Helper()
	require.True(t, eval[bool](t, ctx, `(() => { window.fetched = []; const f = window.fetch;
		window.fetch = function (u) { window.fetched.push(String(u)); return f.apply(this, arguments) }; return true })()`))
}

// whoFetches are the page's questions for who moved a transaction first
// since recordFetches.
func whoFetches(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `window.fetched.filter(u => u.includes("fragment=who"))`)
}

// wholeWords checks that the text of every element matching each selector
// breaks, where it must, between its words, never inside one: a word laid
// out on two lines has two boxes.
func wholeWords(t *testing.T, ctx context.Context, sels ...string) {
	t.Helper()
	for _, sel := range sels {
		broken := eval[[]string](t, ctx, fmt.Sprintf(`(() => {
			const broken = [];
			for (const el of document.querySelectorAll(%q)) {
				const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
				for (let n = walk.nextNode(); n; n = walk.nextNode()) {
					for (const m of n.textContent.matchAll(/\S+/g)) {
						const r = document.createRange();
						r.setStart(n, m.index);
						r.setEnd(n, m.index + m[0].length);
						const lines = new Set([...r.getClientRects()].map(b => Math.round(b.top)));
						if (lines.size > 1) broken.push(m[0]);
					}
				}
			}
			return broken })()`, sel))
		require.NotEmpty(t, eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)), sel)
		require.Empty(t, broken, "%s: words broken across lines", sel)
	}
}

// phoneWidth is the width of the phone the pages are looked at on (CSS
// pixels).
const phoneWidth = 390

// narrow runs f with ctx's page as wide as a phone, then as wide again as
// the browser's window.
func narrow(t *testing.T, ctx context.Context, f func()) {
	t.Helper()
	steps(t, ctx, chromedp.EmulateViewport(phoneWidth, 844, chromedp.EmulatePortrait))
	defer func() {
		steps(t, ctx, chromedp.EmulateViewport(desktopWidth, desktopHeight))
		waitFor(t, ctx, fmt.Sprintf(`innerWidth === %d`, desktopWidth), "the desktop's width")
	}()
	waitFor(t, ctx, fmt.Sprintf(`innerWidth === %d`, phoneWidth), "the phone's width")
	f()
}

// TestConsole_browserCallbacks: the Callbacks page says each delivery's
// last answer once, and a resend the API refuses (the site has no
// callbackUrl any more) is said as the API says it: no race with another
// operator, no question about a transaction.
func TestConsole_browserCallbacks(t *testing.T) {
	b := browser(t)
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 500)
	st := s.callbackSite(t, rcv.url())
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")
	tx := s.approvedDeposit(t, st)
	id := s.eventID(t, st.ID, "deposit.approved.v1", tx)
	s.waitDelivery(t, "", id, "failed", 0)
	requireOK(t, s.ops("PATCH", "/ops/v1/sites/"+st.ID, map[string]any{"callbackUrl": ""}))
	books := s.newSite(map[string]any{"name": "Tigris Books", "callbackUrl": newReceiver(t, 200).url()}, 0)
	other := s.eventID(t, books.ID, "deposit.approved.v1", s.approvedDeposit(t, books))
	s.waitDelivery(t, "", other, "delivered", 0)

	admin := person(t, b)
	signIn(t, admin, s.URL, adminToken, "admin")
	steps(t, admin, chromedp.Navigate(s.URL+"/console/callbacks"), chromedp.WaitVisible("#cb-"+id), chromedp.WaitVisible("#cb-"+other))
	require.Contains(t, text(t, admin, "#cb-"+id), "HTTP 500")
	require.NotContains(t, text(t, admin, "#cb-"+id), "HTTP 500 HTTP 500")
	// Each delivery names its site, and the list is filtered by site.
	require.Equal(t, "Tigris Books", text(t, admin, "#cb-"+other+" td.site"))
	shot(t, admin, "console-callbacks-en")
	steps(t, admin, chromedp.SetValue("#c-site", books.ID), chromedp.Click("#c-search"))
	waitFor(t, admin, fmt.Sprintf(`location.search.includes("site=%s") && !document.getElementById("cb-%s")`, books.ID, id), "the site's deliveries only")
	visible(t, admin, "#cb-"+other)
	require.Contains(t, eval[string](t, admin, `document.getElementById("rows").dataset.live`), "site="+books.ID, "the live refresh keeps the filter")
	steps(t, admin, chromedp.Navigate(s.URL+"/console/callbacks"), chromedp.WaitVisible("#cb-"+id))

	recordFetches(t, admin)
	act(t, admin, "resend", id, nil)
	waitFor(t, admin, `document.getElementById("flash").className === "error"`, "the refusal")
	require.Equal(t, "Event: the event's site has no callbackUrl", text(t, admin, "#flash"))
	require.Empty(t, whoFetches(t, admin))

	// In Arabic the refusal is said in Arabic first, the API's words
	// after it.
	steps(t, admin, chromedp.Navigate(s.URL+"/console/callbacks?lang=ar"), chromedp.WaitVisible("#cb-"+id))
	act(t, admin, "resend", id, nil)
	waitFor(t, admin, `document.getElementById("flash").className === "error"`, "the refusal in Arabic")
	require.Equal(t, "الحالة الحالية لا تسمح بهذا (الحدث): the event's site has no callbackUrl", text(t, admin, "#flash"))
	require.Equal(t, "ltr", eval[string](t, admin, `document.querySelector("#flash bdi").dir`))
}

// TestHostedPage_browserPhone: the hosted page on a phone 390 pixels wide,
// in its three languages. A 16-digit card number is shown in groups of
// four, on one line, inside the screen, and its copy button copies the
// digits alone; the countdown is written in the digits the amount is
// (Arabic-Indic in Arabic and Sorani); an approval for another amount says
// which, and why, without a reload.
func TestHostedPage_browserPhone(t *testing.T) {
	b := browser(t)
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	shop := s.newSite(map[string]any{"name": "Babylon Games", "hostedPage": true, "returnUrl": "https://babylon.example/account",
		"supportContact": "support@babylon.example"}, 0)
	phone := person(t, b)
	narrow(t, phone, func() {
		for _, c := range []struct {
			lang, tag, amount, countdown string
			// approved is the page once the deposit is approved for 24,000
			// ("" to leave it pending).
			approved string
		}{
			{"en", "en", "25,000 IQD", `^[0-9]{1,2}:[0-9]{2}$`, ""},
			{"ar", "ar", "٢٥٬٠٠٠ د.ع", `^[٠-٩]{1,2}:[٠-٩]{2}$`, "تمت الموافقة على ٢٤٬٠٠٠ د.ع: المبلغ الذي استُلم (كان المطلوب ٢٥٬٠٠٠ د.ع)."},
			{"ku", "ckb", "٢٥٬٠٠٠ د.ع", `^[٠-٩]{1,2}:[٠-٩]{2}$`, ""},
		} {
			f := depositForm("QICARD", "card-"+c.lang, "u-"+c.lang, 25000)
			f.Set("lang", c.lang)
			d := rec(t, s.post(shop, pathDeposit, f))
			steps(t, phone, chromedp.Navigate(*d.URL))
			visible(t, phone, "#number")
			require.Equal(t, c.tag, eval[string](t, phone, `document.documentElement.lang`))
			require.Equal(t, phoneWidth, eval[int](t, phone, `innerWidth`))
			require.Equal(t, "6375 0000 1234 5678", text(t, phone, "#number"), c.lang)
			require.Equal(t, 1, eval[int](t, phone, `(() => { const r = document.createRange();
				r.selectNodeContents(document.getElementById("number"));
				return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size })()`), "%s: the card number on one line", c.lang)
			require.True(t, eval[bool](t, phone, `(() => { const on = e => { const r = e.getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth };
				return on(document.getElementById("number")) && on(document.querySelector('button[data-copy="number"]')) &&
					document.documentElement.scrollWidth <= innerWidth })()`), "%s: the number and its button on the screen", c.lang)

			// Whichever way the page copies (the Clipboard API, or
			// selecting and copying where it is missing), the text is
			// the digits alone.
			require.True(t, eval[bool](t, phone, `(() => { window.copied = [];
				Object.defineProperty(navigator, "clipboard", {configurable: true, value: {writeText: v => { window.copied.push(v); return Promise.resolve() }}});
				document.execCommand = () => { window.copied.push(document.activeElement.value); return true };
				return true })()`))
			steps(t, phone, chromedp.Click(`button[data-copy="number"]`))
			waitFor(t, phone, `window.copied.length === 1`, "the copy")
			require.Equal(t, []string{"6375000012345678"}, eval[[]string](t, phone, `window.copied`))

			require.Equal(t, c.amount, text(t, phone, "#amount"))
			waitFor(t, phone, fmt.Sprintf(`/%s/.test(document.getElementById("timer").textContent)`, c.countdown), "the countdown in the amount's digits")
			shot(t, phone, "hosted-390-"+c.tag)
			if c.approved == "" {
				continue
			}
			requireOK(t, s.ops("POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", map[string]any{"amount": 24000}))
			waitFor(t, phone, fmt.Sprintf(`document.getElementById("state").textContent === %q`, c.approved), "the approval, and why its amount differs")
			require.Equal(t, "٢٤٬٠٠٠ د.ع", text(t, phone, "#amount"))
			shot(t, phone, "hosted-approved-390-"+c.tag)
		}
	})
}
