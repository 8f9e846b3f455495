package projections

import (
	"encoding/binary"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
)

// counter is a toy model: per subject, how many messages it holds.
type counter struct{ version uint32 }

func (counter) Name() string      { return "counter" }
func (c counter) Version() uint32 { return c.version }
func (counter) Apply(b *Batch, m events.Msg, _ []events.Event) error {
	v, _, err := b.Get([]byte(m.Subject))
	if err != nil {
		return err
	}
	n := uint64(0)
	if len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	return b.Set([]byte(m.Subject), binary.BigEndian.AppendUint64(nil, n+1))
}

func message(t *testing.T, seq uint64, subject string) events.Msg {
	t.Helper()
	data, _, err := events.Seal([32]byte{}, []events.Event{{Name: events.SiteSandboxName, Time: 1, Actor: "admin",
		Payload: &events.SiteSandbox{Sandbox: true}}})
	require.NoError(t, err)
	return events.Msg{Seq: seq, Subject: subject, Data: data}
}

func count(t *testing.T, d *DB, subject string) uint64 {
	t.Helper()
	v, ok, err := d.View("counter").Get([]byte(subject))
	require.NoError(t, err)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// TestDB_checkpointAndVersion: messages at or below a model's checkpoint
// are not applied again, the checkpoint survives a reopen, and a new format
// version drops the model.
func TestDB_checkpointAndVersion(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir, slog.Default(), counter{1})
	require.NoError(t, err)
	require.NoError(t, d.ApplyMessages([]events.Msg{message(t, 1, "ledger.site.a"), message(t, 2, "ledger.site.a"), message(t, 3, "ledger.site.b")}))
	require.NoError(t, d.ApplyMessages([]events.Msg{message(t, 3, "ledger.site.b"), message(t, 4, "ledger.site.a")}))
	assert.Equal(t, uint64(3), count(t, d, "ledger.site.a"))
	assert.Equal(t, uint64(1), count(t, d, "ledger.site.b"))
	assert.Equal(t, uint64(4), d.Applied())
	require.NoError(t, d.Close())

	d, err = Open(dir, slog.Default(), counter{1})
	require.NoError(t, err)
	assert.Equal(t, uint64(4), d.Checkpoint("counter"))
	assert.Equal(t, uint64(3), count(t, d, "ledger.site.a"))
	require.NoError(t, d.Close())

	d, err = Open(dir, slog.Default(), counter{2})
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, uint64(0), d.Checkpoint("counter"), "a new format starts from the stream's start")
	assert.Equal(t, uint64(0), count(t, d, "ledger.site.a"))
}
