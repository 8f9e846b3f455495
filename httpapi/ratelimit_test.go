package httpapi

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The limiter's buckets are bounded: a flood from more addresses than
// maxBuckets drops the buckets that have filled up again (which are the
// same as none), and as a last resort all of them, never growing past the
// bound.
func TestLimiter_boundedBuckets(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newLimiter(func() time.Time { return now })
	for i := range maxBuckets {
		ok, _ := l.allow("ip:"+strconv.Itoa(i), 1)
		assert.True(t, ok)
	}
	assert.Len(t, l.buckets, maxBuckets)
	// A busy client, empty bucket.
	l.allow("busy", 1)
	l.allow("busy", 1)

	// One second later every bucket but busy's has refilled.
	now = now.Add(time.Second)
	ok, _ := l.allow("new", 1)
	assert.True(t, ok)
	assert.LessOrEqual(t, len(l.buckets), 3, "full buckets are dropped")
	ok, _ = l.allow("busy", 1)
	assert.True(t, ok, "busy's bucket refilled one token")
	ok, wait := l.allow("busy", 1)
	assert.False(t, ok, "busy's bucket was kept, not reset to a full burst")
	assert.Equal(t, 1, wait)

	// All buckets busy at once: the limiter forgets rather than grows.
	l = newLimiter(func() time.Time { return now })
	for i := range maxBuckets + 10 {
		k := "ip:" + strconv.Itoa(i)
		l.allow(k, 1)
		l.allow(k, 1)
	}
	assert.LessOrEqual(t, len(l.buckets), maxBuckets)
}
