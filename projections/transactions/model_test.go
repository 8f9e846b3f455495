package transactions_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/projections"
	"github.com/iqdgateway/gateway/projections/transactions"
)

// TestModel_recordsEqualToday: for every transaction of a generated
// history, the record built from the model is the record records.Reader
// builds today; every processId and alias finds what ByProcessID finds.
func TestModel_recordsEqualToday(t *testing.T) {
	fx := newFixture(t, 6000, 4)
	ctx := context.Background()
	v := fx.view()
	txs := fx.txIDs(t)
	require.Greater(t, len(txs), 1000)
	var hosted, sandbox, reasons, senders int
	for _, id := range txs {
		want, err := fx.reader.ByIDLocal(ctx, id.Site(), id)
		require.NoError(t, err)
		tx, ok, err := transactions.Get(v, id)
		require.NoError(t, err)
		require.True(t, ok, "transaction %s", id)
		cfg, _ := fx.config(id.Site())
		sameRecord(t, want, &tx, tx.Record(cfg, publicURL))
		if want.HostedToken != "" {
			hosted++
		}
		if want.Sandbox {
			sandbox++
		}
		if want.StatusReason != nil {
			reasons++
		}
		if want.Deposit != nil && want.Deposit.SenderName != nil {
			senders++
		}
	}
	assert.Positive(t, hosted)
	assert.Positive(t, sandbox)
	assert.Positive(t, reasons)
	assert.Positive(t, senders)

	aliases := 0
	for site, pids := range fx.processIDs(t) {
		cfg, _ := fx.config(site)
		for _, pid := range pids {
			want, err := fx.reader.ByProcessID(ctx, site, pid)
			require.NoError(t, err)
			got, err := transactions.RecordByProcessID(v, cfg, publicURL, site, pid)
			require.NoError(t, err)
			require.Equal(t, string(want.AppendJSON(nil)), string(got.AppendJSON(nil)), "processId %q of %s", pid, site)
			if want.Deposit != nil && want.Deposit.AlreadyPending {
				aliases++
			}
		}
	}
	assert.Positive(t, aliases, "the history has aliases")
	_, _, ok, err := transactions.ByProcessID(v, "xhosted", "no-such-pid")
	require.NoError(t, err)
	assert.False(t, ok)
}

// versioned is the model under another format version.
type versioned struct {
	transactions.Model
	v uint32
}

func (m versioned) Version() uint32 { return m.v }

// TestModel_versionBumpRebuilds: a DB holding the model at another
// format version drops it when opened, and applying the stream again
// rebuilds it equal.
func TestModel_versionBumpRebuilds(t *testing.T) {
	fx := newFixture(t, 1500, 2)
	ids := fx.txIDs(t)
	dir := t.TempDir()
	open := func(v uint32) *projections.DB {
		d, err := projections.Open(dir, slog.Default(), versioned{transactions.New(), v})
		require.NoError(t, err)
		return d
	}
	apply := func(d *projections.DB) {
		var msgs []events.Msg
		require.NoError(t, fx.mem.Read(context.Background(), events.SubjectPrefix+">", 1, func(m events.Msg) error {
			msgs = append(msgs, m)
			return nil
		}))
		require.NoError(t, d.ApplyMessages(msgs))
	}
	d := open(transactions.Version)
	apply(d)
	before, ok, err := transactions.Get(d.View(transactions.Name), ids[len(ids)-1])
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, d.Close())

	d = open(transactions.Version + 1)
	_, ok, err = transactions.Get(d.View(transactions.Name), ids[len(ids)-1])
	require.NoError(t, err)
	assert.False(t, ok, "the model of the old format is dropped")
	assert.Zero(t, d.Checkpoint(transactions.Name))
	page, err := transactions.Find(d.View(transactions.Name), recordsFilterAll())
	require.NoError(t, err)
	assert.Empty(t, page.Txs, "no index entry is left behind")
	apply(d)
	after, ok, err := transactions.Get(d.View(transactions.Name), ids[len(ids)-1])
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, before, after)
	require.NoError(t, d.Close())
}
