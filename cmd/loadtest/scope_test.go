package main

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildGateway builds the gateway binary into a temp directory.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/iqdgateway/gateway/cmd/gateway").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestURLRunLeavesOtherSitesAlone: a -url run against a gateway that has
// a merchant of its own leaves no method that merchant can see or use,
// and says what it created.
func TestURLRunLeavesOtherSitesAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	o := testOptions("deposit")
	o.gateway = buildGateway(t)
	ctx := context.Background()
	rr := &RunReport{}
	g, base, token, err := spawnGateway(ctx, o, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := g.end("term", 1, rr); err != nil {
			t.Error(err)
		}
	}()
	a := newAPI(base, token)
	var merchant site
	if err := a.ops(ctx, "POST", "/ops/v1/sites", map[string]any{"name": "A real shop"}, &merchant); err != nil {
		t.Fatal(err)
	}
	codes := func(s site) []string {
		var banks []struct {
			Code string `json:"code"`
		}
		if err := a.merchantGet(ctx, s, "/v1/banks", "", &banks); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, b := range banks {
			out = append(out, b.Code)
		}
		return out
	}
	before := codes(merchant)

	o.gateway, o.url, o.adminToken, o.n, o.sites = "", base, token, 200, 3
	run, err := runOnce(ctx, o, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Failures) != 0 || run.Gateway == nil || run.Gateway.OK != 200 {
		t.Fatalf("failures %v report %+v", run.Failures, run.Gateway)
	}

	var methods struct {
		Items []struct {
			Code   string `json:"code"`
			Scoped bool   `json:"scoped"`
		} `json:"items"`
	}
	if err := a.ops(ctx, "GET", "/ops/v1/banks", nil, &methods); err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, m := range methods.Items {
		if strings.HasPrefix(m.Code, "lt") {
			made = append(made, m.Code)
			if !m.Scoped {
				t.Errorf("the load test's method %s is not scoped", m.Code)
			}
		}
	}
	if len(made) != 1 {
		t.Fatalf("the load test made methods %v, want one", made)
	}
	if after := codes(merchant); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("the merchant's methods were %v and are %v after the load test", before, after)
	}
	body := buildBody("deposit", "shop", made[0], 1)
	h := http.Header{}
	h.Set("appKey", merchant.AppKey)
	h.Set("sign", sign(merchant.Secret, body))
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	err = a.do(ctx, "POST", "/v1/transactions/deposit", []byte(body), h, nil)
	if e, ok := err.(*apiError); !ok || e.Env.Code != "unknown_bank" {
		t.Fatalf("a deposit of the merchant with the load test's method: %v, want unknown_bank", err)
	}
}
