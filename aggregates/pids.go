package aggregates

// pidIndex finds a site's transaction by processId without a Go string per
// transaction. processIds are kept length-prefixed in one byte arena (a Tx
// holds its offset), and the index maps a 64-bit hash to the transaction;
// the rare processId whose hash is already taken by another goes to a small
// map of its own. Nothing here holds a pointer per transaction, so a million
// transactions cost the garbage collector nothing to scan.
//
// Each processId is followed in the arena by the deposit's userId, also
// length-prefixed (empty for a withdrawal: nothing looks a withdrawal up by
// its user). The pending-deposit index compares it on a hash hit, so two
// users whose keys collide are told apart without a string per deposit.
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

// user returns the userId stored after the processId at off (empty for a
// withdrawal), without copying.
func (x *pidIndex) user(off uint32) []byte {
	off += 1 + uint32(x.arena[off])
	n := uint32(x.arena[off])
	return x.arena[off+1 : off+1+n]
}

// valid reports whether an entry starting at off, processId and userId,
// lies within the arena: a snapshot read back is checked before use.
func (x *pidIndex) valid(off uint32) bool {
	end := uint64(off)
	for range 2 {
		if end >= uint64(len(x.arena)) {
			return false
		}
		end += 1 + uint64(x.arena[end])
	}
	return end <= uint64(len(x.arena))
}

// lookup returns the transaction with pid.
func (x *pidIndex) lookup(txs []Tx, pid string) (int32, bool) {
	if i, ok := x.byHash[hash64(pid)]; ok && string(x.at(txs[i].PidOff)) == pid {
		return i, true
	}
	i, ok := x.collide[pid]
	return i, ok
}

// add stores pid (not yet present) and user for transaction i and returns
// their offset. Both are at most 255 bytes (validation allows 128).
func (x *pidIndex) add(pid, user string, i int32) uint32 {
	off := uint32(len(x.arena))
	if need := len(x.arena) + 2 + len(pid) + len(user); need > cap(x.arena) {
		grown := make([]byte, len(x.arena), need+len(x.arena)/4+256)
		copy(grown, x.arena)
		x.arena = grown
	}
	x.arena = append(x.arena, byte(len(pid)))
	x.arena = append(x.arena, pid...)
	x.arena = append(x.arena, byte(len(user)))
	x.arena = append(x.arena, user...)
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
