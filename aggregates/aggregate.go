package aggregates

// Every aggregate (Site, Catalog, Operators) has one contract, which the
// ledger relies on:
//
//   - Commands are typed values (Command, CatalogCommand, OperatorsCommand):
//     ids, secrets and hashes are chosen by the caller and passed in.
//   - Decide(cmd, now, actor) returns a Decision (the events to append, and
//     what the caller is answered with) or a refusal. It has no side
//     effects: it reads no clock (now is passed in), does no I/O and does
//     not change the state.
//   - ApplyMessage(seq, evs) folds a stored message into the state. It
//     refuses, whole and with the state unchanged, a message holding an
//     event that is not the aggregate's (ErrForeignEvent); for its own
//     events it cannot fail, since they were valid when decided.
//   - Where the state stands in the stream (sequence and chain hash,
//     events.Position) is not the aggregate's: the ledger keeps it beside
//     the state and the write loop (ledger.Writer) appends with it.
//
// A site also decides several queued commands against one state before
// they are stored (group commit): Begin, Apply for each decided event, then
// Rollback, so that the state changes only when ApplyMessage applies the
// stored message. The catalog and the operators decide one command at a
// time and are published to readers as immutable copies (Clone).
