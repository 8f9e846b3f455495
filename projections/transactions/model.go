// Package transactions is the read model of the merchant-visible
// transactions: one value per transaction with everything its record
// shows, the processIds (and a pending deposit's aliases) of every site,
// and streams of index entries that serve the operator search
// (records.Filter) without scanning every transaction
// (docs/ARCHITECTURE.md "Read models"). It reproduces what records.Reader
// answers from the ledger's state and the stored creation events.
package transactions

import (
	"encoding/binary"
	"fmt"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/projections"
)

// Name is the model's name in the projections DB.
const Name = "transactions"

// Version is the model's format: it rises with any change to the keys or
// the value's encoding, and the model is then rebuilt from the stream.
const Version = 1

// Model folds site events into transactions and their indexes.
type Model struct{}

// New returns the model.
func New() Model { return Model{} }

// Name implements projections.Model.
func (Model) Name() string { return Name }

// Version implements projections.Model.
func (Model) Version() uint32 { return Version }

// Apply implements projections.Model. Only site subjects hold
// transactions; an event naming a transaction the model does not know is
// ignored, as aggregates.Site ignores it (the audit reports such
// histories).
func (Model) Apply(b *projections.Batch, m events.Msg, evs []events.Event) error {
	site, ok := events.SiteOf(m.Subject)
	if !ok {
		return nil
	}
	a := applier{b: b, site: site}
	for i, e := range evs {
		if err := a.apply(m.Seq, uint16(i), e); err != nil {
			return fmt.Errorf("transactions: event %d (%s): %w", i, e.Name, err)
		}
	}
	return nil
}

// applier applies one message's events of one site.
type applier struct {
	b    *projections.Batch
	site ids.SiteID
}

func (a *applier) apply(seq uint64, evIdx uint16, e events.Event) error {
	switch p := e.Payload.(type) {
	case *events.SiteCreated:
		return a.b.Set(siteKey(a.site), nil)
	case *events.DepositRequested:
		i, ok := a.index(p.TxID)
		if !ok {
			return nil
		}
		t := fromDeposit(a.site, i, seq, evIdx, e.Time, p)
		return a.create(&t)
	case *events.WithdrawalRequested:
		i, ok := a.index(p.TxID)
		if !ok {
			return nil
		}
		t := fromWithdrawal(a.site, i, seq, evIdx, e.Time, p)
		return a.create(&t)
	case *events.DepositAliasAdded:
		return a.alias(p)
	case *events.DepositApproved:
		return a.update(p.TxID, e.Time, func(t *Tx) { t.Status, t.Amount = aggregates.StatusApproved, p.Amount })
	case *events.DepositRejected:
		return a.update(p.TxID, e.Time, func(t *Tx) { t.Status, t.Reason = aggregates.StatusRejected, p.Reason })
	case *events.DepositExpired:
		return a.update(p.TxID, e.Time, func(t *Tx) { t.Status = aggregates.StatusExpired })
	case *events.WithdrawalProcessing:
		return a.update(p.TxID, e.Time, func(t *Tx) { t.Status = aggregates.StatusProcessing })
	case *events.WithdrawalPaid:
		return a.update(p.TxID, e.Time, func(t *Tx) {
			t.Status = aggregates.StatusPaid
			if p.Reference != "" {
				t.Reason = p.Reference
			}
		})
	case *events.WithdrawalRejected:
		return a.update(p.TxID, e.Time, func(t *Tx) { t.Status, t.Reason = aggregates.StatusRejected, p.Reason })
	}
	return nil
}

// index is the transaction's index in this site, when txID is one of its
// transactions.
func (a *applier) index(txID string) (int32, bool) {
	id := ids.TxID(txID)
	i, ok := id.Index()
	return i, ok && id.Site() == a.site
}

func (a *applier) create(t *Tx) error {
	if err := a.put(t); err != nil {
		return err
	}
	// A transaction's own processId: an alias never takes its place
	// (aggregates.Site.ByProcessID is asked first).
	if err := a.b.Set(pidKey(a.site, t.ProcessID), pidValue(t.Index, false)); err != nil {
		return err
	}
	keys, ref := t.entries()
	return a.index2(keys, nil, ref)
}

func (a *applier) alias(p *events.DepositAliasAdded) error {
	i, ok := a.index(p.TxID)
	if !ok {
		return nil
	}
	if _, known, err := a.b.Get(txKey(a.site, i)); err != nil || !known {
		return err
	}
	k := pidKey(a.site, p.ProcessID)
	v, taken, err := a.b.Get(k)
	if err != nil {
		return err
	}
	if taken && !pidAlias(v) {
		return nil
	}
	return a.b.Set(k, pidValue(i, true))
}

// update applies fn to a known transaction, moving its index entries
// from what they indexed before to what they index after.
func (a *applier) update(txID string, at int64, fn func(*Tx)) error {
	i, ok := a.index(txID)
	if !ok {
		return nil
	}
	v, known, err := a.b.Get(txKey(a.site, i))
	if err != nil || !known {
		return err
	}
	t, err := decodeTx(v)
	if err != nil {
		return fmt.Errorf("%s: %w", ids.NewTx(a.site, i), err)
	}
	before, ref := t.changingEntries()
	fn(&t)
	t.UpdatedAt = at
	if err := a.put(&t); err != nil {
		return err
	}
	after, _ := t.changingEntries()
	return a.index2(added(after, before), added(before, after), ref)
}

func (a *applier) put(t *Tx) error { return a.b.Set(txKey(a.site, t.Index), t.encode(nil)) }

// index2 writes the entries add and removes the entries del, keeping each
// stream's count.
func (a *applier) index2(add, del [][]byte, ref []byte) error {
	for _, k := range add {
		if err := a.b.Set(k, ref); err != nil {
			return err
		}
		a.count(k, 1)
	}
	for _, k := range del {
		if err := a.b.Delete(k); err != nil {
			return err
		}
		a.count(k, -1)
	}
	return nil
}

// count moves the count of the stream holding entry by d (the counts are
// written once a commit: projections.Batch.Add).
func (a *applier) count(entry []byte, d int64) {
	if c := countKey(entry); c != nil {
		a.b.Add(c, d)
	}
}

// added returns the keys of xs that are not in ys.
func added(xs, ys [][]byte) [][]byte {
	in := make(map[string]bool, len(ys))
	for _, y := range ys {
		in[string(y)] = true
	}
	var out [][]byte
	for _, x := range xs {
		if !in[string(x)] {
			out = append(out, x)
		}
	}
	return out
}

func pidValue(i int32, alias bool) []byte {
	v := binary.BigEndian.AppendUint32(nil, uint32(i))
	if alias {
		return append(v, 1)
	}
	return append(v, 0)
}

func pidAlias(v []byte) bool { return len(v) == 5 && v[4] == 1 }
