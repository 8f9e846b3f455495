package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iqdgateway/gateway/cmd/internal/natsauth"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
)

// streamInfoTimeout bounds one stream's info request. A stream without a
// leader has nobody to answer it, so this is how long the command takes
// to say so.
const streamInfoTimeout = 5 * time.Second

// clusterReport is what `ledgerctl cluster` prints: where each stream of
// the account lives.
type clusterReport struct {
	// OK: every stream has a leader and every one of its replicas is
	// placed, online and current.
	OK      bool        `json:"ok"`
	Streams []placement `json:"streams"`
}

// placement is one stream's leader and followers.
type placement struct {
	Stream string `json:"stream"`
	// Replicas is the stream's configured replication; 0 when its leader
	// did not answer.
	Replicas int `json:"replicas"`
	// Leader is the server name of the stream's leader: the node every
	// write of the stream goes through; "" when it has none.
	Leader    string     `json:"leader"`
	Followers []follower `json:"followers"`
	// Problems say what is not as it should be; empty when nothing.
	Problems []string `json:"problems"`
}

// follower is one replica of a stream other than its leader, as the
// leader sees it.
type follower struct {
	Server  string `json:"server"`
	Current bool   `json:"current"`
	Offline bool   `json:"offline"`
	// Lag is how many operations it is behind the leader.
	Lag uint64 `json:"lag"`
	// LastSeenMs is how long ago the leader last heard from it.
	LastSeenMs int64 `json:"lastSeenMs"`
}

func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("cluster", stderr)
	natsURL := fs.String("nats", "", "URL(s) of the NATS cluster (or server) holding the ledger stream (required)")
	var creds natsauth.Flags
	creds.Register(fs, "--nats (the gateways' own credentials)")
	asJSON := fs.Bool("json", false, "print the report as one JSON document")
	if code, stop := parse(fs, args); stop {
		return code
	}
	if *natsURL == "" {
		return usageErr(stderr, fs, errors.New("--nats is required"))
	}
	auth, err := creds.Auth()
	if err != nil {
		return usageErr(stderr, fs, err)
	}
	opts, err := auth.Options()
	if err != nil {
		return usageErr(stderr, fs, err)
	}
	nc, err := jsstore.Dial(*natsURL, "ledgerctl", opts...)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl cluster: %v\n", err)
		return exitError
	}
	defer nc.Close()
	rep, err := clusterPlacement(ctx, nc)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl cluster: %v\n", err)
		return exitError
	}
	return printReport(stdout, stderr, "cluster", *asJSON, rep, rep.writeText, rep.OK)
}

// clusterPlacement asks for every stream of the account by name and then
// for each one's info. Names come from the cluster's metadata, which
// knows a stream that has no leader; a listing of infos would leave such
// a stream out without a word, as it has nobody to describe it.
func clusterPlacement(ctx context.Context, nc *nats.Conn) (clusterReport, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return clusterReport{}, fmt.Errorf("jetstream: %w", err)
	}
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	lister := js.StreamNames(lctx)
	var names []string
	for name := range lister.Name() {
		names = append(names, name)
	}
	if err := lister.Err(); err != nil {
		return clusterReport{}, fmt.Errorf("list streams: %w", err)
	}
	if len(names) == 0 {
		return clusterReport{}, errors.New("the account has no streams: no gateway has run on this cluster yet, or these are not its credentials")
	}
	// The ledger first: its leader is the one every payment goes through.
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == events.StreamName:
			return -1
		case b == events.StreamName:
			return 1
		}
		return strings.Compare(a, b)
	})
	rep := clusterReport{OK: true}
	for _, name := range names {
		p := streamPlacement(ctx, js, name)
		rep.OK = rep.OK && len(p.Problems) == 0
		rep.Streams = append(rep.Streams, p)
	}
	return rep, nil
}

// streamPlacement describes one stream from its leader's info.
func streamPlacement(ctx context.Context, js jetstream.JetStream, name string) placement {
	p := placement{Stream: name, Followers: []follower{}, Problems: []string{}}
	sctx, cancel := context.WithTimeout(ctx, streamInfoTimeout)
	defer cancel()
	st, err := js.Stream(sctx, name)
	if err != nil {
		p.Problems = append(p.Problems, fmt.Sprintf("no leader answered (%v): writes to it are refused until a majority of its replicas is up and elects one", err))
		return p
	}
	info := st.CachedInfo()
	p.Replicas = info.Config.Replicas
	if info.Cluster == nil || info.Cluster.Leader == "" {
		p.Problems = append(p.Problems, "no leader: writes to it are refused until a majority of its replicas is up and elects one")
	} else {
		p.Leader = info.Cluster.Leader
	}
	if info.Cluster != nil {
		for _, r := range info.Cluster.Replicas {
			f := follower{Server: r.Name, Current: r.Current && !r.Pending, Offline: r.Offline, Lag: r.Lag,
				LastSeenMs: r.Active.Milliseconds()}
			p.Followers = append(p.Followers, f)
			switch {
			case f.Offline:
				p.Problems = append(p.Problems, fmt.Sprintf("%s is offline%s", f.Server, seen(r.Active)))
			case !f.Current:
				p.Problems = append(p.Problems, fmt.Sprintf("%s is not current (%d operations behind)%s", f.Server, f.Lag, seen(r.Active)))
			}
		}
	}
	if placed := len(p.Followers) + 1; p.Leader != "" && p.Replicas > placed {
		p.Problems = append(p.Problems, fmt.Sprintf("only %d of its %d replicas are placed", placed, p.Replicas))
	}
	return p
}

// seen says when the leader last heard from a follower, when it has.
func seen(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf(" (last seen %s ago)", d.Round(100*time.Millisecond))
}

// writeText prints one line per stream, then the result.
func (r clusterReport) writeText(w io.Writer) error {
	var b strings.Builder
	width := 0
	for _, p := range r.Streams {
		width = max(width, len(p.Stream))
	}
	for _, p := range r.Streams {
		leader := p.Leader
		if leader == "" {
			leader = "(none)"
		}
		fmt.Fprintf(&b, "%-*s  leader %s", width, p.Stream, leader)
		if len(p.Followers) > 0 {
			var parts []string
			for _, f := range p.Followers {
				state := "current"
				switch {
				case f.Offline:
					state = "offline"
				case !f.Current:
					state = fmt.Sprintf("behind by %d", f.Lag)
				}
				parts = append(parts, f.Server+" "+state)
			}
			fmt.Fprintf(&b, "  followers %s", strings.Join(parts, ", "))
		}
		b.WriteByte('\n')
		for _, problem := range p.Problems {
			fmt.Fprintf(&b, "%-*s  ! %s\n", width, "", problem)
		}
	}
	if r.OK {
		fmt.Fprintf(&b, "RESULT: OK (%d streams, each with a leader and every replica current)\n", len(r.Streams))
	} else {
		bad := 0
		for _, p := range r.Streams {
			if len(p.Problems) > 0 {
				bad++
			}
		}
		fmt.Fprintf(&b, "RESULT: DEGRADED (%d of %d streams)\n", bad, len(r.Streams))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
