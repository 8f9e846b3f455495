package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/client"
	"github.com/iqdgateway/gateway/ids"
)

// The demo's callbacks: --demo's sites send them to the gateway itself,
// which checks and logs each, so that a new user sees a callback arrive
// (README.md "Sandbox sites") instead of a pile of failing retries.

// demoCallbackPath is the receiver's path, served with --demo only.
const demoCallbackPath = "/demo/callbacks"

// legacySandboxCallbackURL is where earlier versions pointed the demo
// sandbox site's callbacks: the discard port, where every one failed.
const legacySandboxCallbackURL = "http://127.0.0.1:9/callbacks"

// demoCallbackURL is the receiver's URL on the gateway listening at addr:
// a loopback address when it listens on all of them, since the gateway's
// own dispatcher is what calls it.
func demoCallbackURL(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + demoCallbackPath
	}
	ip := ap.Addr()
	switch {
	case ip.Is4() && ip.IsUnspecified():
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case ip.IsUnspecified():
		ip = netip.IPv6Loopback()
	}
	return "http://" + netip.AddrPortFrom(ip, ap.Port()).String() + demoCallbackPath
}

// demoOwnsCallbackURL says that u is a callbackUrl --demo set: an earlier
// version's discard port, or the receiver of a gateway on this machine
// (another --http). --demo moves those to its receiver; anything else an
// operator chose, and is left alone.
func demoOwnsCallbackURL(u string) bool {
	if u == legacySandboxCallbackURL {
		return true
	}
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "http" || p.Path != demoCallbackPath || p.RawQuery != "" || p.User != nil {
		return false
	}
	ip, err := netip.ParseAddr(p.Hostname())
	return err == nil && ip.IsLoopback()
}

// withDemoReceiver serves the demo receiver at demoCallbackPath and
// everything else with next.
func withDemoReceiver(next, rcv http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == demoCallbackPath {
			rcv.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// demoReceiver takes callbacks as a merchant's endpoint would: it verifies
// the Standard Webhooks signature with the webhook secret of the site the
// transaction belongs to (docs/callbacks.md "Signature") and logs the
// callback, answering 204; one that does not verify is logged and answered
// 401, which the dispatcher retries like any failed attempt.
type demoReceiver struct {
	// site is the configuration of a site (the ledger's SiteConfig).
	site func(ids.SiteID) (*aggregates.Config, bool)
	log  *slog.Logger
	now  func() time.Time
}

// maxDemoCallback bounds a callback's body: a record is a few KiB.
const maxDemoCallback = 1 << 20

func (d *demoReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "the demo callback receiver takes POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDemoCallback))
	if err != nil {
		d.refuse(w, r, http.StatusBadRequest, fmt.Errorf("read body: %w", err))
		return
	}
	// Read before it is verified only to know whose secret signs it.
	var cb client.Callback
	if err := json.Unmarshal(body, &cb); err != nil || cb.Data.TransactionID == "" {
		d.refuse(w, r, http.StatusBadRequest, errors.New("not a callback: a JSON body with data.transactionId"))
		return
	}
	// Parsed like every id from outside: the body is not verified yet.
	tx, err := ids.ParseTx(cb.Data.TransactionID)
	site := tx.Site()
	var cfg *aggregates.Config
	ok := err == nil
	if ok {
		cfg, ok = d.site(site)
	}
	if !ok {
		d.refuse(w, r, http.StatusUnauthorized, fmt.Errorf("transaction %q is no site's of this gateway", cb.Data.TransactionID))
		return
	}
	if err := d.verify(cfg, r.Header, body); err != nil {
		d.refuse(w, r, http.StatusUnauthorized, fmt.Errorf("site %s: %w", site, err))
		return
	}
	d.log.InfoContext(r.Context(), "demo callback received", "site", site, "type", cb.Type, "webhookId", r.Header.Get("webhook-id"),
		"transactionId", cb.Data.TransactionID, "status", cb.Data.Status, "amount", cb.Data.Amount, "test", cb.Test)
	w.WriteHeader(http.StatusNoContent)
}

// verify checks the signature with the site's webhook secret, or with the
// previous one during a rotation's overlap.
func (d *demoReceiver) verify(cfg *aggregates.Config, h http.Header, body []byte) error {
	now := d.now()
	err := client.VerifyWebhook(cfg.WebhookSecret, h, body, now)
	if errors.Is(err, client.ErrWebhookSignature) && cfg.PrevWebhookSecret != "" && now.UnixMilli() < cfg.PrevWebhookSecretUntil {
		err = client.VerifyWebhook(cfg.PrevWebhookSecret, h, body, now)
	}
	return err
}

func (d *demoReceiver) refuse(w http.ResponseWriter, r *http.Request, status int, err error) {
	d.log.WarnContext(r.Context(), "demo callback refused", "webhookId", r.Header.Get("webhook-id"), "status", status, "err", err)
	http.Error(w, "demo callback receiver: "+err.Error(), status)
}

// describeCallbackURL is how the demo's printed text names a site's
// callbackUrl.
func describeCallbackURL(u string) string {
	switch {
	case u == "":
		return "none (the site gets no callbacks; set callbackUrl with PATCH /ops/v1/sites/{id})"
	case demoOwnsCallbackURL(u):
		return u + " (this gateway: each callback verified and logged as \"demo callback received\")"
	}
	return u
}
