package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"

	"github.com/iqdgateway/gateway/events"
)

// ModelCheck is what Verify found of one model.
type ModelCheck struct {
	Name string `json:"name"`
	// Checkpoint is the stream sequence the stored model has applied; the
	// replay it was compared with covers messages 1 to it.
	Checkpoint uint64 `json:"checkpoint"`
	// Keys counts the stored model's keys.
	Keys int `json:"keys"`
	// Skipped says why the model was not compared ("" when it was).
	Skipped string `json:"skipped,omitempty"`
	// Differences counts the keys whose value differs, or that only one
	// side holds; First describes the first of them.
	Differences int      `json:"differences"`
	First       []string `json:"first,omitempty"`
}

// maxListed bounds ModelCheck.First.
const maxListed = 10

// errPastCheckpoint ends a replay at the model's checkpoint.
var errPastCheckpoint = errors.New("past the checkpoint")

// Verify compares every model stored in dir with its own replay of the
// stream: the messages 1 to the model's checkpoint applied to an empty
// store in a temporary directory. A model that holds anything else (a
// message applied twice or skipped, a key written by a crash half-way, a
// change of the model's code without a new Version) differs. The store in
// dir is opened read-only and changes in nothing; Pebble locks it, so the
// gateway that keeps it must be stopped.
func Verify(ctx context.Context, dir string, st events.Store, log *slog.Logger, models ...Model) ([]ModelCheck, error) {
	status, err := ReadStatus(dir, log, models...)
	if err != nil {
		return nil, err
	}
	out := make([]ModelCheck, len(models))
	pdb, err := openReadOnly(dir, log)
	if err != nil {
		return nil, err
	}
	if pdb != nil {
		defer pdb.Close()
	}
	for i, m := range models {
		s := status[i]
		out[i] = ModelCheck{Name: m.Name(), Checkpoint: s.Checkpoint}
		switch {
		case s.Stored == 0:
			out[i].Skipped = "not built yet"
			continue
		case s.Stored != s.Version:
			out[i].Skipped = fmt.Sprintf("stored in format %d, this build's is %d: it is rebuilt when the gateway next starts", s.Stored, s.Version)
			continue
		}
		if err := verifyModel(ctx, pdb, st, log, m, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// verifyModel replays m up to c.Checkpoint and compares it with the
// stored model.
func verifyModel(ctx context.Context, stored *pebble.DB, st events.Store, log *slog.Logger, m Model, c *ModelCheck) error {
	tmp, err := os.MkdirTemp("", "verify-"+m.Name()+"-")
	if err != nil {
		return fmt.Errorf("projections: verify %s: %w", m.Name(), err)
	}
	defer os.RemoveAll(tmp)
	replay, err := Open(tmp, log, m)
	if err != nil {
		return err
	}
	defer replay.Close()
	if c.Checkpoint > 0 {
		var chunk []events.Msg
		err = st.Read(ctx, events.SubjectPrefix+">", 1, func(msg events.Msg) error {
			if msg.Seq > c.Checkpoint {
				return errPastCheckpoint
			}
			if chunk = append(chunk, msg); len(chunk) == catchUpMsgs {
				_, err := replay.apply(chunk, pebble.NoSync)
				chunk = chunk[:0]
				return err
			}
			return nil
		})
		if err != nil && !errors.Is(err, errPastCheckpoint) {
			return fmt.Errorf("projections: verify %s: %w", m.Name(), err)
		}
		if _, err := replay.apply(chunk, pebble.NoSync); err != nil {
			return fmt.Errorf("projections: verify %s: %w", m.Name(), err)
		}
	}
	if got := replay.Checkpoint(m.Name()); got != c.Checkpoint {
		c.note(fmt.Sprintf("the stream ends at %d, before the model's checkpoint %d: the model is ahead of the stream", got, c.Checkpoint))
	}
	return compareKeys(View{r: stored, prefix: modelPrefix(m.Name())}, replay.View(m.Name()), c)
}

// compareKeys walks both views in key order at once, holding no more
// than one key of each.
func compareKeys(stored, replayed View, c *ModelCheck) error {
	a, err := stored.iter()
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := replayed.iter()
	if err != nil {
		return err
	}
	defer b.Close()
	okA, okB := a.First(), b.First()
	for okA || okB {
		var ka, kb []byte
		if okA {
			ka = a.Key()[len(stored.prefix):]
		}
		if okB {
			kb = b.Key()[len(replayed.prefix):]
		}
		switch {
		case okA && (!okB || bytes.Compare(ka, kb) < 0):
			c.note(fmt.Sprintf("key %q is not in the replay", ka))
			c.Keys++
			okA = a.Next()
			continue
		case !okA || bytes.Compare(kb, ka) < 0:
			c.note(fmt.Sprintf("key %q is missing (the replay holds it)", kb))
			okB = b.Next()
			continue
		}
		c.Keys++
		va, err := a.ValueAndErr()
		if err != nil {
			return fmt.Errorf("projections: verify %s: %w", c.Name, err)
		}
		vb, err := b.ValueAndErr()
		if err != nil {
			return fmt.Errorf("projections: verify %s: %w", c.Name, err)
		}
		if !bytes.Equal(va, vb) {
			c.note(fmt.Sprintf("key %q holds %x, the replay %x", ka, va, vb))
		}
		okA, okB = a.Next(), b.Next()
	}
	if err := errors.Join(a.Error(), b.Error()); err != nil {
		return fmt.Errorf("projections: verify %s: %w", c.Name, err)
	}
	return nil
}

func (c *ModelCheck) note(s string) {
	c.Differences++
	if len(c.First) < maxListed {
		c.First = append(c.First, s)
	}
}
