package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
)

// The contract's reads: Next, LastFor, Read and Follow.

func stored(t *testing.T, s events.Store) {
	t.Helper()
	for _, m := range []struct{ subj, data string }{
		{subjA, "a1"}, {subjB, "b1"}, {subjA, "a2"}, {subjCat, "c1"}, {subjB, "b2"}, {subjA, "a3"},
	} {
		put(t, s, m.subj, m.data)
	}
}

func testNext(t *testing.T, s events.Store) {
	stored(t, s)
	tests := []struct {
		filter string
		from   uint64
		want   events.Msg
	}{
		{subjA, 0, msg(1, subjA, "a1")},
		{subjA, 1, msg(1, subjA, "a1")},
		{subjA, 2, msg(3, subjA, "a2")},
		{subjA, 3, msg(3, subjA, "a2")},
		{subjA, 4, msg(6, subjA, "a3")},
		{subjB, 3, msg(5, subjB, "b2")},
		{subjCat, 1, msg(4, subjCat, "c1")},
		{events.SitePrefix + "*", 4, msg(5, subjB, "b2")},
		{events.SubjectPrefix + ">", 4, msg(4, subjCat, "c1")},
		{events.SubjectPrefix + "*", 2, msg(4, subjCat, "c1")},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s from %d", tc.filter, tc.from), func(t *testing.T) {
			m, err := s.Next(context.Background(), tc.filter, tc.from)
			require.NoError(t, err)
			assert.Equal(t, shown(tc.want), shown(m))
		})
	}
	_, err := s.Next(context.Background(), subjA, 7)
	assert.ErrorIs(t, err, events.ErrNotFound)
}

func testLastFor(t *testing.T, s events.Store) {
	stored(t, s)
	tests := []struct {
		filter string
		want   uint64
	}{
		{subjA, 6},
		{subjB, 5},
		{subjCat, 4},
		{events.SitePrefix + "*", 6},
		{events.SitePrefix + "b", 5},
		{events.SubjectPrefix + "*", 4},
		{events.SubjectPrefix + ">", 6},
		{events.SitePrefix + "c", 0},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, lastFor(t, s, tc.filter), tc.filter)
	}
}

func testRead(t *testing.T, s events.Store) {
	stored(t, s)
	tests := []struct {
		filter string
		from   uint64
		want   []events.Msg
	}{
		{events.SubjectPrefix + ">", 0, []events.Msg{msg(1, subjA, "a1"), msg(2, subjB, "b1"), msg(3, subjA, "a2"),
			msg(4, subjCat, "c1"), msg(5, subjB, "b2"), msg(6, subjA, "a3")}},
		{events.SitePrefix + ">", 3, []events.Msg{msg(3, subjA, "a2"), msg(5, subjB, "b2"), msg(6, subjA, "a3")}},
		{events.SitePrefix + "*", 2, []events.Msg{msg(2, subjB, "b1"), msg(3, subjA, "a2"), msg(5, subjB, "b2"), msg(6, subjA, "a3")}},
		{subjA, 1, []events.Msg{msg(1, subjA, "a1"), msg(3, subjA, "a2"), msg(6, subjA, "a3")}},
		{subjA, 4, []events.Msg{msg(6, subjA, "a3")}},
		{events.SubjectPrefix + "*", 1, []events.Msg{msg(4, subjCat, "c1")}},
		{subjA, 7, nil},
		{events.SitePrefix + "none", 1, nil},
		{events.SitePrefix + "a.>", 1, nil},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s from %d", tc.filter, tc.from), func(t *testing.T) {
			assert.Equal(t, shown(tc.want...), shown(all(t, s, tc.filter, tc.from)...))
		})
	}
}

func testReadStops(t *testing.T, s events.Store) {
	stored(t, s)
	stop := errors.New("enough")
	for _, after := range []int{1, 3, 6} {
		t.Run(fmt.Sprint("after ", after), func(t *testing.T) {
			var got []uint64
			err := s.Read(context.Background(), events.SubjectPrefix+">", 1, func(m events.Msg) error {
				got = append(got, m.Seq)
				if len(got) == after {
					return stop
				}
				return nil
			})
			assert.ErrorIs(t, err, stop)
			assert.Len(t, got, after, "fn is not called after its error")
		})
	}
}

// follower runs Follow in the background and hands over what it delivers.
type follower struct {
	cancel context.CancelFunc
	got    chan events.Msg
	done   chan error
	// after counts deliveries after Follow returned (must stay 0).
	mu       sync.Mutex
	returned bool
	after    int
}

func follow(s events.Store, filter string, from uint64) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, got: make(chan events.Msg, 100), done: make(chan error, 1)}
	go func() {
		err := s.Follow(ctx, filter, from, func(m events.Msg) {
			f.mu.Lock()
			if f.returned {
				f.after++
			}
			f.mu.Unlock()
			f.got <- m
		})
		f.mu.Lock()
		f.returned = true
		f.mu.Unlock()
		f.done <- err
	}()
	return f
}

// next waits for the next delivery.
func (f *follower) next(t *testing.T) events.Msg {
	t.Helper()
	select {
	case m := <-f.got:
		return m
	case <-time.After(waitFor):
		t.Fatalf("Follow delivered nothing within %s", waitFor)
		return events.Msg{}
	}
}

// stop ends the follower's context and waits for Follow to return.
func (f *follower) stop(t *testing.T) error {
	t.Helper()
	f.cancel()
	select {
	case err := <-f.done:
		return err
	case <-time.After(waitFor):
		t.Fatalf("Follow did not return within %s of its context ending", waitFor)
		return nil
	}
}

func testFollow(t *testing.T, s events.Store) {
	stored(t, s)
	f := follow(s, events.SitePrefix+">", 2)
	var got []events.Msg
	for range 4 {
		got = append(got, f.next(t))
	}
	assert.Equal(t, shown(msg(2, subjB, "b1"), msg(3, subjA, "a2"), msg(5, subjB, "b2"), msg(6, subjA, "a3")),
		shown(got...), "the stored messages, in order")

	put(t, s, subjCat, "c2") // 7, not matching
	put(t, s, subjB, "b3")   // 8
	put(t, s, subjA, "a4")   // 9
	got = []events.Msg{f.next(t), f.next(t)}
	assert.Equal(t, shown(msg(8, subjB, "b3"), msg(9, subjA, "a4")), shown(got...), "then the new ones")

	require.NoError(t, f.stop(t), "Follow returns nil when its context ends")
	put(t, s, subjA, "a5")
	assert.Empty(t, f.got, "nothing is delivered after Follow returned")
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Zero(t, f.after)
}

func testFollowAhead(t *testing.T, s events.Store) {
	put(t, s, subjA, "a1")
	f := follow(s, events.SubjectPrefix+">", 3)
	t.Cleanup(func() { _ = f.stop(t) })
	put(t, s, subjB, "b1") // 2: before from
	put(t, s, subjA, "a2") // 3
	assert.Equal(t, shown(msg(3, subjA, "a2")), shown(f.next(t)))
	assert.Empty(t, f.got)
}
