package httpapi

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"

	"github.com/iqdgateway/gateway/ids"
)

// Secrets and tokens the API hands out are minted here, from crypto/rand;
// ids are minted in package ids, beside their parsers.

// NewSiteSecrets mints a new site's appKey, request-signing secret and
// webhook secret, in the formats the docs give (docs/merchant-api.md,
// docs/operator-api.md), for every way a site is made.
func NewSiteSecrets() (appKey, secret, webhookSecret string) {
	return ids.NewAppKey(), randomSecret(), newWebhookSecret()
}

// randomSecret is a request-signing secret: 256 random bits.
func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// newWebhookSecret is a Standard Webhooks secret: whsec_ + base64 key.
func newWebhookSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// newToken returns an unguessable hosted page token.
func newToken() string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// newRequestID is a request id for a caller that sent no sane Request-Id.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
