package jsstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"

	"gateway/events"
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
