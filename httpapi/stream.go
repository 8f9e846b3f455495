package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/ledger"
)

// callbackStreamPath is the merchant's stream of its callbacks.
const callbackStreamPath = "/v1/callbacks/stream"

// streamTsSkew is how far a stream request's signed ts may be from the
// gateway's clock.
const streamTsSkew = 5 * time.Minute

// fresh checks a stream request's ts, the Unix time in seconds it was
// signed at. A GET's signature covers its query only, and without a
// query it never changes: whoever once saw one (a proxy's log, another
// GET of the site) could open the stream, and the history it replays,
// for as long as the secret lasts. A signed time bounds that to minutes.
func (s *Server) fresh(ts string) error {
	const how = "ts is required: the Unix time in seconds, in the signed query, within 5 minutes of the gateway's clock"
	if ts == "" {
		return errBad("invalid_request", "ts", how)
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || n <= 0 {
		return errBad("invalid_request", "ts", how)
	}
	if d := s.cfg.Now().Sub(time.Unix(n, 0)); d > streamTsSkew || d < -streamTsSkew {
		return &apiError{status: 401, code: "invalid_signature", field: "ts",
			message: fmt.Sprintf("ts is %s from the gateway's clock (at most 5m): sign the request again with the current time", d.Round(time.Second).Abs())}
	}
	return nil
}

// streamHeartbeat is how often an idle stream sends a comment, so that
// proxies and the client see it alive.
const streamHeartbeat = 15 * time.Second

// callbackStream serves GET /v1/callbacks/stream: the site's callbacks as
// server-sent events, each what its delivery would carry (headers signed
// now, and body), from now on or after the event named by Last-Event-ID
// or else ?after=. Its first line is the position it streams after, as an
// SSE id. It is how `merchant listen` forwards callbacks to a machine
// without a public URL (docs/callbacks.md).
func (s *Server) callbackStream(w http.ResponseWriter, r *http.Request) {
	q, err := queryParams(r, "after", "ts")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if err := s.fresh(q.Get("ts")); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if s.cfg.Events == nil {
		s.writeErr(w, r, &apiError{status: 503, code: "unavailable", message: "this process does not serve callback streams"})
		return
	}
	var after, afterField string
	var afterSeq uint64
	// An SSE client reconnects to the URL it first opened, ?after= and
	// all, and sends the last id it received as Last-Event-ID: that is
	// the later position (docs/callbacks.md).
	for _, p := range []struct{ field, v string }{{"after", q.Get("after")}, {"Last-Event-ID", r.Header.Get("Last-Event-ID")}} {
		if p.v == "" {
			continue
		}
		seq, _, ok := callbacks.ParseWebhookID(p.v)
		if !ok {
			s.writeErr(w, r, errBad("invalid_request", p.field, p.field+" must be a webhook-id (<sequence>-<index>)"))
			return
		}
		after, afterField, afterSeq = p.v, p.field, seq
	}
	if after != "" {
		// A position past the stream's end was never handed out: streaming
		// after it would stay silent while callbacks are made.
		last, err := s.cfg.Events.LastSeq(r.Context())
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if afterSeq > last {
			s.writeErr(w, r, errBad("invalid_request", afterField, fmt.Sprintf(
				"%s names no event of this gateway: the newest is at sequence %d; resume from an id the stream sent", afterField, last)))
			return
		}
	}
	release, err := s.streams.take(info(r).siteID, s.cfg.StreamsPerSite, s.cfg.Streams)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	defer release()
	ctx := r.Context()
	if after == "" {
		// The position is read before the answer starts and is its first
		// line: whatever is stored once the client has read it is
		// streamed, and a client whose connection breaks before any
		// callback came resumes from it instead of from a later end.
		pos, err := callbacks.Head(ctx, s.cfg.Events)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		after = pos
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(streamHeartbeat * 2))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := write(fmt.Appendf(nil, "id: %s\n\n", after)); err != nil {
		return
	}
	site := info(r).siteID
	// A stream is let in once but lasts: the credentials it was opened
	// with are checked again as it goes, so that a secret rotated without
	// overlap, an allowlist that no longer admits the caller or any other
	// refusal a new request would get ends it (docs/callbacks.md).
	signed := []byte(r.URL.RawQuery)
	check := func(ctx context.Context) error {
		id, _, _, err := s.merchantCredentials(r, signed)
		if err == nil && id != site {
			err = &apiError{status: 401, code: "unknown_app_key", field: "appKey", message: "appKey is not known"}
		}
		if err == nil {
			// A site taken out of service (a message it cannot apply) streams
			// nothing more: its stream ends as its requests are refused.
			err = s.cfg.Ledger.Read(ctx, site, ledger.Local, nil)
		}
		return err
	}
	beat := time.NewTicker(streamHeartbeat)
	defer beat.Stop()
	evc := make(chan callbacks.StreamEvent)
	errc := make(chan error, 1)
	go func() {
		errc <- callbacks.Stream(ctx, callbacks.StreamConfig{Store: s.cfg.Events, Ledger: s.cfg.Ledger, Records: s.cfg.Reader,
			Check: check, Applied: s.cfg.Ledger.SiteApplied, Secret: signerOf(r)},
			site, after, func(ev callbacks.StreamEvent) error {
				select {
				case evc <- ev:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
	}()
	for {
		select {
		case ev := <-evc:
			b, err := json.Marshal(ev)
			if err != nil {
				return
			}
			if write(fmt.Appendf(nil, "id: %s\nevent: callback\ndata: %s\n\n", ev.ID, b)) != nil {
				return
			}
		case <-beat.C:
			if write([]byte(": alive\n\n")) != nil {
				return
			}
		case <-s.stopping:
			// Every callback written is whole, and the client resumes
			// after the last: a reconnection, which the closed listener
			// sends to another process, misses nothing.
			s.log.DebugContext(ctx, "callback stream ended: the gateway is stopping", "site", site)
			_ = write(streamStopEnd)
			return
		case err := <-errc:
			if err != nil && ctx.Err() == nil {
				_ = write(s.streamEnd(r, err))
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

// streamStopRetry is the reconnection time a stream ended by a stop asks
// for: long enough for a load balancer to see the listener closed, short
// enough that callbacks keep flowing through another process.
const streamStopRetry = 500 * time.Millisecond

// streamStopEnd ends a stream because the process stops: a comment for
// whoever reads the stream, and the SSE reconnection time, which an SSE
// client (an EventSource, the Go client) takes as the pause before it
// connects again, after the last id it received (docs/callbacks.md
// "When a gateway stops"). Not an event: there is nothing to deliver.
var streamStopEnd = fmt.Appendf(nil, ": the gateway is stopping; connect again\nretry: %d\n\n", streamStopRetry.Milliseconds())

// StopStreams ends every open callback stream, and any opened after, with
// streamStopEnd. A stream lasts as long as its client, so a graceful
// shutdown that waits for requests to finish would otherwise wait out its
// deadline; call it as the stop begins, once the listener no longer
// accepts (http.Server.RegisterOnShutdown).
func (s *Server) StopStreams() { s.stopOnce.Do(func() { close(s.stopping) }) }

// OpenStreams is how many callback streams this process serves now.
func (s *Server) OpenStreams() int {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	return s.streams.total
}

// streamEnd is the event that ends a stream on err: the error envelope a
// request refused for it is answered (docs/callbacks.md).
func (s *Server) streamEnd(r *http.Request, err error) []byte {
	ae := classify(err)
	lvl := slog.LevelInfo
	if ae.status >= 500 {
		lvl = slog.LevelWarn
	}
	s.log.Log(r.Context(), lvl, "callback stream ended", "site", info(r).siteID, "status", ae.status, "code", ae.code, "err", err)
	b, _ := s.encode(r, envelope{Status: ae.status, Code: ae.code, Message: ae.message, Field: ae.field}, nil)
	return fmt.Appendf(nil, "event: error\ndata: %s\n\n", b)
}

// streamSlots counts the callback streams open in this process, per site
// and in all.
type streamSlots struct {
	mu     sync.Mutex
	total  int
	bySite map[ids.SiteID]int
}

// streamRetryAfter is the Retry-After of a stream refused for want of a
// slot, in seconds: a slot frees only when some stream ends, so coming
// back at once would most likely be refused again.
const streamRetryAfter = 15

// take holds a slot for a stream of site until release, or refuses it:
// 429 when the site has perSite streams open (its own doing), 503 when the
// process serves total (a limit below 1 is none).
func (sl *streamSlots) take(site ids.SiteID, perSite, total int) (release func(), err error) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if perSite > 0 && sl.bySite[site] >= perSite {
		return nil, &apiError{status: 429, code: "rate_limited", retryAfter: streamRetryAfter,
			message: fmt.Sprintf("the site already has %d callback streams open on this gateway process, the most it may; close one", perSite)}
	}
	if total > 0 && sl.total >= total {
		return nil, &apiError{status: 503, code: "unavailable", retryAfter: streamRetryAfter, limit: true,
			message: "this gateway process serves as many callback streams as it may; try again later"}
	}
	sl.bySite[site]++
	sl.total++
	return func() {
		sl.mu.Lock()
		defer sl.mu.Unlock()
		sl.total--
		if sl.bySite[site]--; sl.bySite[site] == 0 {
			delete(sl.bySite, site)
		}
	}, nil
}
