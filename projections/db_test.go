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

// adder counts messages per subject with Batch.Add.
type adder struct{}

func (adder) Name() string    { return "adder" }
func (adder) Version() uint32 { return 1 }
func (adder) Apply(b *Batch, m events.Msg, _ []events.Event) error {
	b.Add([]byte(m.Subject), 1)
	b.Add([]byte("all"), 2)
	b.Add([]byte("all"), -1)
	return nil
}

// TestBatch_Add: a counter's changes are summed over a commit's messages
// and added to what earlier commits stored.
func TestBatch_Add(t *testing.T) {
	d, err := Open(t.TempDir(), slog.Default(), adder{})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.ApplyMessages([]events.Msg{message(t, 1, "ledger.site.a"), message(t, 2, "ledger.site.a"), message(t, 3, "ledger.site.b")}))
	require.NoError(t, d.ApplyMessages([]events.Msg{message(t, 3, "ledger.site.b"), message(t, 4, "ledger.site.a")}))
	for key, want := range map[string]int64{"ledger.site.a": 3, "ledger.site.b": 1, "all": 4, "none": 0} {
		n, err := Counter(d.View("adder").Get([]byte(key)))
		require.NoError(t, err)
		assert.Equal(t, want, n, key)
	}
}
