package httpapi

import (
	"math"
	"sync"
	"time"
)

// limiter is a token bucket per key (a site, or a client address of the
// hosted page): rate tokens per second, burst twice that (docs/merchant-api.md
// "Rate limit"). It is per process; with several gateway replicas behind a
// balancer each enforces the limit on its share.
//
// Client addresses are as many as the internet has, so the buckets are
// bounded: past maxBuckets, the buckets that have filled up again (which
// are the same as no bucket) are dropped.
type limiter struct {
	now     func() time.Time
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	rate   int64
	tokens float64
	last   time.Time
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{now: now, buckets: map[string]*bucket{}}
}

// allow takes one token from site's bucket. When none is left it returns
// false and the whole seconds until one will be.
func (l *limiter) allow(site string, rate int64) (bool, int) {
	if rate <= 0 {
		return true, 0
	}
	now := l.now()
	burst := float64(2 * rate)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[site]
	if b == nil || b.rate != rate {
		if len(l.buckets) >= maxBuckets {
			l.sweep(now)
		}
		b = &bucket{rate: rate, tokens: burst, last: now}
		l.buckets[site] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(burst, b.tokens+el*float64(rate))
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := (1 - b.tokens) / float64(rate)
	return false, int(math.Ceil(wait))
}

// maxBuckets bounds the limiter's memory (about 100 bytes a bucket).
const maxBuckets = 100_000

// sweep drops the buckets that are full by now; if that frees nothing (a
// flood from more addresses than maxBuckets within one refill), it drops
// them all: the limiter then forgets, rather than the process running out
// of memory (l.mu held).
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*float64(b.rate) >= float64(2*b.rate) {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= maxBuckets {
		clear(l.buckets)
	}
}
