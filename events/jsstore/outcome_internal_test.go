package jsstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"

	"github.com/iqdgateway/gateway/events"
)

// Every failed publish is told apart as a conflict, a maybe-stored or a
// not-stored: the write loop settles the first two and trusts the third,
// so a maybe-stored one taken for not stored would answer 503 for a
// stored write (docs/ARCHITECTURE.md, "On a replicated cluster").
func TestAppendOutcome(t *testing.T) {
	api := func(code jetstream.ErrorCode) error {
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: code, Description: "x"})
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"wrong last sequence", api(jetstream.JSErrCodeStreamWrongLastSequence), events.ErrConflict},
		{"wrong last sequence, replicated", api(jetstream.JSErrCodeStreamWrongLastSequenceConstant), events.ErrConflict},
		{"expectation not ready after a leader change", api(10163), events.ErrConflict},
		{"no answer in time", context.DeadlineExceeded, events.ErrOutcomeUnknown},
		{"caller gave up while waiting", context.Canceled, events.ErrOutcomeUnknown},
		{"request timeout", nats.ErrTimeout, events.ErrOutcomeUnknown},
		{"unreadable acknowledgement", jetstream.ErrInvalidJSAck, events.ErrOutcomeUnknown},
		{"connection closed while waiting", nats.ErrConnectionClosed, events.ErrOutcomeUnknown},
		{"disconnected while waiting", nats.ErrDisconnected, events.ErrOutcomeUnknown},
		{"no stream has the subject", jetstream.ErrNoStreamResponse, events.ErrUnavailable},
		{"no responders", nats.ErrNoResponders, events.ErrUnavailable},
		{"message too large", api(jetstream.JSErrCodeStreamMessageExceedsMaximum), events.ErrUnavailable},
		{"a subject the client will not send", nats.ErrBadSubject, events.ErrUnavailable},
		{"anything else", errors.New("disk on fire"), events.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, appendOutcome(tc.err))
		})
	}
}

// An acknowledgement is read as jetstream's Publish reads it: the sequence
// of a stored message, the stream's refusal as an APIError (a conflict
// stays a conflict), anything else an unreadable acknowledgement, which
// is an unknown outcome.
func TestParsePubAck(t *testing.T) {
	tests := []struct {
		name    string
		ack     string
		seq     uint64
		outcome error // appendOutcome of the error; nil: stored at seq
	}{
		{"usual", `{"stream":"LEDGER","seq":123}`, 123, nil},
		{"with a domain", `{"stream":"LEDGER","domain":"hub","seq":7}`, 7, nil},
		{"duplicate", `{"stream":"LEDGER","seq":9,"duplicate":true}`, 9, nil},
		{"spaces", `{ "stream": "LEDGER", "seq": 5 }`, 5, nil},
		{"conflict", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 4"},"stream":"LEDGER","seq":0}`, 0, events.ErrConflict},
		{"refused otherwise", `{"error":{"code":503,"err_code":10008,"description":"stream offline"}}`, 0, events.ErrUnavailable},
		{"another stream", `{"stream":"LEDGER2","seq":3}`, 0, events.ErrOutcomeUnknown},
		{"a stream named by a prefix", `{"stream":"LEDGERX","seq":3}`, 0, events.ErrOutcomeUnknown},
		{"no stream", `{"seq":3}`, 0, events.ErrOutcomeUnknown},
		{"sequence 0", `{"stream":"LEDGER","seq":0}`, 0, events.ErrOutcomeUnknown},
		{"sequence too large", `{"stream":"LEDGER","seq":18446744073709551616}`, 0, events.ErrOutcomeUnknown},
		{"negative sequence", `{"stream":"LEDGER","seq":-1}`, 0, events.ErrOutcomeUnknown},
		{"cut short", `{"stream":"LEDGER","seq":12`, 0, events.ErrOutcomeUnknown},
		{"empty", ``, 0, events.ErrOutcomeUnknown},
		{"not JSON", `+OK`, 0, events.ErrOutcomeUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seq, err := parsePubAck([]byte(tc.ack), "LEDGER")
			if tc.outcome == nil {
				assert.NoError(t, err)
				assert.Equal(t, tc.seq, seq)
				return
			}
			assert.Zero(t, seq)
			assert.ErrorIs(t, appendOutcome(err), tc.outcome)
		})
	}
}
