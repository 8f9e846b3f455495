package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/iqdgateway/gateway/client"
)

// listen follows the site's callbacks through the gateway (no public URL
// needed) and POSTs each, with the headers its delivery would carry, to a
// local URL, printing each delivery and the local answer, until
// interrupted. It says it is ready once the gateway's stream is open. A
// callback the local URL cannot take (no answer, 5xx or 429: a local
// server restarting) is tried again after 1, 2 and 4 s, then printed as
// not forwarded, and the next one goes on: the gateway's own deliveries
// and their retries are untouched.
func listen(ctx context.Context, c *client.Client, to, after string, stdout, stderr io.Writer) int {
	u, err := url.Parse(to)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintln(stderr, "merchant listen: -forward-to must be an http or https URL")
		return 2
	}
	hc := &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	connects := 0
	// Ready is said once the gateway has told the stream's position: a
	// callback caused after it is read is forwarded.
	ready := client.OnConnect(func(position string) {
		connects++
		if connects == 1 {
			fmt.Fprintf(stdout, "Ready: forwarding the site's callbacks to %s (Ctrl-C to stop)\n", to)
			return
		}
		fmt.Fprintf(stderr, "merchant listen: connected again, after %s\n", position)
	})
	err = c.Callbacks(ctx, after, func(ev client.StreamEvent) error {
		for i := 0; ; i++ {
			retry, err := forward(ctx, hc, to, ev, stdout)
			if err != nil {
				return err
			}
			if !retry {
				return nil
			}
			if i == len(forwardRetries) {
				fmt.Fprintf(stdout, "%s  %-20s %s  not forwarded after %d attempts\n", time.Now().Format("15:04:05"), ev.Type, ev.ID, i+1)
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(forwardRetries[i]):
			}
		}
	}, func(err error) {
		fmt.Fprintf(stderr, "merchant listen: %v; reconnecting\n", err)
	}, ready)
	if errors.Is(err, context.Canceled) {
		return 0
	}
	return failed(stderr, err, noAnswer("listen", nil))
}

// forwardRetries are the pauses before a callback is forwarded again.
var forwardRetries = [...]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// forward POSTs one callback to the local URL and prints the outcome;
// retry says whether the local URL may take it if asked again.
func forward(ctx context.Context, hc *http.Client, to string, ev client.StreamEvent, stdout io.Writer) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(ev.Body))
	if err != nil {
		return false, err
	}
	for k, v := range ev.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", "merchant-listen/1")
	start := time.Now()
	res, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		fmt.Fprintf(stdout, "%s  %-20s %s  -> %s: %v\n", time.Now().Format("15:04:05"), ev.Type, ev.ID, to, err)
		return true, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	res.Body.Close()
	fmt.Fprintf(stdout, "%s  %-20s %s  -> %d (%s)\n", time.Now().Format("15:04:05"), ev.Type, ev.ID, res.StatusCode,
		time.Since(start).Round(time.Millisecond))
	return res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests, nil
}
