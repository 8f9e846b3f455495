package httpapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// dispatcherOptions give a stack a callback dispatcher (stackOptions).
type dispatcherOptions struct {
	// noRun creates the dispatcher without running it: it lists and
	// forwards resends, but never delivers.
	noRun bool
	// schedule replaces the retry delays (20 and 40 ms).
	schedule callbacks.Schedule
}

func (o dispatcherOptions) retries() callbacks.Schedule {
	if o.schedule != nil {
		return o.schedule
	}
	return callbacks.Schedule{20 * time.Millisecond, 40 * time.Millisecond}
}

// startDispatcher makes a dispatcher over the stack's store, ledger and
// records, on a NATS connection of its own, and runs it unless o.noRun.
// stop cancels Run, waits for it and closes the dispatcher; newStack calls
// it before the ledger closes.
func (e *env) startDispatcher(o dispatcherOptions, store *jsstore.Store, led *ledger.Ledger, reader *records.Reader,
	log *slog.Logger) (*callbacks.Dispatcher, func()) {
	t := e.t
	t.Helper()
	nc := e.srv.Conn("callbacks")
	ctx, cancel := context.WithCancel(context.Background())
	d, err := callbacks.New(ctx, callbacks.Config{Conn: nc, Store: store, Ledger: led, Records: reader, AllowPrivate: true,
		Schedule: o.retries(), LeaseTTL: time.Second,
		AckWait: 3 * time.Second, Logger: log})
	if err != nil {
		cancel()
		nc.Close()
		require.NoError(t, err)
	}
	done := make(chan struct{})
	if o.noRun {
		close(done)
	} else {
		go func() {
			defer close(done)
			_ = d.Run(ctx)
		}()
	}
	var once sync.Once
	return d, func() {
		once.Do(func() {
			cancel()
			<-done
			d.Close()
			nc.Close()
		})
	}
}

// delivery is a callback delivery as GET /ops/v1/callbacks lists it.
type delivery struct {
	EventID        string  `json:"eventId"`
	SiteID         string  `json:"siteId"`
	TransactionID  string  `json:"transactionId"`
	Type           string  `json:"type"`
	Status         string  `json:"status"`
	Attempts       int     `json:"attempts"`
	LastStatusCode *int    `json:"lastStatusCode"`
	LastError      *string `json:"lastError"`
	LastAttemptAt  *string `json:"lastAttemptAt"`
	NextAttemptAt  *string `json:"nextAttemptAt"`
	Resends        int     `json:"resends"`
	LastResendBy   string  `json:"lastResendBy"`
	UpdatedAt      string  `json:"updatedAt"`
}

// cbCall is one callback a receiver got.
type cbCall struct {
	ID, Timestamp, Signature string
	Body                     []byte
	Type                     string
	TxID                     string
}

// cbReceiver is a merchant's callback endpoint answering code (200 unless
// set), recording every request.
type cbReceiver struct {
	srv  *httptest.Server
	code atomic.Int32
	mu   sync.Mutex
	got  []cbCall
	// holdAt, when set, is the request (1-based) that is held open: it
	// is announced on held and answered with the code sent on release.
	holdAt  int
	held    chan struct{}
	release chan int
}

func newReceiver(t testing.TB, code int) *cbReceiver {
	t.Helper()
	r := &cbReceiver{}
	r.code.Store(int32(code))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var msg struct {
			Type string `json:"type"`
			Data struct {
				TransactionID string `json:"transactionId"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &msg)
		r.mu.Lock()
		r.got = append(r.got, cbCall{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
			Signature: req.Header.Get("webhook-signature"), Body: b, Type: msg.Type, TxID: msg.Data.TransactionID})
		hold := r.holdAt == len(r.got)
		r.mu.Unlock()
		if hold {
			r.held <- struct{}{}
			w.WriteHeader(<-r.release)
			return
		}
		w.WriteHeader(int(r.code.Load()))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// holding is newReceiver whose request number n is held open until the
// test answers it.
func holding(t testing.TB, code, n int) *cbReceiver {
	r := newReceiver(t, code)
	r.mu.Lock()
	r.holdAt, r.held, r.release = n, make(chan struct{}, 1), make(chan int, 1)
	r.mu.Unlock()
	return r
}

func (r *cbReceiver) url() string { return r.srv.URL + "/cb" }

// waitHeld waits until the request a holding receiver holds has come.
func (r *cbReceiver) waitHeld(t testing.TB) {
	t.Helper()
	select {
	case <-r.held:
	case <-time.After(testkit.WaitFor):
		t.Fatalf("attempt %d never came", r.holdAt)
	}
}

// calls returns the requests for transaction tx, in arrival order.
func (r *cbReceiver) calls(tx string) []cbCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []cbCall
	for _, c := range r.got {
		if c.TxID == tx {
			out = append(out, c)
		}
	}
	return out
}

// waitCalls waits until transaction tx's callback has been received n times.
func (r *cbReceiver) waitCalls(t testing.TB, tx string, n int) []cbCall {
	t.Helper()
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(r.calls(tx)) >= n }, "%d callbacks of %s", n, tx)
	return r.calls(tx)
}

// callbackPage is one page of GET /ops/v1/callbacks with token.
func (s *stack) callbackPage(t testing.TB, token, query string) page[delivery] {
	t.Helper()
	r := s.opsAs(t, token, "GET", "/ops/v1/callbacks"+query, nil)
	requireOK(t, r)
	var p page[delivery]
	r.decode(t, &p)
	require.NotNil(t, p.Items, "items must be a list: %s", r.Raw)
	return p
}

// findDelivery returns the listed delivery of event id.
func findDelivery(p page[delivery], id string) (delivery, bool) {
	for _, d := range p.Items {
		if d.EventID == id {
			return d, true
		}
	}
	return delivery{}, false
}

// waitDelivery waits until the listing with query shows event id in state
// status with at least resends resends, and returns it.
func (s *stack) waitDelivery(t testing.TB, query, id, status string, resends int) delivery {
	t.Helper()
	var d delivery
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		var ok bool
		d, ok = findDelivery(s.callbackPage(t, adminToken, query), id)
		return ok && d.Status == status && d.Resends >= resends
	}, "callback %s listed %s with %d resends by %q", id, status, resends, query)
	return d
}

// approvedDeposit creates a deposit on st and approves it as the admin.
func (s *stack) approvedDeposit(t testing.TB, st site) string {
	t.Helper()
	u := uniq()
	tx := rec(t, s.postT(t, st, pathDeposit, depositForm("ZAINCASH", "cb"+u, "u"+u, 5000))).TransactionID
	requireOK(t, s.opsT(t, "POST", "/ops/v1/deposits/"+tx+"/approve", nil))
	return tx
}

// eventID is the webhook id of the event name of transaction tx: its place
// in the stream, as the site's history shows it.
func (s *stack) eventID(t testing.TB, siteID, name, tx string) string {
	t.Helper()
	for _, it := range s.history(t, siteID) {
		if it.Name == name && it.Data["tx"] == tx {
			return fmt.Sprintf("%d-%d", it.Seq, it.Index)
		}
	}
	t.Fatalf("no %s event of %s in the history of %s", name, tx, siteID)
	return ""
}

func (s *stack) resend(t testing.TB, token, id string) resp {
	t.Helper()
	return s.opsAs(t, token, "POST", "/ops/v1/callbacks/"+id+"/resend", nil)
}

// callbackSite creates a site whose callbackUrl is url ("" for none).
func (s *stack) callbackSite(t testing.TB, url string) site {
	t.Helper()
	settings := map[string]any{"name": "Shop " + uniq()}
	if url != "" {
		settings["callbackUrl"] = url
	}
	return s.newSite(settings, 0)
}

// requireSigned checks a callback's Standard Webhooks signature with the
// site's webhook secret.
func requireSigned(t testing.TB, c cbCall, webhookSecret string) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(webhookSecret, "whsec_"))
	require.NoError(t, err)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(c.ID + "." + c.Timestamp + "." + string(c.Body)))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	require.Contains(t, strings.Fields(c.Signature), want, "webhook-signature %q", c.Signature)
}

func intPtr(n int) *int { return &n }

// TestCallbacks_listing: approved deposits reach the receiver and are
// listed, filtered and paged through GET /ops/v1/callbacks.
func TestCallbacks_listing(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 200)
	a := s.callbackSite(t, rcv.url())
	b := s.callbackSite(t, rcv.url())
	idle := s.callbackSite(t, rcv.url())
	auditor := s.newOperator(t, "Aya", "auditor")

	tx1 := s.approvedDeposit(t, a)
	got := rcv.waitCalls(t, tx1, 1)
	c := got[0]
	assert.Equal(t, "deposit.approved", c.Type)
	assert.Equal(t, s.eventID(t, a.ID, "deposit.approved.v1", tx1), c.ID, "webhook-id names the event's place in the stream")
	requireSigned(t, c, a.WebhookSecret)

	s.waitDelivery(t, "", c.ID, "delivered", 0)
	for _, tok := range []struct{ name, token string }{{"admin", adminToken}, {"auditor", auditor.Token}} {
		t.Run("listed for "+tok.name, func(t *testing.T) {
			r := s.opsAs(t, tok.token, "GET", "/ops/v1/callbacks", nil)
			requireOK(t, r)
			var p page[delivery]
			r.decode(t, &p)
			d, ok := findDelivery(p, c.ID)
			require.True(t, ok, "listing: %s", r.Raw)
			assert.Equal(t, "delivered", d.Status)
			assert.Equal(t, 1, d.Attempts)
			assert.Equal(t, intPtr(200), d.LastStatusCode)
			assert.Equal(t, tx1, d.TransactionID)
			assert.Equal(t, a.ID, d.SiteID)
			assert.Equal(t, "deposit.approved", d.Type)
			assert.Equal(t, 0, d.Resends)
			assert.Empty(t, d.LastResendBy)
			assert.Nil(t, d.NextAttemptAt)
			require.NotNil(t, d.LastAttemptAt)
			parseTime(t, *d.LastAttemptAt)
			parseTime(t, d.UpdatedAt)
		})
	}

	// More deliveries, in stream order: a, b, a.
	tx2 := s.approvedDeposit(t, a)
	tx3 := s.approvedDeposit(t, b)
	tx4 := s.approvedDeposit(t, a)
	var ids []string
	for _, tx := range []string{tx1, tx2, tx3, tx4} {
		id := rcv.waitCalls(t, tx, 1)[0].ID
		s.waitDelivery(t, "", id, "delivered", 0)
		ids = append(ids, id)
	}

	t.Run("filters", func(t *testing.T) {
		tests := []struct {
			query string
			want  []string
		}{
			{"", ids},
			{"?status=delivered", ids},
			{"?status=failed", nil},
			{"?status=pending", nil},
			{"?site=" + a.ID, []string{ids[0], ids[1], ids[3]}},
			{"?site=" + b.ID, []string{ids[2]}},
			{"?site=" + idle.ID, nil},
			{"?site=" + a.ID + "&status=delivered", []string{ids[0], ids[1], ids[3]}},
			{"?site=" + b.ID + "&status=failed", nil},
			{"?limit=1000", ids},
		}
		for _, tc := range tests {
			name := tc.query
			if name == "" {
				name = "no filter"
			}
			t.Run(name, func(t *testing.T) {
				r := s.opsT(t, "GET", "/ops/v1/callbacks"+tc.query, nil)
				requireOK(t, r)
				if len(tc.want) == 0 {
					require.JSONEq(t, `{"items":[],"nextCursor":null}`, string(r.Data))
					return
				}
				var p page[delivery]
				r.decode(t, &p)
				var gotIDs []string
				for _, d := range p.Items {
					gotIDs = append(gotIDs, d.EventID)
				}
				assert.Equal(t, tc.want, gotIDs)
				assert.Nil(t, p.NextCursor)
			})
		}
	})

	t.Run("invalid queries", func(t *testing.T) {
		tests := []struct{ query, field string }{
			{"?status=bogus", "status"},
			{"?status=DELIVERED", "status"},
			{"?limit=0", "limit"},
			{"?limit=x", "limit"},
			{"?limit=-1", "limit"},
			{"?limit=1001", "limit"},
			{"?cursor=garbage!", "cursor"},
			{"?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("hello")), "cursor"},
		}
		for _, tc := range tests {
			t.Run(tc.query, func(t *testing.T) {
				requireErr(t, s.opsT(t, "GET", "/ops/v1/callbacks"+tc.query, nil), 400, "invalid_request", tc.field)
			})
		}
	})

	t.Run("site that is no site id", func(t *testing.T) {
		for _, q := range []string{"?site=a.b", "?site=%2A", "?site=" + strings.Repeat("s", 200)} {
			r := s.opsT(t, "GET", "/ops/v1/callbacks"+q, nil)
			requireErr(t, r, 404, "not_found", "site")
			assert.Equal(t, "no such site", r.Message, q)
		}
	})

	t.Run("paging", func(t *testing.T) {
		tests := []struct {
			query string
			limit int
			want  []string
		}{
			{"", 1, ids},
			{"site=" + a.ID, 1, []string{ids[0], ids[1], ids[3]}},
			{"site=" + a.ID, 2, []string{ids[0], ids[1], ids[3]}},
			{"status=delivered", 3, ids},
		}
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s limit %d", tc.query, tc.limit), func(t *testing.T) {
				var gotIDs []string
				cursor := ""
				for pages := 0; ; pages++ {
					require.Less(t, pages, 10, "paging does not end")
					q := fmt.Sprintf("?%s&limit=%d", tc.query, tc.limit)
					if cursor != "" {
						q += "&cursor=" + url.QueryEscape(cursor)
					}
					p := s.callbackPage(t, auditor.Token, q)
					require.LessOrEqual(t, len(p.Items), tc.limit)
					for _, d := range p.Items {
						gotIDs = append(gotIDs, d.EventID)
					}
					if p.NextCursor == nil {
						break
					}
					require.Len(t, p.Items, tc.limit, "a page before the last is full")
					cursor = *p.NextCursor
				}
				assert.Equal(t, tc.want, gotIDs)
			})
		}
	})

	t.Run("cursor bound to its filters", func(t *testing.T) {
		first := func(query string) string {
			p := s.callbackPage(t, auditor.Token, "?"+query+"&limit=1")
			require.NotNil(t, p.NextCursor, "%s: a next page", query)
			return url.QueryEscape(*p.NextCursor)
		}
		ofA := first("site=" + a.ID)
		ofAll := first("")
		ofDelivered := first("status=delivered")
		listed := func(query string) []string {
			var out []string
			for _, d := range s.callbackPage(t, auditor.Token, "?"+query).Items {
				out = append(out, d.EventID)
			}
			return out
		}
		t.Run("taken with the filters it was issued for", func(t *testing.T) {
			// The page size is no filter; an empty filter is no filter.
			assert.Equal(t, []string{ids[1], ids[3]}, listed("site="+a.ID+"&limit=5&cursor="+ofA))
			assert.Equal(t, []string{ids[1], ids[3]}, listed("site="+a.ID+"&status=&cursor="+ofA))
			assert.Equal(t, ids[1:], listed("cursor="+ofAll))
			assert.Equal(t, ids[1:], listed("site=&cursor="+ofAll))
			assert.Equal(t, ids[1:], listed("status=delivered&cursor="+ofDelivered))
		})
		// Each would page through another listing from the middle: b's
		// delivery before a's second would be skipped, or the deliveries
		// of every site would follow a's.
		for _, tc := range []struct{ name, query string }{
			{"a's with b", "site=" + b.ID + "&cursor=" + ofA},
			{"a's without a site", "cursor=" + ofA},
			{"a's with a status", "site=" + a.ID + "&status=delivered&cursor=" + ofA},
			{"unfiltered with a site", "site=" + a.ID + "&cursor=" + ofAll},
			{"unfiltered with a status", "status=failed&cursor=" + ofAll},
			{"delivered without a status", "cursor=" + ofDelivered},
			{"delivered with a site", "site=" + b.ID + "&status=delivered&cursor=" + ofDelivered},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.opsAs(t, auditor.Token, "GET", "/ops/v1/callbacks?"+tc.query, nil)
				requireErr(t, r, 400, "invalid_request", "cursor")
				assert.Contains(t, r.Message, "other filters")
				assert.Contains(t, r.Message, "filters of the first page")
			})
		}
		t.Run("a cursor of the previous format is still taken", func(t *testing.T) {
			// It names a place in the stream and no filters: a listing
			// paged across an upgrade goes on with the filters it has.
			old := base64.RawURLEncoding.EncodeToString([]byte(ids[0]))
			assert.Equal(t, []string{ids[1], ids[3]}, listed("site="+a.ID+"&cursor="+old))
			assert.Equal(t, ids[1:], listed("cursor="+old))
			assert.Equal(t, []string{ids[2]}, listed("site="+b.ID+"&cursor="+old))
		})
	})
}

// TestCallbacks_parkedThenResent: a receiver that always fails gets the
// callback once and at each retry of the schedule, then it is parked as
// failed; an operator's resend delivers it with the same webhook-id.
func TestCallbacks_parkedThenResent(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 500)
	st := s.callbackSite(t, rcv.url())
	op := s.newOperator(t, "Omar", "operator")

	tx := s.approvedDeposit(t, st)
	id := rcv.waitCalls(t, tx, 1)[0].ID
	d := s.waitDelivery(t, "?status=failed", id, "failed", 0)
	assert.Equal(t, 3, d.Attempts, "one attempt and a retry after each delay of the schedule")
	assert.Equal(t, intPtr(500), d.LastStatusCode)
	require.NotNil(t, d.LastError)
	assert.NotEmpty(t, *d.LastError)
	assert.Nil(t, d.NextAttemptAt)
	assert.Equal(t, 0, d.Resends)
	assert.Equal(t, tx, d.TransactionID)
	assert.Equal(t, st.ID, d.SiteID)
	assert.Equal(t, "deposit.approved", d.Type)
	_, listed := findDelivery(s.callbackPage(t, adminToken, "?status=delivered"), id)
	assert.False(t, listed, "a parked callback is not listed as delivered")
	calls := rcv.calls(tx)
	require.Len(t, calls, 3)
	for _, c := range calls {
		assert.Equal(t, id, c.ID, "the same webhook-id on every retry")
	}

	t.Run("resend delivers it", func(t *testing.T) {
		rcv.code.Store(200)
		r := s.resend(t, op.Token, id)
		requireOK(t, r)
		var got delivery
		r.decode(t, &got)
		assert.Equal(t, id, got.EventID)
		assert.Equal(t, st.ID, got.SiteID)
		assert.Equal(t, tx, got.TransactionID)
		assert.Equal(t, "deposit.approved", got.Type)
		assert.Equal(t, 1, got.Resends)
		assert.Equal(t, op.ID, got.LastResendBy)
		assert.Contains(t, []string{"pending", "delivered"}, got.Status)

		calls := rcv.waitCalls(t, tx, 4)
		assert.Equal(t, id, calls[3].ID, "a resend keeps the webhook-id")
		assert.Equal(t, "deposit.approved", calls[3].Type)
		requireSigned(t, calls[3], st.WebhookSecret)
		d := s.waitDelivery(t, "?status=delivered", id, "delivered", 1)
		assert.Equal(t, 1, d.Attempts, "attempts count from the resend")
		assert.Equal(t, intPtr(200), d.LastStatusCode)
		assert.Equal(t, 1, d.Resends)
		assert.Equal(t, op.ID, d.LastResendBy)
		assert.Nil(t, d.NextAttemptAt)
		_, listed := findDelivery(s.callbackPage(t, adminToken, "?status=failed"), id)
		assert.False(t, listed, "no longer listed as failed")
		assert.Len(t, rcv.calls(tx), 4, "delivered once by the resend")
	})
}

// TestCallbacks_roles: listing needs the auditor role, resending the
// operator role; without a token both answer 401.
func TestCallbacks_roles(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 200)
	st := s.callbackSite(t, rcv.url())
	tx := s.approvedDeposit(t, st)
	id := rcv.waitCalls(t, tx, 1)[0].ID
	s.waitDelivery(t, "", id, "delivered", 0)

	t.Run("no token", func(t *testing.T) {
		for _, auth := range []string{"", "Bearer ", "Bearer wrong", "Bearer op_unknown"} {
			for _, call := range []struct{ method, path string }{
				{"GET", "/ops/v1/callbacks"}, {"POST", "/ops/v1/callbacks/" + id + "/resend"},
			} {
				hdr := map[string]string{}
				if auth != "" {
					hdr["Authorization"] = auth
				}
				r := s.send(t, call.method, call.path, "", hdr)
				requireErr(t, r, 401, "unauthorized", "")
				assert.NotEmpty(t, r.Header.Get("WWW-Authenticate"))
			}
		}
	})

	admin := s.newOperator(t, "Ada", "admin")
	operator := s.newOperator(t, "Omar", "operator")
	auditor := s.newOperator(t, "Aya", "auditor")
	tokens := []struct {
		name, token, actor string
		canResend          bool
	}{
		{"auditor", auditor.Token, auditor.ID, false},
		{"operator", operator.Token, operator.ID, true},
		{"admin", admin.Token, admin.ID, true},
		{"bootstrap admin", adminToken, httpapi.AdminActor, true},
	}
	resends := 0
	for _, tok := range tokens {
		t.Run("list as "+tok.name, func(t *testing.T) {
			_, ok := findDelivery(s.callbackPage(t, tok.token, ""), id)
			require.True(t, ok, "listed for the %s", tok.name)
		})
		if !tok.canResend {
			t.Run("resend as "+tok.name+" forbidden", func(t *testing.T) {
				before := len(rcv.calls(tx))
				r := s.resend(t, tok.token, id)
				requireErr(t, r, 403, "forbidden", "")
				assert.Contains(t, r.Message, "the operator role")
				time.Sleep(100 * time.Millisecond) // 2.5 times the schedule's longest delay
				assert.Len(t, rcv.calls(tx), before, "a forbidden resend sent the callback")
				d, _ := findDelivery(s.callbackPage(t, adminToken, ""), id)
				assert.Equal(t, resends, d.Resends, "a forbidden resend was recorded")
			})
			continue
		}
		t.Run("resend as "+tok.name, func(t *testing.T) {
			before := len(rcv.calls(tx))
			r := s.resend(t, tok.token, id)
			requireOK(t, r)
			resends++
			var d delivery
			r.decode(t, &d)
			assert.Equal(t, id, d.EventID)
			assert.Equal(t, resends, d.Resends)
			assert.Equal(t, tok.actor, d.LastResendBy)
			calls := rcv.waitCalls(t, tx, before+1)
			assert.Equal(t, id, calls[before].ID)
			d = s.waitDelivery(t, "", id, "delivered", resends)
			assert.Equal(t, resends, d.Resends)
			assert.Equal(t, tok.actor, d.LastResendBy)
		})
	}
}

// TestCallbacks_resendErrors: ids that name no callback event answer 404;
// an event of a site without callbackUrl answers 409; neither sends or
// records anything.
func TestCallbacks_resendErrors(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	s.seedBanks()
	rcv := newReceiver(t, 200)
	st := s.callbackSite(t, rcv.url())
	bare := s.callbackSite(t, "")
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")

	tx := s.approvedDeposit(t, st)
	approved := rcv.waitCalls(t, tx, 1)[0].ID
	s.waitDelivery(t, "", approved, "delivered", 0)
	requested := s.eventID(t, st.ID, "deposit.requested.v1", tx)
	seq, _, ok := callbacks.ParseWebhookID(approved)
	require.True(t, ok)
	bareTx := s.approvedDeposit(t, bare)
	bareID := s.eventID(t, bare.ID, "deposit.approved.v1", bareTx)

	tests := []struct {
		name   string
		id     string
		status int
		code   string
	}{
		{"unknown sequence", "999999-0", 404, "not_found"},
		{"malformed", "abc", 404, "not_found"},
		{"zero sequence", "0-0", 404, "not_found"},
		{"leading zero", "0" + approved, 404, "not_found"},
		{"index past the message", fmt.Sprintf("%d-7", seq), 404, "not_found"},
		{"not a final-state event", requested, 404, "not_found"},
		{"site without callbackUrl", bareID, 409, "invalid_transition"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := s.resend(t, adminToken, tc.id)
			requireErr(t, r, tc.status, tc.code, "eventId")
			want := fmt.Sprintf("%q is not the id of a callback event", tc.id)
			if tc.status == 409 {
				want = "the event's site has no callbackUrl"
			}
			assert.Equal(t, want, r.Message)
		})
	}
	// The body is read as strictly as every operator body's: empty or {}.
	for _, body := range []string{"xx", `{"foo":1}`, "[]", `{} {}`} {
		t.Run("body "+body, func(t *testing.T) {
			r := s.send(t, "POST", "/ops/v1/callbacks/"+approved+"/resend", body,
				map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
			requireErr(t, r, 400, "invalid_request", map[string]string{`{"foo":1}`: "foo"}[body])
		})
	}
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, rcv.calls(bareTx), "nothing sent for a site without callbackUrl")
	assert.Len(t, rcv.calls(tx), 1, "nothing sent again")
	require.JSONEq(t, `{"items":[],"nextCursor":null}`, string(s.opsT(t, "GET", "/ops/v1/callbacks?site="+bare.ID, nil).Data))
	// A well-formed id of no site is 404, not an empty list that reads
	// as "nothing failed".
	requireErr(t, s.ops("GET", "/ops/v1/callbacks?site=nosuchsite1234", nil), 404, "not_found", "site")
	p := s.callbackPage(t, adminToken, "")
	require.Len(t, p.Items, 1, "nothing recorded by the refused resends")
	assert.Equal(t, 0, p.Items[0].Resends)
}

// TestCallbacks_otherProcess: a gateway process whose dispatcher is not the
// active one lists from the shared state and forwards resends to the
// active one; with no active dispatcher anywhere a resend answers 503.
func TestCallbacks_otherProcess(t *testing.T) {
	e := newEnv(t)
	// The resend refused while no dispatcher runs.
	e.log.ExpectErrors("status=503 code=unavailable")
	passive := e.newStack(stackOptions{dispatcher: &dispatcherOptions{noRun: true}})
	passive.seedBanks()
	rcv := newReceiver(t, 200)
	st := passive.callbackSite(t, rcv.url())
	op := passive.newOperator(t, "Omar", "operator")
	tx := passive.approvedDeposit(t, st)
	id := passive.eventID(t, st.ID, "deposit.approved.v1", tx)

	require.JSONEq(t, `{"items":[],"nextCursor":null}`, string(passive.opsT(t, "GET", "/ops/v1/callbacks", nil).Data))
	r := passive.resend(t, op.Token, id)
	requireErr(t, r, 503, "unavailable", "")
	assert.Equal(t, "no callback dispatcher is running (a gateway with callbacks on, or 'gateway callbacks'); try again once one is", r.Message)
	assert.Empty(t, rcv.calls(tx))

	active := e.newStack(stackOptions{dispatcher: &dispatcherOptions{}})
	require.Equal(t, id, rcv.waitCalls(t, tx, 1)[0].ID, "the callback made while no dispatcher ran")
	passive.waitDelivery(t, "", id, "delivered", 0)
	require.False(t, passive.Callbacks.Active())

	t.Run("resend forwarded to the active dispatcher", func(t *testing.T) {
		r := passive.resend(t, op.Token, id)
		requireOK(t, r)
		var d delivery
		r.decode(t, &d)
		assert.Equal(t, 1, d.Resends)
		assert.Equal(t, op.ID, d.LastResendBy)
		assert.Equal(t, id, rcv.waitCalls(t, tx, 2)[1].ID)
		for _, s := range []*stack{active, passive} {
			d = s.waitDelivery(t, "", id, "delivered", 1)
			assert.Equal(t, op.ID, d.LastResendBy)
		}
	})
}

// TestCallbacks_withoutDispatcher: a gateway configured without a
// dispatcher has no callback routes.
func TestCallbacks_withoutDispatcher(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	requireErr(t, s.opsT(t, "GET", "/ops/v1/callbacks", nil), 404, "not_found", "")
	requireErr(t, s.opsT(t, "GET", "/ops/v1/callbacks?status=failed", nil), 404, "not_found", "")
	requireErr(t, s.opsT(t, "POST", "/ops/v1/callbacks/1-0/resend", nil), 404, "not_found", "")
	requireErr(t, s.send(t, "GET", "/ops/v1/callbacks", "", nil), 401, "unauthorized", "")
}

// TestCallbacks_resendWhileWaiting: a resend of a callback waiting for its
// retry is recorded (who, how many) and delivered now, and the record then
// describes that delivery alone.
func TestCallbacks_resendWhileWaiting(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{schedule: callbacks.Schedule{time.Hour}}})
	s.seedBanks()
	rcv := newReceiver(t, 500)
	st := s.callbackSite(t, rcv.url())
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")
	tx := s.approvedDeposit(t, st)
	id := rcv.waitCalls(t, tx, 1)[0].ID
	waiting := s.waitDelivery(t, "", id, "pending", 0)
	require.Equal(t, 500, *waiting.LastStatusCode)
	require.NotNil(t, waiting.NextAttemptAt)

	rcv.code.Store(204)
	op := s.newOperator(t, "Omar Operator", "operator")
	r := s.opsAs(t, op.Token, "POST", "/ops/v1/callbacks/"+id+"/resend", nil)
	requireOK(t, r)
	var answer delivery
	r.decode(t, &answer)
	require.Equal(t, 1, answer.Resends, "the answer counts the resend")
	require.Equal(t, op.ID, answer.LastResendBy)
	next, err := time.Parse(time.RFC3339, *answer.NextAttemptAt)
	require.NoError(t, err)
	require.Less(t, time.Until(next), time.Minute, "due now, not at the retry an hour away")

	calls := rcv.waitCalls(t, tx, 2)
	require.Equal(t, id, calls[1].ID)
	done := s.waitDelivery(t, "", id, "delivered", 1)
	require.Equal(t, 1, done.Resends)
	require.Equal(t, op.ID, done.LastResendBy)
	require.Equal(t, 204, *done.LastStatusCode)
	require.Nil(t, done.LastError, "no error beside a 204")
	require.Equal(t, 2, done.Attempts)
}

// TestCallbacks_resendDuringAttempt: a resend that arrives while an attempt
// is under way is answered pending, due now, and an attempt follows it
// whatever the attempt under way does: the schedule's last one failing
// (which used to park the delivery as failed with the resend forgotten),
// or succeeding, first attempt or not.
func TestCallbacks_resendDuringAttempt(t *testing.T) {
	for _, c := range []struct {
		name   string
		held   int // the attempt the resend arrives during
		answer int // that attempt's answer
	}{
		{"the schedule's last attempt fails", 2, 500},
		{"a retry succeeds", 2, 204},
		{"the first attempt succeeds", 1, 204},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{schedule: callbacks.Schedule{20 * time.Millisecond}}})
			s.seedBanks()
			rcv := holding(t, 500, c.held)
			st := s.callbackSite(t, rcv.url())
			testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")
			tx := s.approvedDeposit(t, st)
			rcv.waitHeld(t)
			id := rcv.calls(tx)[0].ID
			op := s.newOperator(t, "Omar Operator", "operator")
			r := s.opsAs(t, op.Token, "POST", "/ops/v1/callbacks/"+id+"/resend", nil)
			requireOK(t, r)
			var answer delivery
			r.decode(t, &answer)
			require.Equal(t, "pending", answer.Status)
			require.Equal(t, 1, answer.Resends)

			rcv.code.Store(204)
			rcv.release <- c.answer
			calls := rcv.waitCalls(t, tx, c.held+1)
			require.Equal(t, id, calls[c.held].ID, "the attempt after the resend")
			done := s.waitDelivery(t, "", id, "delivered", 1)
			require.Equal(t, op.ID, done.LastResendBy)
			require.Equal(t, 204, *done.LastStatusCode)
		})
	}
}

// TestCallbackRetry_hashAfterRotation: a callback retried after the
// site's secret was rotated carries the record's hash made with the new
// secret, as a lookup shows it (docs/callbacks.md "Payload"), with the
// same webhook-id.
func TestCallbackRetry_hashAfterRotation(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{schedule: callbacks.Schedule{20 * time.Millisecond}}})
	s.seedBanks()
	rcv := holding(t, 500, 1)
	st := s.callbackSite(t, rcv.url())
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")
	tx := s.approvedDeposit(t, st)
	rcv.waitHeld(t)
	rotated, _ := rotate(t, s, st, map[string]any{"overlapSeconds": 0})
	rcv.code.Store(200)
	rcv.release <- 500
	calls := rcv.waitCalls(t, tx, 2)
	bankID, first := callbackHash(t, calls[0].Body)
	_, retry := callbackHash(t, calls[1].Body)
	assert.Equal(t, responseHash(st.Secret, tx, bankID, 5000), first, "the first attempt, before the rotation")
	assert.Equal(t, calls[0].ID, calls[1].ID)
	assert.Equal(t, responseHash(rotated.Secret, tx, bankID, 5000), retry, "the retry, after it")
	assert.Equal(t, rec(t, s.get(rotated, "/v1/transactions/"+tx, "")).Hash, retry,
		"the hash a lookup shows")
}

// callbackHash returns the bankId and hash of a callback body's record.
func callbackHash(t testing.TB, b []byte) (bankID, hash string) {
	t.Helper()
	var body struct {
		Data struct {
			BankID string `json:"bankId"`
			Hash   string `json:"hash"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(b, &body))
	return body.Data.BankID, body.Data.Hash
}

// TestCallbackHash_duringOverlap: while a rotated signing secret's overlap
// lasts, a callback's record is hashed with the previous secret, which the
// merchant holds whether or not it has taken the new one; a stream's with
// the secret that signed the stream's request; once the overlap is over,
// a retry carries the current secret's hash (docs/callbacks.md "Payload").
func TestCallbackHash_duringOverlap(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{schedule: callbacks.Schedule{20 * time.Millisecond}}})
	s.seedBanks()
	rcv := holding(t, 200, 2)
	old := s.callbackSite(t, rcv.url())
	testkit.Eventually(t, testkit.WaitFor, s.Callbacks.Active, "the dispatcher is active")
	cur, _ := rotate(t, s, old, map[string]any{"overlapSeconds": 3600})
	streams := map[string]*sseStream{"old": s.openStream(t, old, "", nil), "new": s.openStream(t, cur, "", nil)}
	for _, ss := range streams {
		ss.next() // its position
	}
	tx := s.approvedDeposit(t, old)
	first := rcv.waitCalls(t, tx, 1)[0]
	bankID, h := callbackHash(t, first.Body)
	assert.Equal(t, responseHash(old.Secret, tx, bankID, 5000), h, "a delivery during the overlap: the previous secret")
	for name, ss := range streams {
		ev := ss.next()
		var se struct {
			Body json.RawMessage `json:"body"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &se))
		_, h := callbackHash(t, se.Body)
		secret := map[string]string{"old": old.Secret, "new": cur.Secret}[name]
		assert.Equal(t, responseHash(secret, tx, bankID, 5000), h, "a stream signed with the %s secret", name)
	}

	// A second deposit's first attempt is held; the overlap ends (a
	// rotation without overlap retires the previous secret at once) and
	// its retry is hashed with the secret current then.
	rcv.code.Store(500)
	tx2 := s.approvedDeposit(t, old)
	rcv.waitHeld(t)
	third, _ := rotate(t, s, cur, map[string]any{"overlapSeconds": 0})
	rcv.code.Store(200)
	rcv.release <- 500
	calls := rcv.waitCalls(t, tx2, 2)
	_, h1 := callbackHash(t, calls[0].Body)
	_, h2 := callbackHash(t, calls[1].Body)
	assert.Equal(t, responseHash(old.Secret, tx2, bankID, 5000), h1, "the first attempt, during the first overlap")
	assert.Equal(t, responseHash(third.Secret, tx2, bankID, 5000), h2, "the retry, with no overlap left")
	assert.Equal(t, calls[0].ID, calls[1].ID)
}
