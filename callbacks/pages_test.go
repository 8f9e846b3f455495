package callbacks

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
)

func TestPage_roundTrip(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC).UnixMilli()
	tests := []struct {
		name string
		p    uint64
		es   []pageEntry
	}{
		{"empty", 3, nil},
		{"one", 0, []pageEntry{{k: key{1, 0}, site: "s1", code: 200, at: at}}},
		{"messages of two sites, many callbacks, time going back", 7, []pageEntry{
			{k: key{7 * pageSeqs, 0}, site: "s1", code: 204, at: at},
			{k: key{7 * pageSeqs, 3}, site: "s1", code: 299, at: at - 5000},
			{k: key{7*pageSeqs + 1, 0}, site: "site-with_a-long-name", code: 200, at: at + 1},
			{k: key{8*pageSeqs - 1, ids.MaxEventIndex}, site: "s1", code: 100, at: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodePage(tt.p, encodePage(tt.p, tt.es))
			require.NoError(t, err)
			assert.Equal(t, len(tt.es), len(got))
			for i := range tt.es {
				assert.Equal(t, tt.es[i], got[i])
			}
		})
	}
}

func TestPage_decodeRefusesWhatEncodeCannotWrite(t *testing.T) {
	good := encodePage(1, []pageEntry{{k: key{pageSeqs + 2, 1}, site: "s1", code: 200, at: 1}})
	group := func(off uint64, site string, n uint64, entries ...uint64) []byte {
		b := []byte{pageVersion, 1}
		b = binary.AppendUvarint(b, off)
		b = binary.AppendUvarint(b, uint64(len(site)))
		b = append(b, site...)
		b = binary.AppendUvarint(b, n)
		for _, e := range entries {
			b = binary.AppendUvarint(b, e)
		}
		return b
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"nothing", nil},
		{"unknown version", append([]byte{9}, good[1:]...)},
		{"trailing bytes", append(append([]byte{}, good...), 0)},
		{"cut short", good[:len(good)-1]},
		{"forged message count", binary.AppendUvarint([]byte{pageVersion}, 1<<40)},
		{"sequence outside the page", group(pageSeqs, "s1", 1, 0, 200, 0)},
		{"site id that is no id", group(0, "s 1", 1, 0, 200, 0)},
		{"empty site id", group(0, "", 1, 0, 200, 0)},
		{"forged callback count", group(0, "s1", 1<<40, 0, 200, 0)},
		{"no callbacks", group(0, "s1", 0)},
		{"status code not HTTP's", group(0, "s1", 1, 0, 42, 0)},
		{"index past a message's", group(0, "s1", 1, ids.MaxEventIndex+1, 200, 0)},
		{"indexes out of order", group(0, "s1", 2, 3, 200, 0, 3, 200, 0)},
		{"site length past the end", group(0, "s1", 0)[:4]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodePage(1, tt.b)
			assert.ErrorIs(t, err, errBadPage)
		})
	}
	t.Run("messages out of order", func(t *testing.T) {
		b := []byte{pageVersion, 2}
		for _, off := range []uint64{5, 5} {
			b = binary.AppendUvarint(b, off)
			b = append(b, 2, 's', '1', 1, 0, 200, 1, 0)
		}
		_, err := decodePage(0, b)
		assert.ErrorIs(t, err, errBadPage)
	})
}

func FuzzDecodePage(f *testing.F) {
	f.Add(encodePage(2, []pageEntry{{k: key{2 * pageSeqs, 0}, site: "s1", code: 200, at: 5}, {k: key{2*pageSeqs + 9, 2}, site: "s2", code: 201, at: 3}}))
	f.Add([]byte{pageVersion, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodePage(2, b)
		if err != nil {
			return
		}
		// What decodes encodes to what decodes the same.
		again, err := decodePage(2, encodePage(2, es))
		require.NoError(t, err)
		assert.Equal(t, len(es), len(again))
		for i := range es {
			assert.Equal(t, es[i], again[i])
		}
	})
}

func TestMergeEntries(t *testing.T) {
	e := func(seq uint64, idx int, code uint16) pageEntry {
		return pageEntry{k: key{seq, idx}, site: "s1", code: code}
	}
	tests := []struct {
		name      string
		a, b, out []pageEntry
		added     int
	}{
		{"both empty", nil, nil, []pageEntry{}, 0},
		{"into empty", nil, []pageEntry{e(1, 0, 200)}, []pageEntry{e(1, 0, 200)}, 1},
		{"nothing new", []pageEntry{e(1, 0, 200)}, nil, []pageEntry{e(1, 0, 200)}, 0},
		{"interleaved", []pageEntry{e(1, 0, 200), e(3, 0, 200)}, []pageEntry{e(2, 0, 200), e(3, 1, 200)},
			[]pageEntry{e(1, 0, 200), e(2, 0, 200), e(3, 0, 200), e(3, 1, 200)}, 2},
		{"a callback in both keeps the first logged", []pageEntry{e(1, 0, 200)}, []pageEntry{e(1, 0, 204), e(1, 1, 204)},
			[]pageEntry{e(1, 0, 200), e(1, 1, 204)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, added := mergeEntries(tt.a, tt.b)
			assert.Equal(t, tt.out, out)
			assert.Equal(t, tt.added, added)
		})
	}
}

// Two writers of one page (a dispatcher that lost its lease and its
// successor) each read, merge and write conditionally: neither erases
// what the other wrote.
func TestPageLog_concurrentWritersLoseNothing(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	ctx := context.Background()
	kvOf := func(name string) jetstream.KeyValue {
		js, err := jetstream.New(srv.Conn(name))
		require.NoError(t, err)
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "CALLBACKS", History: 1})
		require.NoError(t, err)
		return kv
	}
	a, b := newPageLog(kvOf("a")), newPageLog(kvOf("b"))
	const n = 200
	var wg sync.WaitGroup
	for w, pl := range []*pageLog{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				// Both write the same two pages, each its own callbacks.
				seq := uint64(pageSeqs + i%(2*pageSeqs))
				e := pageEntry{k: key{seq, w*n + i}, site: "s1", code: 200, at: int64(i)}
				if !assert.NoError(t, pl.add(ctx, []pageEntry{e})) {
					return
				}
			}
		}()
	}
	wg.Wait()
	var all []pageEntry
	for p := uint64(1); p <= 2; p++ {
		es, rev, err := a.read(ctx, p)
		require.NoError(t, err)
		assert.NotZero(t, rev)
		all = append(all, es...)
	}
	assert.Len(t, all, 2*n, "every callback of both writers is in a page")
	for w := 0; w < 2; w++ {
		for i := 0; i < n; i++ {
			_, ok, err := b.lookup(ctx, key{uint64(pageSeqs + i%(2*pageSeqs)), w*n + i})
			require.NoError(t, err)
			assert.True(t, ok, "writer %d callback %d", w, i)
		}
	}
	assert.LessOrEqual(t, len(a.open), openPages)
}

// First-attempt deliveries are not held in memory: a process keeps a few
// pages it is writing, and reads the rest when asked.
func TestDispatcher_deliveryLogIsNotKeptInMemory(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	var txs []string
	for i := 0; i < 3*pageSeqs; i++ {
		tx := f.deposit("s1", int64(100+i))
		f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
		txs = append(txs, tx)
	}
	d, _ := f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "every callback delivered")
	// A second process that only lists, as an operator's gateway would.
	other, err := New(context.Background(), Config{Conn: f.conn("ops"), Store: f.store, Ledger: f.led, Records: f.reader, Logger: f.log.Logger})
	require.NoError(t, err)
	defer other.Close()
	for _, x := range []*Dispatcher{d, other} {
		got, _ := listAll(t, x, Filter{Limit: 50}, 100)
		require.Len(t, got, len(txs))
		for i, it := range got {
			assert.Equal(t, txs[i], string(it.TransactionID), "item %d in stream order", i)
			assert.Equal(t, 1, it.Attempts)
		}
		x.ix.mu.RLock()
		assert.Empty(t, x.ix.log.entries, "no delivery log entry in memory")
		assert.Empty(t, x.ix.recs, "no record: every callback went through at its first attempt")
		x.ix.mu.RUnlock()
	}
	d.pages.mu.Lock()
	assert.LessOrEqual(t, len(d.pages.open), openPages)
	d.pages.mu.Unlock()
}

// A listing reads a bounded number of pages per request: over a long
// stretch of the stream without callbacks it answers what it found and a
// cursor past what it read, and paging on reaches everything, in order.
func TestDispatcher_listingScansBoundedPages(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	f.createSite("quiet", "")
	var want []string
	for round := 0; round < 3; round++ {
		tx := f.deposit("s1", int64(100+round))
		f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
		want = append(want, tx)
		for i := 0; i < 3*pageSeqs; i++ {
			f.deposit("quiet", 10) // no callbacks: pending deposits
		}
	}
	d, _ := f.dispatcher(Config{})
	d.pages.scanMax = 2
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "every callback delivered")
	items, pages := listAll(t, d, Filter{Limit: 10, SiteID: "s1"}, 100)
	var got []string
	for _, it := range items {
		got = append(got, string(it.TransactionID))
	}
	empty := 0
	for _, p := range pages {
		if len(p.Items) == 0 {
			empty++
		}
	}
	assert.Equal(t, want, got)
	assert.Positive(t, empty, "some requests stopped at the bound with nothing found")
}

// Batches of the delivery log as earlier builds wrote them are still
// listed and still keep a logged callback from being delivered again.
func TestDispatcher_readsLegacyLogBatches(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, nil)
	f.createSite("s1", rcv.url("/"))
	tx := f.deposit("s1", 10)
	seq := f.append("s1", ev(&events.DepositRejected{TxID: tx, Reason: "r"}, time.Now()))
	id := WebhookID(seq, 0)
	// Delivered and logged, and the process dies before the message is
	// acknowledged; then its log entry is put the way earlier builds
	// wrote it, instead of in a page.
	f.crashAfterLog()
	require.Len(t, rcv.byTx(tx), 1)
	js, err := jetstream.New(f.nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(context.Background(), "CALLBACKS")
	require.NoError(t, err)
	require.NoError(t, kv.Delete(context.Background(), pageKey(pageOf(seq))))
	at := time.Now().Add(-time.Hour).UnixMilli()
	batch, err := json.Marshal([][4]any{{id, "s1", 203, at}})
	require.NoError(t, err)
	_, err = kv.Put(context.Background(), logPrefix+id+".0a1b2c3d4e5f", batch)
	require.NoError(t, err)

	d, _ := f.dispatcher(Config{})
	testkit.Eventually(t, testkit.WaitFor, f.consumerDone, "the redelivered message is acknowledged")
	assert.Len(t, rcv.byTx(tx), 1, "the legacy log says it was delivered: not sent again")
	p, err := d.List(context.Background(), Filter{})
	require.NoError(t, err)
	require.Len(t, p.Items, 1)
	it := p.Items[0]
	assert.Equal(t, id, it.EventID)
	assert.Equal(t, tx, string(it.TransactionID))
	require.NotNil(t, it.LastStatusCode)
	assert.Equal(t, 203, *it.LastStatusCode)
	rec, err := d.Resend(context.Background(), id, "op-1")
	require.NoError(t, err)
	assert.Equal(t, 1, rec.Resends)
	require.NotNil(t, rec.LastStatusCode)
	assert.Equal(t, 203, *rec.LastStatusCode, "the resend starts from the legacy entry")
	testkit.Eventually(t, testkit.WaitFor, func() bool { return len(rcv.byTx(tx)) == 2 }, "resent")
}
