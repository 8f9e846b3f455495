package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// ModelStatus is where one model of a store stands.
type ModelStatus struct {
	Name string `json:"name"`
	// Version is the model's format in this build, Stored the one its
	// keys were written in (0: none yet). When they differ the model is
	// dropped and rebuilt when the DB next opens.
	Version uint32 `json:"version"`
	Stored  uint32 `json:"storedVersion"`
	// Checkpoint is the stream sequence the model has applied.
	Checkpoint uint64 `json:"checkpoint"`
}

// ReadStatus reports each of models as stored in dir, opening the store
// read-only: unlike Open it drops nothing. A directory that holds no store
// yet reports every model unbuilt. Pebble locks the directory even to
// read it, so a running gateway's store is refused.
func ReadStatus(dir string, log *slog.Logger, models ...Model) ([]ModelStatus, error) {
	out := make([]ModelStatus, 0, len(models))
	for _, m := range models {
		out = append(out, ModelStatus{Name: m.Name(), Version: m.Version()})
	}
	pdb, err := openReadOnly(dir, log)
	if err != nil || pdb == nil {
		return out, err
	}
	defer pdb.Close()
	for i, m := range models {
		v, ok, err := get(pdb, versionKey(m.Name()))
		if err != nil {
			return nil, fmt.Errorf("projections: %s: %w", m.Name(), err)
		}
		if !ok || len(v) != 4 {
			continue
		}
		out[i].Stored = binary.BigEndian.Uint32(v)
		cp, ok, err := get(pdb, checkpointKey(m.Name()))
		if err != nil {
			return nil, fmt.Errorf("projections: %s: %w", m.Name(), err)
		}
		if ok && len(cp) == 8 {
			out[i].Checkpoint = binary.BigEndian.Uint64(cp)
		}
	}
	return out, nil
}

// openReadOnly opens the store in dir read-only; nil when dir holds none
// yet.
func openReadOnly(dir string, log *slog.Logger) (*pebble.DB, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	pdb, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: pebbleLog{log}})
	if errors.Is(err, pebble.ErrDBDoesNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("projections: open %s: %w", dir, err)
	}
	return pdb, nil
}
