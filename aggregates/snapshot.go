package aggregates

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"gateway/ids"
)

// Snapshots are derived state at a known stream sequence: they shorten
// start-up and can always be thrown away and rebuilt from the ledger. The
// format is versioned; a version this build does not know is ignored by the
// caller, which then replays the site from the stream.

// Version 3: compact transactions (encoded as arrays, user keys hashed,
// processIds in an arena).
const snapshotVersion = 3

type siteSnapshot struct {
	Version       int               `msgpack:"v"`
	ID            string            `msgpack:"id"`
	Cfg           *Config           `msgpack:"cfg"`
	Seq           uint64            `msgpack:"seq"`
	Hash          []byte            `msgpack:"hash"`
	Balance       int64             `msgpack:"balance"`
	Pending       int64             `msgpack:"pending"`
	Txs           []Tx              `msgpack:"txs"`
	PendingByUser map[uint64]int32  `msgpack:"pendingUsers"`
	ProcessIDs    []byte            `msgpack:"pids"`
	Rotation      map[string]uint64 `msgpack:"rotation"`
	Reasons       map[int32]string  `msgpack:"reasons"`
}

// MarshalSnapshot encodes the committed state. It must not be called while
// a batch is open.
func (s *Site) MarshalSnapshot() ([]byte, error) {
	b, err := msgpack.Marshal(&siteSnapshot{Version: snapshotVersion, ID: string(s.ID), Cfg: s.Cfg, Seq: s.Seq, Hash: s.Hash[:],
		Balance: s.Balance, Pending: s.PendingWithdrawals, Txs: s.Txs, PendingByUser: s.pendingByUser, ProcessIDs: s.pids.arena,
		Rotation: s.rotation, Reasons: s.reasons})
	if err != nil {
		return nil, fmt.Errorf("snapshot site %s: %w", s.ID, err)
	}
	return b, nil
}

// UnmarshalSiteSnapshot rebuilds a site from MarshalSnapshot's output.
func UnmarshalSiteSnapshot(b []byte) (*Site, error) {
	var snap siteSnapshot
	if err := msgpack.Unmarshal(b, &snap); err != nil {
		return nil, fmt.Errorf("decode site snapshot: %w", err)
	}
	if snap.Version != snapshotVersion || len(snap.Hash) != 32 {
		return nil, fmt.Errorf("site snapshot version %d not supported", snap.Version)
	}
	id, err := ids.ParseSite(snap.ID)
	if err != nil {
		return nil, fmt.Errorf("site snapshot: %w", err)
	}
	s := NewSite(id)
	s.pids = newPidIndex(len(snap.Txs))
	s.pids.arena = snap.ProcessIDs
	s.Cfg, s.Seq, s.Balance, s.PendingWithdrawals, s.Txs = snap.Cfg, snap.Seq, snap.Balance, snap.Pending, snap.Txs
	copy(s.Hash[:], snap.Hash)
	for i := range s.Txs {
		if off := s.Txs[i].PidOff; int(off) >= len(s.pids.arena) || int(off)+1+int(s.pids.arena[off]) > len(s.pids.arena) {
			return nil, fmt.Errorf("site snapshot %s: transaction %d: processId outside the arena", snap.ID, i)
		}
	}
	s.pids.rebuild(s.Txs)
	for u, i := range snap.PendingByUser {
		s.pendingByUser[u] = i
	}
	for k, v := range snap.Rotation {
		s.rotation[s.internStr(k)] = v
	}
	for k, v := range snap.Reasons {
		s.reasons[k] = v
	}
	return s, nil
}
