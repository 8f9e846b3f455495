package composetest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// envelope is every answer of both APIs.
type envelope struct {
	Data    json.RawMessage `json:"data"`
	Status  int             `json:"status"`
	Code    string          `json:"code"`
	Message string          `json:"message"`
	// RequestID names the request in the gateway's log.
	RequestID string `json:"requestId"`
}

// site is what the operator API answers when it creates a site.
type site struct {
	ID     string `json:"id"`
	AppKey string `json:"appKey"`
	Secret string `json:"secret"`
}

// record is the part of a transaction record the checks read.
type record struct {
	TransactionID string `json:"transactionId"`
	ProcessID     string `json:"processId"`
	Type          string `json:"type"`
	Status        string `json:"status"`
	Amount        int64  `json:"amount"`
}

// treasury is GET /v1/balance's data, and a site's treasury.
type treasury struct {
	Balance            int64 `json:"balance"`
	PendingWithdrawals int64 `json:"pendingWithdrawals"`
}

// gateway is one gateway's published HTTP address with the credentials
// the test calls it with.
type gateway struct {
	name  string
	base  string
	token string
	http  *http.Client
}

// requestTimeout is longer than the gateway's own 10 s deadline, so that
// a slow answer is the gateway's 503, not the client giving up; a paused
// gateway answers once it is unpaused.
const requestTimeout = 20 * time.Second

func newGateway(name, base, token string) *gateway {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	return &gateway{name: name, base: base, token: token, http: &http.Client{Transport: tr, Timeout: requestTimeout}}
}

// do sends one request and decodes the envelope. A transport error (no
// answer) is err; any answer, 5xx included, is the envelope.
func (g *gateway) do(ctx context.Context, method, path, contentType string, body []byte, header http.Header) (envelope, error) {
	var e envelope
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, bytes.NewReader(body))
	if err != nil {
		return e, fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return e, fmt.Errorf("%s %s%s: %w", method, g.name, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return e, fmt.Errorf("%s %s%s: read: %w", method, g.name, path, err)
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		// Not the envelope (a proxy's page, say): keep the status.
		e = envelope{Status: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
	}
	e.Status = resp.StatusCode
	return e, nil
}

// ops calls the operator API as the bootstrap admin; key, when not empty,
// is the Idempotency-Key.
func (g *gateway) ops(ctx context.Context, method, path string, body any, key string) (envelope, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return envelope{}, fmt.Errorf("encode %s body: %w", path, err)
		}
	}
	h := http.Header{"Authorization": {"Bearer " + g.token}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return g.do(ctx, method, path, "application/json", b, h)
}

// merchant calls the merchant API signed with the site's secret: over the
// body of a POST, over the query string of a GET.
func (g *gateway) merchant(ctx context.Context, s site, method, path string, form url.Values) (envelope, error) {
	payload := form.Encode()
	mac := hmac.New(sha256.New, []byte(s.Secret))
	mac.Write([]byte(payload))
	h := http.Header{"appKey": {s.AppKey}, "sign": {base64.StdEncoding.EncodeToString(mac.Sum(nil))}}
	if method == http.MethodGet {
		if payload != "" {
			path += "?" + payload
		}
		return g.do(ctx, method, path, "", nil, h)
	}
	return g.do(ctx, method, path, "application/x-www-form-urlencoded", []byte(payload), h)
}

// decode reads an envelope's data into v.
func decode(e envelope, v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode data %.200s: %w", e.Data, err)
	}
	return nil
}

// answer is an envelope (or the lack of one) in a few words, for messages.
func answer(e envelope, err error) string {
	if err != nil {
		return "no answer: " + err.Error()
	}
	return fmt.Sprintf("%d %s %s (requestId %s)", e.Status, e.Code, e.Message, e.RequestID)
}
