package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// demoSiteID and sandboxSiteID are fixed so --demo finds its sites again
// on every start.
const (
	demoSiteID    = "demo"
	sandboxSiteID = "sandbox"
)

// demoBanks are the common Iraqi methods, with made-up recipient accounts.
var demoBanks = []aggregates.CreateBank{
	{Code: "ZAINCASH", Name: events.LocalizedName{En: "ZainCash", Ar: "زين كاش", Ku: "زەین کاش"}, IdentifierKind: "PHONE",
		MinAmount: 1000, MaxAmount: 5_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{{AccountName: "Demo Store ZC 1", AccountNumber: "07801234567"}, {AccountName: "Demo Store ZC 2", AccountNumber: "07807654321"}}},
	{Code: "FASTPAY", Name: events.LocalizedName{En: "FastPay", Ar: "فاست باي", Ku: "فاست پەی"}, IdentifierKind: "PHONE",
		MinAmount: 1000, MaxAmount: 5_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{{AccountName: "Demo Store FP", AccountNumber: "07501234567"}}},
	{Code: "ASIAHAWALA", Name: events.LocalizedName{En: "AsiaHawala", Ar: "آسيا حوالة", Ku: "ئاسیا حەواڵە"}, IdentifierKind: "PHONE",
		MinAmount: 1000, MaxAmount: 3_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{{AccountName: "Demo Store AH", AccountNumber: "07701234567"}}},
	{Code: "QICARD", Name: events.LocalizedName{En: "Qi Card", Ar: "كي كارد", Ku: "کی کارد"}, IdentifierKind: "CARD_NO",
		MinAmount: 5000, MaxAmount: 10_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{{AccountName: "Demo Store QI", AccountNumber: "6375000012345678"}}},
	{Code: "RAFIDAIN", Name: events.LocalizedName{En: "Rafidain Bank", Ar: "مصرف الرافدين", Ku: "بانکی ڕافیدەین"}, IdentifierKind: "ACCOUNT_NO",
		MinAmount: 10_000, MaxAmount: 50_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{{AccountName: "Demo Store LLC", AccountNumber: "0012345678"}}},
	{Code: "NBI", Name: events.LocalizedName{En: "National Bank of Iraq", Ar: "المصرف الأهلي العراقي", Ku: "بانکی نیشتمانی عێراق"}, IdentifierKind: "IBAN",
		MinAmount: 10_000, MaxAmount: 100_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{{AccountName: "Demo Store LLC", AccountNumber: "IQ56NBIQ123456789012345"}}},
}

// setupDemo creates the demo methods and sites when missing, points the
// sites' callbacks at cbURL (the gateway's demo receiver, demohooks.go)
// and prints the sites' keys, where their callbacks go, a signed request
// to try, and the shell variables the README's examples use (token is the
// shell expression of the operator token, "" when it cannot be given
// without printing a secret the operator typed).
func setupDemo(ctx context.Context, led *ledger.Ledger, reader *records.Reader, out io.Writer, base, token, cbURL string) error {
	for _, b := range demoBanks {
		if _, ok := led.Catalog().Resolve(b.Code); ok {
			continue
		}
		b.ID = string(ids.NewBank())
		// Another process may create it meanwhile: the catalog refuses a
		// second method with the code (ErrBankExists).
		_, err := led.ExecuteCatalog(ctx, b, events.ActorSystem)
		if err != nil && !errors.Is(err, aggregates.ErrBankExists) {
			return fmt.Errorf("method %s: %w", b.Code, err)
		}
	}
	name, limit, hosted := "Demo Store", int64(-1_000_000), true
	if err := demoSite(ctx, led, demoSiteID, aggregates.SiteSettings{Name: &name, NegativeLimit: &limit, HostedPage: &hosted,
		CallbackURL: &cbURL}); err != nil {
		return err
	}
	sbName, sandbox := "Demo Sandbox", true
	if err := demoSite(ctx, led, sandboxSiteID, aggregates.SiteSettings{Name: &sbName, NegativeLimit: &limit, HostedPage: &hosted,
		Sandbox: &sandbox, CallbackURL: &cbURL}); err != nil {
		return err
	}
	cfg, ok := led.SiteConfig(demoSiteID)
	sb, sbOK := led.SiteConfig(sandboxSiteID)
	if !ok || !sbOK {
		return errors.New("demo site missing after creation")
	}
	bal, err := reader.BalanceOf(ctx, demoSiteID)
	if err != nil {
		return err
	}
	body := url.Values{"bankId": {"ZAINCASH"}, "processId": {"demo-" + strconv.FormatInt(time.Now().Unix(), 10)},
		"amount": {"25000"}, "userId": {"u-1001"}, "userName": {"ali_k"}, "name": {"Ali Kareem"}, "lang": {"ar"}}.Encode()
	m := hmac.New(sha256.New, []byte(cfg.Secret))
	m.Write([]byte(body))
	sign := base64.StdEncoding.EncodeToString(m.Sum(nil))
	fmt.Fprintf(out, `
Demo site %q (id %s), treasury %d IQD
  appKey         %s
  secret         %s
  webhookSecret  %s
  callbackUrl    %s
Methods: ZAINCASH, FASTPAY, ASIAHAWALA (PHONE), QICARD (CARD_NO), RAFIDAIN (ACCOUNT_NO), NBI (IBAN)

Try a signed deposit, then approve it in the console (%s/console):
  curl -s -X POST %s/v1/transactions/deposit \
    -H 'Content-Type: application/x-www-form-urlencoded' \
    -H 'appKey: %s' \
    -H 'sign: %s' \
    --data '%s'

`, cfg.Name, demoSiteID, bal.Balance, cfg.AppKey, cfg.Secret, cfg.WebhookSecret, describeCallbackURL(cfg.CallbackURL),
		base, base, cfg.AppKey, sign, body)
	fmt.Fprintf(out, `Sandbox site %q (id %s): its merchant moves its own transactions, no operator needed
  appKey         %s
  secret         %s
  webhookSecret  %s
  callbackUrl    %s
Try the whole flow with the merchant CLI; the approval's callback shows in this gateway's log:
  export GATEWAY_URL=%s GATEWAY_APP_KEY=%s GATEWAY_SECRET=%s
  TRY=$(go run ./cmd/merchant deposit -bank ZAINCASH -process-id "try-$(date +%%s)" -amount 25000 -user-id u-1 -user-name ali_k -name 'Ali Kareem' | jq -r .transactionId)
  go run ./cmd/merchant sandbox approve -amount 24000 "$TRY"
To have the callbacks posted to your own endpoint as well, follow them (runs until stopped):
  go run ./cmd/merchant listen -forward-to http://localhost:3000/callbacks

`, sb.Name, sandboxSiteID, sb.AppKey, sb.Secret, sb.WebhookSecret, describeCallbackURL(sb.CallbackURL), base, sb.AppKey, sb.Secret)
	vars := []string{"G=" + shellQuote(base)}
	if token != "" {
		vars = append(vars, "TOKEN="+token)
	}
	vars = append(vars, "SITE="+demoSiteID, "APP_KEY="+shellQuote(cfg.AppKey), "SECRET="+shellQuote(cfg.Secret),
		"SANDBOX_APP_KEY="+shellQuote(sb.AppKey), "SANDBOX_SECRET="+shellQuote(sb.Secret))
	tail := fmt.Sprintf("The README's examples use these variables; paste this line into the shell you run them from:\n  export %s\n", strings.Join(vars, " "))
	if token == "" {
		tail += "  export TOKEN=…   # the --admin-token you gave\n"
	}
	// One write, so that a reader of the output sees the variables whole.
	_, err = io.WriteString(out, tail+"\n")
	return err
}

// tokenShell is how the demo's variables name the operator token: the
// variable or file it came from, or the generated token (printed already);
// "" for a token given on the command line, which is not echoed.
func tokenShell(o options, token string) string {
	switch {
	case o.adminTokenFile != "":
		abs, err := filepath.Abs(o.adminTokenFile)
		if err != nil {
			abs = o.adminTokenFile
		}
		return `"$(cat ` + shellQuote(abs) + `)"`
	case o.adminTokenEnv:
		return `"$GATEWAY_ADMIN_TOKEN"`
	case o.adminToken == "":
		return shellQuote(token)
	}
	return ""
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// demoSite creates a demo site with settings and a treasury of 10,000,000
// IQD when it is missing. The callbackUrl of a site that exists is set to
// settings' when it is one --demo set before (demoOwnsCallbackURL): the
// discard port of earlier versions, or the receiver of another --http.
func demoSite(ctx context.Context, led *ledger.Ledger, id string, st aggregates.SiteSettings) error {
	if cfg, ok := led.SiteConfig(ids.SiteID(id)); !ok {
		appKey, secret, webhookSecret := httpapi.NewSiteSecrets()
		_, err := led.Execute(ctx, ids.SiteID(id), aggregates.CreateSite{AppKey: appKey, Secret: secret,
			WebhookSecret: webhookSecret, Settings: st}, events.ActorSystem)
		// ErrSiteExists: another process created it meanwhile.
		if err != nil && !errors.Is(err, aggregates.ErrSiteExists) {
			return fmt.Errorf("demo site %s: %w", id, err)
		}
	} else if st.CallbackURL != nil && cfg.CallbackURL != *st.CallbackURL && demoOwnsCallbackURL(cfg.CallbackURL) {
		if _, err := led.Execute(ctx, ids.SiteID(id), aggregates.UpdateSite{Settings: aggregates.SiteSettings{CallbackURL: st.CallbackURL}},
			events.ActorSystem); err != nil {
			return fmt.Errorf("demo site %s callbackUrl: %w", id, err)
		}
	}
	// Asked on every start while the site is untouched, and keyed: a
	// start stopped between the creation and the balance gives the
	// balance on the next, and never twice.
	untouched := false
	if err := led.Read(ctx, ids.SiteID(id), ledger.Fresh, func(s *aggregates.Site) error {
		untouched = s.Balance == 0 && len(s.Txs) == 0
		return nil
	}); err != nil {
		return fmt.Errorf("demo site %s: %w", id, err)
	}
	if !untouched {
		return nil
	}
	if _, err := led.Execute(ctx, ids.SiteID(id), aggregates.AdjustTreasury{Amount: demoBalance, Reason: "demo opening balance",
		IdempotencyKey: "demo-opening-balance", RequestHash: "demo-opening-balance"}, events.ActorSystem); err != nil {
		return fmt.Errorf("demo site %s balance: %w", id, err)
	}
	return nil
}

// demoBalance is each demo site's opening balance, in IQD.
const demoBalance = 10_000_000
