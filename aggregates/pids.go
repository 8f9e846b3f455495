package aggregates

// pidIndex finds a site's transaction by processId without a Go string per
// transaction. processIds are kept length-prefixed in one byte arena (a Tx
// holds its offset), and the index maps a 64-bit hash to the transaction;
// the rare processId whose hash is already taken by another goes to a small
// map of its own. Nothing here holds a pointer per transaction, so a million
// transactions cost the garbage collector nothing to scan.
type pidIndex struct {
	arena   []byte
	byHash  map[uint64]int32
	collide map[string]int32
}

func newPidIndex(n int) pidIndex {
	return pidIndex{byHash: make(map[uint64]int32, n)}
}

// hash64 is FNV-1a, 64 bits.
func hash64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// at returns the processId stored at off, without copying.
func (x *pidIndex) at(off uint32) []byte {
	n := uint32(x.arena[off])
	return x.arena[off+1 : off+1+n]
}

// lookup returns the transaction with pid.
func (x *pidIndex) lookup(txs []Tx, pid string) (int32, bool) {
	if i, ok := x.byHash[hash64(pid)]; ok && string(x.at(txs[i].PidOff)) == pid {
		return i, true
	}
	i, ok := x.collide[pid]
	return i, ok
}

// add stores pid (at most 255 bytes, not yet present) for transaction i and
// returns its offset.
func (x *pidIndex) add(pid string, i int32) uint32 {
	off := uint32(len(x.arena))
	if need := len(x.arena) + 1 + len(pid); need > cap(x.arena) {
		grown := make([]byte, len(x.arena), need+len(x.arena)/4+256)
		copy(grown, x.arena)
		x.arena = grown
	}
	x.arena = append(x.arena, byte(len(pid)))
	x.arena = append(x.arena, pid...)
	x.index(pid, i)
	return off
}

func (x *pidIndex) index(pid string, i int32) {
	h := hash64(pid)
	if _, taken := x.byHash[h]; !taken {
		x.byHash[h] = i
		return
	}
	if x.collide == nil {
		x.collide = map[string]int32{}
	}
	x.collide[pid] = i
}

// truncate forgets transactions from index from onwards, whose processIds
// start at arena offset off (a rolled-back batch).
func (x *pidIndex) truncate(txs []Tx, from int, off uint32) {
	for i := from; i < len(txs); i++ {
		pid := string(x.at(txs[i].PidOff))
		if j, ok := x.byHash[hash64(pid)]; ok && int(j) == i {
			delete(x.byHash, hash64(pid))
		} else {
			delete(x.collide, pid)
		}
	}
	x.arena = x.arena[:off]
}

// rebuild indexes txs over an arena read back from a snapshot.
func (x *pidIndex) rebuild(txs []Tx) {
	for i := range txs {
		x.index(string(x.at(txs[i].PidOff)), int32(i))
	}
}
