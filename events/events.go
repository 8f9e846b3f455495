// Package events defines the ledger's event vocabulary: explicit, versioned
// event names, msgpack payloads with explicit field tags, the envelope that
// carries them on a JetStream subject, and the hash chain that makes a site's
// history tamper-evident.
//
// An event, once shipped, never changes: a new shape gets a new name (".v2")
// and an upcaster in Decode. Names are constants, never derived by reflection.
package events

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Event names. Each is the stable identity of one payload shape.
const (
	// SiteCreatedName is written for every site created since operator
	// writes took an Idempotency-Key; SiteCreatedV1Name is only read.
	SiteCreatedName   = "site.created.v2"
	SiteCreatedV1Name = "site.created.v1"
	// SiteUpdatedName says what is left available after a change of the
	// negative limit; SiteUpdatedV1Name, which did not, is only read.
	SiteUpdatedName              = "site.updated.v2"
	SiteUpdatedV1Name            = "site.updated.v1"
	SiteSecretRotatedName        = "site.secret_rotated.v1"
	SiteWebhookSecretRotatedName = "site.webhook_secret_rotated.v1"
	SitePageUpdatedName          = "site.page_updated.v1"
	SiteSandboxName              = "site.sandbox.v1"
	SandboxCallbackName          = "sandbox.callback_requested.v1"
	DepositAliasAddedName        = "deposit.alias_added.v1"
	SiteMethodsSetName           = "site.methods_set.v1"
	TreasuryAdjustedName         = "treasury.adjusted.v3"
	TreasuryAdjustedV2Name       = "treasury.adjusted.v2"
	TreasuryAdjustedV1Name       = "treasury.adjusted.v1"
	DepositRequestedName         = "deposit.requested.v1"
	DepositApprovedName          = "deposit.approved.v1"
	DepositRejectedName          = "deposit.rejected.v1"
	DepositExpiredName           = "deposit.expired.v1"
	WithdrawalRequestedName      = "withdrawal.requested.v1"
	WithdrawalProcessingName     = "withdrawal.processing.v1"
	WithdrawalPaidName           = "withdrawal.paid.v1"
	WithdrawalRejectedName       = "withdrawal.rejected.v1"
	BankCreatedName              = "bank.created.v2"
	BankCreatedV1Name            = "bank.created.v1"
	BankUpdatedName              = "bank.updated.v1"
	BankScopedName               = "bank.scoped.v1"
	OperatorCreatedName          = "operator.created.v1"
	OperatorRevokedName          = "operator.revoked.v1"
)

// Actors that are not operators. Operator actions carry the operator's id.
const (
	ActorMerchant = "merchant"
	ActorSystem   = "system"
)

// Payload is implemented by every event payload; EventName returns one of
// the constants above so the name travels with the type explicitly.
type Payload interface {
	EventName() string
}

// Event is one fact in the history of a site, the catalog or the operators.
type Event struct {
	// Name is the payload's versioned name.
	Name string
	// Time is when the event was decided, in Unix milliseconds.
	Time int64
	// Actor is who caused it: ActorMerchant, ActorSystem or an operator id.
	Actor string
	// Payload is the decoded payload.
	Payload Payload
	// Prev is the chain hash of the previous event of the same subject
	// (all zero for the first event).
	Prev [32]byte

	// data is the payload as stored, kept by Decode for hashing.
	data []byte
}

// At returns the event time as a time.Time in UTC.
func (e Event) At() time.Time { return time.UnixMilli(e.Time).UTC() }

// Tx returns the id of the transaction the event concerns ("" for an event
// of no transaction).
func (e Event) Tx() string {
	switch p := e.Payload.(type) {
	case *DepositRequested:
		return p.TxID
	case *DepositApproved:
		return p.TxID
	case *DepositRejected:
		return p.TxID
	case *DepositExpired:
		return p.TxID
	case *WithdrawalRequested:
		return p.TxID
	case *WithdrawalProcessing:
		return p.TxID
	case *WithdrawalPaid:
		return p.TxID
	case *WithdrawalRejected:
		return p.TxID
	case *SandboxCallback:
		return p.TxID
	}
	return ""
}

// ErrUnknownEvent is returned by Decode for a name this build does not know.
var ErrUnknownEvent = errors.New("unknown event name")

// ErrCorrupt is returned when a message cannot be decoded.
var ErrCorrupt = errors.New("corrupt message")

// wireEvent is the stored shape of one event inside a message.
type wireEvent struct {
	Name  string             `msgpack:"n"`
	Time  int64              `msgpack:"t"`
	Actor string             `msgpack:"a"`
	Data  msgpack.RawMessage `msgpack:"d"`
	Prev  []byte             `msgpack:"p"`
}

// wireMessage is the stored shape of one JetStream message: the events that
// were committed together (group commit) for one subject.
type wireMessage struct {
	Version int         `msgpack:"v"`
	Events  []wireEvent `msgpack:"e"`
	// Nonce makes every sealed message unique, so a writer that lost an
	// acknowledgement can recognise its own message on the subject even
	// when another writer decided byte-identical events in the same
	// millisecond. It is not part of any event or hash.
	Nonce []byte `msgpack:"w,omitempty"`
}

const messageVersion = 1

// Seal chains evs onto prev (the chain hash of the subject's last stored
// event), setting each event's Prev, and encodes them as one message. It
// returns the message bytes and the chain hash of the last event, which the
// next message of the subject must start from.
func Seal(prev [32]byte, evs []Event) ([]byte, [32]byte, error) {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, prev, fmt.Errorf("seal: %w", err)
	}
	return seal(prev, evs, nonce[:])
}

// seal writes the message as msgpack's reflection writes a wireMessage
// (TestSeal_sameBytesAsReflection holds the two side by side), with every
// payload encoded in place: one buffer a message instead of one a payload
// and another for the envelope, which every append paid for.
func seal(prev [32]byte, evs []Event, nonce []byte) ([]byte, [32]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, 64+512*len(evs)))
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	fields := 2
	if len(nonce) > 0 {
		fields = 3
	}
	// The payloads' ends, to slice them out of the finished buffer.
	spans := make([][2]int, len(evs))
	err := func() error {
		if err := enc.EncodeMapLen(fields); err != nil {
			return err
		}
		if err := encodeKeyInt(enc, "v", messageVersion); err != nil {
			return err
		}
		if err := enc.EncodeString("e"); err != nil {
			return err
		}
		if err := enc.EncodeArrayLen(len(evs)); err != nil {
			return err
		}
		for i := range evs {
			e := &evs[i]
			if err := enc.EncodeMapLen(5); err != nil {
				return err
			}
			if err := encodeKeyString(enc, "n", e.Name); err != nil {
				return err
			}
			if err := enc.EncodeString("t"); err != nil {
				return err
			}
			if err := enc.EncodeInt64(e.Time); err != nil {
				return err
			}
			if err := encodeKeyString(enc, "a", e.Actor); err != nil {
				return err
			}
			if err := enc.EncodeString("d"); err != nil {
				return err
			}
			start := buf.Len()
			if err := enc.Encode(e.Payload); err != nil {
				return fmt.Errorf("encode %s: %w", e.Name, err)
			}
			spans[i] = [2]int{start, buf.Len()}
			if err := enc.EncodeString("p"); err != nil {
				return err
			}
			if err := enc.EncodeBytes(prev[:]); err != nil {
				return err
			}
			e.Prev = prev
			prev = hashParts(e.Prev, e.Name, e.Time, e.Actor, buf.Bytes()[start:spans[i][1]])
		}
		if len(nonce) > 0 {
			if err := enc.EncodeString("w"); err != nil {
				return err
			}
			return enc.EncodeBytes(nonce)
		}
		return nil
	}()
	if err != nil {
		return nil, prev, fmt.Errorf("seal: %w", err)
	}
	b := buf.Bytes()
	for i, sp := range spans {
		evs[i].data = b[sp[0]:sp[1]:sp[1]]
	}
	return b, prev, nil
}

func encodeKeyString(enc *msgpack.Encoder, k, v string) error {
	if err := enc.EncodeString(k); err != nil {
		return err
	}
	return enc.EncodeString(v)
}

func encodeKeyInt(enc *msgpack.Encoder, k string, v int64) error {
	if err := enc.EncodeString(k); err != nil {
		return err
	}
	return enc.EncodeInt(v)
}

// Decode parses one stored message into its events, upcasting old versions.
//
// It reads the envelope (wireMessage) field by field rather than through
// msgpack's reflection, and keeps each payload as a slice of b rather than
// a copy: an audit decodes a million messages, and the envelope was most of
// that work. It accepts and refuses what unmarshalling into wireMessage
// does (decode_test.go holds the two side by side).
func Decode(b []byte) ([]Event, error) { return DecodeExcept(b, nil) }

// DecodeExcept is Decode that leaves the payload of every event skip
// names undecoded: such an event has its name, time, actor and chain hash,
// and a nil Payload. A reader that acts on a few kinds of event saves
// decoding the others, most of a busy stream: the callback dispatcher
// reads every message, and most are creations it has no use for
// (BENCHMARKS.md, "Less work per message"). A skipped payload is not
// checked either, so skip must name only events the caller never reads;
// nil skips none.
func DecodeExcept(b []byte, skip func(name string) bool) ([]Event, error) {
	r := bytes.NewReader(b)
	d := msgpack.GetDecoder()
	defer msgpack.PutDecoder(d)
	d.Reset(r)
	m := envelope{d: d, b: b, r: r}
	if err := m.message(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if m.version != messageVersion {
		return nil, fmt.Errorf("%w: message version %d", ErrCorrupt, m.version)
	}
	out := make([]Event, len(m.events))
	for i, w := range m.events {
		var p Payload
		if skip == nil || !skip(w.name) {
			var err error
			if p, err = decodePayload(w.name, w.data); err != nil {
				return nil, err
			}
		}
		if w.prevLen != 32 {
			return nil, fmt.Errorf("%w: %s prev hash has %d bytes", ErrCorrupt, w.name, w.prevLen)
		}
		out[i] = Event{Name: w.name, Time: w.time, Actor: w.actor, Payload: p, Prev: w.prev, data: w.data}
	}
	return out, nil
}

// decodePayload decodes one payload by its name. The v1 names of the
// payloads that gained an idempotency key decode into the same structs as
// their v2 names (the upcaster): v1 is v2 without the key. Nothing ever
// wrote a key into a v1 payload; had anything done so, it would not count
// (upcastV1 drops it), as the v1 decoder ignored fields it did not know.
func decodePayload(name string, data []byte) (Payload, error) {
	var p Payload
	switch name {
	case SiteCreatedName, SiteCreatedV1Name:
		p = &SiteCreated{}
	case SiteUpdatedName, SiteUpdatedV1Name:
		p = &SiteUpdated{}
	case SiteSecretRotatedName:
		p = &SiteSecretRotated{}
	case SitePageUpdatedName:
		p = &SitePageUpdated{}
	case SiteSandboxName:
		p = &SiteSandbox{}
	case SandboxCallbackName:
		p = &SandboxCallback{}
	case DepositAliasAddedName:
		p = &DepositAliasAdded{}
	case SiteMethodsSetName:
		p = &SiteMethodsSet{}
	case SiteWebhookSecretRotatedName:
		p = &SiteWebhookSecretRotated{}
	case TreasuryAdjustedName, TreasuryAdjustedV2Name, TreasuryAdjustedV1Name:
		p = &TreasuryAdjusted{}
	case DepositRequestedName:
		p = &DepositRequested{}
	case DepositApprovedName:
		p = &DepositApproved{}
	case DepositRejectedName:
		p = &DepositRejected{}
	case DepositExpiredName:
		p = &DepositExpired{}
	case WithdrawalRequestedName:
		p = &WithdrawalRequested{}
	case WithdrawalProcessingName:
		p = &WithdrawalProcessing{}
	case WithdrawalPaidName:
		p = &WithdrawalPaid{}
	case WithdrawalRejectedName:
		p = &WithdrawalRejected{}
	case BankCreatedName, BankCreatedV1Name:
		p = &BankCreated{}
	case BankUpdatedName:
		p = &BankUpdated{}
	case BankScopedName:
		p = &BankScoped{}
	case OperatorCreatedName:
		p = &OperatorCreated{}
	case OperatorRevokedName:
		p = &OperatorRevoked{}
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownEvent, name)
	}
	if err := msgpack.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	switch name {
	case SiteCreatedV1Name, TreasuryAdjustedV1Name, BankCreatedV1Name:
		p.(keyed).upcastV1()
	case SiteUpdatedV1Name:
		// v1 never said what was left available; a field that a v1
		// writer could not have meant does not count.
		p.(*SiteUpdated).Available = nil
	}
	return p, nil
}

// keyed is implemented by the payloads that carry an idempotency key from
// their v2 on.
type keyed interface {
	upcastV1()
}

// Hash returns the chain hash of e: SHA-256 over its Prev and its name,
// time, actor and payload bytes. The next event of the subject stores it as
// its Prev, so rewriting any stored event breaks the chain right after it.
// A decoded event is hashed over the bytes as stored, so tampering with the
// payload is detected even when it still decodes.
func Hash(e Event) ([32]byte, error) {
	data := e.data
	if data == nil {
		var err error
		if data, err = msgpack.Marshal(e.Payload); err != nil {
			return [32]byte{}, fmt.Errorf("hash %s: %w", e.Name, err)
		}
	}
	return hashParts(e.Prev, e.Name, e.Time, e.Actor, data), nil
}

func hashParts(prev [32]byte, name string, t int64, actor string, data []byte) [32]byte {
	h := sha256.New()
	h.Write(prev[:])
	h.Write([]byte(name))
	h.Write([]byte{0})
	var tb [8]byte
	binary.BigEndian.PutUint64(tb[:], uint64(t))
	h.Write(tb[:])
	h.Write([]byte(actor))
	h.Write([]byte{0})
	h.Write(data)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Store errors, shared by every store implementation so the service can match
// them without importing one.
var (
	// ErrConflict means the subject moved on since the expected sequence:
	// reload and decide again.
	ErrConflict = errors.New("append conflict: subject changed since it was read")
	// ErrUnavailable means the store could not be reached; when returned
	// by an append, the message was not stored.
	ErrUnavailable = errors.New("event store unavailable")
	// ErrOutcomeUnknown is returned by an append that was sent but not
	// answered (a timeout, a connection or leader lost in flight): the
	// message may or may not be stored, and may still be stored later
	// unless something else takes its place on the subject. Only a read
	// of the subject, or another append at the same expected sequence,
	// settles it.
	ErrOutcomeUnknown = errors.New("event store did not answer whether the append was stored")
	// ErrNotFound means no such message or snapshot.
	ErrNotFound = errors.New("not found in event store")
	// ErrHistoryLost means the stream no longer holds messages it once
	// had (damaged, truncated or removed files): the stream never deletes
	// one, so nothing may be served from what is left. The data directory
	// is restored from a backup.
	ErrHistoryLost = errors.New("the ledger stream lost messages it once held")
)

// Msg is one stored message of the ledger stream.
type Msg struct {
	// Seq is the stream sequence.
	Seq uint64
	// Subject is the message subject (a site's or the catalog's).
	Subject string
	// Data is the sealed message (see Seal).
	Data []byte
}

// ErrChainBroken refuses a message whose first event does not link to the
// chain hash of the last event applied before it.
var ErrChainBroken = errors.New("hash chain broken")

// Position is where an aggregate's state stands in the stream: the sequence
// of the last message applied to it, and the chain hash of that message's
// last event. It belongs to whoever applies messages (the ledger, the
// audit), not to the aggregate: Seal chains a new message from Hash, and
// the append expects Seq as the subject's last sequence.
type Position struct {
	Seq  uint64
	Hash [32]byte
}

// Next returns the position after evs, stored in the message at seq,
// refusing a message whose first event does not extend p's chain.
func (p Position) Next(seq uint64, evs []Event) (Position, error) {
	if len(evs) == 0 {
		return Position{Seq: seq, Hash: p.Hash}, nil
	}
	if evs[0].Prev != p.Hash {
		return p, fmt.Errorf("%w at seq %d", ErrChainBroken, seq)
	}
	h, err := Hash(evs[len(evs)-1])
	if err != nil {
		return p, err
	}
	return Position{Seq: seq, Hash: h}, nil
}
