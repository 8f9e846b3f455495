package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
)

// A panic while deciding answers that batch with ErrInternal, leaves the
// process and the other sites' commands alone, and rebuilds the site from
// the store, so what the site holds afterwards is exactly what is stored.
func TestLedger_panicInDecide_rebuildsTheSite(t *testing.T) {
	onEachStore(t, ledgerPanicInDecideRebuildsTheSite)
}

func ledgerPanicInDecideRebuildsTheSite(t *testing.T, e *env) {
	ctx := context.Background()
	e.expectErrors("panic while deciding a batch")
	st := e.store("a")
	l := e.ledger(st, ledger.Config{})
	setup(t, l, 0, 10_000)
	createSite(t, l, "s2", 0, 0)
	b := bank(t, l)
	_, err := l.Execute(ctx, siteID, testkit.Deposit(b, "before", "u0", 5_000), events.ActorMerchant)
	require.NoError(t, err)
	before := view(t, l, siteID)

	// A method without recipient accounts cannot be created through the
	// catalog; a command that carries one makes the deposit decision
	// divide by zero.
	broken := *b
	broken.Accounts = nil
	var wg sync.WaitGroup
	var panicErr, otherErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, panicErr = l.Execute(ctx, siteID, testkit.Deposit(&broken, "boom", "u1", 5_000), events.ActorMerchant)
	}()
	go func() {
		defer wg.Done()
		_, otherErr = l.Execute(ctx, "s2", testkit.Deposit(b, "other", "u2", 5_000), events.ActorMerchant)
	}()
	wg.Wait()
	require.ErrorIs(t, panicErr, ledger.ErrInternal)
	require.NoError(t, otherErr, "another site's command is not disturbed")
	assert.Contains(t, e.log.String(), "panic while deciding a batch")
	assert.Contains(t, e.log.String(), "goroutine", "the stack is logged")

	after := view(t, l, siteID)
	assert.Equal(t, before, after, "the site holds what is stored, nothing of the failed batch")
	r, err := l.Execute(ctx, siteID, testkit.Deposit(b, "after", "u3", 5_000), events.ActorMerchant)
	require.NoError(t, err, "the site is served again")
	assert.Equal(t, int32(1), r.Decision.Tx)
	assert.Equal(t, verifyChain(t, st, siteID), view(t, l, siteID).Hash)
}

// appendRaw stores evs on the site's subject after its last message,
// chained onto prev, going around the ledger (as a tampered or foreign
// writer would).
func appendRaw(t *testing.T, st ledger.Store, site ids.SiteID, prev [32]byte, evs ...events.Event) uint64 {
	t.Helper()
	ctx := context.Background()
	subj := mustSubject(t, site)
	last, err := st.LastFor(ctx, subj)
	require.NoError(t, err)
	data, _, err := events.Seal(prev, evs)
	require.NoError(t, err)
	seq, err := st.Append(ctx, subj, last, data)
	require.NoError(t, err)
	return seq
}

// A message that breaks the site's hash chain, or that is not the site's,
// is not applied: the site answers ErrUnavailable (503) from then on, an
// ERROR names the subject and sequence, and the other sites are served.
func TestLedger_unappliableMessage_stopsServingTheSite(t *testing.T) {
	adjust := events.Event{Name: events.TreasuryAdjustedName, Time: epoch.UnixMilli(), Actor: "x",
		Payload: &events.TreasuryAdjusted{Amount: 1_000_000, Reason: "forged"}}
	foreign := events.Event{Name: events.SiteCreatedName, Time: epoch.UnixMilli(), Actor: "x",
		Payload: &events.SiteCreated{SiteID: "s2", Name: "other", AppKey: "app-s2", Secret: "x"}}
	tests := []struct {
		name string
		// chained: the message links to the site's chain (only its
		// content is wrong).
		chained bool
		ev      events.Event
		log     string
	}{
		{"broken hash chain", false, adjust, "hash chain broken"},
		{"another site's creation", true, foreign, "creates site"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			onEachStore(t, func(t *testing.T, e *env) {
				ctx := context.Background()
				e.expectErrors("site message not applied")
				st := e.store("a")
				l := e.ledger(st, ledger.Config{})
				setup(t, l, 0, 10_000)
				createSite(t, l, "s2", 0, 500)
				b := bank(t, l)
				before := view(t, l, siteID)
				var prev [32]byte
				if tc.chained {
					prev = before.Hash
				}
				seq := appendRaw(t, st, siteID, prev, tc.ev)

				testkit.Eventually(t, testkit.WaitFor, func() bool {
					_, err := l.Execute(ctx, siteID, testkit.Deposit(b, "p", "u", 5_000), events.ActorMerchant)
					return errors.Is(err, events.ErrUnavailable)
				}, "the site is out of service")
				err := l.Read(ctx, siteID, ledger.Local, func(*aggregates.Site) error { return nil })
				assert.ErrorIs(t, err, events.ErrUnavailable, "reads are refused too")
				assert.ErrorIs(t, l.Read(ctx, siteID, ledger.Fresh, nil), events.ErrUnavailable)
				logs := e.log.String()
				assert.Contains(t, logs, tc.log)
				assert.Contains(t, logs, "subject=ledger.site.s1")
				assert.Contains(t, logs, fmt.Sprintf("seq=%d", seq))

				s2, cfg, ok := l.SiteByAppKey("app-s2")
				require.True(t, ok, "the other site keeps its appKey")
				assert.Equal(t, ids.SiteID("s2"), s2)
				assert.Equal(t, "secret-s2", cfg.Secret)
				_, err = l.Execute(ctx, "s2", testkit.Deposit(b, "p", "u", 5_000), events.ActorMerchant)
				assert.NoError(t, err, "other sites are served")
				assert.Equal(t, int64(500), view(t, l, "s2").Balance)
			})
		})
	}
}

// Snapshots whose names are no site id (what a wildcard read once saved as
// "site-*") are ignored and reported; the sites start from the stream.
func TestLedger_snapshotWithInvalidName_isIgnored(t *testing.T) {
	onEachStore(t, ledgerSnapshotWithInvalidNameIsIgnored)
}

func ledgerSnapshotWithInvalidNameIsIgnored(t *testing.T, e *env) {
	ctx := context.Background()
	e.expectErrors("ignoring a snapshot whose name is not a site id")
	st := e.store("a")
	l := e.ledger(st, ledger.Config{})
	setup(t, l, 0, 10_000)
	want := view(t, l, siteID)
	require.NoError(t, l.Close(ctx))
	var data []byte
	pos := ledger.PositionOf(l, siteID)
	require.NoError(t, l.Read(context.Background(), siteID, ledger.Local, func(s *aggregates.Site) error {
		var err error
		data, err = s.MarshalSnapshot(pos)
		return err
	}))
	for _, name := range []string{"site-*", "site->", "site-a.b"} {
		require.NoError(t, st.SaveSnapshot(ctx, name, want.Seq, data))
	}

	l2 := e.ledger(e.store("b"), ledger.Config{})
	assert.Equal(t, want, view(t, l2, siteID))
	assert.Equal(t, []ids.SiteID{siteID}, l2.SiteIDs(), "no phantom site")
	assert.Contains(t, e.log.String(), `name=site-*`)
}

// Another site's settings never take over an appKey.
func TestLedger_appKeyIsNeverRepointed(t *testing.T) { onEachStore(t, ledgerAppKeyIsNeverRepointed) }

func ledgerAppKeyIsNeverRepointed(t *testing.T, e *env) {
	e.expectErrors("appKey already belongs to another site")
	l := e.ledger(e.store("a"), ledger.Config{})
	setup(t, l, 0, 0)
	cfg, ok := l.SiteConfig(siteID)
	require.True(t, ok)
	ledger.AdoptConfig(l, "phantom", cfg)
	got, _, ok := l.SiteByAppKey(cfg.AppKey)
	require.True(t, ok)
	assert.Equal(t, siteID, got)
	assert.Contains(t, e.log.String(), "appKey already belongs to another site")
}

// Reads never wait for an append: with the site's append held in the store,
// lookups answer at once from the committed state, and see the command once
// it is stored.
func TestLedger_readsDoNotWaitForAppends(t *testing.T) {
	onEachStore(t, ledgerReadsDoNotWaitForAppends)
}

func ledgerReadsDoNotWaitForAppends(t *testing.T, e *env) {
	ctx := context.Background()
	st := e.store("a")
	gate := &appendGate{Store: st, release: make(chan struct{}), entered: make(chan struct{}, 1)}
	l := e.ledger(gate, ledger.Config{})
	setup(t, l, 0, 10_000)
	b := bank(t, l)
	gate.hold.Store(true)

	done := make(chan error, 1)
	go func() {
		_, err := l.Execute(ctx, siteID, testkit.Withdrawal(b, "w1", "u1", 4_000, payee), events.ActorMerchant)
		done <- err
	}()
	<-gate.entered // the batch is in the store's hands
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for name, read := range map[string]func() error{
		"Local": func() error { return l.Read(rctx, siteID, ledger.Local, func(*aggregates.Site) error { return nil }) },
		"Fresh": func() error { return l.Read(rctx, siteID, ledger.Fresh, func(*aggregates.Site) error { return nil }) },
	} {
		require.NoError(t, read(), name)
	}
	v := view(t, l, siteID)
	assert.Empty(t, v.Txs, "nothing of the batch in flight is visible")
	assert.Equal(t, int64(0), v.Pending)

	gate.hold.Store(false)
	close(gate.release)
	require.NoError(t, <-done)
	v = view(t, l, siteID)
	assert.Len(t, v.Txs, 1)
	assert.Equal(t, int64(4_000), v.Pending)
}
