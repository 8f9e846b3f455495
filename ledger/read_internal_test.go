package ledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// lastForStore answers the one store read Read may do (a subject's last
// sequence) and counts it. Any other store call panics on the nil Store:
// Read must not make one.
type lastForStore struct {
	Store
	last  atomic.Uint64
	reads atomic.Int32
}

func (s *lastForStore) LastFor(context.Context, string) (uint64, error) {
	s.reads.Add(1)
	return s.last.Load(), nil
}

// siteAt gives l a created site id whose state is at seq, as the follower
// would after applying its messages.
func siteAt(t *testing.T, l *Ledger, id ids.SiteID, seq uint64) *entry {
	t.Helper()
	e, err := l.entry(id, true)
	require.NoError(t, err)
	e.mu.Lock()
	defer e.mu.Unlock()
	require.NoError(t, e.mutate(func() error {
		e.state.Cfg = &aggregates.Config{AppKey: "app-" + string(id)}
		e.pos.Seq = seq
		return nil
	}))
	l.published(e)
	return e
}

// readCtx bounds a read that must not wait: a read that blocked on a lock
// would fail the test with ErrUnavailable (Fresh) or time it out.
func readCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var consistencies = []struct {
	name string
	c    bool
}{{"Local", Local}, {"Fresh", Fresh}}

// Read never takes the site's append lock, and holds the state lock for
// reading only while fn runs; without fn it takes no lock at all.
func TestRead_locks(t *testing.T) {
	for _, tc := range consistencies {
		t.Run(tc.name, func(t *testing.T) {
			st := &lastForStore{}
			st.last.Store(3)
			l := New(st, Config{})
			e := siteAt(t, l, "s1", 3)
			ctx := readCtx(t)

			e.mu.Lock() // an append in flight
			var inside bool
			err := l.Read(ctx, "s1", tc.c, func(s *aggregates.Site) error {
				inside = true
				assert.Equal(t, uint64(3), e.pos.Seq)
				assert.False(t, e.rw.TryLock(), "the state lock is held for reading while fn runs")
				assert.True(t, e.rw.TryRLock(), "other readers go on")
				e.rw.RUnlock()
				return nil
			})
			require.NoError(t, err)
			assert.True(t, inside)
			assert.NoError(t, l.Read(ctx, "s1", tc.c, nil))
			e.mu.Unlock()

			require.True(t, e.rw.TryLock(), "the state lock is released when fn returns")
			// A writer changing the state in memory does not hold up a
			// read without fn.
			assert.NoError(t, l.Read(ctx, "s1", tc.c, nil))
			e.rw.Unlock()

			boom := errors.New("boom")
			assert.ErrorIs(t, l.Read(ctx, "s1", tc.c, func(*aggregates.Site) error { return boom }), boom,
				"fn's error is Read's")
		})
	}
}

// An unknown or uncreated site is ErrSiteNotFound: a valid id costs Fresh
// one store read and Local none, an invalid one none, and no entry is made.
func TestRead_unknownSite(t *testing.T) {
	tests := []struct {
		name  string
		site  ids.SiteID
		c     bool
		reads int32
	}{
		{"unknown, Local", "nope", Local, 0},
		{"unknown, Fresh", "nope", Fresh, 1},
		{"invalid, Local", "a.b", Local, 0},
		{"invalid, Fresh", "a.b", Fresh, 0},
		{"wildcard, Fresh", "*", Fresh, 0},
		{"uncreated, Local", "bare", Local, 0},
		{"uncreated, Fresh", "bare", Fresh, 1},
	}
	for _, tc := range tests {
		for _, withFn := range []bool{true, false} {
			name := tc.name + ", without fn"
			if withFn {
				name = tc.name + ", with fn"
			}
			t.Run(name, func(t *testing.T) {
				st := &lastForStore{}
				l := New(st, Config{})
				siteAt(t, l, "s1", 3)
				_, err := l.entry("bare", true) // followed nothing yet
				require.NoError(t, err)
				var fn func(*aggregates.Site) error
				if withFn {
					fn = func(*aggregates.Site) error { t.Error("fn ran"); return nil }
				}
				assert.ErrorIs(t, l.Read(readCtx(t), tc.site, tc.c, fn), aggregates.ErrSiteNotFound)
				assert.Equal(t, tc.reads, st.reads.Load(), "store reads")
				l.mu.RLock()
				defer l.mu.RUnlock()
				assert.Len(t, l.sites, 2, "no entry is made")
			})
		}
	}
}

// A site that is not served answers ErrUnavailable, and fn does not run.
func TestRead_faultedSite(t *testing.T) {
	for _, tc := range consistencies {
		t.Run(tc.name, func(t *testing.T) {
			st := &lastForStore{}
			st.last.Store(3)
			l := New(st, Config{})
			e := siteAt(t, l, "s1", 3)
			e.fault.Store(&fault{err: events.ErrChainBroken})
			ctx := readCtx(t)
			err := l.Read(ctx, "s1", tc.c, func(*aggregates.Site) error { t.Error("fn ran"); return nil })
			assert.ErrorIs(t, err, events.ErrUnavailable)
			assert.ErrorIs(t, l.Read(ctx, "s1", tc.c, nil), events.ErrUnavailable)
		})
	}
}

// Fresh answers once this process has applied what the site's subject held
// when it was called, never from an older state; Local answers at once.
func TestRead_freshWaitsForTheSubject(t *testing.T) {
	st := &lastForStore{}
	st.last.Store(7) // stored through another process
	l := New(st, Config{})
	e := siteAt(t, l, "s1", 5)

	var seq uint64
	require.NoError(t, l.Read(readCtx(t), "s1", Local, func(s *aggregates.Site) error { seq = e.pos.Seq; return nil }))
	assert.Equal(t, uint64(5), seq, "Local is what this process holds")

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := l.Read(short, "s1", Fresh, func(*aggregates.Site) error { t.Error("fn ran on a stale state"); return nil })
	assert.ErrorIs(t, err, events.ErrUnavailable, "ctx ended while waiting")

	done := make(chan error, 1)
	go func() {
		done <- l.Read(readCtx(t), "s1", Fresh, func(s *aggregates.Site) error { seq = e.pos.Seq; return nil })
	}()
	e.mu.Lock() // the follower applies messages 6 and 7
	require.NoError(t, e.mutate(func() error { e.pos.Seq = 7; return nil }))
	l.published(e)
	e.mu.Unlock()
	require.NoError(t, <-done)
	assert.Equal(t, uint64(7), seq)
}
