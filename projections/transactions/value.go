package transactions

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// Tx is one transaction as the model keeps it: what its creation event
// showed the merchant, and what later events changed (status, amount,
// reason, last change). It is everything records.Reader joins from the
// site's state and the creation event, except the site's settings (the
// secret the hash is made with, the sandbox mark), which are read when
// the record is built (Record).
type Tx struct {
	Site  ids.SiteID
	Index int32
	// Seq and EvIdx place the creation event in the stream: creation
	// order across sites.
	Seq   uint64
	EvIdx uint16

	Kind      aggregates.Kind
	Status    aggregates.Status
	Amount    int64
	Requested int64
	// Reason is the status reason ("" when none).
	Reason string
	// CreatedAt, UpdatedAt and ExpiresAt are Unix ms (ExpiresAt 0 for a
	// withdrawal).
	CreatedAt, UpdatedAt, ExpiresAt int64

	ProcessID      string
	BankID         string
	BankCode       string
	IdentifierKind string
	UserID         string
	UserName       string
	Name           string
	ConvertedName  string
	// AccountName and AccountNumber are a deposit's recipient account, or
	// a withdrawal's account name and IBAN.
	AccountName   string
	AccountNumber string
	// Deposits only.
	BankName    string
	SenderName  string
	Lang        string
	HostedToken string
}

// ID returns the transaction's id.
func (t *Tx) ID() ids.TxID { return ids.NewTx(t.Site, t.Index) }

func (t *Tx) pos() pos { return pos{seq: t.Seq, ev: t.EvIdx} }

// Record builds the transaction's record as records.Reader builds it,
// with the site's current settings cfg; publicURL is the base of hosted
// page links (without a trailing slash, as records.Reader.PublicURL).
func (t *Tx) Record(cfg *aggregates.Config, publicURL string) records.Record {
	return records.New(records.Fields{TxID: t.ID(), Kind: t.Kind, Status: t.Status, Amount: t.Amount, Requested: t.Requested,
		Reason: t.Reason, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, ExpiresAt: t.ExpiresAt,
		BankID: t.BankID, BankCode: t.BankCode, IdentifierKind: t.IdentifierKind,
		ProcessID: t.ProcessID, UserID: t.UserID, UserName: t.UserName, Name: t.Name, ConvertedName: t.ConvertedName,
		AccountName: t.AccountName, AccountNumber: t.AccountNumber,
		BankName: t.BankName, SenderName: t.SenderName, Lang: t.Lang, HostedToken: t.HostedToken,
		Sandbox: cfg.Sandbox}, cfg.Secret, publicURL)
}

// fromDeposit is the transaction a deposit.requested event creates.
func fromDeposit(site ids.SiteID, i int32, seq uint64, evIdx uint16, at int64, p *events.DepositRequested) Tx {
	return Tx{Site: site, Index: i, Seq: seq, EvIdx: evIdx, Kind: aggregates.KindDeposit, Status: aggregates.StatusPending,
		Amount: p.Amount, Requested: p.Amount, CreatedAt: at, UpdatedAt: at, ExpiresAt: p.ExpiresAt,
		ProcessID: p.ProcessID, BankID: p.BankID, BankCode: p.BankCode, IdentifierKind: p.IdentifierKind,
		UserID: p.UserID, UserName: p.UserName, Name: p.Name, ConvertedName: p.ConvertedName,
		AccountName: p.AccountName, AccountNumber: p.AccountNumber,
		BankName: p.BankName, SenderName: p.SenderName, Lang: p.Lang, HostedToken: p.HostedToken}
}

// fromWithdrawal is the transaction a withdrawal.requested event creates.
func fromWithdrawal(site ids.SiteID, i int32, seq uint64, evIdx uint16, at int64, p *events.WithdrawalRequested) Tx {
	return Tx{Site: site, Index: i, Seq: seq, EvIdx: evIdx, Kind: aggregates.KindWithdrawal, Status: aggregates.StatusPending,
		Amount: p.Amount, Requested: p.Amount, CreatedAt: at, UpdatedAt: at,
		ProcessID: p.ProcessID, BankID: p.BankID, BankCode: p.BankCode, IdentifierKind: p.IdentifierKind,
		UserID: p.UserID, UserName: p.UserName, Name: p.Name, ConvertedName: p.ConvertedName,
		AccountName: p.AccountName, AccountNumber: p.IBAN}
}

// The value is hand-written binary: fixed-width fields first, then
// varints, then length-prefixed strings, in the order of Tx's fields.
// The model's Version changes with it.

func (t *Tx) strings() []*string {
	return []*string{(*string)(&t.Site), &t.Reason, &t.ProcessID, &t.BankID, &t.BankCode, &t.IdentifierKind, &t.UserID,
		&t.UserName, &t.Name, &t.ConvertedName, &t.AccountName, &t.AccountNumber, &t.BankName, &t.SenderName, &t.Lang,
		&t.HostedToken}
}

func (t *Tx) encode(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(t.Index))
	b = binary.BigEndian.AppendUint64(b, t.Seq)
	b = binary.BigEndian.AppendUint16(b, t.EvIdx)
	b = append(b, byte(t.Kind), byte(t.Status))
	for _, v := range []int64{t.Amount, t.Requested, t.CreatedAt, t.UpdatedAt, t.ExpiresAt} {
		b = binary.AppendVarint(b, v)
	}
	for _, s := range t.strings() {
		b = appendStr(b, *s)
	}
	return b
}

var errValue = errors.New("transactions: malformed value")

func decodeTx(b []byte) (Tx, error) {
	var t Tx
	if len(b) < 16 {
		return t, errValue
	}
	t.Index = int32(binary.BigEndian.Uint32(b))
	t.Seq = binary.BigEndian.Uint64(b[4:])
	t.EvIdx = binary.BigEndian.Uint16(b[12:])
	t.Kind, t.Status = aggregates.Kind(b[14]), aggregates.Status(b[15])
	b = b[16:]
	for _, v := range []*int64{&t.Amount, &t.Requested, &t.CreatedAt, &t.UpdatedAt, &t.ExpiresAt} {
		n, k := binary.Varint(b)
		if k <= 0 {
			return t, errValue
		}
		*v, b = n, b[k:]
	}
	for _, s := range t.strings() {
		var ok bool
		if *s, b, ok = readStr(b); !ok {
			return t, errValue
		}
	}
	if len(b) != 0 {
		return t, fmt.Errorf("%w: %d bytes left", errValue, len(b))
	}
	return t, nil
}

// appendStr appends s with its length (uvarint) before it, so that a
// key holding it is never a prefix of one holding a longer string.
func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func readStr(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", b, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}
