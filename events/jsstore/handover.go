package jsstore

// Hand-over requests between the processes writing one stream
// (ledger.HandOver, docs/ARCHITECTURE.md "Two writers of one site"). They
// travel as core NATS messages, not stream messages: a request is a hint
// that only makes a busy site fairer between two writers, never what keeps
// a write safe (the expected sequence does), so one that is lost costs
// nothing but time and none needs to outlive the moment.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// handOverSubject is the core NATS subject of the stream's hand-over
// requests.
func (s *Store) handOverSubject() string { return "gateway.ledger." + s.name + ".handover" }

// newWriterID returns a random id telling one store's requests apart.
func newWriterID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// HandOver asks every other process writing the stream to hold its
// appends on subject for a moment (hold), or tells them this one no longer
// needs them to. The request is "<writer id> <+ or -> <subject>".
func (s *Store) HandOver(subject string, hold bool) error {
	op := "-"
	if hold {
		op = "+"
	}
	if err := s.nc.Publish(s.handOverSubject(), []byte(s.self+" "+op+" "+subject)); err != nil {
		return fmt.Errorf("hand-over of %s: %w", subject, err)
	}
	return nil
}

// OnHandOver calls fn with every hand-over request another process makes,
// until ctx ends; one connection delivers a publisher's messages in the
// order they were sent. The requests of this store are not passed on, nor
// any that cannot be read.
func (s *Store) OnHandOver(ctx context.Context, fn func(subject string, hold bool)) error {
	sub, err := s.nc.Subscribe(s.handOverSubject(), func(m *nats.Msg) {
		from, rest, ok := strings.Cut(string(m.Data), " ")
		if !ok || from == s.self {
			return
		}
		op, subject, ok := strings.Cut(rest, " ")
		if !ok || (op != "+" && op != "-") || subject == "" {
			return
		}
		fn(subject, op == "+")
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", s.handOverSubject(), err)
	}
	context.AfterFunc(ctx, func() { _ = sub.Unsubscribe() })
	return nil
}
