// Package projtest holds what the read models' users test with.
package projtest

import (
	"encoding/binary"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/projections"
)

// Tally is a toy read model for the commands' tests: how many messages
// each subject holds, under the model name "tally".
type Tally struct{}

// Name implements projections.Model.
func (Tally) Name() string { return "tally" }

// Version implements projections.Model.
func (Tally) Version() uint32 { return 1 }

// Apply implements projections.Model.
func (Tally) Apply(b *projections.Batch, m events.Msg, _ []events.Event) error {
	n, err := tallyOf(b.Get, m.Subject)
	if err != nil {
		return err
	}
	return b.Set([]byte(m.Subject), binary.BigEndian.AppendUint64(nil, n+1))
}

// TallyOf returns how many messages of subject the model in v holds.
func TallyOf(v projections.View, subject string) (uint64, error) { return tallyOf(v.Get, subject) }

func tallyOf(get func([]byte) ([]byte, bool, error), subject string) (uint64, error) {
	v, _, err := get([]byte(subject))
	if len(v) != 8 {
		return 0, err
	}
	return binary.BigEndian.Uint64(v), err
}
