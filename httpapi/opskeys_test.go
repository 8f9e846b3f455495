package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bodies of the keyed operator writes, as exact bytes: the request hash is
// taken over them.
const (
	keyedSiteBody = `{"name":"Keyed Shop","negativeLimit":-5000,"callbackUrl":"https://shop.example/cb","ipAllowlist":["127.0.0.1"]}`
	keyedBankBody = `{"code":"KEYEDPAY","name":{"en":"Keyed Pay","ar":"ك","ku":"ک"},"identifierKind":"PHONE","minAmount":1000,` +
		`"maxAmount":500000,"deposit":true,"withdraw":true,"accounts":[{"accountName":"Store","accountNumber":"07801234567"}]}`
	keyedAdjustBody = `{"amount":250000,"reason":"top-up"}`
)

// keyed posts body to an operator path as the admin, with Idempotency-Key
// key when key is not nil.
func (s *stack) keyed(t testing.TB, path string, key *string, body string) resp {
	t.Helper()
	hdr := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	if key != nil {
		hdr["Idempotency-Key"] = *key
	}
	return s.send(t, http.MethodPost, path, body, hdr)
}

// raw returns a GET's data as bytes, to compare listings exactly.
func (s *stack) raw(t testing.TB, path string) string {
	t.Helper()
	r := s.opsT(t, http.MethodGet, path, nil)
	requireOK(t, r)
	return string(r.Data)
}

func keyOf(s string) *string { return &s }

// keyedCall is one operator write with a key: the path it goes to and its
// body, a second body for the same key, and the listing that must show
// exactly one effect.
type keyedCall struct {
	name    string
	path    func(st site) string
	body    string
	other   string
	listing func(s *stack, st site) string
}

func keyedCalls() []keyedCall {
	return []keyedCall{
		{"site", func(site) string { return "/ops/v1/sites" }, keyedSiteBody,
			strings.Replace(keyedSiteBody, "Keyed Shop", "Other Shop", 1),
			func(s *stack, _ site) string { return s.raw(s.t, "/ops/v1/sites") }},
		{"method", func(site) string { return "/ops/v1/banks" }, keyedBankBody,
			strings.Replace(keyedBankBody, `"maxAmount":500000`, `"maxAmount":600000`, 1),
			func(s *stack, _ site) string { return s.raw(s.t, "/ops/v1/banks") }},
		{"adjustment", func(st site) string { return "/ops/v1/sites/" + st.ID + "/adjustments" }, keyedAdjustBody,
			`{"amount":250001,"reason":"top-up"}`,
			func(s *stack, st site) string {
				return s.raw(s.t, "/ops/v1/sites/"+st.ID) + s.raw(s.t, "/ops/v1/sites/"+st.ID+"/events?limit=1000")
			}},
	}
}

func TestOpsIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	st := s.newSite(nil, 1_000_000)
	for _, c := range keyedCalls() {
		t.Run(c.name, func(t *testing.T) {
			key := keyOf("retry-" + c.name)
			first := s.keyed(t, c.path(st), key, c.body)
			requireOK(t, first)
			after := c.listing(s, st)

			t.Run("a repeat answers the first answer and writes nothing", func(t *testing.T) {
				for i := 0; i < 3; i++ {
					again := s.keyed(t, c.path(st), key, c.body)
					requireOK(t, again)
					assert.Equal(t, string(first.Data), string(again.Data))
				}
				assert.Equal(t, after, c.listing(s, st))
			})
			t.Run("another body is a conflict and writes nothing", func(t *testing.T) {
				for _, body := range []string{c.other, " " + c.body, c.body + "\n", strings.Replace(c.body, ":", ": ", 1)} {
					r := s.keyed(t, c.path(st), key, body)
					requireErr(t, r, 409, "idempotency_key_conflict", "Idempotency-Key")
					assert.Contains(t, r.Message, "different body")
				}
				assert.Equal(t, after, c.listing(s, st))
			})
			t.Run("an invalid key is refused and writes nothing", func(t *testing.T) {
				for _, bad := range []string{"", strings.Repeat("k", 256), "a\tb", "ключ", "caf\xc3\xa9"} {
					r := s.keyed(t, c.path(st), &bad, c.other)
					requireErr(t, r, 400, "invalid_request", "Idempotency-Key")
				}
				req, err := http.NewRequest(http.MethodPost, s.URL+c.path(st), strings.NewReader(c.other))
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer "+adminToken)
				req.Header.Add("Idempotency-Key", "one")
				req.Header.Add("Idempotency-Key", "two")
				requireErr(t, do(t, req), 400, "invalid_request", "Idempotency-Key")
				assert.Equal(t, after, c.listing(s, st))
			})
		})
	}

	t.Run("keys of 1 to 255 printable characters", func(t *testing.T) {
		for _, key := range []string{"k", strings.Repeat("k", 255), `~ !"#$%&'()*+,-./:;<=>?@[\]^_{|}` + "`"} {
			r := s.keyed(t, "/ops/v1/sites/"+st.ID+"/adjustments", &key, keyedAdjustBody)
			requireOK(t, r)
			assert.Equal(t, string(r.Data), string(s.keyed(t, "/ops/v1/sites/"+st.ID+"/adjustments", &key, keyedAdjustBody).Data))
		}
	})
	t.Run("without a key, two posts are two effects", func(t *testing.T) {
		site := func() site {
			var v site
			r := s.keyed(t, "/ops/v1/sites", nil, keyedSiteBody)
			r.decode(t, &v)
			return v
		}
		a, b := site(), site()
		assert.NotEqual(t, a.ID, b.ID)
		assert.NotEqual(t, a.Secret, b.Secret)
		bal := s.balanceOf(t, st).Balance
		requireOK(t, s.keyed(t, "/ops/v1/sites/"+st.ID+"/adjustments", nil, keyedAdjustBody))
		requireOK(t, s.keyed(t, "/ops/v1/sites/"+st.ID+"/adjustments", nil, keyedAdjustBody))
		assert.Equal(t, bal+2*250000, s.balanceOf(t, st).Balance)
		n := len(s.raw(t, "/ops/v1/banks"))
		requireOK(t, s.keyed(t, "/ops/v1/banks", nil, strings.Replace(keyedBankBody, "KEYEDPAY", "PLAIN1", 1)))
		requireOK(t, s.keyed(t, "/ops/v1/banks", nil, strings.Replace(keyedBankBody, "KEYEDPAY", "PLAIN2", 1)))
		assert.Greater(t, len(s.raw(t, "/ops/v1/banks")), n)
		// A method's code is still taken once, keyed or not.
		requireErr(t, s.keyed(t, "/ops/v1/banks", nil, keyedBankBody), 409, "conflict", "code")
		requireErr(t, s.keyed(t, "/ops/v1/banks", keyOf("another key"), keyedBankBody), 409, "conflict", "code")
	})
}

// The first answer stays the answer: a keyed site shows the secrets it was
// created with after they were rotated, a method as it was created, an
// adjustment the balance right after it; and the answered secrets work.
func TestOpsIdempotencyKey_firstAnswerStays(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 1_000_000)

	r := s.keyed(t, "/ops/v1/sites", keyOf("site-1"), keyedSiteBody)
	requireOK(t, r)
	var created site
	r.decode(t, &created)
	siteAnswer := string(r.Data)
	requireOK(t, s.opsT(t, "PATCH", "/ops/v1/sites/"+created.ID, map[string]any{"name": "Renamed"}))
	requireOK(t, s.opsT(t, "POST", "/ops/v1/sites/"+created.ID+"/webhook-secret", map[string]any{"overlapSeconds": 0}))

	r = s.keyed(t, "/ops/v1/banks", keyOf("bank-1"), keyedBankBody)
	requireOK(t, r)
	bankAnswer := string(r.Data)
	var bk bank
	r.decode(t, &bk)
	requireOK(t, s.opsT(t, "PATCH", "/ops/v1/banks/"+bk.ID, map[string]any{"maxAmount": 900000, "enabled": false}))

	path := "/ops/v1/sites/" + st.ID + "/adjustments"
	r = s.keyed(t, path, keyOf("adj-1"), keyedAdjustBody)
	requireOK(t, r)
	adjustAnswer := string(r.Data)
	var b balance
	r.decode(t, &b)
	assert.Equal(t, balance{Balance: 1_250_000, Available: 1_250_000, Currency: "IQD"}, b)
	requireOK(t, s.opsT(t, "POST", path, map[string]any{"amount": -1000, "reason": "fee"}))
	requireOK(t, s.post(st, pathWithdraw, withdrawForm("QICARD", "w-1", "u1", 30000, "6375000012345678")))

	assert.Equal(t, siteAnswer, string(s.keyed(t, "/ops/v1/sites", keyOf("site-1"), keyedSiteBody).Data))
	assert.Equal(t, bankAnswer, string(s.keyed(t, "/ops/v1/banks", keyOf("bank-1"), keyedBankBody).Data))
	assert.Equal(t, adjustAnswer, string(s.keyed(t, path, keyOf("adj-1"), keyedAdjustBody).Data))
	now := s.balanceOf(t, st)
	assert.Equal(t, int64(1_249_000), now.Balance)
	assert.Equal(t, int64(30000), now.PendingWithdrawals)

	// The site answered is the site created: its appKey and secret sign
	// merchant requests (the allowlist admits the test client).
	requireOK(t, s.balanceOfRaw(t, created))
	assert.Contains(t, siteAnswer, `"name":"Keyed Shop"`)
	assert.Contains(t, s.raw(t, "/ops/v1/sites/"+created.ID), `"name":"Renamed"`)
	// The same key on another site is another adjustment.
	other := s.newSite(nil, 0)
	r = s.keyed(t, "/ops/v1/sites/"+other.ID+"/adjustments", keyOf("adj-1"), keyedAdjustBody)
	requireOK(t, r)
	assert.Equal(t, int64(250000), s.balanceOf(t, other).Balance)
	// A key on a site that does not exist writes nothing.
	requireErr(t, s.keyed(t, "/ops/v1/sites/snosuchsite/adjustments", keyOf("adj-1"), keyedAdjustBody), 404, "not_found", "")
}

// balanceOfRaw is GET /v1/balance signed with the site's credentials.
func (s *stack) balanceOfRaw(t testing.TB, st site) resp {
	t.Helper()
	return s.getT(t, st, "/v1/balance", "")
}

// keyedAnswer is one concurrent keyed call's outcome, collected without
// testing calls off the test goroutine.
type keyedAnswer struct {
	http int
	env  struct {
		Data   json.RawMessage `json:"data"`
		Status int             `json:"status"`
		Code   string          `json:"code"`
	}
	err error
}

// concurrentlyKeyed posts body with key to path on stacks[i%len(stacks)],
// n times, all released at once.
func concurrentlyKeyed(stacks []*stack, n int, path, key, body string) []keyedAnswer {
	out := make([]keyedAnswer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a := &out[i]
			req, err := http.NewRequest(http.MethodPost, stacks[i%len(stacks)].URL+path, strings.NewReader(body))
			if err != nil {
				a.err = err
				return
			}
			req.Header.Set("Authorization", "Bearer "+adminToken)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			<-start
			res, err := raceClient.Do(req)
			if err != nil {
				a.err = err
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			if err != nil {
				a.err = err
				return
			}
			a.http = res.StatusCode
			a.err = json.Unmarshal(b, &a.env)
		}(i)
	}
	close(start)
	wg.Wait()
	return out
}

// TestOpsIdempotencyKey_race: the same keyed request sent at once, many
// times, to two gateway stacks on one NATS server makes one site, one
// method and one adjustment, and every answer is the same. A stack started
// afterwards, and one started after the first ones stopped (from their
// snapshots), answer repeats the same way.
func TestOpsIdempotencyKey_race(t *testing.T) {
	e := newEnv(t)
	a := e.newStack(stackOptions{})
	b := e.newStack(stackOptions{})
	st := a.newSite(nil, 1_000_000)
	// b must know the site before it can adjust it.
	requireOK(t, b.opsT(t, "GET", "/ops/v1/sites/"+st.ID, nil))
	stacks := []*stack{a, b}
	const n = 24

	sitesBefore := len(a.Ledger.SiteIDs())
	banksBefore := len(a.Ledger.Catalog().Banks())
	answers := map[string]string{}
	for _, c := range keyedCalls() {
		got := concurrentlyKeyed(stacks, n, c.path(st), "race-"+c.name, c.body)
		for i, r := range got {
			require.NoError(t, r.err, "%s call %d", c.name, i)
			require.Equal(t, 200, r.http, "%s call %d: %s %s", c.name, i, r.env.Code, r.env.Data)
			require.Equal(t, string(got[0].env.Data), string(r.env.Data), "%s call %d answers differently", c.name, i)
		}
		answers[c.name] = string(got[0].env.Data)
	}

	// One effect each, as both stacks see it.
	for _, s := range stacks {
		require.NoError(t, s.Ledger.CatchUp(context.Background()))
		assert.Len(t, s.Ledger.SiteIDs(), sitesBefore+1)
		assert.Len(t, s.Ledger.Catalog().Banks(), banksBefore+1)
		assert.Equal(t, int64(1_250_000), s.balanceOf(t, st).Balance, "the treasury moved once")
	}
	keyedEvents := 0
	for _, it := range a.history(t, st.ID) {
		if it.Data["idempotencyKey"] == "race-adjustment" {
			keyedEvents++
			assert.Equal(t, "treasury.adjusted.v3", it.Name)
		}
	}
	assert.Equal(t, 1, keyedEvents)

	repeat := func(s *stack) {
		t.Helper()
		for _, c := range keyedCalls() {
			r := s.keyed(t, c.path(st), keyOf("race-"+c.name), c.body)
			requireOK(t, r)
			assert.Equal(t, answers[c.name], string(r.Data), c.name)
		}
	}
	// A process started now replays the stream.
	repeat(e.newStack(stackOptions{}))
	// One started after the others stopped starts from their snapshots.
	for _, s := range stacks {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, s.Ledger.Close(ctx))
		cancel()
	}
	c := e.newStack(stackOptions{})
	repeat(c)
	assert.Equal(t, int64(1_250_000), c.balanceOf(t, st).Balance)
	assert.Len(t, c.Ledger.SiteIDs(), sitesBefore+1)
}
