package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// sseEvent is one event of a server-sent event stream: its fields, and
// the comment it carries (a block of comments alone, such as a heartbeat,
// is not one).
type sseEvent struct{ ID, Event, Data, Retry, Comment string }

// sseStream is an open GET /v1/callbacks/stream.
type sseStream struct {
	t      testing.TB
	Header http.Header
	events chan sseEvent
	cancel context.CancelFunc
}

// openStream opens the site's callback stream with query, signed, and the
// headers hdr; it fails the test unless the stream is answered.
func (s *stack) openStream(t testing.TB, st site, query string, hdr map[string]string) *sseStream {
	t.Helper()
	ss, r := s.tryStream(t, st, query, hdr)
	require.NotNil(t, ss, "the stream is refused: %d %s", r.HTTP, r.Raw)
	return ss
}

// withTs adds the signed time a stream request needs to query, unless it
// has one.
func withTs(query string) string {
	if strings.Contains(query, "ts=") {
		return query
	}
	ts := "ts=" + strconv.FormatInt(time.Now().Unix(), 10)
	if query == "" {
		return ts
	}
	return query + "&" + ts
}

// tryStream opens the site's callback stream: the stream when answered
// 200, otherwise the refusal.
func (s *stack) tryStream(t testing.TB, st site, query string, hdr map[string]string) (*sseStream, resp) {
	t.Helper()
	return s.tryStreamAsIs(t, st, withTs(query), hdr)
}

// tryStreamAsIs is tryStream with the query as given, ts or none.
func (s *stack) tryStreamAsIs(t testing.TB, st site, query string, hdr map[string]string) (*sseStream, resp) {
	t.Helper()
	u := s.URL + "/v1/callbacks/stream?" + query
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("appKey", st.AppKey)
	req.Header.Set("sign", sign(st.Secret, []byte(query)))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if res.StatusCode != http.StatusOK {
		defer cancel()
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		r := resp{HTTP: res.StatusCode, Header: res.Header, Raw: b}
		require.NoError(t, json.Unmarshal(b, &r), "body: %s", b)
		return nil, r
	}
	ss := &sseStream{t: t, Header: res.Header, events: make(chan sseEvent, 64), cancel: cancel}
	t.Cleanup(ss.close)
	go func() {
		defer close(ss.events)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if ev.ID != "" || ev.Event != "" || ev.Data != "" || ev.Retry != "" {
					ss.events <- ev
				}
				ev = sseEvent{}
				continue
			}
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "":
				ev.Comment += value
			case "id":
				ev.ID = value
			case "event":
				ev.Event = value
			case "data":
				ev.Data += value
			case "retry":
				ev.Retry = value
			}
		}
	}()
	return ss, resp{HTTP: res.StatusCode, Header: res.Header}
}

// next is the stream's next event; it fails the test when the stream ends
// first.
func (ss *sseStream) next() sseEvent {
	ss.t.Helper()
	select {
	case ev, ok := <-ss.events:
		require.True(ss.t, ok, "the stream ended")
		return ev
	case <-time.After(testkit.WaitFor):
		ss.t.Fatal("no event on the stream")
		return sseEvent{}
	}
}

// ended waits for the stream's end; it fails the test on another event.
func (ss *sseStream) ended() {
	ss.t.Helper()
	select {
	case ev, ok := <-ss.events:
		require.False(ss.t, ok, "an event after the stream's last: %+v", ev)
	case <-time.After(testkit.WaitFor):
		ss.t.Fatal("the stream did not end")
	}
}

func (ss *sseStream) close() { ss.cancel() }

// splitEventID splits a webhook-id into its sequence and index.
func splitEventID(t testing.TB, id string) (uint64, int) {
	t.Helper()
	a, b, ok := strings.Cut(id, "-")
	require.True(t, ok, "event id %q", id)
	seq, err := strconv.ParseUint(a, 10, 64)
	require.NoError(t, err)
	idx, err := strconv.Atoi(b)
	require.NoError(t, err)
	return seq, idx
}

// TestCallbackStream_startsWithItsPosition: the stream's first event is
// the position it streams after, read before it answered, as an SSE id
// that resumes exactly there.
func TestCallbackStream_startsWithItsPosition(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	tx1 := s.approvedDeposit(t, st)
	seq1, _ := splitEventID(t, s.eventID(t, st.ID, "deposit.approved.v1", tx1))

	ss := s.openStream(t, st, "", nil)
	first := ss.next()
	require.Equal(t, sseEvent{ID: first.ID}, first, "the first event is an id alone")
	seq, idx := splitEventID(t, first.ID)
	assert.GreaterOrEqual(t, seq, seq1, "the stream's end when it was opened")
	assert.Equal(t, 1<<16, idx, "after every event of that message")

	// Stored once the position was read: streamed.
	tx2 := s.approvedDeposit(t, st)
	id2 := s.eventID(t, st.ID, "deposit.approved.v1", tx2)
	ev := ss.next()
	assert.Equal(t, "callback", ev.Event)
	assert.Equal(t, id2, ev.ID)
	ss.close()

	// From the position, later: the callback stored since comes first.
	rs := s.openStream(t, st, "after="+first.ID, nil)
	assert.Equal(t, sseEvent{ID: first.ID}, rs.next(), "a resumed stream tells where it resumes")
	assert.Equal(t, id2, rs.next().ID)

	// After the approval's whole message: none of it again, the next one.
	ms := s.openStream(t, st, "after="+strconv.FormatUint(seq1, 10)+"-65536", nil)
	ms.next()
	assert.Equal(t, id2, ms.next().ID)
}

// TestCallbackStream_lastEventIDWins: an SSE client that reconnects to the
// URL it opened with ?after= sends the last id it received as
// Last-Event-ID, the later position, which the stream resumes from.
func TestCallbackStream_lastEventIDWins(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	var ids []string
	for range 3 {
		tx := s.approvedDeposit(t, st)
		ids = append(ids, s.eventID(t, st.ID, "deposit.approved.v1", tx))
	}

	ss := s.openStream(t, st, "after="+ids[0], map[string]string{"Last-Event-ID": ids[1]})
	assert.Equal(t, sseEvent{ID: ids[1]}, ss.next(), "the position is Last-Event-ID's")
	assert.Equal(t, ids[2], ss.next().ID)
	ss.close()

	// Either, when it is not a webhook-id, is refused by its name.
	_, r := s.tryStream(t, st, "after="+ids[0], map[string]string{"Last-Event-ID": "soon"})
	requireErr(t, r, 400, "invalid_request", "Last-Event-ID")
	_, r = s.tryStream(t, st, "after=soon", map[string]string{"Last-Event-ID": ids[1]})
	requireErr(t, r, 400, "invalid_request", "after")

	// A position past the stream's end was never sent: refused by its
	// name, where streaming after it would stay silent.
	_, r = s.tryStream(t, st, "after=99999999999-1", nil)
	requireErr(t, r, 400, "invalid_request", "after")
	require.Contains(t, r.Message, "names no event")
	_, r = s.tryStream(t, st, "after="+ids[0], map[string]string{"Last-Event-ID": "99999999999-0"})
	requireErr(t, r, 400, "invalid_request", "Last-Event-ID")
	// The stream's own end, as a position read at the start, is taken.
	ss = s.openStream(t, st, "", nil)
	head := ss.next().ID
	ss.close()
	ss = s.openStream(t, st, "after="+head, nil)
	assert.Equal(t, sseEvent{ID: head}, ss.next())
	ss.close()
}

// requireStreamEnd asserts that the stream's next event is its last, an
// error carrying the envelope of a request refused with status, code and
// field.
func requireStreamEnd(t testing.TB, ss *sseStream, status int, code, field string) {
	t.Helper()
	ev := ss.next()
	require.Equal(t, "error", ev.Event, "%+v", ev)
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &keys), "data: %s", ev.Data)
	require.Equal(t, "null", string(keys["data"]), "data: %s", ev.Data)
	var env resp
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &env))
	assert.Equal(t, status, env.Status)
	assert.Equal(t, code, env.Code)
	assert.Equal(t, field, env.Field)
	assert.NotEmpty(t, env.Message)
	assert.Equal(t, "docs/errors.md#"+code, env.DocURL)
	assert.Equal(t, ss.Header.Get("Request-Id"), env.RequestID)
	assert.Equal(t, "test", env.AppVersion)
	ss.ended()
}

// TestCallbackStream_endsWhenItsCredentialsAreRefused: an open stream goes
// on only while the credentials it was opened with would let a new request
// in: a secret rotated without overlap, or an allowlist that no longer
// admits the caller, ends it with the refusal, before any later callback.
func TestCallbackStream_endsWhenItsCredentialsAreRefused(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	s.seedBanks()

	t.Run("secret rotated with an overlap: on", func(t *testing.T) {
		st := s.newSite(nil, 0)
		ss := s.openStream(t, st, "", nil)
		ss.next()
		r := s.opsT(t, "POST", "/ops/v1/sites/"+st.ID+"/secret", map[string]any{"overlapSeconds": 3600})
		requireOK(t, r)
		cur := st
		cur.Secret = decodeAny(t, r)["secret"].(string)
		tx := s.approvedDeposit(t, cur)
		assert.Equal(t, s.eventID(t, st.ID, "deposit.approved.v1", tx), ss.next().ID)
	})
	t.Run("secret rotated without overlap: ended", func(t *testing.T) {
		st := s.newSite(nil, 0)
		ss := s.openStream(t, st, "", nil)
		ss.next()
		r := s.opsT(t, "POST", "/ops/v1/sites/"+st.ID+"/secret", map[string]any{"overlapSeconds": 0})
		requireOK(t, r)
		cur := st
		cur.Secret = decodeAny(t, r)["secret"].(string)
		s.approvedDeposit(t, cur)
		requireStreamEnd(t, ss, 401, "invalid_signature", "sign")
	})
	t.Run("allowlist that no longer admits the caller: ended", func(t *testing.T) {
		const office, shop = "198.51.100.7", "203.0.113.9"
		st := s.newSite(map[string]any{"ipAllowlist": []string{"198.51.100.0/24", "203.0.113.0/24"}}, 0)
		ss := s.openStream(t, st, "", map[string]string{"X-Forwarded-For": office})
		ss.next()
		requireOK(t, s.opsT(t, "PATCH", "/ops/v1/sites/"+st.ID, map[string]any{"ipAllowlist": []string{"203.0.113.0/24"}}))
		body := depositForm("ZAINCASH", "al-1", "u1", 5000).Encode()
		tx := rec(t, s.send(t, http.MethodPost, pathDeposit, body, map[string]string{"Content-Type": "application/x-www-form-urlencoded",
			"appKey": st.AppKey, "sign": sign(st.Secret, []byte(body)), "X-Forwarded-For": shop})).TransactionID
		requireOK(t, s.opsT(t, "POST", "/ops/v1/deposits/"+tx+"/approve", nil))
		requireStreamEnd(t, ss, 403, "not_authorized", "")
	})
	t.Run("site taken out of service: ended", func(t *testing.T) {
		e.log.ExpectErrors("site message not applied")
		st := s.newSite(nil, 0)
		ss := s.openStream(t, st, "", nil)
		ss.next()
		// A message that does not extend the site's hash chain: the
		// ledger stops serving the site rather than apply it.
		forged, _, err := events.Seal([32]byte{}, []events.Event{{Name: events.TreasuryAdjustedName, Time: time.Now().UnixMilli(),
			Actor: "x", Payload: &events.TreasuryAdjusted{Amount: 1_000_000, Reason: "forged"}}})
		require.NoError(t, err)
		subj, err := events.SiteSubject(ids.SiteID(st.ID))
		require.NoError(t, err)
		_, err = s.Store.Append(context.Background(), subj, s.Ledger.SiteApplied(ids.SiteID(st.ID)), forged)
		require.NoError(t, err)
		requireStreamEnd(t, ss, 503, "unavailable", "")
	})
}

// TestCallbackStream_endsWhenTheGatewayStops: a graceful stop
// (http.Server.Shutdown, with StopStreams registered as the gateway does)
// ends an open stream at once with a comment and a retry:, no event, and
// returns well before its deadline instead of waiting for the stream's
// client. Another process on the same store, resumed after the last id the
// stream sent, streams what was stored since, missing nothing.
func TestCallbackStream_endsWhenTheGatewayStops(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	other := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	ss := s.openStream(t, st, "", nil)
	ss.next()
	tx := s.approvedDeposit(t, st)
	last := ss.next()
	require.Equal(t, s.eventID(t, st.ID, "deposit.approved.v1", tx), last.ID)

	s.srv.Config.RegisterOnShutdown(s.API.StopStreams)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testkit.WaitFor)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- s.srv.Config.Shutdown(ctx) }()
	assert.Equal(t, sseEvent{Comment: "the gateway is stopping; connect again", Retry: "500"}, ss.next(),
		"the stream's end: a comment and the reconnection time")
	ss.ended()
	select {
	case err := <-stopped:
		require.NoError(t, err, "Shutdown waited out its deadline")
	case <-time.After(testkit.WaitFor):
		t.Fatal("Shutdown did not return once the stream ended")
	}

	missed := other.approvedDeposit(t, st)
	rs := other.openStream(t, st, "after="+last.ID, nil)
	assert.Equal(t, sseEvent{ID: last.ID}, rs.next())
	assert.Equal(t, other.eventID(t, st.ID, "deposit.approved.v1", missed), rs.next().ID, "the callback stored between the two")
}

// TestCallbackStream_bounded: a site has at most DefaultStreamsPerSite
// streams open in a process (then 429 rate_limited), a process serves at
// most Config.Streams (then 503 unavailable), and a stream that ends gives
// its slot back.
func TestCallbackStream_bounded(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{streams: httpapi.DefaultStreamsPerSite + 2})
	a, b, c := s.newSite(nil, 0), s.newSite(nil, 0), s.newSite(nil, 0)
	var open []*sseStream
	for range httpapi.DefaultStreamsPerSite {
		ss := s.openStream(t, a, "", nil)
		ss.next()
		open = append(open, ss)
	}
	_, r := s.tryStream(t, a, "", nil)
	requireErr(t, r, 429, "rate_limited", "")
	assert.NotEmpty(t, r.Header.Get("Retry-After"))

	for range 2 {
		s.openStream(t, b, "", nil).next()
	}
	_, r = s.tryStream(t, c, "", nil)
	requireErr(t, r, 503, "unavailable", "")
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	// A limit reached is the operator's to raise, not a fault: a warning
	// (an ERROR line would fail the test when it ends).
	assert.Contains(t, e.log.String(), `level=WARN msg="request refused"`)

	open[0].close()
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		ss, _ := s.tryStream(t, a, "", nil)
		return ss != nil
	}, "the slot of the stream that ended is free again")
}

// TestCallbackStream_signedTime: a stream request carries the time it was
// signed at in its signed query, and one signed more than 5 minutes away
// is refused, so a signature seen once (that of a GET without a query,
// say) cannot open the stream and replay its history later.
func TestCallbackStream_signedTime(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{dispatcher: &dispatcherOptions{noRun: true}})
	s.seedBanks()
	st := s.newSite(nil, 100_000)
	at := func(d time.Duration) string { return "ts=" + strconv.FormatInt(time.Now().Add(d).Unix(), 10) }
	for _, c := range []struct {
		name, query string
		status      int
		code, field string
	}{
		{"no ts: the signature of any GET without a query", "", 400, "invalid_request", "ts"},
		{"only after", "after=1-0", 400, "invalid_request", "ts"},
		{"not a number", "ts=soon", 400, "invalid_request", "ts"},
		{"signed ten minutes ago", at(-10 * time.Minute), 401, "invalid_signature", "ts"},
		{"signed for ten minutes on", at(10 * time.Minute), 401, "invalid_signature", "ts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ss, r := s.tryStreamAsIs(t, st, c.query, nil)
			require.Nil(t, ss)
			requireErr(t, r, c.status, c.code, c.field)
		})
	}
	ss := s.openStream(t, st, at(-4*time.Minute), nil)
	require.NotNil(t, ss, "four minutes is within the bound")
}
