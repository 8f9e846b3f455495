// Package callbacks delivers signed callbacks (Standard Webhooks) for
// transactions that reach a final state. This file holds the retry
// schedule of docs/callbacks.md "Delivery and retries", shared by the dispatcher and the gateway's
// --callback-retry flag.
package callbacks

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// DefaultSchedule is the delay before each retry after a failed attempt:
// 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; after the last the delivery is
// parked as failed.
var DefaultSchedule = Schedule{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Schedule is the list of retry delays.
type Schedule []time.Duration

// ParseSchedule reads a comma-separated list of durations ("1s,2s,4s").
// An empty string gives DefaultSchedule.
func ParseSchedule(s string) (Schedule, error) {
	if strings.TrimSpace(s) == "" {
		return append(Schedule(nil), DefaultSchedule...), nil
	}
	var out Schedule
	for _, part := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("callback retry %q: %w", part, err)
		}
		if d <= 0 || d > 7*24*time.Hour {
			return nil, fmt.Errorf("callback retry %q: must be between 0 and 168h", part)
		}
		out = append(out, d)
	}
	return out, nil
}

// Delay returns the wait before retry number n (1-based: the wait after the
// n-th failed attempt), with up to 10 % random jitter so that many
// deliveries failing together do not retry together. ok is false when the
// schedule is exhausted and the delivery must be parked.
func (s Schedule) Delay(n int, rng *rand.Rand) (time.Duration, bool) {
	if n < 1 || n > len(s) {
		return 0, false
	}
	d := s[n-1]
	if rng != nil {
		d += time.Duration(rng.Int64N(int64(d)/10 + 1))
	}
	return d, true
}

// String renders the schedule as ParseSchedule reads it.
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}
