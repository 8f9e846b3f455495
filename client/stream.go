package client

// Following the site's callbacks through the gateway's signed stream.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// StreamEvent is one callback as GET /v1/callbacks/stream carries it:
// what its delivery would send, headers (signed when sent) and body.
type StreamEvent struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

// Callbacks follows the site's callbacks (GET /v1/callbacks/stream) and
// calls fn for each, in order, from now on or after the event after (a
// webhook-id, "" for now on). Each connection starts by telling its
// position, which Callbacks keeps as after until a callback moves it on:
// when the stream breaks it reconnects from there, so a callback stored
// while it was disconnected is not missed, even before the first one came.
// The gateway ends a stream whose credentials it no longer accepts (a
// secret rotated without overlap, an IP allowlist that no longer admits
// the caller) with its refusal, which Callbacks returns as an *Error.
// A gateway process that stops ends its streams with a reconnection time
// (an SSE retry:): Callbacks tells onError ErrGatewayStopping and
// reconnects after that time (at least 100 ms), from where it was, which
// a load balancer sends to another process. Otherwise, before
// reconnecting it pauses: the first pause of WithRetries (at least
// 100 ms), doubled after each connection that failed (up to 10 s), or the
// gateway's Retry-After when longer (a full site or process), and back to
// the first after a connection that served: one that delivered a callback
// or stayed open 15 s. It goes on until ctx ends, fn fails or
// the gateway refuses the stream (an *Error); onError is told of each
// break (it may be nil).
func (c *Client) Callbacks(ctx context.Context, after string, fn func(StreamEvent) error, onError func(error), opts ...StreamOption) error {
	var o streamOptions
	for _, opt := range opts {
		opt(&o)
	}
	first := max(c.backoff, minStreamPause)
	pause := first
	for {
		var opened time.Time
		delivered := false
		err := c.stream(ctx, &after, func(ev StreamEvent) error {
			delivered = true
			return fn(ev)
		}, func() {
			opened = time.Now()
			if o.onConnect != nil {
				o.onConnect(after)
			}
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if delivered || (!opened.IsZero() && time.Since(opened) >= healthyStream) {
			// The pause grew while the gateway could not serve the
			// stream; a connection that did ends that, and its break
			// is a new one. One that only told its position and ended
			// (a site out of service) does not: it would be asked
			// again at the first pause for ever.
			pause = first
		}
		var fnErr *callbackError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		var e *Error
		if errors.As(err, &e) && e.Status < 500 && e.Status != http.StatusTooManyRequests {
			return err // a refusal: the same request would be refused again
		}
		if onError != nil {
			onError(err)
		}
		var stop *stoppingError
		if errors.As(err, &stop) {
			// The gateway served the stream and ended it on purpose: the
			// reconnection is not an outage's, and it takes the time the
			// gateway asked for rather than a growing pause.
			pause = first
			if err := c.wait(ctx, max(stop.retry, minStreamPause)); err != nil {
				return err
			}
			continue
		}
		wait := pause
		if e != nil && e.RetryAfter > wait {
			wait = e.RetryAfter // the gateway's streams are full for a while
		}
		if err := c.wait(ctx, wait); err != nil {
			return err
		}
		pause = min(2*pause, 10*time.Second)
	}
}

// healthyStream is how long a connection that delivered no callback must
// have stayed open to count as served.
const healthyStream = 15 * time.Second

// minStreamPause is the shortest pause before Callbacks reconnects, also
// with WithRetries(n, 0): a gateway that refuses at once would otherwise
// be asked again in a tight loop.
const minStreamPause = 100 * time.Millisecond

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// StreamOption changes how Callbacks follows the stream.
type StreamOption func(*streamOptions)

type streamOptions struct {
	onConnect func(position string)
}

// OnConnect has Callbacks call fn each time a connection is open and has
// told its position: every callback stored from then on reaches
// Callbacks' fn. position is the webhook-id form of the place the
// connection streams after (the after a reconnection would send). A
// program that must not miss a callback it causes starts causing them
// once fn was called.
func OnConnect(fn func(position string)) StreamOption {
	return func(o *streamOptions) { o.onConnect = fn }
}

// ErrGatewayStopping is what Callbacks tells onError when the gateway
// process ended the stream because it is stopping (docs/callbacks.md
// "When a gateway stops"); Callbacks reconnects.
var ErrGatewayStopping = errors.New("the gateway ended the callback stream: it is stopping")

// stoppingError is a stream the gateway ended with a reconnection time
// (retry, the SSE field) and nothing after it.
type stoppingError struct{ retry time.Duration }

func (e *stoppingError) Error() string {
	return fmt.Sprintf("%v (it asked for a reconnection after %s)", ErrGatewayStopping, e.retry)
}

func (e *stoppingError) Unwrap() error { return ErrGatewayStopping }

// callbackError is fn's own failure, which ends Callbacks.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// stream reads one connection of the stream, moving *after on; connected
// is called once, when the connection's first event (its position) came.
func (c *Client) stream(ctx context.Context, after *string, fn func(StreamEvent) error, connected func()) error {
	// ts is signed with the query: the gateway refuses a stream request
	// signed more than 5 minutes away from its clock (docs/callbacks.md).
	v := url.Values{"ts": {strconv.FormatInt(time.Now().Unix(), 10)}}
	if *after != "" {
		v.Set("after", *after)
	}
	q := v.Encode()
	path := "/v1/callbacks/stream?" + q
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("appKey", c.appKey)
	req.Header.Set("sign", Sign(c.secret, []byte(q)))
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.hc.Do(req)
	if err != nil {
		return &NetworkError{Op: "GET " + path, Err: err}
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		if err != nil {
			return &NetworkError{Op: "GET " + path, Status: res.StatusCode, Err: err}
		}
		return decodeAnswer("GET "+path, res, raw, nil)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var event, data, id string
	first := true
	// retry is the reconnection time the gateway gave (-1: none); atEnd
	// says no event is half read.
	retry, atEnd := time.Duration(-1), true
	for sc.Scan() {
		line := sc.Text()
		atEnd = line == ""
		if line == "" {
			// An event is complete (the SSE format, as the gateway
			// writes it: "field: value" lines, then a blank one).
			switch {
			case event == "callback" && data != "":
				var ev StreamEvent
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return fmt.Errorf("callback stream: %w", err)
				}
				if err := fn(ev); err != nil {
					return &callbackError{err}
				}
				// The SSE id is the stream's own position; the body's
				// is the same webhook-id. An event without either
				// leaves the position where it was rather than at
				// "now", which would skip what follows a break.
				if id != "" {
					*after = id
				} else if ev.ID != "" {
					*after = ev.ID
				}
			case event == "error":
				// The gateway ends a stream with the envelope a request
				// refused for the same reason gets: a refusal ends
				// Callbacks, anything else is a break.
				var env struct {
					Status                                           int
					Code, Message, Field, DocURL, DocLink, RequestID string
				}
				if json.Unmarshal([]byte(data), &env) != nil || env.Code == "" {
					return fmt.Errorf("callback stream: the gateway ended it: %s", data)
				}
				return &Error{Status: env.Status, Code: env.Code, Message: env.Message, Field: env.Field, DocURL: env.DocURL,
					DocLink: env.DocLink, RequestID: env.RequestID}
			case data == "" && id != "":
				*after = id // the position the connection streams after
			}
			if first {
				first = false
				connected()
			}
			event, data, id = "", "", ""
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			event = value
		case "data":
			data += value
		case "id":
			id = value
		case "retry":
			// SSE: the reconnection time, in milliseconds, digits only.
			if ms, err := strconv.ParseUint(value, 10, 31); err == nil {
				retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := sc.Err(); err != nil {
		return &NetworkError{Op: "GET " + path, Err: err}
	}
	if retry >= 0 && atEnd {
		// Ended whole after telling when to come back: a gateway that
		// stops (docs/callbacks.md "When a gateway stops").
		return &stoppingError{retry: retry}
	}
	return &NetworkError{Op: "GET " + path, Err: io.ErrUnexpectedEOF}
}
