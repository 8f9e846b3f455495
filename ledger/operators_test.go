package ledger_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/ledger"
)

// deafStore is a store whose follower never delivers anything, as if the
// process lagged the stream for as long as the test runs: what the ledger
// knows then comes only from start-up and from its own commands.
type deafStore struct{ ledger.Store }

func (deafStore) Follow(ctx context.Context, _ string, _ uint64, _ func(events.Msg)) error {
	<-ctx.Done()
	return ctx.Err()
}

func hashOf(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

func createOperator(l *ledger.Ledger, id, name, role string) error {
	_, err := l.ExecuteOperators(context.Background(),
		aggregates.CreateOperator{ID: id, Name: name, Role: role, TokenHash: hashOf("op_" + id)}, "admin")
	return err
}

func revokeOperator(l *ledger.Ledger, id, actor string) error {
	_, err := l.ExecuteOperators(context.Background(), aggregates.RevokeOperator{ID: ids.OperatorID(id)}, actor)
	return err
}

// operatorsView is everything observable in an operators value.
func operatorsView(o *aggregates.Operators) []aggregates.Operator {
	out := []aggregates.Operator{}
	for _, op := range o.List() {
		out = append(out, *op)
	}
	return out
}

func TestExecuteOperators_sharedAcrossLedgers(t *testing.T) {
	onEachStore(t, executeOperatorsSharedAcrossLedgers)
}

func executeOperatorsSharedAcrossLedgers(t *testing.T, e *env) {
	a := e.ledger(e.store("a"), ledger.Config{Now: atEpoch})
	b := e.ledger(e.store("b"), ledger.Config{Now: atEpoch})
	setupCatalog(t, a) // the catalog and the operators do not disturb each other

	require.NoError(t, createOperator(a, "o1", "Alice", "operator"))
	require.NoError(t, createOperator(a, "o2", "Bob", "auditor"))
	op, ok := a.Operators().ByTokenHash(hashOf("op_o1"))
	require.True(t, ok, "the writer sees its own command at once")
	assert.Equal(t, aggregates.RoleOperator, op.Role)

	require.NoError(t, b.CatchUp(context.Background()))
	op, ok = b.Operators().ByTokenHash(hashOf("op_o2"))
	require.True(t, ok, "another ledger knows the operator once caught up")
	assert.Equal(t, "Bob", op.Name)
	assert.True(t, op.Active())

	require.NoError(t, revokeOperator(b, "o1", "o2"))
	require.NoError(t, a.CatchUp(context.Background()))
	op, _ = a.Operators().ByID("o1")
	assert.False(t, op.Active(), "the revocation reaches the other ledger")

	assert.Equal(t, operatorsView(a.Operators()), operatorsView(b.Operators()))
	assert.Equal(t, ledger.OperatorsPosition(a), ledger.OperatorsPosition(b))
	_, ok = a.Catalog().Resolve(bankCode)
	assert.True(t, ok)
	_, ok = b.Catalog().Resolve(bankCode)
	assert.True(t, ok)

	// A ledger started later reads them from the stream at Start (its
	// follower is deaf, so only start-up can have told it; it is never
	// ready, so it is not waited for).
	c := ledger.New(deafStore{e.store("c")}, ledger.Config{Logger: e.log.Logger, Now: atEpoch})
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	assert.Equal(t, operatorsView(a.Operators()), operatorsView(c.Operators()))
	assert.Equal(t, ledger.OperatorsPosition(a).Hash, ledger.OperatorsPosition(c).Hash)
	_, ok = c.Catalog().Resolve(bankCode)
	assert.True(t, ok)
}

// TestExecuteOperators_staleState: a ledger that has not seen another's
// writes still decides correctly, whether its state makes it accept a
// command the stream refuses (the append conflicts; it reloads) or refuse
// one the stream accepts (it reloads before answering).
func TestExecuteOperators_staleState(t *testing.T) {
	tests := []struct {
		name    string
		act     func(stale *ledger.Ledger) error
		wantErr error
		// want is the operators after the command, as the stream has them.
		want []aggregates.Operator
	}{
		{"create a name taken elsewhere", func(l *ledger.Ledger) error { return createOperator(l, "o9", "Alice", "admin") },
			aggregates.ErrOperatorExists,
			[]aggregates.Operator{{ID: "o1", Name: "Alice", Role: "operator", TokenHash: hashOf("op_o1"), CreatedAt: epoch.UnixMilli()}}},
		{"create another name", func(l *ledger.Ledger) error { return createOperator(l, "o9", "Zed", "admin") },
			nil,
			[]aggregates.Operator{
				{ID: "o1", Name: "Alice", Role: "operator", TokenHash: hashOf("op_o1"), CreatedAt: epoch.UnixMilli()},
				{ID: "o9", Name: "Zed", Role: "admin", TokenHash: hashOf("op_o9"), CreatedAt: epoch.UnixMilli()}}},
		{"revoke an operator created elsewhere", func(l *ledger.Ledger) error { return revokeOperator(l, "o1", "admin") },
			nil,
			[]aggregates.Operator{{ID: "o1", Name: "Alice", Role: "operator", TokenHash: hashOf("op_o1"), CreatedAt: epoch.UnixMilli(),
				RevokedAt: epoch.UnixMilli()}}},
		{"revoke an unknown operator", func(l *ledger.Ledger) error { return revokeOperator(l, "o7", "admin") },
			aggregates.ErrOperatorNotFound,
			[]aggregates.Operator{{ID: "o1", Name: "Alice", Role: "operator", TokenHash: hashOf("op_o1"), CreatedAt: epoch.UnixMilli()}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			onEachStore(t, func(t *testing.T, e *env) {
				stale := e.ledger(deafStore{e.store("stale")}, ledger.Config{Now: atEpoch})
				fresh := e.ledger(e.store("fresh"), ledger.Config{Now: atEpoch})
				require.NoError(t, createOperator(fresh, "o1", "Alice", "operator"))
				require.Empty(t, stale.Operators().List(), "the stale ledger has not seen it")

				err := tc.act(stale)
				if tc.wantErr != nil {
					require.ErrorIs(t, err, tc.wantErr)
				} else {
					require.NoError(t, err)
				}
				assert.Equal(t, tc.want, operatorsView(stale.Operators()), "the stale ledger caught up")
				require.NoError(t, fresh.CatchUp(context.Background()))
				assert.Equal(t, tc.want, operatorsView(fresh.Operators()), "the stream")
				assert.Equal(t, ledger.OperatorsPosition(fresh).Hash, ledger.OperatorsPosition(stale).Hash)
			})
		})
	}
}

// TestExecuteOperators_racingProcesses: two ledgers create operators with
// the same names at once; each name is given exactly once.
func TestExecuteOperators_racingProcesses(t *testing.T) {
	onEachStore(t, executeOperatorsRacingProcesses)
}

func executeOperatorsRacingProcesses(t *testing.T, e *env) {
	ls := []*ledger.Ledger{e.ledger(e.store("a"), ledger.Config{Now: atEpoch}), e.ledger(e.store("b"), ledger.Config{Now: atEpoch})}
	const names = 20
	var wg sync.WaitGroup
	errs := make([][]error, len(ls))
	for k, l := range ls {
		errs[k] = make([]error, names)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < names; i++ {
				errs[k][i] = createOperator(l, fmt.Sprintf("o%d-%d", k, i), fmt.Sprintf("name-%d", i), "auditor")
			}
		}()
	}
	wg.Wait()
	for i := 0; i < names; i++ {
		ok := 0
		for k := range ls {
			if errs[k][i] == nil {
				ok++
			} else {
				assert.ErrorIs(t, errs[k][i], aggregates.ErrOperatorExists)
			}
		}
		assert.Equal(t, 1, ok, "name-%d given once", i)
	}
	for _, l := range ls {
		require.NoError(t, l.CatchUp(context.Background()))
		assert.Len(t, l.Operators().List(), names)
	}
	assert.Equal(t, operatorsView(ls[0].Operators()), operatorsView(ls[1].Operators()))
}

// atEpoch is a ledger clock stopped at epoch: operators are created and
// revoked at a known time.
func atEpoch() time.Time { return epoch }
