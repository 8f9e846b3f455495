package aggregates

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPidIndex(t *testing.T) {
	x := newPidIndex(0)
	var txs []Tx
	add := func(pid, user string) {
		i := int32(len(txs))
		txs = append(txs, Tx{PidOff: x.add(pid, user, i)})
	}
	long := strings.Repeat("x", maxIDLen)
	stored := []struct{ pid, user string }{{"order-1", "u1"}, {"order-2", ""}, {long, strings.Repeat("y", maxIDLen)}}
	for _, st := range stored {
		add(st.pid, st.user)
	}
	for i, st := range stored {
		got, ok := x.lookup(txs, st.pid)
		require.True(t, ok, st.pid)
		assert.Equal(t, int32(i), got)
		assert.Equal(t, st.pid, string(x.at(txs[i].PidOff)))
		assert.Equal(t, st.user, string(x.user(txs[i].PidOff)))
		assert.True(t, x.valid(txs[i].PidOff))
	}
	_, ok := x.lookup(txs, "u1")
	assert.False(t, ok, "a userId is not a processId")
	_, ok = x.lookup(txs, "order-3")
	assert.False(t, ok)
	_, ok = x.lookup(txs, "order")
	assert.False(t, ok, "a prefix of a stored processId is not a match")

	// Make "clash" collide with order-1's hash slot: it must go to the
	// collision map and still be found, and order-1 must be unaffected.
	x.byHash[hash64("clash")] = 0
	mark := uint32(len(x.arena))
	add("clash", "u9")
	assert.Equal(t, int32(3), x.collide["clash"])
	got, ok := x.lookup(txs, "clash")
	require.True(t, ok)
	assert.Equal(t, int32(3), got)
	got, ok = x.lookup(txs, "order-1")
	require.True(t, ok)
	assert.Equal(t, int32(0), got)

	// Rolling back the last transaction forgets it and its bytes.
	x.truncate(txs, 3, mark)
	txs = txs[:3]
	_, ok = x.lookup(txs, "clash")
	assert.False(t, ok)
	assert.Len(t, x.arena, int(mark))

	// A rebuild from the arena gives the same answers.
	y := newPidIndex(len(txs))
	y.arena = x.arena
	y.rebuild(txs)
	for i := range txs {
		got, ok := y.lookup(txs, string(x.at(txs[i].PidOff)))
		require.True(t, ok)
		assert.Equal(t, int32(i), got)
	}
}

func TestPidIndex_valid(t *testing.T) {
	tests := []struct {
		name  string
		arena []byte
		off   uint32
		want  bool
	}{
		{"processId and userId", []byte{2, 'p', '1', 2, 'u', '1'}, 0, true},
		{"withdrawal: empty userId", []byte{2, 'p', '1', 0}, 0, true},
		{"second entry", []byte{1, 'a', 0, 1, 'b', 1, 'u'}, 3, true},
		{"offset at the end", []byte{1, 'a', 0}, 3, false},
		{"offset past the end", []byte{1, 'a', 0}, 9, false},
		{"empty arena", nil, 0, false},
		{"processId cut short", []byte{3, 'p', '1'}, 0, false},
		{"no userId length", []byte{2, 'p', '1'}, 0, false},
		{"userId cut short", []byte{2, 'p', '1', 2, 'u'}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := pidIndex{arena: tc.arena}
			assert.Equal(t, tc.want, x.valid(tc.off))
		})
	}
}
