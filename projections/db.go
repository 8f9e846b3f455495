package projections

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/iqdgateway/gateway/events"
)

// DB is the read models of one gateway process, in one Pebble store.
type DB struct {
	pdb    *pebble.DB
	log    *slog.Logger
	models []Model

	mu sync.Mutex
	// applied is each model's checkpoint, as committed.
	applied map[string]uint64
	// changed is closed, and replaced, whenever applied or err changes:
	// the broadcast WaitFor waits on.
	changed chan struct{}
	// err is the fault that stopped the projector (Err).
	err error
	// chunkMsgs is CatchUp's chunk (catchUpMsgs; tests make it small).
	chunkMsgs int
	// batchBytes bounds one batch's writes (maxBatch; tests make it
	// small).
	batchBytes int
}

var modelName = regexp.MustCompile(`^[a-z]+$`)

// Meta keys.
var metaPrefix = []byte("\x00meta\x00")

func versionKey(name string) []byte {
	return append(append([]byte(nil), metaPrefix...), "version\x00"+name...)
}
func checkpointKey(name string) []byte {
	return append(append([]byte(nil), metaPrefix...), "checkpoint\x00"+name...)
}

// blockCache is the size of the store's block cache.
const blockCache = 64 << 20

// Open opens (creating it when absent) the store in dir with models. A
// model whose stored format version is not its Version is dropped, its
// checkpoint with it: it is rebuilt from the stream's start.
func Open(dir string, log *slog.Logger, models ...Model) (*DB, error) {
	seen := map[string]bool{}
	for _, m := range models {
		if !modelName.MatchString(m.Name()) || seen[m.Name()] {
			return nil, fmt.Errorf("projections: model name %q is not lower-case letters, or given twice", m.Name())
		}
		seen[m.Name()] = true
	}
	// A model's Apply reads what it updates (a transaction, a count): with
	// Pebble's default 8 MiB block cache most of those reads went to the
	// files for their index blocks, and folding ran at half the rate
	// (docs/ARCHITECTURE.md "The transactions model").
	cache := pebble.NewCache(blockCache)
	pdb, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLog{log}, Cache: cache})
	cache.Unref()
	if err != nil {
		return nil, fmt.Errorf("projections: open %s: %w", dir, err)
	}
	d := &DB{pdb: pdb, log: log, models: models, applied: map[string]uint64{}, changed: make(chan struct{}), chunkMsgs: catchUpMsgs,
		batchBytes: maxBatch}
	for _, m := range models {
		if err := d.openModel(m); err != nil {
			_ = pdb.Close()
			return nil, err
		}
	}
	return d, nil
}

// openModel reads a model's version and checkpoint, dropping the model
// when its version changed.
func (d *DB) openModel(m Model) error {
	name := m.Name()
	v, ok, err := get(d.pdb, versionKey(name))
	if err != nil {
		return fmt.Errorf("projections: %s: %w", name, err)
	}
	if ok && len(v) == 4 && binary.BigEndian.Uint32(v) == m.Version() {
		cp, ok, err := get(d.pdb, checkpointKey(name))
		if err != nil {
			return fmt.Errorf("projections: %s: %w", name, err)
		}
		if ok && len(cp) == 8 {
			d.applied[name] = binary.BigEndian.Uint64(cp)
		}
		return nil
	}
	if ok {
		d.log.Info("read model format changed: rebuilding it from the stream", "model", name, "version", m.Version())
	}
	return d.drop(m)
}

// drop removes a model's keys and checkpoint, and records its version, in
// one batch.
func (d *DB) drop(m Model) error {
	name := m.Name()
	b := d.pdb.NewBatch()
	defer b.Close()
	p := modelPrefix(name)
	if err := b.DeleteRange(p, PrefixEnd(p), nil); err != nil {
		return fmt.Errorf("projections: drop %s: %w", name, err)
	}
	if err := b.Delete(checkpointKey(name), nil); err != nil {
		return fmt.Errorf("projections: drop %s: %w", name, err)
	}
	if err := b.Set(versionKey(name), binary.BigEndian.AppendUint32(nil, m.Version()), nil); err != nil {
		return fmt.Errorf("projections: drop %s: %w", name, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("projections: drop %s: %w", name, err)
	}
	d.mu.Lock()
	d.applied[name] = 0
	d.broadcastLocked()
	d.mu.Unlock()
	return nil
}

// Drop removes model name's keys and checkpoint, so that the next CatchUp
// or Follow builds it again from the stream's start (ledgerctl projections
// rebuild). Do not call it while the DB follows the stream.
func (d *DB) Drop(name string) error {
	for _, m := range d.models {
		if m.Name() == name {
			return d.drop(m)
		}
	}
	return fmt.Errorf("projections: no model %q", name)
}

// Models returns the DB's models.
func (d *DB) Models() []Model { return append([]Model(nil), d.models...) }

// broadcastLocked wakes every WaitFor; d.mu is held.
func (d *DB) broadcastLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// Close closes the store.
func (d *DB) Close() error { return d.pdb.Close() }

// Checkpoint returns the stream sequence model name has applied.
func (d *DB) Checkpoint(name string) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applied[name]
}

// Applied returns the stream sequence every model has applied: the
// smallest checkpoint (0 without models).
func (d *DB) Applied() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.appliedLocked()
}

func (d *DB) appliedLocked() uint64 {
	first := true
	var low uint64
	for _, m := range d.models {
		if a := d.applied[m.Name()]; first || a < low {
			low, first = a, false
		}
	}
	return low
}

// View reads model name's committed keys.
func (d *DB) View(name string) View { return View{r: d.pdb, prefix: modelPrefix(name)} }

// ApplyMessages applies msgs, in stream order, to every model that has not
// applied them yet, and commits them with each model's new checkpoint: in
// one batch, or in several when their writes outgrow maxBatch, each batch
// with the checkpoints of the messages it holds. A message at or below a
// model's checkpoint is skipped for that model, so applying a message
// twice changes nothing.
func (d *DB) ApplyMessages(msgs []events.Msg) error {
	_, err := d.apply(msgs, pebble.Sync)
	return err
}

// maxBatch bounds the writes of one batch: a batch's index of its own
// writes (which a model's reads go through) slows down as it grows, and
// holds them all in memory. A catch-up's chunk of messages that writes
// more is committed in several batches.
const maxBatch = 4 << 20

// apply is ApplyMessages with the last commit's durability: pebble.Sync
// puts the batch, and every batch committed before it, on disk before it
// returns; pebble.NoSync leaves it to the next synced commit (a process
// that dies loses nothing written, a machine that stops may lose the
// batch, whole: its checkpoint with it). The batches before the last are
// committed without a sync, which the last one's sync covers. It returns
// how many events the messages held.
func (d *DB) apply(msgs []events.Msg, sync *pebble.WriteOptions) (int, error) {
	n := 0
	for len(msgs) > 0 {
		taken, evs, err := d.commit(msgs, sync)
		if err != nil {
			return 0, err
		}
		n += evs
		msgs = msgs[taken:]
	}
	return n, nil
}

// commit applies msgs in order until they end or the batch's writes reach
// maxBatch, and commits what it applied with the checkpoints; sync is the
// durability when it took them all. It returns how many messages it took
// (at least one) and how many events they held.
func (d *DB) commit(msgs []events.Msg, sync *pebble.WriteOptions) (taken, n int, err error) {
	pb := d.pdb.NewIndexedBatch()
	defer pb.Close()
	d.mu.Lock()
	cps := make(map[string]uint64, len(d.models))
	for _, m := range d.models {
		cps[m.Name()] = d.applied[m.Name()]
	}
	d.mu.Unlock()
	batches := make(map[string]*Batch, len(d.models))
	for _, m := range d.models {
		batches[m.Name()] = &Batch{b: pb, prefix: modelPrefix(m.Name())}
	}
	for ; taken < len(msgs) && (taken == 0 || pb.Len() < d.batchBytes); taken++ {
		msg := msgs[taken]
		evs, err := events.Decode(msg.Data)
		if err != nil {
			return 0, 0, fmt.Errorf("projections: message %d: %w", msg.Seq, err)
		}
		n += len(evs)
		for _, m := range d.models {
			name := m.Name()
			if msg.Seq <= cps[name] {
				continue
			}
			if err := m.Apply(batches[name], msg, evs); err != nil {
				return 0, 0, &ModelError{Model: name, Seq: msg.Seq, Err: err}
			}
			cps[name] = msg.Seq
		}
	}
	last := msgs[taken-1].Seq
	for name, b := range batches {
		if err := b.flushCounters(); err != nil {
			return 0, 0, &ModelError{Model: name, Seq: last, Err: err}
		}
	}
	for name, cp := range cps {
		if err := pb.Set(checkpointKey(name), binary.BigEndian.AppendUint64(nil, cp), nil); err != nil {
			return 0, 0, fmt.Errorf("projections: checkpoint %s: %w", name, err)
		}
	}
	if taken < len(msgs) {
		sync = pebble.NoSync
	}
	if err := pb.Commit(sync); err != nil {
		return 0, 0, fmt.Errorf("projections: commit messages %d to %d: %w", msgs[0].Seq, last, err)
	}
	d.mu.Lock()
	for name, cp := range cps {
		d.applied[name] = cp
	}
	d.broadcastLocked()
	d.mu.Unlock()
	return taken, n, nil
}

// ModelError is a model's Apply failing for a message: the model stays at
// its previous checkpoint, and the projector stops.
type ModelError struct {
	Model string
	Seq   uint64
	Err   error
}

func (e *ModelError) Error() string {
	return fmt.Sprintf("projections: %s: message %d: %v", e.Model, e.Seq, e.Err)
}

func (e *ModelError) Unwrap() error { return e.Err }

// pebbleLog hands Pebble's own messages to the process's log: its
// routine ones (the WALs it replays as it opens) at DEBUG, so that they do
// not go to standard error unasked.
type pebbleLog struct{ log *slog.Logger }

func (l pebbleLog) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLog) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is called by Pebble when it cannot go on; like Pebble's own
// logger, it ends the process.
func (l pebbleLog) Fatalf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
	os.Exit(1)
}
