package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// envelope is the response shape of every call (docs/merchant-api.md "Response envelope", "Errors").
// data stays raw so each caller decodes only what it needs.
type envelope struct {
	Data      json.RawMessage `json:"data"`
	Status    int             `json:"status"`
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Field     string          `json:"field"`
	RequestID string          `json:"requestId"`
}

// apiError describes a non-2xx answer with everything the contract puts in an
// error envelope, so a failing setup says exactly what the gateway objected to.
type apiError struct {
	Method, Path string
	HTTPStatus   int
	Env          envelope
	Body         string
}

// Error formats the failure with the envelope's code and message, or the raw
// body when the answer was not an envelope.
func (e *apiError) Error() string {
	if e.Env.Code != "" || e.Env.Message != "" {
		s := fmt.Sprintf("%s %s: HTTP %d code=%s message=%q", e.Method, e.Path, e.HTTPStatus, e.Env.Code, e.Env.Message)
		if e.Env.Field != "" {
			s += " field=" + e.Env.Field
		}
		if e.Env.RequestID != "" {
			s += " requestId=" + e.Env.RequestID
		}
		return s
	}
	return fmt.Sprintf("%s %s: HTTP %d body=%q", e.Method, e.Path, e.HTTPStatus, truncate(e.Body, 300))
}

// truncate shortens s to n bytes for error messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// api talks to one gateway: the operator API with a bearer token and the
// signed merchant GETs used by the checks.
type api struct {
	base   string
	token  string
	client *http.Client
}

// newAPI builds a client for base with its own connection pool, separate from
// the load clients so setup and checks never compete with the measured load.
func newAPI(base, token string) *api {
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	return &api{base: strings.TrimRight(base, "/"), token: token, client: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// do sends one request and decodes the envelope's data into out (when not
// nil). Any non-2xx answer becomes an *apiError.
func (a *api) do(ctx context.Context, method, path string, body []byte, hdr http.Header, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	var env envelope
	jerr := json.Unmarshal(raw, &env)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &apiError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Env: env, Body: string(raw)}
	}
	if jerr != nil {
		return fmt.Errorf("%s %s: HTTP %d but body is not an envelope: %v (%q)", method, path, resp.StatusCode, jerr, truncate(string(raw), 300))
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return fmt.Errorf("%s %s: decode data: %v (%q)", method, path, err, truncate(string(env.Data), 300))
		}
	}
	return nil
}

// ops performs an operator call with a JSON body (docs/operator-api.md "Requests and responses").
func (a *api) ops(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	return a.do(ctx, method, path, body, h, out)
}

// merchantGet performs a signed merchant GET; the signature covers the raw
// query string exactly as sent (empty when there is none), per docs/merchant-api.md "Authentication".
func (a *api) merchantGet(ctx context.Context, s site, path, rawQuery string, out any) error {
	h := http.Header{}
	h.Set("appKey", s.AppKey)
	h.Set("sign", sign(s.Secret, rawQuery))
	full := path
	if rawQuery != "" {
		full += "?" + rawQuery
	}
	return a.do(ctx, http.MethodGet, full, nil, h, out)
}

// site is a merchant site created for the run (or the fixed refgw identity).
type site struct {
	ID     string `json:"id"`
	AppKey string `json:"appKey"`
	Secret string `json:"secret"`
}

// method is the part of a created method the load needs.
type method struct {
	ID   string `json:"_id"`
	Code string `json:"code"`
}

// createMethod creates a PHONE method open for deposits and withdrawals with
// a random code, so repeated runs against one gateway never collide. It is
// scoped (docs/operator-api.md "Methods"): only the sites the load test
// creates offer it (useSite), so a run against a live gateway never shows
// it to a real merchant.
func (a *api) createMethod(ctx context.Context) (method, error) {
	code := "lt" + randomHex(4)
	in := map[string]any{
		"code":           code,
		"name":           map[string]string{"en": "Load Test", "ar": "اختبار التحميل", "ku": "تاقیکردنەوەی بار"},
		"identifierKind": "PHONE",
		"minAmount":      1000,
		"maxAmount":      100000000,
		"deposit":        true,
		"withdraw":       true,
		"accounts":       []map[string]string{{"accountName": "Load Test", "accountNumber": "07701234567"}},
		"scoped":         true,
	}
	var m method
	if err := a.ops(ctx, http.MethodPost, "/ops/v1/banks", in, &m); err != nil {
		return m, err
	}
	if m.ID == "" {
		return m, fmt.Errorf("POST /ops/v1/banks: response has no data._id")
	}
	if m.Code == "" {
		m.Code = code
	}
	return m, nil
}

// useMethod makes site id offer exactly method m (docs/operator-api.md
// "Methods of a site"): the scoped method is then the site's only one.
func (a *api) useMethod(ctx context.Context, id string, m method) error {
	in := map[string]any{"methods": []map[string]string{{"bank": m.ID}}}
	return a.ops(ctx, http.MethodPut, "/ops/v1/sites/"+id+"/methods", in, nil)
}

// createSites creates n sites offering method m, with 16 concurrent
// workers (a thousand sites one by one would dominate a short run) and,
// when seed > 0, credits each site's treasury with seed so withdrawals are
// covered.
func (a *api) createSites(ctx context.Context, prefix string, n int, m method, seed int64) ([]site, error) {
	sites := make([]site, n)
	errs := make([]error, n)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Go(func() {
			for k := range jobs {
				errs[k] = a.createSite(ctx, fmt.Sprintf("%s-%d", prefix, k), m, seed, &sites[k])
			}
		})
	}
	for k := 0; k < n; k++ {
		if ctx.Err() != nil {
			break
		}
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return sites, nil
}

// createSite creates one site offering method m and optionally seeds its
// treasury.
func (a *api) createSite(ctx context.Context, name string, m method, seed int64, out *site) error {
	if err := a.ops(ctx, http.MethodPost, "/ops/v1/sites", map[string]any{"name": name}, out); err != nil {
		return err
	}
	if out.ID == "" || out.AppKey == "" || out.Secret == "" {
		return fmt.Errorf("POST /ops/v1/sites: response lacks id, appKey or secret")
	}
	if err := a.useMethod(ctx, out.ID, m); err != nil {
		return err
	}
	if seed > 0 {
		in := map[string]any{"amount": seed, "reason": "load test"}
		if err := a.ops(ctx, http.MethodPost, "/ops/v1/sites/"+out.ID+"/adjustments", in, nil); err != nil {
			return err
		}
	}
	return nil
}
