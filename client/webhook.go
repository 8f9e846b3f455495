package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Callback is one callback the gateway sent (docs/callbacks.md): the
// transaction as of the event, and the status it left.
type Callback struct {
	// ID is the webhook-id header: the same on every attempt; deduplicate
	// on it.
	ID string `json:"-"`
	// Type is deposit.approved, deposit.rejected, deposit.expired,
	// withdrawal.paid or withdrawal.rejected.
	Type      string       `json:"type"`
	Timestamp string       `json:"timestamp"`
	Data      CallbackData `json:"data"`
	// Test marks a sandbox site's test callback (Client.SandboxCallback):
	// it changes nothing, and must not be taken for the transaction's
	// real change. Its previousStatus is the one a real callback of its
	// type leaves (docs/merchant-api.md "Sandbox sites").
	Test bool `json:"test,omitempty"`
}

// CallbackData is a callback's data: the transaction's record as of the
// event, and the status it left.
type CallbackData struct {
	Transaction
	PreviousStatus string `json:"previousStatus"`
}

// MarshalJSON writes the record as Transaction does, then previousStatus,
// as the gateway does (Transaction's MarshalJSON would otherwise be
// promoted and leave previousStatus out).
func (d CallbackData) MarshalJSON() ([]byte, error) {
	b, err := d.Transaction.MarshalJSON()
	if err != nil {
		return nil, err
	}
	ps, err := json.Marshal(d.PreviousStatus)
	if err != nil {
		return nil, err
	}
	b = append(b[:len(b)-1], `,"previousStatus":`...)
	return append(append(b, ps...), '}'), nil
}

// WebhookTolerance is how far a callback's timestamp may be from now.
const WebhookTolerance = 5 * time.Minute

// Webhook verification errors.
var (
	ErrWebhookHeaders   = errors.New("webhook-id, webhook-timestamp or webhook-signature is missing")
	ErrWebhookTimestamp = errors.New("webhook-timestamp is not within 5 minutes of now")
	ErrWebhookSignature = errors.New("no webhook signature matches")
)

// VerifyWebhook checks a callback as Standard Webhooks does: one of the
// webhook-signature values ("v1,<base64>", space-separated) must be the
// HMAC-SHA256, under the site's webhook secret ("whsec_…"), of
// webhook-id + "." + webhook-timestamp + "." + body, and the timestamp must
// be within WebhookTolerance of now. body is the exact request body.
func VerifyWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return ErrWebhookHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrWebhookTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > WebhookTolerance || d < -WebhookTolerance {
		return ErrWebhookTimestamp
	}
	want := WebhookSignature(secret, id, ts, body)
	for _, s := range strings.Fields(sigs) {
		if v, sig, ok := strings.Cut(s, ","); ok && v == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return ErrWebhookSignature
}

// WebhookSignature is the v1 signature of a callback (without "v1,").
func WebhookSignature(secret, id, timestamp string, body []byte) string {
	key := strings.TrimPrefix(secret, "whsec_")
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		raw = []byte(key) // a secret that is not base64 is its own bytes
	}
	m := hmac.New(sha256.New, raw)
	m.Write([]byte(id + "." + timestamp + "."))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// ParseCallback verifies a callback (VerifyWebhook) and decodes it; the
// record's response hash is checked with the site's secret when secret
// is not empty. During a signing secret's rotation a callback's hash is
// made with the previous secret until the overlap ends: a merchant that
// has taken the new secret meanwhile checks it with Client.ParseCallback
// of a client given both.
func ParseCallback(webhookSecret, secret string, h http.Header, body []byte, now time.Time) (*Callback, error) {
	var c *Client
	if secret != "" {
		c = &Client{secret: secret}
	}
	return c.ParseCallback(webhookSecret, h, body, now)
}

// ParseCallback is the package's ParseCallback, the record's hash checked
// with the client's secret or its previous one (WithPreviousSecret); a
// nil client checks no hash.
func (c *Client) ParseCallback(webhookSecret string, h http.Header, body []byte, now time.Time) (*Callback, error) {
	if err := VerifyWebhook(webhookSecret, h, body, now); err != nil {
		return nil, err
	}
	var cb Callback
	if err := json.Unmarshal(body, &cb); err != nil {
		return nil, fmt.Errorf("decode callback: %w", err)
	}
	cb.ID = h.Get("webhook-id")
	if c != nil && !c.hashValid(&cb.Data.Transaction) {
		return &cb, fmt.Errorf("callback %s: %w", cb.ID, ErrBadHash)
	}
	return &cb, nil
}
