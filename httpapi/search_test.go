package httpapi_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOpsSearch covers every filter of GET /ops/v1/transactions, alone and
// together, over two sites, in both orders and with every page size.
func TestOpsSearch(t *testing.T) {
	var c clock
	e := newEnv(t)
	s := e.newStack(c.opts())
	banks := s.seedBanks()
	a := s.newSite(nil, 1_000_000)
	b := s.newSite(nil, 1_000_000)

	// Each a minute after the last, so creation times tell them apart.
	create := func(st site, path string, form url.Values) record {
		t.Helper()
		c.advance(time.Minute)
		return rec(t, s.post(st, path, form))
	}
	dep := func(st site, bank, pid, user, name string, amount int64) record {
		f := depositForm(bank, pid, user, amount)
		f.Set("name", name)
		return create(st, pathDeposit, f)
	}
	d0 := dep(a, "ZAINCASH", "order-1", "u1", "أحمد علي", 25000)
	d1 := dep(b, "QICARD", "order-1", "u2", "Ali Kareem", 30000)
	w2 := create(a, pathWithdraw, withdrawForm("ZAINCASH", "pay-1", "u1", 10000, "07712345678"))
	d3 := dep(a, "QICARD", "order-2", "u3", "Sara Ahmed", 25000)
	f4 := depositForm("NBI", "order-3", "u4", 50000)
	f4.Set("senderName", "Zaid Hassan")
	d4 := create(b, pathDeposit, f4)
	w5 := create(b, pathWithdraw, withdrawForm("QICARD", "pay-2", "u2", 20000, "6375000012345678"))
	requireOK(t, s.ops("POST", "/ops/v1/deposits/"+d3.TransactionID+"/approve", map[string]any{"amount": 24000}))
	at := func(r record) string { return url.QueryEscape(r.CreatedAt) }

	cases := []struct {
		query string
		want  []string // oldest first
	}{
		{"", txIDs(d0, d1, w2, d3, d4, w5)},
		{"site=" + a.ID, txIDs(d0, w2, d3)},
		{"processId=order-1", txIDs(d0, d1)},
		{"processId=order-1&site=" + b.ID, txIDs(d1)},
		{"processId=nope", txIDs()},
		{"processId=order-2&type=withdrawal", txIDs()},
		{"transactionId=" + d3.TransactionID, txIDs(d3)},
		{"transactionId=" + d3.TransactionID + "&site=" + b.ID, txIDs()},
		{"transactionId=" + d3.TransactionID + "&processId=order-1", txIDs()},
		{"userId=u1", txIDs(d0, w2)},
		{"userId=u2", txIDs(d1, w5)},
		{"userId=u2&type=withdrawal", txIDs(w5)},
		{"minAmount=25000", txIDs(d0, d1, d4)},
		{"minAmount=20000&maxAmount=25000", txIDs(d0, d3, w5)}, // d3 approved at 24,000
		{"maxAmount=24000", txIDs(w2, d3, w5)},
		{"name=" + url.QueryEscape("احمد"), txIDs(d0)},              // أحمد written without its hamza
		{"name=" + url.QueryEscape("  ALI kareem!"), txIDs(d1, d4)}, // convertedName rules
		{"name=ahmed", txIDs(w2, d3, w5)},                           // withdrawals' name is "Sara Ahmed"
		{"name=zaid", txIDs(d4)},                                    // the sender's name
		{"name=" + url.QueryEscape("!!"), txIDs()},                  // nothing to match on
		{"method=QICARD", txIDs(d1, d3, w5)},
		{"method=" + banks["NBI"].ID, txIDs(d4)},
		{"method=qicard", txIDs()},
		{"status=pending&type=deposit", txIDs(d0, d1, d4)},
		{"status=approved", txIDs(d3)},
		{"from=" + at(d3), txIDs(d3, d4, w5)},
		{"from=" + strings.ToLower(at(d3)), txIDs(d3, d4, w5)}, // RFC 3339 allows "t" and "z"
		{"to=" + at(d3), txIDs(d0, d1, w2)},
		{"from=" + at(d1) + "&to=" + at(d4), txIDs(d1, w2, d3)},
		{"from=" + url.QueryEscape(time.Now().Add(24*time.Hour).Format(time.RFC3339)), txIDs()},
		{"from=" + at(d1) + "&method=QICARD&type=deposit&status=pending&minAmount=30000", txIDs(d1)},
	}
	for _, tc := range cases {
		for _, order := range []string{"", "oldest", "newest"} {
			for _, limit := range []int{1, 2, 100} {
				q := tc.query
				if order != "" {
					q += "&order=" + order
				}
				t.Run(q+" limit "+itoa(int64(limit)), func(t *testing.T) {
					want := tc.want
					if order == "newest" {
						want = reversed(want)
					}
					require.Equal(t, want, txIDs(s.opsList(t, strings.TrimPrefix(q, "&"), limit)...))
				})
			}
		}
	}
	// The records are the current ones, with their site.
	l := s.opsList(t, "transactionId="+d3.TransactionID, 10)
	require.Equal(t, int64(24000), l[0].Amount)
	require.Equal(t, a.ID, l[0].SiteID)
}

// txIDs lists the records' transaction ids.
func txIDs(l ...record) []string {
	out := []string{}
	for _, r := range l {
		out = append(out, r.TransactionID)
	}
	return out
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// TestOpsSearch_refused: a parameter the listing does not know is a 400
// naming it, as is a bad value of one it knows; nothing is listed.
func TestOpsSearch_refused(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	long := strings.Repeat("x", 257)
	cur := url.QueryEscape(deref(oldestCursor(t, s, st)))
	cases := []struct{ query, field, message string }{
		{"processid=order-1", "processid", `unknown parameter "processid"`},
		{"q=ali", "q", "the filters are cursor, from, limit, maxAmount, method, minAmount, name, order, processId, site, status, to, transactionId, type, userId"},
		{"amount=5", "amount", "unknown parameter"},
		{"status=pending&status=approved", "status", "more than once"},
		{"transactionId=nope", "transactionId", "not a transaction id"},
		{"transactionId=" + url.QueryEscape("a.b-1"), "transactionId", "not a transaction id"},
		{"processId=" + long, "processId", "at most 256 bytes"},
		{"userId=" + long, "userId", "at most 256 bytes"},
		{"name=" + long, "name", "at most 256 bytes"},
		{"method=" + long, "method", "at most 256 bytes"},
		{"minAmount=0", "minAmount", "positive whole number of IQD"},
		{"minAmount=1.5", "minAmount", "positive whole number of IQD"},
		{"maxAmount=-3", "maxAmount", "positive whole number of IQD"},
		{"maxAmount=99999999999999999999", "maxAmount", "positive whole number of IQD"},
		{"minAmount=500&maxAmount=100", "maxAmount", "below minAmount"},
		{"from=yesterday", "from", "RFC 3339"},
		{"to=2026-13-01T00:00:00Z", "to", "RFC 3339"},
		{"from=" + url.QueryEscape("2026-01-02T00:00:00-24:00"), "from", "RFC 3339"},
		{"from=" + url.QueryEscape("2026-01-02T00:00:00+00:60"), "from", "RFC 3339"},
		{"from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "to", "after from"},
		{"from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "to", "after from"},
		{"order=random", "order", "oldest or newest"},
		// A cursor of one order does not continue the other, nor one of
		// other filters: it would page through another listing.
		{"order=newest&site=" + st.ID + "&cursor=" + cur, "cursor", "other filters or the other order"},
		{"status=pending&site=" + st.ID + "&cursor=" + cur, "cursor", "other filters or the other order"},
		{"cursor=" + cur, "cursor", "other filters or the other order"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			r := s.opsT(t, "GET", "/ops/v1/transactions?"+tc.query, nil)
			requireErr(t, r, 400, "invalid_request", tc.field)
			require.Contains(t, r.Message, tc.message)
		})
	}
}

// oldestCursor returns the cursor after the first of two transactions.
func oldestCursor(t *testing.T, s *stack, st site) *string {
	t.Helper()
	for _, pid := range []string{"c1", "c2"} {
		requireOK(t, s.post(st, pathDeposit, depositForm("ZAINCASH", pid, pid, 5000)))
	}
	var p page[record]
	r := s.opsT(t, "GET", "/ops/v1/transactions?limit=1&site="+st.ID, nil)
	r.decode(t, &p)
	require.NotNil(t, p.NextCursor)
	return p.NextCursor
}

func deref(p *string) string { return *p }

// TestOpsSearch_budget: a filter that reads creation events stops a page
// after the budget's reads, with fewer items and a cursor, and walking the
// cursors finds every match once, in order.
func TestOpsSearch_budget(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{scanBudget: 3})
	s.seedBanks()
	st := s.newSite(nil, 0)
	var want []string
	for i := range 10 {
		f := depositForm("ZAINCASH", "b"+itoa(int64(i)), "u"+itoa(int64(i)), 5000)
		if i%4 == 3 {
			f.Set("name", "Huda Salim")
		}
		r := rec(t, s.post(st, pathDeposit, f))
		if i%4 == 3 {
			want = append(want, r.TransactionID)
		}
	}
	for _, order := range []string{"oldest", "newest"} {
		t.Run(order, func(t *testing.T) {
			var got []string
			cursor, pages, short := "", 0, 0
			for {
				pages++
				require.Less(t, pages, 20, "the listing does not end")
				q := "name=huda&limit=2&order=" + order
				if cursor != "" {
					q += "&cursor=" + url.QueryEscape(cursor)
				}
				var p page[record]
				r := s.opsT(t, "GET", "/ops/v1/transactions?"+q, nil)
				requireOK(t, r)
				r.decode(t, &p)
				got = append(got, txIDs(p.Items...)...)
				if p.NextCursor == nil {
					break
				}
				if len(p.Items) < 2 {
					short++
				}
				cursor = *p.NextCursor
			}
			exp := want
			if order == "newest" {
				exp = reversed(want)
			}
			require.Equal(t, exp, got)
			require.Positive(t, short, "no page ended on its budget")
		})
	}
}
