package audit_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// decideAppend decides cmd against s and appends the events as one message.
func decideAppend(t *testing.T, e *env, s *aggregates.Site, cmd aggregates.Command, now time.Time, actor string) aggregates.Decision {
	t.Helper()
	d, err := s.Decide(cmd, now, actor)
	require.NoError(t, err)
	appendEvents(t, e.st, s, d.Events...)
	return d
}

func TestHistory_readableLines(t *testing.T) {
	e := newEnv(t)
	cat := aggregates.NewCatalog()
	now := time.Date(2026, 11, 23, 1, 2, 3, 4_000_000, time.UTC)
	d, err := cat.Decide(aggregates.CreateBank{ID: "b1", Code: "ZAINCASH", Name: events.LocalizedName{En: "ZainCash"},
		IdentifierKind: "PHONE", MinAmount: 1000, MaxAmount: 1_000_000, Deposit: true, Withdraw: true,
		Accounts: []events.Account{{AccountName: "Store", AccountNumber: "07801234567"}}}, now, "op-1")
	require.NoError(t, err)
	require.NoError(t, cat.ApplyMessage(1, d.Events))
	bank, _ := cat.Resolve("ZAINCASH")

	s := aggregates.NewSite("h1")
	name, hosted := "Hosted Shop", true
	decideAppend(t, e, s, aggregates.CreateSite{AppKey: "ak_1", Secret: "sekrit-signing", WebhookSecret: "whsec_c2VrcmV0",
		Settings: aggregates.SiteSettings{Name: &name, HostedPage: &hosted}}, now, "op-1")
	decideAppend(t, e, s, aggregates.AdjustTreasury{Amount: 500_000, Reason: "opening balance", IdempotencyKey: "top-up 1",
		RequestHash: "ab12"}, now, "op-1")
	d = decideAppend(t, e, s, aggregates.RequestDeposit{Request: aggregates.Request{ProcessID: "p1", Amount: 25000, UserID: "u1",
		UserName: "ali", Name: "Ali Kareem", Bank: bank, BankRef: "ZAINCASH"}, Lang: "en", HostedToken: "tok-unguessable"}, now, events.ActorMerchant)
	txID := txIDOf(s.ID, d.Tx)
	approveSeq := func() uint64 {
		decideAppend(t, e, s, aggregates.ApproveDeposit{TxID: ids.TxID(txID), Amount: 24000}, now.Add(time.Minute), "op-2")
		return posOf(s).Seq
	}()

	var lines []string
	require.NoError(t, audit.History(context.Background(), e.st, string(s.ID), 1, 0, func(en audit.Entry) error {
		lines = append(lines, en.Line())
		return nil
	}))
	require.Len(t, lines, 4)
	all := strings.Join(lines, "\n")
	assert.NotContains(t, all, "sekrit-signing")
	assert.NotContains(t, all, "c2VrcmV0")
	assert.NotContains(t, all, "tok-unguessable")

	lineRE := regexp.MustCompile(`^#\d+\.\d+ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \S+ [a-z_.]+\.v\d+( \S+=\S.*)*$`)
	for _, l := range lines {
		assert.Regexp(t, lineRE, l)
	}
	assert.Contains(t, lines[0], "2026-11-23T01:02:03.004Z op-1 site.created.v2 id=h1 name=\"Hosted Shop\" appKey=ak_1 secret=[redacted] webhookSecret=[redacted]")
	assert.NotContains(t, lines[0], "idempotencyKey", "an unkeyed creation shows no key")
	assert.Contains(t, lines[1], "treasury.adjusted.v3 amount=500000 reason=\"opening balance\" idempotencyKey=\"top-up 1\" requestHash=ab12")
	assert.Contains(t, lines[2], "merchant deposit.requested.v1 tx=h1-1 processId=p1 bankId=b1 bank=ZAINCASH")
	assert.Contains(t, lines[2], "amount=25000")
	assert.Contains(t, lines[2], "hostedToken=[redacted]")
	assert.Equal(t, "#"+strconv.FormatUint(approveSeq, 10)+".0 2026-11-23T01:03:03.004Z op-2 deposit.approved.v1 tx=h1-1 amount=24000 requested=25000", lines[3])

	t.Run("from and limit", func(t *testing.T) {
		var got []string
		require.NoError(t, audit.History(context.Background(), e.st, string(s.ID), 3, 1, func(en audit.Entry) error {
			got = append(got, en.Line())
			return nil
		}))
		require.Len(t, got, 1)
		assert.Contains(t, got[0], "deposit.requested.v1")
	})
}

func TestAllowedTransitions(t *testing.T) {
	// Every (kind, from, to) the audit accepts, from docs/merchant-api.md "States";
	// everything else is refused.
	const (
		pending    = aggregates.StatusPending
		processing = aggregates.StatusProcessing
		approved   = aggregates.StatusApproved
		rejected   = aggregates.StatusRejected
		expired    = aggregates.StatusExpired
		paid       = aggregates.StatusPaid
	)
	type edge struct {
		k        aggregates.Kind
		from, to aggregates.Status
	}
	ok := map[edge]bool{
		{aggregates.KindDeposit, pending, approved}:       true,
		{aggregates.KindDeposit, pending, rejected}:       true,
		{aggregates.KindDeposit, pending, expired}:        true,
		{aggregates.KindDeposit, expired, approved}:       true,
		{aggregates.KindWithdrawal, pending, processing}:  true,
		{aggregates.KindWithdrawal, pending, rejected}:    true,
		{aggregates.KindWithdrawal, processing, paid}:     true,
		{aggregates.KindWithdrawal, processing, rejected}: true,
	}
	for _, k := range []aggregates.Kind{aggregates.KindDeposit, aggregates.KindWithdrawal} {
		for from := pending; from <= paid; from++ {
			for to := pending; to <= paid; to++ {
				assert.Equal(t, ok[edge{k, from, to}], audit.Allowed(k, from, to), "%s %s → %s", k, from, to)
			}
		}
	}
}
