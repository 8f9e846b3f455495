package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"gateway/aggregates"
	"gateway/events"
	"gateway/ledger"
	"gateway/records"
)

// demoSiteID is fixed so --demo finds its site again on every start.
const demoSiteID = "demo"

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

// setupDemo creates the demo methods and site when missing and prints the
// site's keys and a signed request to try.
func setupDemo(ctx context.Context, led *ledger.Ledger, reader *records.Reader, out io.Writer, base string) error {
	for _, b := range demoBanks {
		if _, ok := led.Catalog().Resolve(b.Code); ok {
			continue
		}
		b.ID = newBankID()
		// Another process may create it meanwhile: the catalog refuses a
		// second method with the code (ErrBankExists).
		_, err := led.ExecuteCatalog(ctx, b, events.ActorSystem)
		if err != nil && !errors.Is(err, aggregates.ErrBankExists) {
			return fmt.Errorf("method %s: %w", b.Code, err)
		}
	}
	if _, ok := led.SiteConfig(demoSiteID); !ok {
		name, limit, hosted := "Demo Store", int64(-1_000_000), true
		_, err := led.Execute(ctx, demoSiteID, aggregates.CreateSite{AppKey: "ak_demo_" + randomHex(8), Secret: randomHex(24),
			WebhookSecret: "whsec_" + base64.StdEncoding.EncodeToString(randomBytes(24)),
			Settings:      aggregates.SiteSettings{Name: &name, NegativeLimit: &limit, HostedPage: &hosted}}, events.ActorSystem)
		if err != nil && !errors.Is(err, aggregates.ErrSiteExists) {
			return fmt.Errorf("demo site: %w", err)
		}
		if err == nil {
			if _, err := led.Execute(ctx, demoSiteID, aggregates.AdjustTreasury{Amount: 10_000_000, Reason: "demo opening balance"},
				events.ActorSystem); err != nil {
				return fmt.Errorf("demo balance: %w", err)
			}
		}
	}
	cfg, ok := led.SiteConfig(demoSiteID)
	if !ok {
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
Methods: ZAINCASH, FASTPAY, ASIAHAWALA (PHONE), QICARD (CARD_NO), RAFIDAIN (ACCOUNT_NO), NBI (IBAN)

Try a signed deposit:
  curl -s -X POST %s/v1/transactions/deposit \
    -H 'Content-Type: application/x-www-form-urlencoded' \
    -H 'appKey: %s' \
    -H 'sign: %s' \
    --data '%s'

`, cfg.Name, demoSiteID, bal.Balance, cfg.AppKey, cfg.Secret, cfg.WebhookSecret, base, cfg.AppKey, sign, body)
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randomHex(n int) string { return hex.EncodeToString(randomBytes(n)) }

func newBankID() string { return randomHex(12) }
