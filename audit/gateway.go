package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Gateway asks a running gateway's operator API for each site's treasury
// (GET {URL}/ops/v1/sites/{id}, data.treasury) so the audit can compare it
// with the replay. The comparison is exact only while no command is being
// written: run it against a quiet gateway.
type Gateway struct {
	// URL is the gateway's base URL, e.g. http://127.0.0.1:8080.
	URL string
	// Token is the operator bearer token.
	Token string
	// Client defaults to one with a 15 s timeout.
	Client *http.Client
}

// Treasury is a site's treasury as the operator API shows it.
type Treasury struct {
	Balance            int64 `json:"balance"`
	PendingWithdrawals int64 `json:"pendingWithdrawals"`
}

// Treasury fetches site id's treasury.
func (g *Gateway) Treasury(ctx context.Context, id string) (Treasury, error) {
	c := g.Client
	if c == nil {
		c = &http.Client{Timeout: 15 * time.Second}
	}
	u := strings.TrimRight(g.URL, "/") + "/ops/v1/sites/" + url.PathEscape(id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Treasury{}, err
	}
	req.Header.Set("Authorization", "Bearer "+g.Token)
	resp, err := c.Do(req)
	if err != nil {
		return Treasury{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Treasury{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Treasury{}, fmt.Errorf("GET %s: HTTP %d: %.200s", u, resp.StatusCode, body)
	}
	var env struct {
		Data struct {
			Treasury *Treasury `json:"treasury"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return Treasury{}, fmt.Errorf("GET %s: %w", u, err)
	}
	if env.Data.Treasury == nil {
		return Treasury{}, fmt.Errorf("GET %s: no data.treasury in the answer", u)
	}
	return *env.Data.Treasury, nil
}

// compare adds a gateway check to every site of the report.
func (g *Gateway) compare(ctx context.Context, rep *Report) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range rep.Sites {
		s := &rep.Sites[i]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var p problems
			t, err := g.Treasury(ctx, s.ID)
			if err != nil {
				p.addf(nil, "", "%v", err)
			} else {
				if t.Balance != s.Balance {
					p.addf(nil, "", "the gateway shows balance %d, the replay %d", t.Balance, s.Balance)
				}
				if t.PendingWithdrawals != s.PendingWithdrawals {
					p.addf(nil, "", "the gateway shows pending withdrawals %d, the replay %d", t.PendingWithdrawals, s.PendingWithdrawals)
				}
			}
			s.Checks = append(s.Checks, p.check(CheckGateway, "GET /ops/v1/sites/"+s.ID+" treasury"))
		}()
	}
	wg.Wait()
}
