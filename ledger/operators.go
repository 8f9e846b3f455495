package ledger

import (
	"context"

	"gateway/aggregates"
	"gateway/events"
)

// The operators aggregate lives on events.OperatorsSubject and is kept like
// the catalog (see shared): read whole at Start, updated by the follower,
// written through ExecuteOperators.

func newOperators() *shared[aggregates.Operators, *aggregates.Operators] {
	return newShared("operators", events.OperatorsSubject, aggregates.NewOperators(),
		func(o *aggregates.Operators) (*uint64, *[32]byte) { return &o.Seq, &o.Hash })
}

// Operators returns the current operators. The value is never modified.
func (l *Ledger) Operators() *aggregates.Operators { return l.operators.get() }

// OperatorsCommand decides against the operators; it returns the events.
type OperatorsCommand func(o *aggregates.Operators) ([]events.Event, error)

// ExecuteOperators runs an operators command with the same load → decide →
// append(expected sequence) → retry loop as the catalog's and the sites'.
func (l *Ledger) ExecuteOperators(ctx context.Context, decide OperatorsCommand) error {
	return l.operators.execute(ctx, l, decide)
}
