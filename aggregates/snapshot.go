package aggregates

import (
	"fmt"
	"slices"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Snapshots are derived state at a known stream sequence: they shorten
// start-up and can always be thrown away and rebuilt from the ledger. The
// format is versioned; a version this build does not know is ignored by the
// caller, which then replays the site from the stream.

// Version 3: compact transactions (encoded as arrays, user keys hashed,
// processIds in an arena). Version 4: a deposit's userId follows its
// processId in the arena, and the pending-deposit index is stored as the
// list of indexed deposits, its maps rebuilt from the arena on load.
// Version 5: the settings hold the key and request hash the site was
// created with, and the snapshot holds the settings as a keyed creation
// answered them and the answers of keyed treasury adjustments.
// Version 6: the aliases of pending deposits (deposit.alias_added).
// Version 7: the site's own methods (Config.OwnMethods and Methods,
// site.methods_set).
//
// The version must rise whenever a snapshot gains a field, its settings'
// included: they are a msgpack map, and an older build decodes it without
// error, dropping the keys it does not know. Without its own methods a
// site offers every method with the method's own limits and accounts, so
// an older build would load a wrong site; a version it does not know
// makes it replay the site from the stream instead (docs/ARCHITECTURE.md
// "Snapshots").
const snapshotVersion = 7

type siteSnapshot struct {
	Version int     `msgpack:"v"`
	ID      string  `msgpack:"id"`
	Cfg     *Config `msgpack:"cfg"`
	Seq     uint64  `msgpack:"seq"`
	Hash    []byte  `msgpack:"hash"`
	Balance int64   `msgpack:"balance"`
	Pending int64   `msgpack:"pending"`
	Txs     []Tx    `msgpack:"txs"`
	// PendingDeposits lists, ascending, the deposits in the pending index.
	PendingDeposits []int32           `msgpack:"pendingDeposits"`
	ProcessIDs      []byte            `msgpack:"pids"`
	Rotation        map[string]uint64 `msgpack:"rotation"`
	Reasons         map[int32]string  `msgpack:"reasons"`
	// Created is the settings as a keyed creation answered them.
	Created *Config `msgpack:"created,omitempty"`
	// Adjusted are the answers of keyed treasury adjustments, by key.
	Adjusted map[string]AdjustmentAnswer `msgpack:"adjusted,omitempty"`
	// Aliases are the processIds that name earlier pending deposits.
	Aliases map[string]Alias `msgpack:"aliases,omitempty"`
}

// MarshalSnapshot encodes the committed state, which stands at pos in the
// stream. It must not be called while a batch is open.
func (s *Site) MarshalSnapshot(pos events.Position) ([]byte, error) {
	pending := make([]int32, 0, len(s.pending.byKey)+len(s.pending.collide))
	s.PendingDeposits(func(i int32, _ *Tx) { pending = append(pending, i) })
	slices.Sort(pending)
	b, err := msgpack.Marshal(&siteSnapshot{Version: snapshotVersion, ID: string(s.ID), Cfg: s.Cfg, Seq: pos.Seq, Hash: pos.Hash[:],
		Balance: s.Balance, Pending: s.PendingWithdrawals, Txs: s.Txs, PendingDeposits: pending, ProcessIDs: s.pids.arena,
		Rotation: s.rotation, Reasons: s.reasons, Created: s.created, Adjusted: s.adjusted, Aliases: s.aliases})
	if err != nil {
		return nil, fmt.Errorf("snapshot site %s: %w", s.ID, err)
	}
	return b, nil
}

// UnmarshalSiteSnapshot rebuilds a site, and where it stands in the
// stream, from MarshalSnapshot's output. A snapshot whose offsets or
// indexes do not fit its own contents is refused, and the caller replays
// the site from the stream instead.
func UnmarshalSiteSnapshot(b []byte) (*Site, events.Position, error) {
	return unmarshalSiteSnapshot(b, UserKey)
}

// unmarshalSiteSnapshot is UnmarshalSiteSnapshot for a site whose userKey is
// key (tests make userIds collide).
func unmarshalSiteSnapshot(b []byte, key func(string) uint64) (*Site, events.Position, error) {
	var snap siteSnapshot
	if err := msgpack.Unmarshal(b, &snap); err != nil {
		return nil, events.Position{}, fmt.Errorf("decode site snapshot: %w", err)
	}
	// Versions 5 and 6 read as version 7: a field one lacks was not
	// there when it was written (no aliases, no methods of the site's
	// own), which its zero value says. A version 6 written by a build
	// that had the site's methods holds them, and they decode.
	if snap.Version < 5 || snap.Version > snapshotVersion || len(snap.Hash) != 32 {
		return nil, events.Position{}, fmt.Errorf("site snapshot version %d not supported", snap.Version)
	}
	id, err := ids.ParseSite(snap.ID)
	if err != nil {
		return nil, events.Position{}, fmt.Errorf("site snapshot: %w", err)
	}
	s := NewSite(id)
	s.userKey = key
	s.pids = newPidIndex(len(snap.Txs))
	s.pids.arena = snap.ProcessIDs
	s.Cfg, s.Balance, s.PendingWithdrawals, s.Txs = snap.Cfg, snap.Balance, snap.Pending, snap.Txs
	pos := events.Position{Seq: snap.Seq}
	copy(pos.Hash[:], snap.Hash)
	for i := range s.Txs {
		if !s.pids.valid(s.Txs[i].PidOff) {
			return nil, events.Position{}, fmt.Errorf("site snapshot %s: transaction %d: processId or userId outside the arena", snap.ID, i)
		}
	}
	s.pids.rebuild(s.Txs)
	for k, i := range snap.PendingDeposits {
		if i < 0 || int(i) >= len(s.Txs) || (k > 0 && i <= snap.PendingDeposits[k-1]) {
			return nil, events.Position{}, fmt.Errorf("site snapshot %s: pending deposit %d: no such transaction or out of order", snap.ID, i)
		}
		user := string(s.pids.user(s.Txs[i].PidOff))
		if tx := &s.Txs[i]; tx.Kind != KindDeposit || user == "" {
			return nil, events.Position{}, fmt.Errorf("site snapshot %s: pending deposit %d: not a deposit with a userId", snap.ID, i)
		}
		s.setPendingUser(key(user), user, i)
	}
	for k, v := range snap.Rotation {
		s.rotation[s.internStr(k)] = v
	}
	for k, v := range snap.Reasons {
		s.reasons[k] = v
	}
	for k := range snap.Adjusted {
		if CheckIdempotencyKey(k) != nil {
			return nil, events.Position{}, fmt.Errorf("site snapshot %s: adjustment key %q is no Idempotency-Key", snap.ID, k)
		}
	}
	if len(snap.Adjusted) > 0 {
		s.adjusted = snap.Adjusted
	}
	if snap.Created != nil && snap.Cfg == nil {
		return nil, events.Position{}, fmt.Errorf("site snapshot %s: settings as created without settings", snap.ID)
	}
	s.created = snap.Created
	for pid, a := range snap.Aliases {
		if a.Tx < 0 || int(a.Tx) >= len(s.Txs) || s.Txs[a.Tx].Kind != KindDeposit {
			return nil, events.Position{}, fmt.Errorf("site snapshot %s: alias %q names no deposit", snap.ID, pid)
		}
	}
	if len(snap.Aliases) > 0 {
		s.aliases = snap.Aliases
	}
	return s, pos, nil
}
