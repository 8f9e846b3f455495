package callbacks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// fixture is an embedded JetStream server in a temp dir with the gateway's
// store, ledger and record reader over it, and a writer of site events. Its
// log fails the test on an ERROR line the test did not declare
// (f.log.ExpectErrors).
type fixture struct {
	t testing.TB
	// denyPrivate keeps the refusal of loopback receivers; every other
	// test's receiver is on 127.0.0.1.
	denyPrivate bool
	srv         *testkit.Server
	nc          *nats.Conn
	store       *jsstore.Store
	led         *ledger.Ledger
	reader      *records.Reader
	log         *testkit.Log

	mu    sync.Mutex
	heads map[string]head
	ntx   map[string]int32
}

type head struct {
	seq  uint64
	hash [32]byte
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	// The log first: its check then runs last, after everything that
	// logs into it has stopped.
	f := &fixture{t: t, log: testkit.NewLog(t, slog.LevelInfo), heads: map[string]head{}, ntx: map[string]int32{}}
	f.srv = testkit.StartServer(t, jsstore.ServerConfig{})
	f.nc = f.conn("gateway")
	f.store = testkit.OpenStore(t, f.nc, jsstore.Options{})
	f.led = ledger.New(f.store, ledger.Config{Logger: f.log.Logger})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitFor)
	defer cancel()
	require.NoError(t, f.led.Start(ctx))
	require.NoError(t, f.led.WaitReady(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitFor)
		defer cancel()
		_ = f.led.Close(ctx)
	})
	f.reader = records.NewReader(f.led, f.store, "http://gw.test")
	return f
}

// conn opens another in-process connection, as another process would.
func (f *fixture) conn(name string) *nats.Conn {
	f.t.Helper()
	return f.srv.Conn(name)
}

// append seals evs as one message on the site's subject.
func (f *fixture) append(site string, evs ...events.Event) uint64 {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.heads[site]
	data, last, err := events.Seal(h.hash, evs)
	require.NoError(f.t, err)
	subj, err := events.SiteSubject(ids.SiteID(site))
	require.NoError(f.t, err)
	seq, err := f.store.Append(context.Background(), subj, h.seq, data)
	require.NoError(f.t, err)
	f.heads[site] = head{seq: seq, hash: last}
	return seq
}

func ev(p events.Payload, at time.Time) events.Event {
	return events.Event{Name: p.EventName(), Time: at.UnixMilli(), Actor: events.ActorSystem, Payload: p}
}

// testSecret is a Standard Webhooks secret.
func testSecret(seed string) string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte("key-of-"+seed+"-0123456789abcdef"))
}

// createSite appends the site's creation; url may be empty.
func (f *fixture) createSite(site, url string) {
	f.append(site, ev(&events.SiteCreated{SiteID: site, Name: "Shop " + site, AppKey: "ak_" + site, Secret: "sec-" + site,
		WebhookSecret: testSecret(site), CallbackURL: url, DepositTTLSeconds: 1800, NegativeLimit: -1000000}, time.Now()))
}

// nextTx reserves the id of the site's next transaction.
func (f *fixture) nextTx(site string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.ntx[site]
	f.ntx[site] = i + 1
	return string(ids.NewTx(ids.SiteID(site), i))
}

func (f *fixture) depositEvent(site string, amount int64, expiresAt time.Time) (string, events.Event) {
	tx := f.nextTx(site)
	return tx, ev(&events.DepositRequested{TxID: tx, ProcessID: "p-" + tx, BankID: "b1", BankCode: "zain", BankName: "Zain Cash",
		IdentifierKind: "PHONE", Amount: amount, UserID: "u-" + tx, UserName: "user", Name: "Ali Hassan",
		ConvertedName: "alihassan", Lang: "en", AccountName: "Gateway", AccountNumber: "07701234567",
		ExpiresAt: expiresAt.UnixMilli()}, time.Now())
}

// deposit appends a pending deposit and returns its id.
func (f *fixture) deposit(site string, amount int64) string {
	tx, e := f.depositEvent(site, amount, time.Now().Add(30*time.Minute))
	f.append(site, e)
	return tx
}

// withdrawal appends a pending withdrawal and returns its id.
func (f *fixture) withdrawal(site string, amount int64) string {
	tx := f.nextTx(site)
	f.append(site, ev(&events.WithdrawalRequested{TxID: tx, ProcessID: "p-" + tx, BankID: "b1", BankCode: "zain",
		IdentifierKind: "PHONE", Amount: amount, UserID: "u-" + tx, UserName: "user", Name: "Sara Ali",
		ConvertedName: "saraali", AccountName: "Sara Ali", IBAN: "07709876543"}, time.Now()))
	return tx
}

// dispatcher starts a dispatcher delivering in the background; the
// returned stop function cancels it and waits for Run to return.
func (f *fixture) dispatcher(cfg Config) (*Dispatcher, func()) {
	f.t.Helper()
	if cfg.Conn == nil {
		cfg.Conn = f.nc
	}
	if cfg.Store == nil {
		cfg.Store, cfg.Ledger, cfg.Records = f.store, f.led, f.reader
	}
	if cfg.Logger == nil {
		cfg.Logger = f.log.Logger
	}
	cfg.AllowPrivate = !f.denyPrivate
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = time.Second
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 2 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if len(cfg.Schedule) == 0 {
		cfg.Schedule = Schedule{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := New(ctx, cfg)
	require.NoError(f.t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			d.Close()
		})
	}
	f.t.Cleanup(stop)
	return d, stop
}

// consumerDone reports whether the callbacks consumer has acknowledged
// every site message up to the stream's end.
func (f *fixture) consumerDone() bool {
	js, err := jetstream.New(f.nc)
	require.NoError(f.t, err)
	c, err := js.Consumer(context.Background(), events.StreamName, "callbacks")
	if err != nil {
		return false
	}
	info, err := c.Info(context.Background())
	if err != nil {
		return false
	}
	last, err := f.store.LastSeq(context.Background())
	require.NoError(f.t, err)
	return info.NumAckPending == 0 && info.NumPending == 0 && info.Delivered.Stream >= last
}

// loseLease takes the active dispatcher's lease from under it, as its
// expiry does when the dispatcher cannot renew it in time: its next renewal
// finds another revision, and the term ends.
func (f *fixture) loseLease() {
	f.t.Helper()
	js, err := jetstream.New(f.nc)
	require.NoError(f.t, err)
	kv, err := js.KeyValue(context.Background(), "CALLBACKS_LEASE")
	require.NoError(f.t, err)
	require.NoError(f.t, kv.Delete(context.Background(), leaseKey))
}

// callback is one request a receiver got.
type callback struct {
	ID, Timestamp, Signature string
	Header                   http.Header
	Body                     []byte
	At                       time.Time
	Msg                      struct {
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
}

// receiver is a merchant endpoint; answer decides each response (nil:
// 200, negative: no answer until the caller gives up). It records every
// request, and how many it was holding at once.
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	mu     sync.Mutex
	got    []callback
	answer func(c callback, n int) (int, http.Header)
	hang   chan struct{}
	// open counts the requests being handled; peak is its highest.
	open, peak int
}

func newReceiver(t testing.TB, answer func(c callback, n int) (int, http.Header)) *receiver {
	r := &receiver{t: t, answer: answer, hang: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		c := callback{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
			Signature: req.Header.Get("webhook-signature"), Header: req.Header.Clone(), Body: b, At: time.Now()}
		_ = json.Unmarshal(b, &c.Msg)
		r.mu.Lock()
		r.got = append(r.got, c)
		r.open++
		r.peak = max(r.peak, r.open)
		defer func() {
			r.mu.Lock()
			r.open--
			r.mu.Unlock()
		}()
		n := 0
		for _, g := range r.got {
			if g.ID == c.ID {
				n++
			}
		}
		answer := r.answer
		r.mu.Unlock()
		code := http.StatusOK
		if answer != nil {
			var h http.Header
			code, h = answer(c, n)
			for k, v := range h {
				w.Header()[k] = v
			}
		}
		if code < 0 {
			select {
			case <-r.hang:
			case <-req.Context().Done():
			}
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(func() {
		close(r.hang)
		r.srv.Close()
	})
	return r
}

func (r *receiver) url(path string) string { return r.srv.URL + path }

func (r *receiver) calls() []callback {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]callback(nil), r.got...)
}

// inFlight is how many requests the receiver is handling now, and the
// most it ever handled at once.
func (r *receiver) inFlight() (now, peak int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open, r.peak
}

// byTx returns the requests for a transaction, in arrival order.
func (r *receiver) byTx(tx string) []callback {
	var out []callback
	for _, c := range r.calls() {
		if c.Msg.Data["transactionId"] == tx {
			out = append(out, c)
		}
	}
	return out
}

// count counts the requests that satisfy pred.
func count(cs []callback, pred func(callback) bool) int {
	n := 0
	for _, c := range cs {
		if pred(c) {
			n++
		}
	}
	return n
}

// hasPrefix is a small readability helper for error strings.
func hasPrefix(s *string, p string) bool { return s != nil && strings.HasPrefix(*s, p) }

// listAll pages through d's listing with f, following nextCursor, in at
// most maxPages requests.
func listAll(t testing.TB, d *Dispatcher, f Filter, maxPages int) (all []Delivery, pages []records.Page[Delivery]) {
	t.Helper()
	for n := 0; ; n++ {
		require.Less(t, n, maxPages, "paging ends")
		p, err := d.List(context.Background(), f)
		require.NoError(t, err)
		all, pages = append(all, p.Items...), append(pages, p)
		if p.NextCursor == nil {
			return all, pages
		}
		f.Cursor = *p.NextCursor
	}
}

// crashAfterLog runs a dispatcher whose connection dies after the delivery
// log holds a callback and before its message is acknowledged.
func (f *fixture) crashAfterLog() {
	f.t.Helper()
	crashConn := f.conn("doomed")
	var logged atomic.Bool
	_, stop := f.dispatcher(Config{Conn: crashConn, afterLog: func([]string) {
		if logged.CompareAndSwap(false, true) {
			crashConn.Close()
		}
	}})
	testkit.Eventually(f.t, testkit.WaitFor, logged.Load, "delivery logged")
	stop()
	require.False(f.t, f.consumerDone(), "the message is still unacknowledged")
}
