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
	add := func(pid string) {
		i := int32(len(txs))
		txs = append(txs, Tx{PidOff: x.add(pid, i)})
	}
	add("order-1")
	add("order-2")
	add(strings.Repeat("x", maxIDLen))
	for i, pid := range []string{"order-1", "order-2", strings.Repeat("x", maxIDLen)} {
		got, ok := x.lookup(txs, pid)
		require.True(t, ok, pid)
		assert.Equal(t, int32(i), got)
		assert.Equal(t, pid, string(x.at(txs[i].PidOff)))
	}
	_, ok := x.lookup(txs, "order-3")
	assert.False(t, ok)
	_, ok = x.lookup(txs, "order")
	assert.False(t, ok, "a prefix of a stored processId is not a match")

	// Make "clash" collide with order-1's hash slot: it must go to the
	// collision map and still be found, and order-1 must be unaffected.
	x.byHash[hash64("clash")] = 0
	mark := uint32(len(x.arena))
	add("clash")
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
