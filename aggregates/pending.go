package aggregates

import "strings"

// pendingIndex finds an end user's pending deposit (CONTRACT: a user with a
// pending deposit is given that one back, alreadyPending). Like pidIndex it
// keeps no string per deposit: byKey maps UserKey(userId) to the deposit,
// and a hit counts only if the userId stored in the arena after the
// deposit's processId is the one asked for. A user whose key is already held
// by another user's pending deposit goes to collide, keyed by the userId
// itself, so colliding users never see each other's deposit (its recipient
// account, amount and hosted page) and each may have one of their own.
//
// Each userId has at most one entry in the two maps together.
type pendingIndex struct {
	byKey   map[uint64]int32
	collide map[string]int32
}

func newPendingIndex() pendingIndex {
	return pendingIndex{byKey: map[uint64]int32{}}
}

// pendingOf returns the pending deposit of the end user userID.
func (s *Site) pendingOf(userID string) (int32, bool) {
	if i, ok := s.pending.byKey[s.userKey(userID)]; ok && string(s.pids.user(s.Txs[i].PidOff)) == userID {
		return i, true
	}
	i, ok := s.pending.collide[userID]
	return i, ok
}

// setPendingUser indexes deposit i as the pending deposit of userID, whose
// key is key. A newer deposit of the same user replaces the indexed one
// wherever it is.
func (s *Site) setPendingUser(key uint64, userID string, i int32) {
	j, taken := s.pending.byKey[key]
	if taken && string(s.pids.user(s.Txs[j].PidOff)) == userID {
		s.setByKey(key, i)
		return
	}
	if _, ok := s.pending.collide[userID]; ok || taken {
		s.setCollide(userID, i)
		return
	}
	s.setByKey(key, i)
}

// clearPendingUser removes deposit i from the index if it is the one
// indexed for its user; an expired deposit approved late is not indexed,
// and its user may have a newer pending deposit that must stay.
func (s *Site) clearPendingUser(i int32) {
	// The key is not kept per transaction (8 bytes each): it is the
	// userId's, and the userId is in the arena.
	key := s.userKey(string(s.pids.user(s.Txs[i].PidOff)))
	if cur, ok := s.pending.byKey[key]; ok && cur == i {
		if s.j != nil {
			s.j.users = append(s.j.users, userUndo{key: key, i: i, had: true})
		}
		delete(s.pending.byKey, key)
		return
	}
	if len(s.pending.collide) == 0 {
		return
	}
	u := s.pids.user(s.Txs[i].PidOff)
	if cur, ok := s.pending.collide[string(u)]; ok && cur == i {
		userID := string(u)
		if s.j != nil {
			s.j.users = append(s.j.users, userUndo{userID: userID, side: true, i: i, had: true})
		}
		delete(s.pending.collide, userID)
	}
}

func (s *Site) setByKey(key uint64, i int32) {
	if s.j != nil {
		old, had := s.pending.byKey[key]
		s.j.users = append(s.j.users, userUndo{key: key, i: old, had: had})
	}
	s.pending.byKey[key] = i
}

func (s *Site) setCollide(userID string, i int32) {
	if s.pending.collide == nil {
		s.pending.collide = map[string]int32{}
	}
	old, had := s.pending.collide[userID]
	if !had {
		// A copy: the map must not keep the decoded event alive.
		userID = strings.Clone(userID)
	}
	if s.j != nil {
		s.j.users = append(s.j.users, userUndo{userID: userID, side: true, i: old, had: had})
	}
	s.pending.collide[userID] = i
}

// undo reverts one change recorded in the journal.
func (x *pendingIndex) undo(u userUndo) {
	switch {
	case u.side && u.had:
		x.collide[u.userID] = u.i
	case u.side:
		delete(x.collide, u.userID)
	case u.had:
		x.byKey[u.key] = u.i
	default:
		delete(x.byKey, u.key)
	}
}
