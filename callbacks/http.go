package callbacks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// maxRetryAfter caps a merchant's Retry-After, so that a typo in a header
// cannot park a callback for a month.
const maxRetryAfter = 24 * time.Hour

// errPrivate is a connection refused because the callback address is not
// a public unicast address (see privateKind).
type errPrivate struct {
	addr netip.Addr
	kind string
}

func (e *errPrivate) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s address (--callback-allow-private allows it)", e.addr, e.kind)
}

// refusePrivate is the dialer's Control hook. It runs on the address the
// dialer actually connects to, after name resolution, so a DNS answer that
// changes between a check and the connection cannot redirect a callback
// into the gateway's own network.
func refusePrivate(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("callback address %q: %w", address, err)
	}
	if k := privateKind(ap.Addr()); k != "" {
		return &errPrivate{addr: ap.Addr().Unmap(), kind: k}
	}
	return nil
}

// newClient returns the HTTP client of the deliveries: no proxy (a proxy
// would connect on our behalf, past the address check), no redirects
// (a 3xx is a failed delivery), and connections kept alive per merchant.
// perHost is as many as all attempts in flight: several sites may share
// one host (a platform serving many shops), and a smaller idle pool would
// close and reopen a connection for most of their callbacks.
func newClient(allowPrivate bool, perHost int) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = refusePrivate
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          max(1024, perHost),
		MaxIdleConnsPerHost:   perHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// The answer's body is drained unread: asking for it compressed
		// (a header the callbacks document does not list) gains nothing.
		DisableCompression: true,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// outcome is the result of one delivery attempt.
type outcome struct {
	// ok is a 2xx answer within the timeout.
	ok bool
	// code is the HTTP status (0 when there was no answer).
	code int
	// err describes a failure, for the operator listing.
	err string
	// retryAfter is a 429 or 503's Retry-After (0 when absent).
	retryAfter time.Duration
}

// validURL checks a callbackUrl: an absolute http or https URL.
func validURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("callbackUrl %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("callbackUrl %q is not an absolute http or https URL", raw)
	}
	return nil
}

// post makes one attempt: POST body to target with the Standard Webhooks
// headers. The attempt is bounded by timeout; only the status line and
// headers must arrive within it.
func post(ctx context.Context, c *http.Client, target string, hdr http.Header, body []byte, timeout time.Duration, now time.Time) outcome {
	if err := validURL(target); err != nil {
		return outcome{err: err.Error()}
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return outcome{err: err.Error()}
	}
	req.Header = hdr
	resp, err := c.Do(req)
	if err != nil {
		var pe *errPrivate
		switch {
		case errors.As(err, &pe):
			return outcome{err: pe.Error()}
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return outcome{err: fmt.Sprintf("no answer within %s", timeout)}
		}
		return outcome{err: trimURLError(err)}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The body of a 101 is the connection itself, which the
		// attempt's deadline does not bound: reading it would wait as
		// long as the receiver holds it open, and hold a graceful stop
		// with it. A callback is no protocol switch: a failed attempt.
		resp.Body.Close()
		return outcome{code: resp.StatusCode, err: "HTTP 101 (a protocol switch is no answer to a callback)"}
	}
	// Drain a little of the body so the connection can be reused; a
	// merchant's answer beyond that is of no interest.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	o := outcome{code: resp.StatusCode}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		o.ok = true
		return o
	}
	o.err = "HTTP " + strconv.Itoa(resp.StatusCode)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		o.err += " (redirects are not followed)"
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			o.retryAfter = d
		}
	}
	return o
}

// trimURLError drops the method and URL that net/http puts in front of a
// transport error: the listing shows the URL separately, and a URL may
// carry a merchant's token. A failed name lookup loses the address of the
// resolver that answered it too: that is the gateway's own network, of no
// use to whoever reads why a callback failed.
func trimURLError(err error) string {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	var de *net.DNSError
	if errors.As(err, &de) && de.Server != "" {
		msg = strings.Replace(msg, " on "+de.Server, "", 1)
	}
	return msg
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP
// date. ok is false when the header is absent or unreadable; a date in the
// past means "now" (a tiny positive delay).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(maxRetryAfter/time.Second) {
			n = int64(maxRetryAfter / time.Second)
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, time.Millisecond), maxRetryAfter), true
}
