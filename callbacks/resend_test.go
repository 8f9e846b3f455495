package callbacks

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// gate answers 200, except request number at, which it announces on held
// and answers with the code sent on release.
type gate struct {
	held    chan struct{}
	release chan int
	at      int
}

func newGate(at int) *gate {
	return &gate{held: make(chan struct{}, 1), release: make(chan int, 1), at: at}
}

func (g *gate) answer(_ callback, n int) (int, http.Header) {
	if n == g.at {
		g.held <- struct{}{}
		return <-g.release, nil
	}
	return 200, nil
}

// A resend during an attempt (the first, or a retry), then a graceful
// stop while the attempt is under way, which succeeds within the grace:
// the next dispatcher (another process) delivers the resend, once.
func TestResendDuringAttempt_gracefulStop(t *testing.T) {
	for _, c := range []struct {
		name string
		at   int
	}{{"first attempt", 1}, {"retry", 2}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			g := newGate(c.at)
			var first atomic.Bool
			rcv := newReceiver(t, func(cb callback, n int) (int, http.Header) {
				if n == 1 && c.at == 2 && first.CompareAndSwap(false, true) {
					return 500, nil
				}
				return g.answer(cb, n)
			})
			f.createSite("s1", rcv.url("/"))
			tx := f.deposit("s1", 10)
			f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
			d, stop := f.dispatcher(Config{Conn: f.conn("a")})
			<-g.held
			id := rcv.byTx(tx)[0].ID
			rec, err := d.Resend(context.Background(), id, "op")
			require.NoError(t, err)
			require.Equal(t, StatusPending, rec.Status)
			done := make(chan struct{})
			go func() { stop(); close(done) }()
			time.Sleep(200 * time.Millisecond)
			g.release <- 200
			<-done
			require.Len(t, rcv.byTx(tx), c.at)
			f.dispatcher(Config{Conn: f.conn("b")})
			testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == c.at+1 }, "the resend is delivered by the next term")
			time.Sleep(time.Second)
			require.Len(t, rcv.byTx(tx), c.at+1, "delivered once more, not twice")
		})
	}
}

// A delivery whose attempt succeeds while a resend of it is pending is
// not settled through the delivery log, which would acknowledge its
// message while the resend lives only in memory (a process dying then
// loses it): its record is written pending, with the resend, and it is
// delivered again.
func TestResendDuringAttempt_recordedBeforeSettled(t *testing.T) {
	f := newFixture(t)
	g := newGate(1)
	rcv := newReceiver(t, g.answer)
	f.createSite("s1", rcv.url("/"))
	tx := f.deposit("s1", 10)
	f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
	var logged []string
	var mu sync.Mutex
	d, _ := f.dispatcher(Config{Conn: f.conn("a"), afterLog: func(ids []string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, ids...)
	}})
	<-g.held
	id := rcv.byTx(tx)[0].ID
	rec, err := d.Resend(context.Background(), id, "op")
	require.NoError(t, err)
	require.Equal(t, StatusPending, rec.Status, "the operator is told the resend is pending")
	g.release <- 200
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == 2 }, "delivered again")
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "the message is acknowledged")
	done := recordDelivered(t, d, id)
	require.Equal(t, 1, done.Resends)
	mu.Lock()
	defer mu.Unlock()
	require.NotContains(t, logged, id, "the attempt under which it was resent went to the delivery log")
}

// A resend that comes once the attempt's outcome was taken, while its
// first-attempt delivery is being logged: the delivery is settled through
// the log, and the resend starts it again, recorded, and delivered once
// more.
func TestResendWhileLogged(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, func(callback, int) (int, http.Header) { return 200, nil })
	f.createSite("s1", rcv.url("/"))
	tx := f.deposit("s1", 10)
	f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
	var d *Dispatcher
	var once sync.Once
	ready := make(chan struct{})
	type answer struct {
		rec Delivery
		err error
	}
	answered := make(chan answer, 1)
	d, _ = f.dispatcher(Config{Conn: f.conn("a"), afterLog: func(ids []string) {
		once.Do(func() {
			<-ready
			rec, err := d.Resend(context.Background(), ids[0], "op")
			answered <- answer{rec, err}
		})
	}})
	close(ready)
	a := <-answered
	require.NoError(t, a.err)
	rec := a.rec
	require.Equal(t, StatusPending, rec.Status, "the operator is told the resend is pending")
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == 2 }, "delivered again")
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "the message is acknowledged")
	id := rcv.byTx(tx)[0].ID
	done := recordDelivered(t, d, id)
	require.Equal(t, 1, done.Resends)
	require.Equal(t, "op", done.LastResendBy)
	time.Sleep(500 * time.Millisecond)
	require.Len(t, rcv.byTx(tx), 2, "delivered once more, not twice")
}

// recordDelivered waits until the dispatcher's record of id says
// delivered, and returns it.
func recordDelivered(t *testing.T, d *Dispatcher, id string) Delivery {
	t.Helper()
	var done Delivery
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		var ok bool
		done, ok = d.ix.record(id)
		return ok && done.Status == StatusDelivered
	}, "the record of %s says delivered", id)
	return done
}
