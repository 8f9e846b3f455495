package transactions_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/projections/transactions"
	"github.com/iqdgateway/gateway/records"
)

func recordsFilterAll() records.Filter { return records.Filter{} }

var genStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// searchFilters are every filter alone and some combinations.
func searchFilters() map[string]records.Filter {
	from, to := genStart.Add(90*time.Second), genStart.Add(4*time.Minute)
	return map[string]records.Filter{
		"all":                  {},
		"site":                 {SiteID: "s2"},
		"kind":                 {Kind: aggregates.KindWithdrawal},
		"kind in site":         {SiteID: "s1", Kind: aggregates.KindDeposit},
		"status":               {Status: aggregates.StatusApproved},
		"status in site":       {SiteID: "s3", Status: aggregates.StatusPending},
		"user":                 {UserID: "xu-1"},
		"user in site":         {SiteID: "xhosted", UserID: "xu-2"},
		"generated user":       {UserID: "u-17"},
		"method code":          {Method: "ZAINCASH"},
		"method id in site":    {SiteID: "s4", Method: "b0000000000000000000001"},
		"no such method":       {Method: "NOPE"},
		"amount in site":       {SiteID: "s3", MinAmount: 100_000, MaxAmount: 180_000},
		"min amount":           {MinAmount: 450_000},
		"max amount":           {MaxAmount: 9000},
		"name arabic":          {Name: "علي"},
		"name of sender":       {Name: "abd-al salih"},
		"name latin":           {Name: "Ali Kareem"},
		"name short":           {Name: "mu"},
		"name nothing":         {Name: "!!!"},
		"time window":          {From: from, To: to},
		"time window in site":  {SiteID: "s2", From: from, To: to},
		"from":                 {From: genStart.Add(6 * time.Minute)},
		"to":                   {To: genStart.Add(40 * time.Second)},
		"tx id":                {TxID: ids.NewTx("s2", 17)},
		"tx id other site":     {SiteID: "s1", TxID: ids.NewTx("s2", 17)},
		"process id":           {ProcessID: "p-40"},
		"process id alias":     {ProcessID: "x-10"},
		"deposits approved s1": {SiteID: "s1", Kind: aggregates.KindDeposit, Status: aggregates.StatusApproved},
		"pending named":        {Status: aggregates.StatusPending, Name: "zainab"},
		"user withdrawals":     {UserID: "xu-3", Kind: aggregates.KindWithdrawal},
		"method amount from":   {Method: "ZAINCASH", MinAmount: 200_000, From: from},
		"rejected in window":   {Status: aggregates.StatusRejected, From: from, To: to.Add(time.Hour)},
	}
}

// pages reads every page of f with list, and how many pages it took.
func pages(t *testing.T, f records.Filter, list func(records.Filter) (records.Page[records.OpsRecord], error)) ([]string, int) {
	t.Helper()
	var out []string
	n := 0
	for {
		p, err := list(f)
		require.NoError(t, err)
		n++
		for _, it := range p.Items {
			out = append(out, string(it.AppendJSON(nil)))
		}
		if p.NextCursor == nil {
			return out, n
		}
		require.Less(t, n, 10_000, "paging does not end")
		f.Cursor = *p.NextCursor
	}
}

// TestSearch_equalsToday: every filter alone and some combinations, in
// both orders, paged with small pages, list what records.Reader.List
// lists today.
func TestSearch_equalsToday(t *testing.T) {
	fx := newFixture(t, 6000, 4)
	ctx := context.Background()
	v := fx.view()
	for name, f := range searchFilters() {
		for _, order := range []records.Order{records.Oldest, records.Newest} {
			for _, limit := range []int{7, 100} {
				t.Run(fmt.Sprintf("%s/order%d/limit%d", name, order, limit), func(t *testing.T) {
					f.Order, f.Limit = order, limit
					want, _ := pages(t, f, func(f records.Filter) (records.Page[records.OpsRecord], error) { return fx.reader.List(ctx, f) })
					got, _ := pages(t, f, func(f records.Filter) (records.Page[records.OpsRecord], error) {
						return transactions.Search(v, f, fx.config, publicURL)
					})
					require.Equal(t, want, got)
				})
			}
		}
	}
}

// TestSearch_readsLittle: a filter an index answers exactly reads only
// what it returns and one more per page (a combination's reads are
// logged).
func TestSearch_readsLittle(t *testing.T) {
	fx := newFixture(t, 6000, 4)
	v := fx.view()
	for name, tc := range map[string]struct {
		f     records.Filter
		exact bool
	}{
		"status":               {records.Filter{Status: aggregates.StatusExpired}, true},
		"status in site":       {records.Filter{SiteID: "s2", Status: aggregates.StatusApproved}, true},
		"rejected":             {records.Filter{Status: aggregates.StatusRejected}, true},
		"kind in site":         {records.Filter{SiteID: "s3", Kind: aggregates.KindWithdrawal}, true},
		"user":                 {records.Filter{UserID: "xu-1"}, true},
		"method":               {records.Filter{Method: "ZAINCASH", SiteID: "s1"}, true},
		"name":                 {records.Filter{Name: "zainab"}, false},
		"pending in site":      {records.Filter{SiteID: "s4", Status: aggregates.StatusPending}, true},
		"user's withdrawals":   {records.Filter{UserID: "xu-3", Kind: aggregates.KindWithdrawal}, false},
		"site approved amount": {records.Filter{SiteID: "s1", Status: aggregates.StatusApproved, MinAmount: 250_000, MaxAmount: 400_000}, false},
	} {
		t.Run(name, func(t *testing.T) {
			f := tc.f
			f.Limit = 20
			returned, examined, npages := 0, 0, 0
			for {
				res, err := transactions.Find(v, f)
				require.NoError(t, err)
				npages++
				returned += len(res.Txs)
				examined += res.Examined
				if res.Next == nil {
					break
				}
				f.Cursor = *res.Next
			}
			require.Positive(t, returned)
			if tc.exact {
				assert.LessOrEqual(t, examined, returned+npages, "an exact index reads what it returns and one more a page")
				return
			}
			// A combination reads its most selective stream and checks the
			// rest: how much more than it returns depends on the data.
			t.Logf("returned %d in %d pages, examined %d", returned, npages, examined)
		})
	}
}

// TestSearch_cursorAcrossWrites: a listing paged while new transactions
// are created and others move lists every transaction that existed at its
// first page and still matches, once.
func TestSearch_cursorAcrossWrites(t *testing.T) {
	fx := newFixture(t, 3000, 3)
	ctx := context.Background()
	bank, _ := fx.l.Catalog().Resolve("ZAINCASH")
	for _, order := range []records.Order{records.Oldest, records.Newest} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			f := records.Filter{SiteID: "xhosted", Kind: aggregates.KindDeposit, Order: order, Limit: 3}
			all := records.Filter{SiteID: f.SiteID, Kind: f.Kind, Order: order, Limit: 1000}
			before, err := transactions.Find(fx.view(), all)
			require.NoError(t, err)
			seen := map[ids.TxID]int{}
			for k := 0; ; k++ {
				res, err := transactions.Find(fx.view(), f)
				require.NoError(t, err)
				for _, tx := range res.Txs {
					seen[tx.ID()]++
				}
				if res.Next == nil {
					break
				}
				f.Cursor = *res.Next
				// Between pages: a new deposit, and an earlier one approved.
				req := aggregates.Request{ProcessID: fmt.Sprintf("later-%d-%d", order, k), Amount: 7000, UserID: fmt.Sprintf("later-%d-%d", order, k),
					UserName: "later", Name: "Later User", Bank: bank, BankRef: bank.ID}
				res2 := fx.exec(t, "xhosted", aggregates.RequestDeposit{Request: req, Lang: "en", HostedToken: "later"}, "merchant")
				if k%2 == 0 {
					fx.exec(t, "xhosted", aggregates.ApproveDeposit{TxID: ids.NewTx("xhosted", res2.Decision.Tx)}, "op")
				}
				fx.sync(t)
			}
			for _, tx := range before.Txs {
				assert.Equal(t, 1, seen[tx.ID()], "transaction %s", tx.ID())
			}
			for id, n := range seen {
				assert.Equal(t, 1, n, "transaction %s listed twice", id)
			}
			_, err = fx.reader.List(ctx, records.Filter{})
			require.NoError(t, err)
		})
	}
}

// TestSearch_refuses: cursors of other filters or not issued, and an
// unknown site, are refused as records.Reader.List refuses them.
func TestSearch_refuses(t *testing.T) {
	fx := newFixture(t, 1000, 2)
	v := fx.view()
	first, err := transactions.Find(v, records.Filter{SiteID: "s1", Limit: 2})
	require.NoError(t, err)
	require.NotNil(t, first.Next)
	for name, tc := range map[string]struct {
		f    records.Filter
		want error
	}{
		"other filters": {records.Filter{SiteID: "s2", Cursor: *first.Next}, records.ErrCursorFilters},
		"other order":   {records.Filter{SiteID: "s1", Order: records.Newest, Cursor: *first.Next}, records.ErrCursorFilters},
		"not issued":    {records.Filter{Cursor: "bm90LWEtY3Vyc29y"}, records.ErrBadCursor},
		"unknown site":  {records.Filter{SiteID: "nosuch"}, aggregates.ErrSiteNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := transactions.Find(v, tc.f)
			require.True(t, errors.Is(err, tc.want), "got %v", err)
			_, err = fx.reader.List(context.Background(), tc.f)
			require.True(t, errors.Is(err, tc.want), "today: got %v", err)
		})
	}
	// The cursor is today's: records.Reader.List goes on from it.
	want, err := fx.reader.List(context.Background(), records.Filter{SiteID: "s1", Limit: 2, Cursor: *first.Next})
	require.NoError(t, err)
	got, err := transactions.Search(v, records.Filter{SiteID: "s1", Limit: 2, Cursor: *first.Next}, fx.config, publicURL)
	require.NoError(t, err)
	require.Len(t, got.Items, len(want.Items))
	for i := range want.Items {
		assert.Equal(t, string(want.Items[i].AppendJSON(nil)), string(got.Items[i].AppendJSON(nil)))
	}
}
