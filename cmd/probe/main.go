// Command probe is the health check of the deployment's container images.
// They are built FROM scratch, so there is no shell, curl or wget to run
// one: probe GETs a URL and exits 0 when the answer is 2xx, 1 when it is
// anything else or does not come, 2 on a usage error. It writes one line
// saying what it saw, which Docker keeps in the container's health log.
//
//	probe [-timeout 3s] URL
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: probe [-timeout 3s] URL\n\nExits 0 when GET URL answers 2xx, 1 otherwise.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	status, err := get(fs.Arg(0), *timeout)
	if err != nil {
		fmt.Fprintln(stderr, "probe:", err)
		return 1
	}
	fmt.Fprintf(stdout, "probe: %s: %d %s\n", fs.Arg(0), status, http.StatusText(status))
	if status < 200 || status > 299 {
		return 1
	}
	return 0
}

// get answers the status of GET url. It ignores proxy variables: a health
// check asks the process next to it, never a proxy.
func get(url string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("request %s: %w", url, err)
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	// Read a little of the body so the server does not log a reset.
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	return resp.StatusCode, nil
}
