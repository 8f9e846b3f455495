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

	"gateway/client"
)

// listen follows the site's callbacks through the gateway (no public URL
// needed) and POSTs each, with the headers its delivery would carry, to a
// local URL, printing each delivery and the local answer, until
// interrupted. It says it is ready once the gateway's stream is open. A
// local failure is printed and the next callback goes on: the gateway's
// own deliveries and their retries are untouched.
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
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(ev.Body))
		if err != nil {
			return err
		}
		for k, v := range ev.Headers {
			req.Header.Set(k, v)
		}
		req.Header.Set("User-Agent", "merchant-listen/1")
		start := time.Now()
		res, err := hc.Do(req)
		if err != nil {
			fmt.Fprintf(stdout, "%s  %-20s %s  -> %s: %v\n", time.Now().Format("15:04:05"), ev.Type, ev.ID, to, err)
			return nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		res.Body.Close()
		fmt.Fprintf(stdout, "%s  %-20s %s  -> %d (%s)\n", time.Now().Format("15:04:05"), ev.Type, ev.ID, res.StatusCode,
			time.Since(start).Round(time.Millisecond))
		return nil
	}, func(err error) {
		fmt.Fprintf(stderr, "merchant listen: %v; reconnecting\n", err)
	}, ready)
	if errors.Is(err, context.Canceled) {
		return 0
	}
	return failed(stderr, err)
}
