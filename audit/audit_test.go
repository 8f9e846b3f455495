package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// TestAudit_generatedHistory audits a generated history of more than
// 100,000 events with a snapshot part-way and compares every site's numbers
// with the generator's own bookkeeping and its aggregate state.
func TestAudit_generatedHistory(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	gen := e.generate(t, audit.GenOptions{Events: 110_000, Sites: 7, Batch: 100, Seed: 42, SnapshotAt: 0.6})
	t.Logf("generated %d events in %d messages in %s", gen.Events, gen.Messages, time.Since(start))
	require.GreaterOrEqual(t, gen.Events, 100_000)

	// A stand-in for the gateway's operator API, serving the generator's
	// figures (one site's balance off by one when off names it).
	var off atomic.Value
	off.Store("")
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer T0K" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		id, _ := strings.CutPrefix(r.URL.Path, "/ops/v1/sites/")
		for _, g := range gen.Sites {
			if g.ID == id {
				bal := g.Balance
				if id == off.Load().(string) {
					bal++
				}
				_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"id": id,
					"treasury": map[string]any{"balance": bal, "pendingWithdrawals": g.PendingWithdrawals}}})
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	defer gw.Close()

	start = time.Now()
	var progress bytes.Buffer
	rep := e.runAudit(t, audit.Options{Progress: &progress, Gateway: &audit.Gateway{URL: gw.URL, Token: "T0K"}})
	t.Logf("audited %d events in %s", rep.Events, time.Since(start))
	require.True(t, rep.OK, "failed checks: %v", failed(rep))
	assert.Equal(t, uint64(gen.Events), rep.Events)
	assert.Equal(t, uint64(gen.Messages), rep.Messages)
	assert.Equal(t, gen.LastSeq, rep.LastSeq)
	assert.Contains(t, progress.String(), "events/s")
	assert.Contains(t, progress.String(), fmt.Sprintf("seq %d/%d", gen.LastSeq, gen.LastSeq))

	require.Len(t, rep.Subjects, 1)
	assert.Equal(t, events.CatalogSubject, rep.Subjects[0].Subject)
	assert.Equal(t, 1, rep.Subjects[0].Banks)

	require.Len(t, rep.Sites, len(gen.Sites))
	kinds := map[string]bool{}
	for _, g := range gen.Sites {
		s, ok := rep.Site(g.ID)
		require.True(t, ok, g.ID)
		// The generator's bookkeeping of the commands it issued.
		assert.Equal(t, g.Balance, s.Balance, "%s balance", g.ID)
		assert.Equal(t, g.PendingWithdrawals, s.PendingWithdrawals, "%s pending", g.ID)
		assert.Equal(t, g.Adjustments, s.Adjustments, "%s adjustments", g.ID)
		assert.Equal(t, g.Deposits, s.Deposits, "%s deposits", g.ID)
		assert.Equal(t, g.Withdrawals, s.Withdrawals, "%s withdrawals", g.ID)
		assert.Equal(t, uint64(g.Events), s.Events)
		// The generator's aggregate, decided in process.
		assert.Equal(t, g.State.Balance, s.Balance)
		assert.Equal(t, g.State.PendingWithdrawals, s.PendingWithdrawals)
		assert.Equal(t, len(g.State.Txs), s.Transactions)
		assert.Equal(t, g.State.Cfg.NegativeLimit, s.NegativeLimit)
		// The live model was compared, from the snapshot written part-way.
		require.NotZero(t, g.SnapshotSeq)
		assert.Equal(t, g.SnapshotSeq, s.SnapshotSeq)
		assert.Equal(t, audit.Pass, check(t, rep, g.ID, audit.CheckGateway).Status)
		live := check(t, rep, g.ID, audit.CheckLiveModel)
		assert.Equal(t, audit.Pass, live.Status, live.Detail)
		keys := check(t, rep, g.ID, audit.CheckIdempotency)
		assert.Equal(t, audit.Pass, keys.Status)
		assert.NotEqual(t, "0 keyed adjustments", keys.Detail, "the generator keys every other adjustment")
		assert.Contains(t, live.Detail, fmt.Sprintf("snapshot at seq %d + ", g.SnapshotSeq))
		for st, tot := range s.Deposits {
			kinds["deposit "+st] = kinds["deposit "+st] || tot.Count > 0
		}
		for st, tot := range s.Withdrawals {
			kinds["withdrawal "+st] = kinds["withdrawal "+st] || tot.Count > 0
		}
		if s.Deposits["approved"].Amount != s.Deposits["approved"].Requested {
			kinds["approved for another amount"] = true
		}
	}
	// The history holds every kind of move.
	for _, k := range []string{"deposit pending", "deposit approved", "deposit rejected", "deposit expired",
		"withdrawal pending", "withdrawal processing", "withdrawal paid", "withdrawal rejected", "approved for another amount"} {
		assert.True(t, kinds[k], k)
	}

	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	assert.Contains(t, text.String(), "RESULT: PASS")
	assert.Contains(t, text.String(), "[pass] hash-chain")
	assert.Contains(t, text.String(), "[pass] live-model")

	t.Run("one site", func(t *testing.T) {
		g := gen.Sites[2]
		one := e.runAudit(t, audit.Options{Site: g.ID, Workers: 1})
		require.True(t, one.OK, "failed checks: %v", failed(one))
		require.Len(t, one.Sites, 1)
		assert.Empty(t, one.Subjects)
		assert.Equal(t, g.Balance, one.Sites[0].Balance)
		assert.Equal(t, uint64(g.Events), one.Events)
	})

	t.Run("unknown site", func(t *testing.T) {
		none := e.runAudit(t, audit.Options{Site: "nosuchsite"})
		assert.False(t, none.OK)
	})

	t.Run("gateway disagrees", func(t *testing.T) {
		wrong := gen.Sites[1]
		off.Store(wrong.ID)
		defer off.Store("")
		rep := e.runAudit(t, audit.Options{Site: wrong.ID, Gateway: &audit.Gateway{URL: gw.URL, Token: "T0K"}})
		assert.Equal(t, []string{wrong.ID + "/" + audit.CheckGateway}, failed(rep))
		c := check(t, rep, wrong.ID, audit.CheckGateway)
		require.Len(t, c.Problems, 1)
		assert.Contains(t, c.Problems[0].Message, fmt.Sprintf("balance %d, the replay %d", wrong.Balance+1, wrong.Balance))

		bad := e.runAudit(t, audit.Options{Site: gen.Sites[0].ID, Gateway: &audit.Gateway{URL: gw.URL, Token: "wrong"}})
		assert.Equal(t, []string{gen.Sites[0].ID + "/" + audit.CheckGateway}, failed(bad))
		c = check(t, bad, gen.Sites[0].ID, audit.CheckGateway)
		assert.Contains(t, c.Problems[0].Message, "HTTP 401")
	})
}

// TestAudit_rewrittenEvent: one stored event's payload re-encoded with
// another amount, its Prev (and every other byte) kept. The stream denies
// deletes, so the tampered history is built in a fresh store.
func TestAudit_rewrittenEvent(t *testing.T) {
	src := newEnv(t)
	src.generate(t, audit.GenOptions{Events: 3000, Sites: 3, Batch: 50, Seed: 7})
	msgs := src.messages(t)

	// Pick a deposit approval in the middle of a site message, on a site
	// whose negative limit does not change after it: a site.updated.v2
	// says what is left available, so a later one would tell the rewrite
	// too, and only the chain is under test here.
	lastLimit := map[string]audit.Position{}
	for _, m := range msgs {
		evs, err := events.Decode(m.Data)
		require.NoError(t, err)
		for i, e := range evs {
			if p, ok := e.Payload.(*events.SiteUpdated); ok && p.NegativeLimit != nil {
				lastLimit[m.Subject] = audit.Position{Seq: m.Seq, Index: i}
			}
		}
	}
	afterLimit := func(m events.Msg, i int) bool {
		l := lastLimit[m.Subject]
		return m.Seq > l.Seq || m.Seq == l.Seq && i > l.Index
	}
	var target events.Msg
	idx := -1
	var altered *events.DepositApproved
	for _, m := range msgs[len(msgs)/2:] {
		evs, err := events.Decode(m.Data)
		require.NoError(t, err)
		for i := 1; i < len(evs)-1; i++ {
			if p, ok := evs[i].Payload.(*events.DepositApproved); ok && afterLimit(m, i) {
				target, idx = m, i
				cp := *p
				cp.Amount += 1_000_000
				altered = &cp
				break
			}
		}
		if idx >= 0 {
			break
		}
	}
	require.GreaterOrEqual(t, idx, 0, "a deposit approval inside a message")

	dst := newEnv(t)
	copyInto(t, dst.st, msgs, func(m events.Msg) []byte {
		if m.Seq != target.Seq {
			return m.Data
		}
		return rewritePayload(t, m.Data, idx, altered)
	})

	rep := dst.runAudit(t, audit.Options{})
	require.False(t, rep.OK)
	site := strings.TrimPrefix(target.Subject, events.SitePrefix)
	c := check(t, rep, site, audit.CheckChain)
	require.Equal(t, audit.Fail, c.Status)
	require.Equal(t, 1, c.Count, "one rewritten event breaks one link: %v", c.Problems)
	p := c.Problems[0]
	require.NotNil(t, p.After)
	assert.Equal(t, audit.Position{Seq: target.Seq, Index: idx, Event: events.DepositApprovedName}, *p.After, "names the rewritten event")
	require.NotNil(t, p.At)
	assert.Equal(t, target.Seq, p.At.Seq)
	assert.Equal(t, idx+1, p.At.Index)
	// Only the chain can tell: the rewritten history is self-consistent.
	assert.Equal(t, []string{site + "/" + audit.CheckChain}, failed(rep))

	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	assert.Contains(t, text.String(), fmt.Sprintf("preceding event #%d.%d %s", target.Seq, idx, events.DepositApprovedName))
	assert.Contains(t, text.String(), "RESULT: FAIL")

	// The untouched copy passes, so the failure is the rewrite's.
	same := newEnv(t)
	copyInto(t, same.st, msgs, nil)
	assert.True(t, same.runAudit(t, audit.Options{}).OK)
}

// TestAudit_invalidTransitions appends events with a correct hash chain and
// expected sequence that the state machine forbids.
func TestAudit_invalidTransitions(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixMilli()
	ev := func(p events.Payload) events.Event {
		return events.Event{Name: p.EventName(), Time: now, Actor: "op-mallory", Payload: p}
	}
	cases := []struct {
		name  string
		event func(t *testing.T, s *aggregates.Site) events.Event
		want  string
		// also lists other checks the event fails: a double approval
		// credits the aggregate's treasury twice, an expired withdrawal
		// stays in its pending sum.
		also []string
	}{
		{"paid while pending", func(t *testing.T, s *aggregates.Site) events.Event {
			i := findTx(t, s, aggregates.KindWithdrawal, aggregates.StatusPending)
			return ev(&events.WithdrawalPaid{TxID: txIDOf(s.ID, i)})
		}, "withdrawal pending → paid is not an edge", nil},
		{"approved twice", func(t *testing.T, s *aggregates.Site) events.Event {
			i := findTx(t, s, aggregates.KindDeposit, aggregates.StatusApproved)
			return ev(&events.DepositApproved{TxID: txIDOf(s.ID, i), Amount: s.Txs[i].Amount, Requested: s.Txs[i].Requested})
		}, "deposit approved → approved is not an edge", []string{audit.CheckBalance}},
		{"rejected after expiry", func(t *testing.T, s *aggregates.Site) events.Event {
			i := findTx(t, s, aggregates.KindDeposit, aggregates.StatusExpired)
			return ev(&events.DepositRejected{TxID: txIDOf(s.ID, i), Reason: "late"})
		}, "deposit expired → rejected is not an edge", nil},
		{"deposit event on a withdrawal", func(t *testing.T, s *aggregates.Site) events.Event {
			i := findTx(t, s, aggregates.KindWithdrawal, aggregates.StatusPending)
			return ev(&events.DepositExpired{TxID: txIDOf(s.ID, i)})
		}, "is a deposit event for a withdrawal", []string{audit.CheckPending}},
		{"unknown transaction", func(t *testing.T, s *aggregates.Site) events.Event {
			return ev(&events.DepositApproved{TxID: txIDOf(s.ID, int32(len(s.Txs)+5)), Amount: 5000, Requested: 5000})
		}, "names a transaction the site does not have", nil},
		{"another site's transaction", func(t *testing.T, s *aggregates.Site) events.Event {
			return ev(&events.WithdrawalProcessing{TxID: txIDOf("elsewhere", 0)})
		}, "names a transaction the site does not have", nil},
	}
	// One history, copied into a fresh store per case.
	src := newEnv(t)
	gen := src.generate(t, audit.GenOptions{Events: 6000, Sites: 2, Batch: 100, Seed: 3})
	msgs := src.messages(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			copyInto(t, e.st, msgs, nil)
			s := replaySite(t, msgs, gen.Sites[1].ID, ^uint64(0), 0)
			bad := tc.event(t, s)
			seq := appendEvents(t, e.st, s, ev(&events.TreasuryAdjusted{Amount: 1000, Reason: "cover"}), bad)

			rep := e.runAudit(t, audit.Options{})
			want := []string{string(s.ID) + "/" + audit.CheckTransitions}
			for _, c := range tc.also {
				want = append(want, string(s.ID)+"/"+c)
			}
			assert.ElementsMatch(t, want, failed(rep))
			c := check(t, rep, string(s.ID), audit.CheckTransitions)
			require.Equal(t, 1, c.Count, "%v", c.Problems)
			p := c.Problems[0]
			assert.Equal(t, &audit.Position{Seq: seq, Index: 1, Event: bad.Name}, p.At)
			assert.Contains(t, p.Message, tc.want)
			var text bytes.Buffer
			require.NoError(t, rep.WriteText(&text))
			assert.Contains(t, text.String(), fmt.Sprintf("#%d.1 %s", seq, bad.Name))
		})
	}
}

// TestAudit_treasuryRule: a withdrawal reserved beyond what the treasury
// allows, appended with a correct chain.
func TestAudit_treasuryRule(t *testing.T) {
	e := newEnv(t)
	gen := e.generate(t, audit.GenOptions{Events: 1000, Sites: 1, Batch: 100, Seed: 5})
	s := gen.Sites[0].State
	amount := s.Available() + 1
	p := &events.WithdrawalRequested{TxID: txIDOf(s.ID, int32(len(s.Txs))), ProcessID: "overdraft-1", BankID: "b",
		BankCode: "ZAINCASH", IdentifierKind: "PHONE", Amount: amount, UserID: "u", UserName: "u", Name: "n", AccountName: "n", IBAN: "07701234567"}
	seq := appendEvents(t, e.st, s, events.Event{Name: p.EventName(), Time: time.Now().UnixMilli(), Actor: events.ActorMerchant, Payload: p})

	rep := e.runAudit(t, audit.Options{})
	assert.Equal(t, []string{string(s.ID) + "/" + audit.CheckTreasury}, failed(rep))
	c := check(t, rep, string(s.ID), audit.CheckTreasury)
	require.Len(t, c.Problems, 1)
	assert.Equal(t, seq, c.Problems[0].At.Seq)
	assert.Equal(t, p.TxID, c.Problems[0].Tx)
}

// TestAudit_transactionIDs: a creation event with another id than the
// site's next one, and a reused processId.
func TestAudit_transactionIDs(t *testing.T) {
	e := newEnv(t)
	gen := e.generate(t, audit.GenOptions{Events: 1000, Sites: 1, Batch: 100, Seed: 9})
	s := gen.Sites[0].State
	pid := s.ProcessID(0)
	p := &events.DepositRequested{TxID: txIDOf(s.ID, int32(len(s.Txs)+1)), ProcessID: pid, BankID: "b", BankCode: "ZAINCASH",
		Amount: 5000, UserID: "u-x", UserName: "u", Name: "n", Lang: "en", ExpiresAt: time.Now().Add(time.Hour).UnixMilli()}
	appendEvents(t, e.st, s, events.Event{Name: p.EventName(), Time: time.Now().UnixMilli(), Actor: events.ActorMerchant, Payload: p})

	rep := e.runAudit(t, audit.Options{})
	assert.Equal(t, []string{string(s.ID) + "/" + audit.CheckTxIDs}, failed(rep))
	c := check(t, rep, string(s.ID), audit.CheckTxIDs)
	require.Equal(t, 2, c.Count, "%v", c.Problems)
	assert.Contains(t, c.Problems[0].Message, "where the next id of the site is "+txIDOf(s.ID, int32(len(s.Txs)-1)))
	assert.Contains(t, c.Problems[1].Message, fmt.Sprintf("processId %q is already used by %s", pid, txIDOf(s.ID, 0)))
}

// TestAudit_snapshots compares the live model (snapshot + later messages)
// with the full replay, for good, stale and wrong snapshots.
func TestAudit_snapshots(t *testing.T) {
	e := newEnv(t)
	gen := e.generate(t, audit.GenOptions{Events: 4000, Sites: 4, Batch: 100, Seed: 11})
	msgs := e.messages(t)
	ctx := context.Background()

	replay := func(id string, upTo, skip uint64) *aggregates.Site { return replaySite(t, msgs, id, upTo, skip) }
	siteSeqs := func(id string) []uint64 {
		var out []uint64
		for _, m := range msgs {
			if m.Subject == siteSubject(id) {
				out = append(out, m.Seq)
			}
		}
		return out
	}
	save := func(id string, metaSeq uint64, s *aggregates.Site) {
		data, err := s.MarshalSnapshot(posOf(s))
		require.NoError(t, err)
		require.NoError(t, e.st.SaveSnapshot(ctx, audit.SnapshotPrefix+id, metaSeq, data))
	}

	good, stale, wrong, meta := gen.Sites[0].ID, gen.Sites[1].ID, gen.Sites[2].ID, gen.Sites[3].ID
	// good: the state at its 5th message.
	gs := siteSeqs(good)
	save(good, gs[4], replay(good, gs[4], 0))
	// stale: claims its 6th message but lacks the 3rd.
	ss := siteSeqs(stale)
	save(stale, ss[5], replay(stale, ss[5], ss[2]))
	// wrong: the right sequence, a balance off by one.
	ws := siteSeqs(wrong)
	w := replay(wrong, ws[5], 0)
	w.Balance++
	save(wrong, ws[5], w)
	// meta: the state of the 4th message saved as the 5th's.
	ms := siteSeqs(meta)
	save(meta, ms[4], replay(meta, ms[3], 0))
	// A snapshot of a site the stream does not have.
	save("ghost", ms[4], replay(meta, ms[3], 0))

	rep := e.runAudit(t, audit.Options{})
	assert.ElementsMatch(t, []string{"/" + audit.CheckSnapshots, stale + "/" + audit.CheckLiveModel,
		wrong + "/" + audit.CheckLiveModel, meta + "/" + audit.CheckLiveModel}, failed(rep))

	c := check(t, rep, good, audit.CheckLiveModel)
	assert.Equal(t, audit.Pass, c.Status)
	assert.Contains(t, c.Detail, fmt.Sprintf("snapshot at seq %d + %d later messages", gs[4], len(gs)-5))

	text := func(c audit.Check) string {
		var b strings.Builder
		for _, p := range c.Problems {
			b.WriteString(p.String() + "\n")
		}
		return b.String()
	}
	c = check(t, rep, stale, audit.CheckLiveModel)
	assert.Contains(t, text(c), "transactions, the full replay")

	c = check(t, rep, wrong, audit.CheckLiveModel)
	require.NotZero(t, c.Count)
	full := gen.Sites[2].State.Balance
	assert.Contains(t, c.Problems[0].Message, fmt.Sprintf("balance %d, the full replay's %d", full+1, full))
	// The keyed adjustments applied after the snapshot recorded the
	// wrong balance in their answers too.
	for _, p := range c.Problems[1:] {
		assert.Regexp(t, `^keyed adjustment "gen-\S+" answers .*, the full replay's `, p.Message)
	}

	c = check(t, rep, meta, audit.CheckLiveModel)
	require.Equal(t, 1, c.Count, text(c))
	assert.Contains(t, text(c), fmt.Sprintf("saved as seq %d but holds the state at seq %d", ms[4], ms[3]))

	assert.Contains(t, rep.Checks[len(rep.Checks)-1].Problems[0].Message, "snapshot site-ghost belongs to no site")

	t.Run("unreadable snapshot is skipped", func(t *testing.T) {
		require.NoError(t, e.st.SaveSnapshot(ctx, audit.SnapshotPrefix+good, gs[4], []byte("not a snapshot")))
		one := e.runAudit(t, audit.Options{Site: good})
		require.True(t, one.OK, "%v", failed(one))
		c := check(t, one, good, audit.CheckLiveModel)
		assert.Equal(t, audit.Skipped, c.Status)
		assert.Contains(t, c.Detail, "unreadable")
	})
}

// TestAudit_undecodableMessage: bytes that are not a message at all.
func TestAudit_undecodableMessage(t *testing.T) {
	e := newEnv(t)
	gen := e.generate(t, audit.GenOptions{Events: 500, Sites: 1, Batch: 100, Seed: 1})
	s := gen.Sites[0].State
	seq, err := e.st.Append(context.Background(), siteSubject(string(s.ID)), posOf(s).Seq, []byte("garbage"))
	require.NoError(t, err)
	rep := e.runAudit(t, audit.Options{})
	assert.Equal(t, []string{string(s.ID + "/" + audit.CheckDecode)}, failed(rep))
	c := check(t, rep, string(s.ID), audit.CheckDecode)
	assert.Equal(t, seq, c.Problems[0].At.Seq)
}

// TestAudit_otherSubjects: a subject under ledger.> that is neither a site
// nor the catalog still has its chain checked.
func TestAudit_otherSubjects(t *testing.T) {
	e := newEnv(t)
	e.generate(t, audit.GenOptions{Events: 300, Sites: 1, Seed: 2})
	p := &events.TreasuryAdjusted{Amount: 1, Reason: "x"}
	ev := events.Event{Name: p.EventName(), Time: 1, Actor: "op", Payload: p}
	first, _, err := events.Seal([32]byte{}, []events.Event{ev})
	require.NoError(t, err)
	seq, err := e.st.Append(context.Background(), "ledger.misc", 0, first)
	require.NoError(t, err)
	// The second message starts a new chain instead of linking the first.
	second, _, err := events.Seal([32]byte{}, []events.Event{ev})
	require.NoError(t, err)
	seq2, err := e.st.Append(context.Background(), "ledger.misc", seq, second)
	require.NoError(t, err)

	rep := e.runAudit(t, audit.Options{})
	assert.Equal(t, []string{"ledger.misc/" + audit.CheckChain}, failed(rep))
	require.Len(t, rep.Subjects, 2)
	misc := rep.Subjects[1]
	assert.Equal(t, "ledger.misc", misc.Subject)
	c, _ := misc.Check(audit.CheckChain)
	require.Len(t, c.Problems, 1)
	assert.Equal(t, &audit.Position{Seq: seq2, Index: 0, Event: p.EventName()}, c.Problems[0].At)
	assert.Equal(t, &audit.Position{Seq: seq, Index: 0, Event: p.EventName()}, c.Problems[0].After)
}

// TestAudit_emptyStream: nothing to audit passes.
func TestAudit_emptyStream(t *testing.T) {
	e := newEnv(t)
	rep := e.runAudit(t, audit.Options{})
	assert.True(t, rep.OK)
	assert.Zero(t, rep.Events)
}

// TestAudit_checkpointPromise: a checkpoint promises a snapshot of every
// site with messages up to it; a gateway starting from it would miss the
// messages of a site without one.
func TestAudit_checkpointPromise(t *testing.T) {
	e := newEnv(t)
	gen := e.generate(t, audit.GenOptions{Events: 1000, Sites: 2, Seed: 13, SnapshotAt: 0.5})
	rep := e.runAudit(t, audit.Options{})
	require.True(t, rep.OK, "%v", failed(rep))
	require.NotZero(t, rep.Checkpoint, "the generator writes a checkpoint with its snapshots")

	// Site 2's snapshot replaced by one of another site: unusable, so no
	// snapshot backs the checkpoint's promise for it.
	s1 := gen.Sites[0].State
	data, err := s1.MarshalSnapshot(posOf(s1))
	require.NoError(t, err)
	require.NoError(t, e.st.SaveSnapshot(context.Background(), audit.SnapshotPrefix+gen.Sites[1].ID, posOf(s1).Seq, data))
	rep = e.runAudit(t, audit.Options{})
	assert.True(t, rep.OK, "an unreadable snapshot is skipped, like the gateway does: %v", failed(rep))

	e2 := newEnv(t)
	msgs := e.messages(t)
	copyInto(t, e2.st, msgs, nil)
	require.NoError(t, e2.st.SaveSnapshot(context.Background(), audit.CheckpointName, rep.Checkpoint, nil))
	rep = e2.runAudit(t, audit.Options{})
	assert.ElementsMatch(t, []string{gen.Sites[0].ID + "/" + audit.CheckLiveModel, gen.Sites[1].ID + "/" + audit.CheckLiveModel}, failed(rep))
	c := check(t, rep, gen.Sites[1].ID, audit.CheckLiveModel)
	assert.Contains(t, c.Problems[0].Message, fmt.Sprintf("before the checkpoint at seq %d, which promises one", rep.Checkpoint))
}

// TestAudit_subjectsAndSnapshotsWithInvalidIDs: damage written before ids
// were parsed at the edge is found: a message on a site-like subject whose
// last token is no site id (a dotted id made it several tokens), and
// snapshots named after wildcard ids.
func TestAudit_subjectsAndSnapshotsWithInvalidIDs(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.generate(t, audit.GenOptions{Events: 200, Sites: 1, Seed: 3})
	p := &events.TreasuryAdjusted{Amount: 1, Reason: "x"}
	data, _, err := events.Seal([32]byte{}, []events.Event{{Name: p.EventName(), Time: 1, Actor: "op", Payload: p}})
	require.NoError(t, err)
	_, err = e.st.Append(ctx, "ledger.site.a.b", 0, data)
	require.NoError(t, err)
	for _, name := range []string{"site-*", "site->"} {
		require.NoError(t, e.st.SaveSnapshot(ctx, name, 1, []byte("x")))
	}

	rep := e.runAudit(t, audit.Options{})
	assert.ElementsMatch(t, []string{"ledger.site.a.b/" + audit.CheckSubject, "/" + audit.CheckSnapshots}, failed(rep))
	var sub *audit.SubjectReport
	for i := range rep.Subjects {
		if rep.Subjects[i].Subject == "ledger.site.a.b" {
			sub = &rep.Subjects[i]
		}
	}
	require.NotNil(t, sub, "the subject is reported")
	c, ok := sub.Check(audit.CheckSubject)
	require.True(t, ok)
	assert.Contains(t, c.Problems[0].Message, "is not a site subject")
	var snaps audit.Check
	for _, c := range rep.Checks {
		if c.Name == audit.CheckSnapshots {
			snaps = c
		}
	}
	require.Len(t, snaps.Problems, 2)
	assert.Contains(t, snaps.Problems[0].Message, `"site-*"`)
	assert.Contains(t, snaps.Problems[1].Message, `"site->"`)
	_, isSite := rep.Site("a.b")
	assert.False(t, isSite, "no site is made of it")
}

// TestAudit_sandbox: a sandbox site (site.sandbox in its creation's
// message) is marked as one in the report.
func TestAudit_sandbox(t *testing.T) {
	e := newEnv(t)
	gen := e.generate(t, audit.GenOptions{Events: 200, Sites: 1, Batch: 50, Seed: 13})
	s, _, _ := handSite(t, e, "s-sandbox", true, time.Now())

	rep := e.runAudit(t, audit.Options{})
	assert.Empty(t, failed(rep))
	sb, ok := rep.Site(string(s.ID))
	require.True(t, ok)
	assert.True(t, sb.Sandbox)
	other, ok := rep.Site(string(gen.Sites[0].State.ID))
	require.True(t, ok)
	assert.False(t, other.Sandbox)
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	assert.Contains(t, b.String(), "site "+string(s.ID)+" (sandbox: test money):")
	assert.NotContains(t, b.String(), "site "+string(gen.Sites[0].State.ID)+" (sandbox")
}

// TestAudit_settingsAliasesAndTestCallbacks: the events that move no money
// (site methods, hosted page settings, a sandbox's test callbacks, the
// aliases of alreadyPending) pass where they are what the gateway writes,
// and fail the check they break where they are not.
func TestAudit_settingsAliasesAndTestCallbacks(t *testing.T) {
	ev := func(p events.Payload) events.Event {
		return events.Event{Name: p.EventName(), Time: time.Now().UnixMilli(), Actor: events.ActorMerchant, Payload: p}
	}
	tests := []struct {
		name    string
		sandbox bool
		evs     func(s *aggregates.Site, pending, paid string) []events.Event
		fails   []string // checks of the site that fail
		message string
	}{
		{"settings", false, func(s *aggregates.Site, _, _ string) []events.Event {
			url := "https://shop.example/back"
			return []events.Event{ev(&events.SiteMethodsSet{Methods: []events.SiteMethod{{BankID: "b0000000000000000000001"}}}),
				ev(&events.SitePageUpdated{ReturnURL: &url}), ev(&events.SiteMethodsSet{All: true})}
		}, nil, ""},
		{"an alias of a pending deposit", false, func(s *aggregates.Site, pending, _ string) []events.Event {
			return []events.Event{ev(&events.DepositAliasAdded{TxID: pending, ProcessID: "order-new"})}
		}, nil, ""},
		{"a test callback of a sandbox", true, func(s *aggregates.Site, _, paid string) []events.Event {
			return []events.Event{ev(&events.SandboxCallback{TxID: paid, Type: "withdrawal.paid"})}
		}, nil, ""},
		{"a test callback of a live site", false, func(s *aggregates.Site, _, paid string) []events.Event {
			return []events.Event{ev(&events.SandboxCallback{TxID: paid, Type: "withdrawal.paid"})}
		}, []string{audit.CheckTransitions}, "not a sandbox"},
		{"an alias of a withdrawal", false, func(s *aggregates.Site, _, paid string) []events.Event {
			return []events.Event{ev(&events.DepositAliasAdded{TxID: paid, ProcessID: "order-new"})}
		}, []string{audit.CheckTransitions}, "for a withdrawal"},
		{"an alias of nothing", false, func(s *aggregates.Site, _, _ string) []events.Event {
			return []events.Event{ev(&events.DepositAliasAdded{TxID: string(s.ID) + "-zzzz", ProcessID: "order-new"})}
		}, []string{audit.CheckTransitions}, "does not have"},
		{"an alias that takes a used processId", false, func(s *aggregates.Site, pending, paid string) []events.Event {
			i, _ := ids.TxID(paid).Index()
			return []events.Event{ev(&events.DepositAliasAdded{TxID: pending, ProcessID: s.ProcessID(i)})}
		}, []string{audit.CheckTxIDs}, "already used by " + "PAID"},
		{"a processId taken twice as an alias", false, func(s *aggregates.Site, pending, _ string) []events.Event {
			return []events.Event{ev(&events.DepositAliasAdded{TxID: pending, ProcessID: "order-new"}),
				ev(&events.DepositAliasAdded{TxID: pending, ProcessID: "order-new"})}
		}, []string{audit.CheckTxIDs}, "already a name of"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var s *aggregates.Site
			var pending, paid string
			if tc.sandbox {
				// Only a creation makes a sandbox.
				s, pending, paid = handSite(t, e, "s-sandbox", true, time.Now())
			} else {
				gen := e.generate(t, audit.GenOptions{Events: 300, Sites: 1, Batch: 20, Seed: 21})
				s = gen.Sites[0].State
				pending = string(ids.NewTx(s.ID, findTx(t, s, aggregates.KindDeposit, aggregates.StatusPending)))
				paid = string(ids.NewTx(s.ID, findTx(t, s, aggregates.KindWithdrawal, aggregates.StatusPaid)))
			}
			appendEvents(t, e.st, s, tc.evs(s, pending, paid)...)

			rep := e.runAudit(t, audit.Options{})
			var want []string
			for _, c := range tc.fails {
				want = append(want, string(s.ID)+"/"+c)
			}
			assert.Equal(t, want, failed(rep))
			for _, c := range tc.fails {
				msg := strings.ReplaceAll(tc.message, "PAID", paid)
				var all []string
				for _, p := range check(t, rep, string(s.ID), c).Problems {
					all = append(all, p.Message)
				}
				assert.Contains(t, strings.Join(all, "\n"), msg)
			}
		})
	}
}

// losing drops the messages at some sequences from every read, as a
// server does that dropped damaged records from its block files.
type losing struct {
	audit.Source
	lost map[uint64]bool
}

func (l losing) Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	return l.Source.Read(ctx, filter, from, func(m events.Msg) error {
		if l.lost[m.Seq] {
			return nil
		}
		return fn(m)
	})
}

// TestAudit_lostMessages: a message missing from the stream fails the
// read, even the last of its subject, whose loss no hash chain shows (the
// stream never deletes one); a site's audit reads its subject alone and
// does not judge the others' sequences.
func TestAudit_lostMessages(t *testing.T) {
	e := newEnv(t)
	gen := e.generate(t, audit.GenOptions{Events: 300, Sites: 3, Batch: 1, Seed: 3})
	msgs := e.messages(t)
	lastOf := map[string]uint64{}
	for _, m := range msgs {
		lastOf[m.Subject] = m.Seq
	}
	s := gen.Sites[0].State
	tail := lastOf[siteSubject(string(s.ID))]
	require.Less(t, tail, gen.LastSeq, "the site's last message is not the stream's")
	for _, c := range []struct {
		name string
		lost []uint64
		want string
	}{
		{"a subject's last message", []uint64{tail}, fmt.Sprintf("1 of the messages 1..%d are missing, the first at sequence %d", gen.LastSeq, tail)},
		{"the first message", []uint64{1}, fmt.Sprintf("1 of the messages 1..%d are missing, the first at sequence 1", gen.LastSeq)},
		{"a run of three", []uint64{10, 11, 12}, fmt.Sprintf("3 of the messages 1..%d are missing, the first at sequence 10", gen.LastSeq)},
	} {
		t.Run(c.name, func(t *testing.T) {
			lost := map[uint64]bool{}
			for _, q := range c.lost {
				lost[q] = true
			}
			rep, err := audit.Run(context.Background(), losing{Source: e.st, lost: lost}, audit.Options{})
			require.NoError(t, err)
			assert.False(t, rep.OK)
			assert.Contains(t, failed(rep), "/"+audit.CheckRead)
			var read audit.Check
			for _, ch := range rep.Checks {
				if ch.Name == audit.CheckRead {
					read = ch
				}
			}
			require.NotEmpty(t, read.Problems)
			assert.Contains(t, read.Problems[0].Message, c.want)
		})
	}
	t.Run("nothing lost", func(t *testing.T) {
		rep, err := audit.Run(context.Background(), losing{Source: e.st}, audit.Options{})
		require.NoError(t, err)
		assert.True(t, rep.OK, "failed checks: %v", failed(rep))
	})
}

// shortened is a stream that ends at end: its later messages were lost.
type shortened struct {
	audit.Source
	end uint64
}

func (s shortened) LastSeq(context.Context) (uint64, error) { return s.end, nil }

func (s shortened) Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	return s.Source.Read(ctx, filter, from, func(m events.Msg) error {
		if m.Seq > s.end {
			return nil
		}
		return fn(m)
	})
}

// TestAudit_endsBeforeItsSnapshots: a stream that ends before its
// checkpoint, or a site's snapshot, lost the messages they were saved
// from, with no gap to show it: the read fails.
func TestAudit_endsBeforeItsSnapshots(t *testing.T) {
	e := newEnv(t)
	gen := e.generate(t, audit.GenOptions{Events: 2000, Sites: 2, Batch: 5, Seed: 4, SnapshotAt: 0.6})
	rep := e.runAudit(t, audit.Options{})
	require.True(t, rep.OK, "failed checks: %v", failed(rep))
	cp := rep.Checkpoint
	require.Positive(t, cp)
	require.Less(t, cp, gen.LastSeq)

	rep, err := audit.Run(context.Background(), shortened{Source: e.st, end: cp - 1}, audit.Options{})
	require.NoError(t, err)
	assert.Contains(t, failed(rep), "/"+audit.CheckRead)
	var msgs []string
	for _, c := range rep.Checks {
		if c.Name == audit.CheckRead {
			for _, p := range c.Problems {
				msgs = append(msgs, p.Message)
			}
		}
	}
	assert.Contains(t, strings.Join(msgs, "\n"), fmt.Sprintf("the checkpoint is at sequence %d, beyond the stream's last (%d)", cp, cp-1))
}

// corruptSnapshot is a source whose snapshot of one site cannot be read.
type corruptSnapshot struct {
	audit.Source
	name string
}

func (c corruptSnapshot) LoadSnapshot(ctx context.Context, name string) (uint64, []byte, error) {
	if name == c.name {
		return 0, nil, fmt.Errorf("load snapshot %s: %w: digest mismatch", name, events.ErrCorrupt)
	}
	return c.Source.LoadSnapshot(ctx, name)
}

// TestAudit_unreadableSnapshot: a damaged snapshot fails the snapshots
// check, naming it, and the audit goes on (the stream is what it audits;
// a gateway replays instead of loading that snapshot).
func TestAudit_unreadableSnapshot(t *testing.T) {
	e := newEnv(t)
	gen := e.generate(t, audit.GenOptions{Events: 600, Sites: 2, Batch: 5, Seed: 8, SnapshotAt: 0.5})
	id := string(gen.Sites[0].State.ID)
	rep, err := audit.Run(context.Background(), corruptSnapshot{Source: e.st, name: audit.SnapshotPrefix + id}, audit.Options{})
	require.NoError(t, err)
	// (The checkpoint promised that site's snapshot: its live model fails
	// too, as for a snapshot missing.)
	assert.Equal(t, []string{"/" + audit.CheckSnapshots, id + "/" + audit.CheckLiveModel}, failed(rep))
	var msgs []string
	for _, c := range rep.Checks {
		if c.Name == audit.CheckSnapshots {
			for _, p := range c.Problems {
				msgs = append(msgs, p.Message)
			}
		}
	}
	require.Len(t, msgs, 1)
	assert.Contains(t, msgs[0], "snapshot "+audit.SnapshotPrefix+id+" cannot be read")
	assert.Equal(t, uint64(gen.Events), rep.Events)
}
