package callbacks

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/records"
)

func TestDispatcher_delivers_signedStandardWebhooks(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/hook"))
	dep := f.deposit("s1", 25000)
	rej := f.deposit("s1", 1000)
	wpaid := f.withdrawal("s1", 7000)
	wrej := f.withdrawal("s1", 3000)
	wrejp := f.withdrawal("s1", 4000)
	now := time.Now()
	f.append("s1", ev(&events.DepositApproved{TxID: dep, Amount: 24000, Requested: 25000}, now))
	f.append("s1", ev(&events.DepositRejected{TxID: rej, Reason: "no transfer"}, now),
		ev(&events.WithdrawalProcessing{TxID: wpaid}, now), ev(&events.WithdrawalProcessing{TxID: wrejp}, now))
	f.append("s1", ev(&events.WithdrawalPaid{TxID: wpaid, Reference: "ref-9"}, now),
		ev(&events.WithdrawalRejected{TxID: wrej, Reason: "bad account"}, now),
		ev(&events.WithdrawalRejected{TxID: wrejp, Reason: "closed"}, now))
	d, _ := f.dispatcher(Config{})

	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.calls()) >= 5 }, "five callbacks")
	wh, err := standardwebhooks.NewWebhook(testSecret("s1"))
	require.NoError(t, err)
	want := map[string]struct {
		typ, status, prev string
		amount            float64
		reason            any
	}{
		dep:   {TypeDepositApproved, "approved", "pending", 24000, nil},
		rej:   {TypeDepositRejected, "rejected", "pending", 1000, "no transfer"},
		wpaid: {TypeWithdrawalPaid, "paid", "processing", 7000, "ref-9"},
		wrej:  {TypeWithdrawalRejected, "rejected", "pending", 3000, "bad account"},
		wrejp: {TypeWithdrawalRejected, "rejected", "processing", 4000, "closed"},
	}
	for tx, w := range want {
		t.Run(w.typ+"/"+w.prev, func(t *testing.T) {
			cs := rcv.byTx(tx)
			require.Len(t, cs, 1)
			c := cs[0]
			require.NoError(t, wh.Verify(c.Body, c.Header), "verifies with the Standard Webhooks library")
			assert.Equal(t, "application/json", c.Header.Get("Content-Type"))
			assert.Empty(t, c.Header.Get("Accept-Encoding"), "only the documented headers")
			_, _, ok := ParseWebhookID(c.ID)
			assert.True(t, ok, "webhook-id %q", c.ID)
			ts, err := strconv.ParseInt(c.Timestamp, 10, 64)
			require.NoError(t, err)
			assert.InDelta(t, time.Now().Unix(), ts, 300)
			assert.Equal(t, w.typ, c.Msg.Type)
			_, err = time.Parse(time.RFC3339, c.Msg.Timestamp)
			assert.NoError(t, err)
			d := c.Msg.Data
			assert.Equal(t, w.status, d["status"])
			assert.Equal(t, w.prev, d["previousStatus"])
			assert.Equal(t, w.amount, d["amount"])
			assert.Equal(t, w.reason, d["statusReason"])
			assert.Equal(t, records.ResponseHash("sec-s1", tx, "b1", int64(w.amount)), d["hash"])
			assert.NotEmpty(t, d["updatedAt"])
			assert.Equal(t, "p-"+tx, d["processId"])
			if strings.HasPrefix(w.typ, "deposit") {
				assert.Contains(t, d, "bankAccountIban", "the deposit record's own fields")
			} else {
				assert.Contains(t, d, "iban", "the withdrawal record's own fields")
			}
		})
	}
	c := rcv.byTx(dep)[0]
	assert.Equal(t, float64(25000), c.Msg.Data["requestedAmount"])
	// Every delivery is listed, first-attempt ones from the delivery log,
	// by every process (other follows the bucket without delivering).
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "all messages acknowledged")
	other, _ := f.dispatcher(Config{})
	for _, dd := range []*Dispatcher{d, other} {
		var page records.Page[Delivery]
		testkit.Eventually(t, testkit.WaitFor, func() bool {
			page, err = dd.List(context.Background(), Filter{Status: StatusDelivered})
			return err == nil && len(page.Items) == 5
		}, "five deliveries listed")
		for _, it := range page.Items {
			c := rcv.byTx(string(it.TransactionID))
			require.Len(t, c, 1, "listed transaction %s", it.TransactionID)
			assert.Equal(t, c[0].ID, it.EventID)
			assert.Equal(t, want[string(it.TransactionID)].typ, it.Type)
			assert.Equal(t, "s1", string(it.SiteID))
			assert.Equal(t, 1, it.Attempts)
			require.NotNil(t, it.LastStatusCode)
			assert.Equal(t, 200, *it.LastStatusCode)
			assert.NotNil(t, it.LastAttemptAt)
			assert.Nil(t, it.NextAttemptAt)
			assert.Nil(t, it.LastError)
		}
		p, err := dd.List(context.Background(), Filter{Status: StatusFailed})
		require.NoError(t, err)
		assert.Empty(t, p.Items)
	}
}

func TestDispatcher_signsWithBothSecretsDuringOverlap(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	newSecret := testSecret("rotated")
	f.append("s1", ev(&events.SiteWebhookSecretRotated{Secret: newSecret, PreviousValidUntil: time.Now().Add(time.Hour).UnixMilli()}, time.Now()))
	tx := f.deposit("s1", 100)
	f.append("s1", ev(&events.DepositExpired{TxID: tx}, time.Now()))
	f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == 1 }, "callback")
	c := rcv.byTx(tx)[0]
	assert.Len(t, strings.Fields(c.Signature), 2, "two signatures while the old secret is valid")
	for _, s := range []string{newSecret, testSecret("s1")} {
		wh, err := standardwebhooks.NewWebhook(s)
		require.NoError(t, err)
		assert.NoError(t, wh.Verify(c.Body, c.Header))
	}
}

func TestDispatcher_retriesUntil2xx(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, func(c callback, n int) (int, http.Header) {
		switch n {
		case 1:
			return http.StatusInternalServerError, nil
		case 2:
			// A redirect is a failure, never followed.
			return http.StatusFound, http.Header{"Location": {"/elsewhere"}}
		}
		return http.StatusNoContent, nil
	})
	f.createSite("s1", rcv.url("/hook"))
	tx := f.deposit("s1", 500)
	f.append("s1", ev(&events.DepositApproved{TxID: tx, Amount: 500, Requested: 500}, time.Now()))
	d, _ := f.dispatcher(Config{})

	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == 3 }, "three attempts")
	cs := rcv.byTx(tx)
	for _, c := range cs[1:] {
		assert.Equal(t, cs[0].ID, c.ID, "the same webhook-id on every retry")
		assert.Equal(t, cs[0].Body, c.Body, "the same body on every retry")
	}
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		p, err := d.List(context.Background(), Filter{Status: StatusDelivered})
		return err == nil && len(p.Items) == 1
	}, "delivered record")
	p, err := d.List(context.Background(), Filter{Status: StatusDelivered})
	require.NoError(t, err)
	r := p.Items[0]
	assert.Equal(t, cs[0].ID, r.EventID)
	assert.Equal(t, 3, r.Attempts)
	require.NotNil(t, r.LastStatusCode)
	assert.Equal(t, 204, *r.LastStatusCode)
	assert.Equal(t, "s1", string(r.SiteID))
	assert.Equal(t, tx, string(r.TransactionID))
	assert.Equal(t, TypeDepositApproved, r.Type)
	assert.Nil(t, r.NextAttemptAt)
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "message acknowledged once delivered")
	assert.Len(t, rcv.byTx(tx), 3, "nothing after the 2xx")
}

func TestDispatcher_parksAfterScheduleAndResends(t *testing.T) {
	f := newFixture(t)
	var healthy atomic.Bool
	rcv := newReceiver(t, func(callback, int) (int, http.Header) {
		if healthy.Load() {
			return http.StatusOK, nil
		}
		return http.StatusInternalServerError, nil
	})
	f.createSite("s1", rcv.url("/hook"))
	tx := f.withdrawal("s1", 900)
	f.append("s1", ev(&events.WithdrawalRejected{TxID: tx, Reason: "limits"}, time.Now()))
	d, _ := f.dispatcher(Config{Schedule: Schedule{10 * time.Millisecond, 20 * time.Millisecond}})

	var parked Delivery
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		p, err := d.List(context.Background(), Filter{Status: StatusFailed})
		if err != nil || len(p.Items) != 1 {
			return false
		}
		parked = p.Items[0]
		return true
	}, "parked delivery")
	assert.Equal(t, 3, parked.Attempts, "the first attempt and two retries")
	require.NotNil(t, parked.LastStatusCode)
	assert.Equal(t, 500, *parked.LastStatusCode)
	assert.Equal(t, "HTTP 500", deref(parked.LastError))
	assert.Nil(t, parked.NextAttemptAt)
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "a parked delivery's message is acknowledged")
	require.Len(t, rcv.byTx(tx), 3)

	// The operator resends from a process that is not the active
	// dispatcher: the call is forwarded to it.
	other, err := New(context.Background(), Config{Conn: f.conn("ops"), Store: f.store, Ledger: f.led, Records: f.reader, Logger: f.log.Logger})
	require.NoError(t, err)
	defer other.Close()
	require.False(t, other.Active())
	healthy.Store(true)
	rec, err := other.Resend(context.Background(), parked.EventID, "op-7")
	require.NoError(t, err)
	assert.Equal(t, parked.EventID, rec.EventID)
	assert.Equal(t, 1, rec.Resends)
	assert.Equal(t, "op-7", rec.LastResendBy)

	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == 4 }, "resent")
	cs := rcv.byTx(tx)
	assert.Equal(t, parked.EventID, cs[3].ID, "a resend keeps the webhook-id")
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		p, _ := other.List(context.Background(), Filter{Status: StatusDelivered})
		return len(p.Items) == 1
	}, "resent delivery recorded as delivered, seen by another process")
	p, err := other.List(context.Background(), Filter{Status: StatusDelivered})
	require.NoError(t, err)
	require.Len(t, p.Items, 1)
	assert.Nil(t, p.NextCursor)
	assert.Equal(t, 1, p.Items[0].Resends)
	assert.Equal(t, "op-7", p.Items[0].LastResendBy)
	assert.Equal(t, 1, p.Items[0].Attempts)

	// A status that is none of the three is refused, naming the field.
	_, err = other.List(context.Background(), Filter{Status: "lost"})
	assert.ErrorIs(t, err, ErrInvalidFilter)
	assertField(t, err, "status")

	// Unknown and non-callback events.
	for _, id := range []string{"999999-0", "1-0", "x"} {
		_, err := other.Resend(context.Background(), id, "op")
		assert.ErrorIs(t, err, ErrEventNotFound, id)
		assertField(t, err, "eventId")
	}
}

func TestDispatcher_resendDeliveredAndListPaging(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, func(c callback, n int) (int, http.Header) {
		if n == 1 {
			return 500, nil
		}
		return 200, nil
	})
	f.createSite("s1", rcv.url("/"))
	f.createSite("s2", "")
	var txs []string
	for i := 0; i < 5; i++ {
		tx := f.deposit("s1", int64(100+i))
		f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
		txs = append(txs, tx)
	}
	d, _ := f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		p, _ := d.List(context.Background(), Filter{Status: StatusDelivered})
		return len(p.Items) == 5
	}, "five deliveries after one failure each")
	var ids []string
	cursor := ""
	for {
		p, err := d.List(context.Background(), Filter{Cursor: cursor, Limit: 2})
		require.NoError(t, err)
		for _, it := range p.Items {
			ids = append(ids, string(it.TransactionID))
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	assert.Equal(t, txs, ids, "pages in stream order")
	_, err := d.List(context.Background(), Filter{Cursor: "garbage!"})
	assert.ErrorIs(t, err, ErrBadCursor)
	p, err := d.List(context.Background(), Filter{SiteID: "s2"})
	require.NoError(t, err)
	assert.Empty(t, p.Items)

	// Resending a delivered callback sends it once more.
	id := rcv.byTx(txs[0])[0].ID
	before := time.Now().Add(-time.Second)
	rec, err := d.Resend(context.Background(), id, "op")
	require.NoError(t, err)
	assert.Equal(t, StatusPending, rec.Status)
	// Due now, as every resend answer says (docs/callbacks.md).
	require.NotNil(t, rec.NextAttemptAt, "a resend of a delivered callback is due now")
	due, err := time.Parse(time.RFC3339Nano, *rec.NextAttemptAt)
	require.NoError(t, err)
	assert.True(t, due.After(before), "due %s", *rec.NextAttemptAt)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(txs[0])) == 3 }, "resent")

	// A site without callbackUrl has nothing to resend to.
	tx := f.deposit("s2", 5)
	seq := f.append("s2", ev(&events.DepositExpired{TxID: tx}, time.Now()))
	_, err = d.Resend(context.Background(), WebhookID(seq, 0), "op")
	assert.ErrorIs(t, err, ErrNoCallbackURL)
	assertField(t, err, "eventId")
}

func TestDispatcher_ordersExpiredBeforeLateApproval(t *testing.T) {
	f := newFixture(t)
	var expiredOK atomic.Bool
	rcv := newReceiver(t, func(c callback, n int) (int, http.Header) {
		if c.Msg.Type == TypeDepositExpired && n < 3 {
			return http.StatusServiceUnavailable, nil
		}
		if c.Msg.Type == TypeDepositExpired {
			expiredOK.Store(true)
		}
		return http.StatusOK, nil
	})
	f.createSite("s1", rcv.url("/"))
	tx, req := f.depositEvent("s1", 10000, time.Now().Add(-time.Second))
	f.append("s1", req)
	f.append("s1", ev(&events.DepositExpired{TxID: tx}, time.Now()))
	// Retries slow enough that the approval is in the stream while the
	// expired callback is still failing.
	f.dispatcher(Config{Schedule: Schedule{200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}})
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) >= 1 }, "first expired attempt")
	f.append("s1", ev(&events.DepositApproved{TxID: tx, Amount: 9000, Requested: 10000}, time.Now()))

	testkit.Eventually(t, testkit.WaitFor, func() bool {
		return count(rcv.byTx(tx), func(c callback) bool { return c.Msg.Type == TypeDepositApproved }) == 1
	},
		"approved callback")
	cs := rcv.byTx(tx)
	require.Len(t, cs, 4, "three expired attempts, then the approval")
	for _, c := range cs[:3] {
		assert.Equal(t, TypeDepositExpired, c.Msg.Type)
		assert.Equal(t, "expired", c.Msg.Data["status"], "the expired callback describes the deposit as of its expiry")
		assert.Equal(t, float64(10000), c.Msg.Data["amount"])
		assert.Equal(t, "pending", c.Msg.Data["previousStatus"])
		assert.Equal(t, records.ResponseHash("sec-s1", tx, "b1", 10000), c.Msg.Data["hash"])
	}
	a := cs[3]
	assert.Equal(t, "approved", a.Msg.Data["status"])
	assert.Equal(t, "expired", a.Msg.Data["previousStatus"])
	assert.Equal(t, float64(9000), a.Msg.Data["amount"])
	assert.NotEqual(t, cs[0].ID, a.ID)
}

func TestDispatcher_previousStatusFromStreamAfterRestart(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	dep, req := f.depositEvent("s1", 800, time.Now().Add(-time.Minute))
	f.append("s1", req)
	w := f.withdrawal("s1", 300)
	late := f.deposit("s1", 50)
	_, stop := f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "creations consumed")
	stop()

	// The transactions were created before the next term began: their
	// previous states are read back from the stream.
	f.append("s1", ev(&events.DepositExpired{TxID: dep}, time.Now()), ev(&events.WithdrawalProcessing{TxID: w}, time.Now()))
	f.append("s1", ev(&events.DepositApproved{TxID: dep, Amount: 800, Requested: 800}, time.Now()))
	f.append("s1", ev(&events.WithdrawalRejected{TxID: w, Reason: "x"}, time.Now()),
		ev(&events.DepositApproved{TxID: late, Amount: 50, Requested: 50}, time.Now()))
	f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.calls()) == 4 }, "four callbacks")
	prev := func(tx, typ string) any {
		for _, c := range rcv.byTx(tx) {
			if c.Msg.Type == typ {
				return c.Msg.Data["previousStatus"]
			}
		}
		return nil
	}
	assert.Equal(t, "pending", prev(dep, TypeDepositExpired))
	assert.Equal(t, "expired", prev(dep, TypeDepositApproved))
	assert.Equal(t, "processing", prev(w, TypeWithdrawalRejected))
	assert.Equal(t, "pending", prev(late, TypeDepositApproved))
	cs := rcv.byTx(dep)
	assert.Equal(t, TypeDepositExpired, cs[0].Msg.Type)
	assert.Equal(t, TypeDepositApproved, cs[1].Msg.Type)
}

// readCounter is the fixture's store, counting the reads of a subject.
type readCounter struct {
	Store
	mu    sync.Mutex
	reads map[string]int
}

func (r *readCounter) Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error {
	r.mu.Lock()
	r.reads[filter]++
	r.mu.Unlock()
	return r.Store.Read(ctx, filter, from, fn)
}

func TestDispatcher_previousStatusOfThisTermWithoutReading(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	st := &readCounter{Store: f.store, reads: map[string]int{}}
	f.dispatcher(Config{Store: st, Ledger: f.led, Records: f.reader})
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "site consumed")

	// Created in this term: the dispatcher saw the site's first creation
	// (the only one it decodes) and knows every later transaction's status.
	// A withdrawal rejected while pending, and a deposit approved after
	// its expiry time (not expired yet), are what only that knowledge
	// tells apart from the stream's history.
	_ = f.deposit("s1", 100)
	late, req := f.depositEvent("s1", 200, time.Now().Add(-time.Minute))
	f.append("s1", req)
	w, paid := f.withdrawal("s1", 50), f.withdrawal("s1", 60)
	f.append("s1", ev(&events.DepositApproved{TxID: late, Amount: 200, Requested: 200}, time.Now()),
		ev(&events.WithdrawalProcessing{TxID: paid}, time.Now()))
	f.append("s1", ev(&events.WithdrawalRejected{TxID: w, Reason: "closed account"}, time.Now()),
		ev(&events.WithdrawalPaid{TxID: paid, Reference: "r-1"}, time.Now()))
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.calls()) == 3 }, "three callbacks")
	prev := map[string]any{}
	for _, c := range rcv.calls() {
		prev[c.Msg.Type] = c.Msg.Data["previousStatus"]
	}
	assert.Equal(t, map[string]any{TypeDepositApproved: "pending", TypeWithdrawalRejected: "pending",
		TypeWithdrawalPaid: "processing"}, prev)
	subj, err := events.SiteSubject("s1")
	require.NoError(t, err)
	st.mu.Lock()
	defer st.mu.Unlock()
	assert.Zero(t, st.reads[subj], "no transaction's history was read back from the stream")
}

// TestDispatcher_hangingSiteDoesNotDelayOthers: a merchant whose endpoint
// never answers holds at most SiteConcurrency connections, and another
// site's callbacks are delivered meanwhile, through the one slot of the
// dispatcher's own bound the hanging site leaves free.
//
// What is counted is the connections held at once, not the requests: a
// dispatcher that loses its lease (one that cannot renew it in time on a
// loaded machine, with the fixture's 1 s lease) gives up the attempts under
// way, and the next term makes them again, with the same webhook-id (at
// least once, docs/callbacks.md). The second case loses it on purpose.
func TestDispatcher_hangingSiteDoesNotDelayOthers(t *testing.T) {
	for _, c := range []struct {
		name      string
		loseLease bool
	}{{name: "lease held"}, {name: "lease lost while it hangs", loseLease: true}} {
		t.Run(c.name, func(t *testing.T) {
			const slots = 4
			f := newFixture(t)
			hanging := newReceiver(t, func(callback, int) (int, http.Header) { return -1, nil })
			healthy := newReceiver(t, nil)
			f.createSite("slow", hanging.url("/"))
			f.createSite("fast", healthy.url("/"))
			for i := 0; i < 40; i++ {
				tx := f.deposit("slow", 10)
				f.append("slow", ev(&events.DepositExpired{TxID: tx}, time.Now()))
			}
			f.dispatcher(Config{Timeout: time.Minute, SiteConcurrency: slots, Concurrency: slots + 1})
			holding := func() bool {
				now, _ := hanging.inFlight()
				return now >= slots
			}
			testkit.Eventually(t, testkit.WaitFor, holding, "the slow site's endpoint holds its four slots")
			if c.loseLease {
				f.loseLease()
				testkit.Eventually(t, testkit.WaitFor, func() bool { return len(hanging.calls()) > slots && holding() },
					"the next term attempts the slow site's callbacks again")
			}
			fast := map[string]bool{}
			for i := 0; i < 50; i++ {
				tx := f.deposit("fast", 10)
				f.append("fast", ev(&events.DepositApproved{TxID: tx, Amount: 10, Requested: 10}, time.Now()))
				fast[tx] = true
			}
			testkit.Eventually(t, testkit.WaitFor, func() bool {
				n := 0
				for tx := range stableWebhookIDs(t, healthy) {
					require.True(t, fast[tx], "a callback of the healthy site's own deposits: %s", tx)
					n++
				}
				return n == len(fast)
			}, "every callback of the healthy site")
			stableWebhookIDs(t, hanging)
			_, peak := hanging.inFlight()
			assert.Equal(t, slots, peak, "the slow site never held more than its slots")
		})
	}
}

// stableWebhookIDs checks that every request r got for a transaction
// carried one webhook-id, and returns them by transaction.
func stableWebhookIDs(t *testing.T, r *receiver) map[string]string {
	t.Helper()
	byTx := map[string]string{}
	for _, c := range r.calls() {
		tx, _ := c.Msg.Data["transactionId"].(string)
		if id, seen := byTx[tx]; seen {
			require.Equal(t, id, c.ID, "a callback delivered again keeps its webhook-id (%s)", tx)
		}
		byTx[tx] = c.ID
	}
	return byTx
}

func TestDispatcher_redeliversAfterCrashBeforeAck(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	var txs []string
	for i := 0; i < 3; i++ {
		tx := f.deposit("s1", 10)
		f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
		txs = append(txs, tx)
	}
	// The first dispatcher's connection dies right after the merchant has
	// answered 2xx to the first callback, before the acknowledgement.
	crashConn := f.conn("doomed")
	var crashed atomic.Bool
	var crashedID atomic.Value
	_, stop := f.dispatcher(Config{Conn: crashConn, afterAttempt: func(id string, o outcome) {
		if o.ok && crashed.CompareAndSwap(false, true) {
			crashedID.Store(id)
			crashConn.Close()
		}
	}})
	testkit.Eventually(t, testkit.WaitFor, crashed.Load, "first delivery")
	stop()
	first := crashedID.Load().(string)
	require.Equal(t, 1, count(rcv.calls(), func(c callback) bool { return c.ID == first }))

	f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, func() bool { return count(rcv.calls(), func(c callback) bool { return c.ID == first }) == 2 },
		"the unacknowledged callback is delivered again, with the same webhook-id")
	for _, tx := range txs {
		testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) >= 1 }, "every callback delivered (%s)", tx)
	}
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "all acknowledged")
}

func TestDispatcher_loggedBeforeCrashIsNotDeliveredAgain(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	tx := f.deposit("s1", 10)
	f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
	f.crashAfterLog()

	d, _ := f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "the redelivered message is acknowledged")
	assert.Len(t, rcv.byTx(tx), 1, "the log says it was delivered: not sent again")
	p, err := d.List(context.Background(), Filter{})
	require.NoError(t, err)
	require.Len(t, p.Items, 1)
	assert.Equal(t, StatusDelivered, p.Items[0].Status)
	assert.Equal(t, tx, string(p.Items[0].TransactionID))
}

func TestDispatcher_listsLoggedAndRecordedInStreamOrder(t *testing.T) {
	f := newFixture(t)
	// Every other transaction's callback fails once, so the listing mixes
	// records of their own with delivery log entries.
	var mu sync.Mutex
	failed := map[string]bool{}
	rcv := newReceiver(t, func(c callback, n int) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		amount, _ := c.Msg.Data["amount"].(float64)
		if int(amount)%2 == 1 && !failed[c.ID] {
			failed[c.ID] = true
			return 503, nil
		}
		return 204, nil
	})
	f.createSite("s1", rcv.url("/"))
	f.createSite("s2", rcv.url("/"))
	var txs []string
	for i := 0; i < 9; i++ {
		site := []string{"s1", "s2"}[i%2]
		tx := f.deposit(site, int64(100+i))
		f.append(site, ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
		txs = append(txs, tx)
	}
	d, _ := f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		p, _ := d.List(context.Background(), Filter{Status: StatusDelivered})
		return len(p.Items) == 9
	}, "nine deliveries")
	got, _ := listAll(t, d, Filter{Limit: 2}, 10)
	require.Len(t, got, 9)
	for i, it := range got {
		assert.Equal(t, txs[i], string(it.TransactionID), "item %d in stream order", i)
		assert.Equal(t, TypeDepositRejected, it.Type)
		assert.Equal(t, 1+i%2, it.Attempts, "item %d: odd amounts took two attempts", i)
		require.NotNil(t, it.LastStatusCode)
		assert.Equal(t, 204, *it.LastStatusCode)
	}
	p, err := d.List(context.Background(), Filter{SiteID: "s2", Status: StatusDelivered})
	require.NoError(t, err)
	require.Len(t, p.Items, 4)
	for _, it := range p.Items {
		assert.Equal(t, "s2", string(it.SiteID))
	}
	p, err = d.List(context.Background(), Filter{SiteID: "nope"})
	require.NoError(t, err)
	assert.Empty(t, p.Items)

	// A resent first-attempt delivery keeps what its log entry said and
	// is listed once, from its own record.
	id := got[0].EventID
	rec, err := d.Resend(context.Background(), id, "op-1")
	require.NoError(t, err)
	assert.Equal(t, 1, rec.Resends)
	require.NotNil(t, rec.LastStatusCode)
	assert.Equal(t, 204, *rec.LastStatusCode)
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(txs[0])) == 2 }, "resent")
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		p, _ := d.List(context.Background(), Filter{Limit: 1})
		return len(p.Items) == 1 && p.Items[0].Resends == 1 && p.Items[0].Status == StatusDelivered
	}, "the resend's record replaces the log entry")
	p, err = d.List(context.Background(), Filter{})
	require.NoError(t, err)
	assert.Len(t, p.Items, 9)
}

func TestDispatcher_noDeliveriesWithoutCallbackURL(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("quiet", "")
	f.createSite("s1", rcv.url("/"))
	for i := 0; i < 5; i++ {
		tx := f.deposit("quiet", 10)
		f.append("quiet", ev(&events.DepositApproved{TxID: tx, Amount: 10, Requested: 10}, time.Now()))
	}
	tx := f.deposit("s1", 10)
	f.append("s1", ev(&events.DepositExpired{TxID: tx}, time.Now()))
	d, _ := f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "every message handled")
	cs := rcv.calls()
	require.Len(t, cs, 1)
	assert.Equal(t, tx, cs[0].Msg.Data["transactionId"])
	p, err := d.List(context.Background(), Filter{SiteID: "quiet"})
	require.NoError(t, err)
	assert.Empty(t, p.Items, "no records, no noise")
	p, err = d.List(context.Background(), Filter{})
	require.NoError(t, err)
	require.Len(t, p.Items, 1)
	assert.Equal(t, tx, string(p.Items[0].TransactionID))
	assert.NotContains(t, f.log.String(), "level=WARN")
	assert.NotContains(t, f.log.String(), "level=ERROR")
}

func TestDispatcher_refusesPrivateAddresses(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/")) // 127.0.0.1
	f.createSite("s2", strings.Replace(rcv.url("/"), "127.0.0.1", "localhost", 1))
	tx1 := f.deposit("s1", 10)
	f.append("s1", ev(&events.DepositExpired{TxID: tx1}, time.Now()))
	tx2 := f.deposit("s2", 10)
	f.append("s2", ev(&events.DepositExpired{TxID: tx2}, time.Now()))
	f.denyPrivate = true
	d, _ := f.dispatcher(Config{Schedule: Schedule{10 * time.Millisecond}})
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		p, _ := d.List(context.Background(), Filter{Status: StatusFailed})
		return len(p.Items) == 2
	}, "both parked")
	p, err := d.List(context.Background(), Filter{Status: StatusFailed})
	require.NoError(t, err)
	for _, r := range p.Items {
		assert.Equal(t, 2, r.Attempts, "each refusal is a failed attempt")
		assert.Nil(t, r.LastStatusCode)
		assert.True(t, hasPrefix(r.LastError, "refused to connect to"), deref(r.LastError))
		assert.Contains(t, deref(r.LastError), "loopback")
	}
	assert.Empty(t, rcv.calls(), "nothing reached the loopback endpoint")
}

// A Retry-After lengthens the scheduled wait, and never shortens it: a 0
// or a date in the past would otherwise spend every attempt in moments.
func TestDispatcher_honoursRetryAfter(t *testing.T) {
	cases := []struct {
		name     string
		code     int
		value    func() string
		schedule time.Duration
		// The second attempt comes no sooner than min after the first,
		// and its nextAttemptAt is less than max away.
		min, max time.Duration
	}{
		{"503 seconds, longer than the schedule", http.StatusServiceUnavailable, func() string { return "2" }, 200 * time.Millisecond, 1900 * time.Millisecond, 3 * time.Second},
		{"429 http date, longer than the schedule", http.StatusTooManyRequests, func() string { return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat) }, 200 * time.Millisecond, 900 * time.Millisecond, 3 * time.Second},
		{"503 zero", http.StatusServiceUnavailable, func() string { return "0" }, 2 * time.Second, 1900 * time.Millisecond, 3 * time.Second},
		{"429 date in the past", http.StatusTooManyRequests, func() string { return time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat) }, 2 * time.Second, 1900 * time.Millisecond, 3 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			rcv := newReceiver(t, func(c callback, n int) (int, http.Header) {
				if n == 1 {
					return tc.code, http.Header{"Retry-After": {tc.value()}}
				}
				return http.StatusOK, nil
			})
			f.createSite("s1", rcv.url("/"))
			tx := f.deposit("s1", 10)
			f.append("s1", ev(&events.DepositExpired{TxID: tx}, time.Now()))
			d, _ := f.dispatcher(Config{Schedule: Schedule{tc.schedule}})
			testkit.Eventually(t, testkit.WaitFor, func() bool {
				p, _ := d.List(context.Background(), Filter{Status: StatusPending})
				return len(p.Items) == 1 || len(rcv.byTx(tx)) == 2
			}, "pending record")
			p, err := d.List(context.Background(), Filter{Status: StatusPending})
			require.NoError(t, err)
			if len(p.Items) == 1 {
				next, err := time.Parse(time.RFC3339, *p.Items[0].NextAttemptAt)
				require.NoError(t, err)
				assert.Less(t, time.Until(next), tc.max)
			}
			testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == 2 }, "retried")
			cs := rcv.byTx(tx)
			assert.GreaterOrEqual(t, cs[1].At.Sub(cs[0].At), tc.min, "not before the longer of the schedule and Retry-After")
		})
	}
}

func TestDispatcher_oneActiveAtATime(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	a, stopA := f.dispatcher(Config{Conn: f.conn("a")})
	b, stopB := f.dispatcher(Config{Conn: f.conn("b")})
	testkit.Eventually(t, testkit.WaitFor, func() bool { return a.Active() || b.Active() }, "one takes the lease")
	var txs []string
	for i := 0; i < 20; i++ {
		tx := f.deposit("s1", 10)
		f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
		txs = append(txs, tx)
	}
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.calls()) == len(txs) }, "all delivered")
	assert.False(t, a.Active() && b.Active(), "never both")
	// The active one stops; the other takes over.
	next := b
	if b.Active() {
		stopB()
		next = a
	} else {
		stopA()
	}
	testkit.Eventually(t, testkit.WaitFor, next.Active, "the other takes over")
	tx := f.deposit("s1", 10)
	f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == 1 }, "delivered by the new one")
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "all acknowledged")
	for _, c := range rcv.calls() {
		assert.Equal(t, 1, count(rcv.calls(), func(o callback) bool { return o.ID == c.ID }), "each callback once: %s", c.ID)
	}
	if t.Failed() {
		t.Log(f.log.String())
	}
}

func TestDispatcher_backlogLimitParks(t *testing.T) {
	f := newFixture(t)
	hanging := newReceiver(t, func(callback, int) (int, http.Header) { return -1, nil })
	f.createSite("s1", hanging.url("/"))
	for i := 0; i < 6; i++ {
		tx := f.deposit("s1", 10)
		f.append("s1", ev(&events.DepositExpired{TxID: tx}, time.Now()))
	}
	d, _ := f.dispatcher(Config{Timeout: time.Minute, SiteConcurrency: 2, SiteBacklog: 4})
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		p, _ := d.List(context.Background(), Filter{Status: StatusFailed})
		return len(p.Items) == 2
	}, "callbacks beyond the backlog parked")
	p, err := d.List(context.Background(), Filter{Status: StatusFailed})
	require.NoError(t, err)
	for _, r := range p.Items {
		assert.Equal(t, 0, r.Attempts)
		assert.Contains(t, deref(r.LastError), "awaiting delivery")
	}
}

// assertField checks that err is an *Error naming field, with a message.
func assertField(t *testing.T, err error, field string) {
	t.Helper()
	var ce *Error
	if assert.ErrorAs(t, err, &ce) {
		assert.Equal(t, field, ce.Field)
		assert.NotEmpty(t, ce.Msg)
	}
}

// TestNew_needsTheProcessWiring: the dispatcher builds no store or ledger
// of its own; without them it refuses to start.
func TestNew_needsTheProcessWiring(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		cfg  Config
	}{
		{"nothing but a connection", Config{Conn: f.nc}},
		{"no records", Config{Conn: f.nc, Store: f.store, Ledger: f.led}},
		{"no ledger", Config{Conn: f.nc, Store: f.store, Records: f.reader}},
		{"no store", Config{Conn: f.nc, Ledger: f.led, Records: f.reader}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(context.Background(), tc.cfg)
			assert.Error(t, err)
			assert.Nil(t, d)
		})
	}
}

// A receiver that answers 101 Switching Protocols and holds the connection
// open: its body is the connection, which the attempt's deadline does not
// bound. The attempt fails at once instead of waiting as long as the
// receiver likes (and holding a graceful stop with it).
func TestPost_switchingProtocolsIsAFailedAttempt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	// The receiver lets go of the connection only after 20 s (so that a
	// gateway that waits for it does end the test); let records when.
	var let atomic.Bool
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				_, _ = c.Read(buf)
				_, _ = c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n"))
				time.Sleep(20 * time.Second)
				let.Store(true)
			}()
		}
	}()
	o := post(context.Background(), newClient(true, 4), "http://"+ln.Addr().String()+"/", http.Header{}, []byte("{}"), 10*time.Second, time.Now())
	assert.False(t, let.Load(), "the attempt waited until the receiver let go of the connection")
	assert.False(t, o.ok)
	assert.Equal(t, http.StatusSwitchingProtocols, o.code)
	assert.Contains(t, o.err, "HTTP 101")
}

// An overdue deposit approved before the sweep reached it is expired and
// approved in one message (aggregates: ApproveDeposit): two callbacks, in
// that order, the approval's previousStatus expired.
func TestDispatcher_expiredAndApprovedInOneMessage(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	tx, req := f.depositEvent("s1", 10000, time.Now().Add(-time.Second))
	f.append("s1", req)
	f.dispatcher(Config{})
	f.append("s1", ev(&events.DepositExpired{TxID: tx}, time.Now()), ev(&events.DepositApproved{TxID: tx, Amount: 10000, Requested: 10000}, time.Now()))
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == 2 }, "both callbacks")
	cs := rcv.byTx(tx)
	assert.Equal(t, TypeDepositExpired, cs[0].Msg.Type)
	assert.Equal(t, "pending", cs[0].Msg.Data["previousStatus"])
	assert.Equal(t, TypeDepositApproved, cs[1].Msg.Type)
	assert.Equal(t, "expired", cs[1].Msg.Data["previousStatus"])
	assert.Equal(t, "approved", cs[1].Msg.Data["status"])
}
