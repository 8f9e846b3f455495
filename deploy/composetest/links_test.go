package composetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// checkHostedLinks creates a site with hosted pages (apart from the fault
// test's site, whose listing must hold only the drivers' transactions) and
// a deposit through each gateway, and follows each deposit's link: it
// must start with gateway-1's published address, which deploy/build wrote
// into the env file as GATEWAY_PUBLIC_URL from GATEWAY_1_PORT, and open
// the page (README.md "Run as a cluster"). A link to 127.0.0.1:8080 while
// the gateways are published elsewhere opens nothing.
func checkHostedLinks(t *testing.T, s *stack, gws []*gateway) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := s.gatewayURL("gateway-1")
	if got := s.settings["GATEWAY_PUBLIC_URL"]; got != base {
		t.Errorf("GATEWAY_PUBLIC_URL in the env file deploy/build completed is %q, want gateway-1's published %q", got, base)
	}
	var st site
	e, err := gws[0].ops(ctx, "POST", "/ops/v1/sites", map[string]any{"name": "Link test", "hostedPage": true}, "link-site")
	if err == nil && e.Status == 200 {
		err = decode(e, &st)
	}
	if err != nil || e.Status != 200 {
		t.Fatalf("hosted links: create the site: %s", answer(e, err))
	}
	e, err = gws[0].ops(ctx, "PUT", "/ops/v1/sites/"+st.ID+"/methods", map[string]any{"methods": []map[string]any{{"bank": "ZAINCASH"}}}, "")
	if err != nil || e.Status != 200 {
		t.Fatalf("hosted links: set the site's methods: %s", answer(e, err))
	}
	for i, g := range gws {
		form := url.Values{"bankId": {"ZAINCASH"}, "processId": {fmt.Sprintf("link-%d", i)}, "amount": {"25000"},
			"userId": {fmt.Sprintf("link-user-%d", i)}, "userName": {"user"}, "name": {"Link Test"}}
		e, err := g.merchant(ctx, st, "POST", "/v1/transactions/deposit", form)
		if err != nil || e.Status != 200 {
			t.Errorf("hosted links: create a deposit through %s: %s", g.name, answer(e, err))
			continue
		}
		var dep struct {
			URL *string `json:"url"`
		}
		if err := json.Unmarshal(e.Data, &dep); err != nil || dep.URL == nil {
			t.Errorf("hosted links: the deposit created through %s has no url: %s (%v)", g.name, e.Data, err)
			continue
		}
		if !strings.HasPrefix(*dep.URL, base+"/pay/") {
			t.Errorf("hosted links: the deposit created through %s links to %s, not to gateway-1's published %s", g.name, *dep.URL, base)
			continue
		}
		status, ctype, err := get(ctx, *dep.URL)
		if err != nil || status != http.StatusOK || !strings.HasPrefix(ctype, "text/html") {
			t.Errorf("hosted links: GET %s (made through %s): %d %s %v, want 200 text/html", *dep.URL, g.name, status, ctype, err)
		}
	}
}

// get fetches u and returns its status and content type.
func get(ctx context.Context, u string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	c := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), nil
}
