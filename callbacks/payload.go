package callbacks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// Callback types (docs/callbacks.md "Which events produce callbacks"): the final-state event names without their
// version suffix.
const (
	TypeDepositApproved    = "deposit.approved"
	TypeDepositRejected    = "deposit.rejected"
	TypeDepositExpired     = "deposit.expired"
	TypeWithdrawalPaid     = "withdrawal.paid"
	TypeWithdrawalRejected = "withdrawal.rejected"
)

// callbackType returns the callback type of a final-state event, or "" for
// an event that triggers no callback. The mapping is explicit, like the
// event names themselves: a future ".v2" of an event must be added here.
func callbackType(e events.Event) string {
	if p, ok := e.Payload.(*events.SandboxCallback); ok {
		return p.Type // checked when it was asked for
	}
	switch e.Name {
	case events.DepositApprovedName:
		return TypeDepositApproved
	case events.DepositRejectedName:
		return TypeDepositRejected
	case events.DepositExpiredName:
		return TypeDepositExpired
	case events.WithdrawalPaidName:
		return TypeWithdrawalPaid
	case events.WithdrawalRejectedName:
		return TypeWithdrawalRejected
	}
	return ""
}

// txOf returns the transaction an event concerns ("" for site, treasury
// and catalog events).
func txOf(e events.Event) ids.TxID {
	return ids.TxID(e.Tx())
}

// WebhookID is the Standard Webhooks message id of the idx-th event of the
// ledger message at stream sequence seq: its ids.EventID. It names the
// event's place in the stream, so it is the same on every retry, after
// restarts and on resends, and the event can be read back from it.
func WebhookID(seq uint64, idx int) string {
	return ids.EventID{Seq: seq, Index: idx}.String()
}

// ParseWebhookID is the inverse of WebhookID (ids.ParseEvent).
func ParseWebhookID(id string) (seq uint64, idx int, ok bool) {
	e, err := ids.ParseEvent(id)
	if err != nil {
		return 0, 0, false
	}
	return e.Seq, e.Index, true
}

// asOf rewrites the transaction's current record into what it was right
// after ev: a deposit that expired and was approved later is reported as
// expired, with its requested amount, by the expired callback. Status,
// amount, reason, hash and updatedAt come from the event; everything the
// creation event fixed (names, bank, accounts) is unchanged by later events.
func asOf(rec records.Record, ev events.Event, secret string) records.Record {
	reason := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	switch p := ev.Payload.(type) {
	case *events.DepositApproved:
		rec.Status = aggregates.StatusApproved.String()
		rec.Amount, rec.RequestedAmount = p.Amount, p.Requested
		rec.StatusReason = nil
	case *events.DepositRejected:
		rec.Status = aggregates.StatusRejected.String()
		rec.Amount = rec.RequestedAmount
		rec.StatusReason = reason(p.Reason)
	case *events.DepositExpired:
		rec.Status = aggregates.StatusExpired.String()
		rec.Amount = rec.RequestedAmount
		rec.StatusReason = nil
	case *events.WithdrawalPaid:
		rec.Status = aggregates.StatusPaid.String()
		rec.StatusReason = reason(p.Reference)
	case *events.WithdrawalRejected:
		rec.Status = aggregates.StatusRejected.String()
		rec.StatusReason = reason(p.Reason)
	case *events.SandboxCallback:
		// A test: the record as it is, in the status the type names,
		// with what a real callback of the type carries: a reason (or,
		// paid, a reference) only where the type has one, and the
		// requested amount where nothing was received.
		_, st, _ := strings.Cut(p.Type, ".")
		rec.Status = st
		rec.StatusReason = nil
		switch p.Type {
		case TypeDepositRejected, TypeDepositExpired:
			rec.Amount = rec.RequestedAmount
		}
		switch p.Type {
		case TypeDepositRejected, TypeWithdrawalRejected, TypeWithdrawalPaid:
			rec.StatusReason = reason("sandbox test callback")
		}
	}
	rec.UpdatedAt = records.FormatTime(ev.Time)
	rec.Hash = records.ResponseHash(secret, rec.TransactionID, rec.BankID, rec.Amount)
	return rec
}

// hashSecret is the signing secret a callback's record is hashed with:
// while a rotated secret's overlap lasts, the previous one, which the
// merchant holds whether or not it has taken the new one yet (it signs
// its requests with it until the overlap ends); the current one after
// that. A callback answers no request, so it cannot follow the secret
// that signed one, as an answer does (docs/callbacks.md "Payload").
func hashSecret(cfg *aggregates.Config, nowMs int64) string {
	if cfg.PrevSecret != "" && nowMs < cfg.PrevSecretUntil {
		return cfg.PrevSecret
	}
	return cfg.Secret
}

// testPrevious is a sandbox test callback's previousStatus: whatever the
// transaction's own status, the one a real callback of the type leaves
// most often (docs/callbacks.md "Which events produce callbacks"), so a
// test never shows a transition the state machine cannot make (an
// approved deposit "rejected").
func testPrevious(typ string) string {
	if typ == TypeWithdrawalPaid {
		return aggregates.StatusProcessing.String()
	}
	return aggregates.StatusPending.String()
}

// body renders the callback body of docs/callbacks.md "Payload":
// {"type":…,"timestamp":…,"data":{record, previousStatus}}, the same for
// a delivery and a stream. The timestamp is when the event happened, so
// the body is the same on every attempt. prev is the status the
// transaction left; a sandbox test callback's is its type's (testPrevious),
// whatever the transaction went through.
func body(typ string, ev events.Event, rec records.Record, prev string) ([]byte, error) {
	p, test := ev.Payload.(*events.SandboxCallback)
	if test {
		prev = testPrevious(p.Type)
	}
	data, err := rec.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode record %s: %w", rec.TransactionID, err)
	}
	if len(data) < 2 || data[len(data)-1] != '}' {
		return nil, fmt.Errorf("encode record %s: not an object", rec.TransactionID)
	}
	ps, _ := json.Marshal(prev)
	data = append(data[:len(data)-1], `,"previousStatus":`...)
	data = append(data, ps...)
	data = append(data, '}')
	return json.Marshal(struct {
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
		// Test marks a sandbox site's test callback.
		Test bool `json:"test,omitempty"`
	}{typ, records.FormatTime(ev.Time), data, test})
}

// webhookKey is the HMAC key of a Standard Webhooks secret: the base64
// part after "whsec_". A secret that is not base64 (not one this gateway
// issued) is used as raw bytes rather than refused, so its merchant still
// gets callbacks it can verify with the same secret.
func webhookKey(secret string) []byte {
	s := strings.TrimPrefix(secret, "whsec_")
	if k, err := base64.StdEncoding.DecodeString(s); err == nil && len(k) > 0 {
		return k
	}
	return []byte(s)
}

// sign returns one Standard Webhooks signature: "v1," +
// base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func sign(secret, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, webhookKey(secret))
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// signatures is the webhook-signature header: the current secret's
// signature and, while a rotated secret is in its overlap period, the
// previous one's, space-separated.
func signatures(cfg *aggregates.Config, id string, ts int64, body []byte, nowMs int64) string {
	s := sign(cfg.WebhookSecret, id, ts, body)
	if cfg.PrevWebhookSecret != "" && cfg.PrevWebhookSecretUntil > nowMs {
		s += " " + sign(cfg.PrevWebhookSecret, id, ts, body)
	}
	return s
}
