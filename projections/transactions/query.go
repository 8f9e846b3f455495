package transactions

import (
	"encoding/binary"
	"fmt"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/projections"
	"github.com/iqdgateway/gateway/records"
)

// Get returns the transaction txID; ok is false when the model has none.
func Get(v projections.View, txID ids.TxID) (t Tx, ok bool, err error) {
	i, valid := txID.Index()
	if !valid {
		return Tx{}, false, nil
	}
	return getKey(v, txKey(txID.Site(), i))
}

func getKey(v projections.View, k []byte) (Tx, bool, error) {
	val, ok, err := v.Get(k)
	if err != nil || !ok {
		return Tx{}, false, err
	}
	t, err := decodeTx(val)
	if err != nil {
		return Tx{}, false, fmt.Errorf("transactions: %q: %w", k, err)
	}
	return t, true, nil
}

// ByProcessID returns a site's transaction with processId pid, as
// records.Reader.ByProcessID finds it: the transaction's own processId
// first, then a pending deposit's alias (alias true: its record is
// answered with alreadyPending).
func ByProcessID(v projections.View, site ids.SiteID, pid string) (t Tx, alias, ok bool, err error) {
	val, ok, err := v.Get(pidKey(site, pid))
	if err != nil || !ok {
		return Tx{}, false, false, err
	}
	if len(val) != 5 {
		return Tx{}, false, false, fmt.Errorf("transactions: processId %q of %s: %w", pid, site, errValue)
	}
	t, ok, err = getKey(v, txKey(site, int32(binary.BigEndian.Uint32(val))))
	return t, pidAlias(val), ok, err
}

// recordAs is the transaction's record, alreadyPending set
// for an alias.
func (t *Tx) recordAs(cfg *aggregates.Config, publicURL string, alias bool) records.Record {
	r := t.Record(cfg, publicURL)
	if alias && r.Deposit != nil {
		r.Deposit.AlreadyPending = true
	}
	return r
}

// RecordByProcessID is ByProcessID's answer as records.Reader.ByProcessID
// gives it; aggregates.ErrNotFound when there is none.
func RecordByProcessID(v projections.View, cfg *aggregates.Config, publicURL string, site ids.SiteID, pid string) (records.Record, error) {
	t, alias, ok, err := ByProcessID(v, site, pid)
	if err != nil {
		return records.Record{}, err
	}
	if !ok {
		return records.Record{}, aggregates.ErrNotFound
	}
	return t.recordAs(cfg, publicURL, alias), nil
}

// SiteExists reports whether the model holds site's creation.
func SiteExists(v projections.View, site ids.SiteID) (bool, error) {
	_, ok, err := v.Get(siteKey(site))
	return ok, err
}

// Sites lists the created sites, sorted by the length of their id, then
// by id (the order of their keys).
func Sites(v projections.View) ([]ids.SiteID, error) {
	var out []ids.SiteID
	err := v.Scan([]byte{keySite}, []byte{keySite + 1}, false, func(k, _ []byte) bool {
		if s, _, ok := readStr(k[1:]); ok {
			out = append(out, ids.SiteID(s))
		}
		return true
	})
	return out, err
}

// Configs returns a site's current settings (ledger.Ledger.SiteConfig).
type Configs func(ids.SiteID) (*aggregates.Config, bool)

// Search is records.Reader.List served by the model: the same filters,
// order, page size and cursors, the records built with each site's
// current settings from cfgs.
func Search(v projections.View, f records.Filter, cfgs Configs, publicURL string) (records.Page[records.OpsRecord], error) {
	res, err := Find(v, f)
	if err != nil {
		return records.Page[records.OpsRecord]{}, err
	}
	page := records.Page[records.OpsRecord]{Items: make([]records.OpsRecord, 0, len(res.Txs)), NextCursor: res.Next}
	for i := range res.Txs {
		t := &res.Txs[i]
		cfg, ok := cfgs(t.Site)
		if !ok {
			return records.Page[records.OpsRecord]{}, fmt.Errorf("transactions: %s: %w", t.ID(), aggregates.ErrSiteNotFound)
		}
		page.Items = append(page.Items, records.OpsRecord{SiteID: t.Site, Record: t.Record(cfg, publicURL)})
	}
	return page, nil
}
