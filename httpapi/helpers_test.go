package httpapi_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/client"
)

// Paths of the merchant API.
const (
	pathDeposit  = "/v1/transactions/deposit"
	pathWithdraw = "/v1/transactions/withdraw"
)

var responseTimeRE = regexp.MustCompile(`^\d+ms$`)

// checkEnvelope asserts the parts of the envelope every response has: JSON,
// status equal to the HTTP status, requestId equal to the Request-Id
// header, app_version "test" and a responseTime like "3ms".
func checkEnvelope(t testing.TB, r resp) {
	t.Helper()
	require.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"),
		"content type %q, body %s", r.Header.Get("Content-Type"), r.Raw)
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.Raw, &keys), "body: %s", r.Raw)
	for _, k := range []string{"data", "status", "responseTime", "app_version", "requestId"} {
		require.Contains(t, keys, k, "envelope key %q missing: %s", k, r.Raw)
	}
	require.Equal(t, r.HTTP, r.Status, "envelope status vs HTTP status: %s", r.Raw)
	require.NotEmpty(t, r.RequestID, "requestId: %s", r.Raw)
	require.Equal(t, r.Header.Get("Request-Id"), r.RequestID, "Request-Id header vs requestId")
	require.Equal(t, "test", r.AppVersion)
	require.Regexp(t, responseTimeRE, r.ResponseTime)
}

// requireOK asserts a 200 envelope without error fields.
func requireOK(t testing.TB, r resp) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.HTTP, "body: %s", r.Raw)
	checkEnvelope(t, r)
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.Raw, &keys))
	for _, k := range []string{"code", "message", "field"} {
		require.NotContains(t, keys, k, "success envelope carries %q: %s", k, r.Raw)
	}
	require.NotEqual(t, "null", string(keys["data"]), "data is null on success")
}

// requireErr asserts an error envelope: the HTTP status, code and field
// (field "" means the envelope must not name one), data null and a message.
func requireErr(t testing.TB, r resp, status int, code, field string) {
	t.Helper()
	require.Equal(t, status, r.HTTP, "body: %s", r.Raw)
	checkEnvelope(t, r)
	require.Equal(t, code, r.Code, "body: %s", r.Raw)
	require.Equal(t, field, r.Field, "field; body: %s", r.Raw)
	require.NotEmpty(t, r.Message, "message: %s", r.Raw)
	require.Equal(t, "docs/errors.md#"+code, r.DocURL, "docUrl: %s", r.Raw)
	require.Regexp(t, `^http://127\.0\.0\.1:[0-9]+/docs/errors#`+code+`$`, r.DocLink, "docLink: %s", r.Raw)
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.Raw, &keys))
	require.Equal(t, "null", string(keys["data"]), "data must be null on errors: %s", r.Raw)
}

// responseHash is docs/merchant-api.md "Response hash", computed independently of the server.
func responseHash(secret, txID, bankID string, amount int64) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(txID + bankID + strconv.FormatInt(amount, 10)))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// record is a transaction record as the APIs return it: the Go client's
// Transaction, which client's TestTransaction_JSONIsTheGateways holds
// equal to what the gateway writes, with the operator API's siteId.
type record struct {
	SiteID string `json:"siteId"`
	client.Transaction
}

// rec decodes a 200 response's record.
func rec(t testing.TB, r resp) record {
	t.Helper()
	requireOK(t, r)
	var out record
	r.decode(t, &out)
	return out
}

// dataKeys returns the keys of a response's data object.
func dataKeys(t testing.TB, r resp) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	r.decode(t, &m)
	return m
}

// balance is GET /v1/balance's data.
type balance struct {
	Balance            int64  `json:"balance"`
	PendingWithdrawals int64  `json:"pendingWithdrawals"`
	NegativeLimit      int64  `json:"negativeLimit"`
	Available          int64  `json:"available"`
	Currency           string `json:"currency"`
}

// balanceOf reads a site's balance through the merchant API.
func (s *stack) balanceOf(t testing.TB, st site) balance {
	t.Helper()
	r := s.getT(t, st, "/v1/balance", "")
	requireOK(t, r)
	var b balance
	r.decode(t, &b)
	require.Equal(t, "IQD", b.Currency)
	require.Equal(t, b.Balance-b.PendingWithdrawals-b.NegativeLimit, b.Available, "available = balance − pending − negativeLimit")
	return b
}

// send sends a request with exactly the headers given (no signing).
func (s *stack) send(t testing.TB, method, path, body string, hdr map[string]string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" || method == http.MethodPost {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

// postT is stack.post with an explicit test (usable inside subtests and
// fuzz targets).
func (s *stack) postT(t testing.TB, st site, path string, form url.Values) resp {
	t.Helper()
	body := form.Encode()
	return s.send(t, http.MethodPost, path, body, map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "appKey": st.AppKey, "sign": sign(st.Secret, []byte(body))})
}

// getT is stack.get with an explicit test.
func (s *stack) getT(t testing.TB, st site, path, query string) resp {
	t.Helper()
	p := path
	if query != "" {
		p += "?" + query
	}
	return s.send(t, http.MethodGet, p, "", map[string]string{"appKey": st.AppKey, "sign": sign(st.Secret, []byte(query))})
}

// opsT is stack.ops with an explicit test.
func (s *stack) opsT(t testing.TB, method, path string, body any) resp {
	t.Helper()
	hdr := map[string]string{"Authorization": "Bearer " + adminToken}
	b := ""
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		b = string(raw)
		hdr["Content-Type"] = "application/json"
	}
	return s.send(t, method, path, b, hdr)
}

// historyItem is one entry of GET /ops/v1/sites/{id}/events.
type historyItem struct {
	Seq   uint64         `json:"seq"`
	Index int            `json:"index"`
	Name  string         `json:"name"`
	Time  string         `json:"time"`
	Actor string         `json:"actor"`
	Data  map[string]any `json:"data"`
	Prev  string         `json:"prev"`
	Hash  string         `json:"hash"`
}

type page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

// history walks a site's whole history through the operator API.
func (s *stack) history(t testing.TB, siteID string) []historyItem {
	t.Helper()
	var out []historyItem
	cursor := ""
	for {
		q := "?limit=1000"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := s.opsT(t, "GET", "/ops/v1/sites/"+siteID+"/events"+q, nil)
		requireOK(t, r)
		var p page[historyItem]
		r.decode(t, &p)
		out = append(out, p.Items...)
		if p.NextCursor == nil {
			return out
		}
		cursor = *p.NextCursor
	}
}

// eventCount is the number of events in a site's history.
func (s *stack) eventCount(t testing.TB, siteID string) int {
	t.Helper()
	return len(s.history(t, siteID))
}

// opsList walks GET /ops/v1/transactions with the query given.
func (s *stack) opsList(t testing.TB, query string, limit int) []record {
	t.Helper()
	var out []record
	cursor := ""
	for n := 0; ; n++ {
		require.Less(t, n, 1000, "listing does not end")
		q := query + "&limit=" + strconv.Itoa(limit)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := s.opsT(t, "GET", "/ops/v1/transactions?"+q, nil)
		requireOK(t, r)
		var p page[record]
		r.decode(t, &p)
		require.LessOrEqual(t, len(p.Items), limit)
		out = append(out, p.Items...)
		if p.NextCursor == nil {
			return out
		}
		require.Len(t, p.Items, limit, "a page before the last is full")
		cursor = *p.NextCursor
	}
}

// unchanged asserts that nothing was written for the site since before (its
// event count) and, when pid is set, that processId pid does not exist.
func (s *stack) unchanged(t testing.TB, st site, before int, pid string) {
	t.Helper()
	require.Equal(t, before, s.eventCount(t, st.ID), "events were written for a refused request")
	if pid != "" {
		requireErr(t, s.getT(t, st, "/v1/transactions", "processId="+url.QueryEscape(pid)), 404, "not_found", "")
	}
}

// depositForm is a valid deposit request.
func depositForm(bankID, pid, userID string, amount int64) url.Values {
	return url.Values{"bankId": {bankID}, "processId": {pid}, "amount": {strconv.FormatInt(amount, 10)},
		"userId": {userID}, "userName": {"user_" + userID}, "name": {"Ali Kareem"}}
}

// withdrawForm is a valid withdrawal request to a ZAINCASH-style phone.
func withdrawForm(bankID, pid, userID string, amount int64, iban string) url.Values {
	return url.Values{"bankId": {bankID}, "processId": {pid}, "amount": {strconv.FormatInt(amount, 10)},
		"userId": {userID}, "userName": {"user_" + userID}, "name": {"Sara Ahmed"},
		"accountName": {"Sara Ahmed"}, "iban": {iban}}
}

// with returns a copy of v with k set (or removed when val is nil).
func with(v url.Values, k string, val *string) url.Values {
	out := url.Values{}
	for kk, vv := range v {
		out[kk] = append([]string(nil), vv...)
	}
	if val == nil {
		delete(out, k)
	} else {
		out.Set(k, *val)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// iraqiIBAN builds a mod-97 valid Iraqi IBAN from a 4-letter bank code and
// 15 digits (ISO 13616, computed independently of the server).
func iraqiIBAN(bank, digits string) string {
	bban := bank + digits
	check := 98 - ibanMod97(bban+"IQ00")
	return fmt.Sprintf("IQ%02d%s", check, bban)
}

func ibanMod97(s string) int {
	var b strings.Builder
	for _, c := range s {
		if c >= 'A' && c <= 'Z' {
			b.WriteString(strconv.Itoa(int(c-'A') + 10))
		} else {
			b.WriteRune(c)
		}
	}
	n, _ := new(big.Int).SetString(b.String(), 10)
	return int(new(big.Int).Mod(n, big.NewInt(97)).Int64())
}

// parseTime parses the records' RFC 3339 times.
func parseTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err, "time %q", s)
	return tm
}
