package aggregates

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

func tokenHash(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

func validCreateOperator() CreateOperator {
	return CreateOperator{ID: "oalice", Name: "Alice", Role: "operator", TokenHash: tokenHash("op_alice")}
}

// operatorsWith applies the decided events of each command, in order.
func operatorsWith(t *testing.T, cmds ...CreateOperator) *Operators {
	t.Helper()
	o := NewOperators()
	for _, cmd := range cmds {
		evs, err := evsOf(o.Decide(cmd, t0, operator))
		require.NoError(t, err)
		for _, e := range evs {
			o.Apply(e)
		}
	}
	return o
}

func TestRole_Allows(t *testing.T) {
	roles := []Role{RoleAuditor, RoleOperator, RoleAdmin}
	tests := []struct {
		have Role
		want []bool // may it do what needs auditor, operator, admin
	}{
		{RoleAuditor, []bool{true, false, false}},
		{RoleOperator, []bool{true, true, false}},
		{RoleAdmin, []bool{true, true, true}},
		{"", []bool{false, false, false}},
		{"root", []bool{false, false, false}},
		{"Admin", []bool{false, false, false}},
	}
	for _, tc := range tests {
		t.Run(string(tc.have), func(t *testing.T) {
			for i, need := range roles {
				assert.Equal(t, tc.want[i], tc.have.Allows(need), "%q allows %q", tc.have, need)
			}
		})
	}
}

func TestDecideCreateOperator(t *testing.T) {
	existing := CreateOperator{ID: "obob", Name: "Bob", Role: "admin", TokenHash: tokenHash("op_bob")}
	revoked := CreateOperator{ID: "ocarol", Name: "Carol", Role: "auditor", TokenHash: tokenHash("op_carol")}
	tests := []struct {
		name  string
		mod   func(c *CreateOperator)
		want  error
		field string
	}{
		{"valid operator", func(*CreateOperator) {}, nil, ""},
		{"valid admin", func(c *CreateOperator) { c.Role = "admin" }, nil, ""},
		{"valid auditor", func(c *CreateOperator) { c.Role = "auditor" }, nil, ""},
		{"name of 1 byte", func(c *CreateOperator) { c.Name = "a" }, nil, ""},
		{"name of 128 bytes", func(c *CreateOperator) { c.Name = strings.Repeat("a", 128) }, nil, ""},
		{"arabic name", func(c *CreateOperator) { c.Name = "علي" }, nil, ""},
		{"name of a revoked operator", func(c *CreateOperator) { c.Name = "Carol" }, nil, ""},
		{"empty name", func(c *CreateOperator) { c.Name = "" }, ErrInvalidRequest, "name"},
		{"blank name", func(c *CreateOperator) { c.Name = "   " }, ErrInvalidRequest, "name"},
		{"name of 129 bytes", func(c *CreateOperator) { c.Name = strings.Repeat("a", 129) }, ErrInvalidRequest, "name"},
		{"name of 65 two-byte runes", func(c *CreateOperator) { c.Name = strings.Repeat("ع", 65) }, ErrInvalidRequest, "name"},
		{"name with newline", func(c *CreateOperator) { c.Name = "a\nb" }, ErrInvalidRequest, "name"},
		{"name not utf-8", func(c *CreateOperator) { c.Name = "a\xffb" }, ErrInvalidRequest, "name"},
		{"name of an active operator", func(c *CreateOperator) { c.Name = "Bob" }, ErrOperatorExists, "name"},
		{"empty role", func(c *CreateOperator) { c.Role = "" }, ErrInvalidRequest, "role"},
		{"unknown role", func(c *CreateOperator) { c.Role = "root" }, ErrInvalidRequest, "role"},
		{"upper-case role", func(c *CreateOperator) { c.Role = "ADMIN" }, ErrInvalidRequest, "role"},
		{"empty id", func(c *CreateOperator) { c.ID = "" }, ErrInvalidRequest, "id"},
		{"id of the bootstrap admin", func(c *CreateOperator) { c.ID = "admin" }, ErrInvalidRequest, "id"},
		{"id of the merchant actor", func(c *CreateOperator) { c.ID = events.ActorMerchant }, ErrInvalidRequest, "id"},
		{"id of the system actor", func(c *CreateOperator) { c.ID = events.ActorSystem }, ErrInvalidRequest, "id"},
		{"existing id", func(c *CreateOperator) { c.ID = "obob" }, ErrOperatorExists, "id"},
		{"existing token", func(c *CreateOperator) { c.TokenHash = tokenHash("op_bob") }, ErrOperatorExists, "tokenHash"},
		{"token not hashed", func(c *CreateOperator) { c.TokenHash = "op_alice" }, ErrInvalidRequest, "tokenHash"},
		{"upper-case hash", func(c *CreateOperator) { c.TokenHash = strings.ToUpper(tokenHash("x")) }, ErrInvalidRequest, "tokenHash"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := operatorsWith(t, existing, revoked)
			evs, err := evsOf(o.Decide(RevokeOperator{ID: "ocarol"}, t0, operator))
			require.NoError(t, err)
			o.Apply(evs[0])
			before := len(o.List())

			cmd := validCreateOperator()
			tc.mod(&cmd)
			evs, err = evsOf(o.Decide(cmd, t0, operator))
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tc.field, fe.Field)
				assert.Empty(t, evs)
				assert.Len(t, o.List(), before, "a refusal changes nothing")
				return
			}
			require.NoError(t, err)
			require.Len(t, evs, 1)
			e := evs[0]
			assert.Equal(t, events.OperatorCreatedName, e.Name)
			assert.Equal(t, operator, e.Actor)
			assert.Equal(t, t0.UnixMilli(), e.Time)
			assert.Equal(t, &events.OperatorCreated{ID: cmd.ID, Name: cmd.Name, Role: cmd.Role, TokenHash: cmd.TokenHash}, e.Payload)

			o.Apply(e)
			op, ok := o.ByID(ids.OperatorID(cmd.ID))
			require.True(t, ok)
			assert.Equal(t, &Operator{ID: cmd.ID, Name: cmd.Name, Role: Role(cmd.Role), TokenHash: cmd.TokenHash, CreatedAt: t0.UnixMilli()}, op)
			assert.True(t, op.Active())
			byHash, ok := o.ByTokenHash(cmd.TokenHash)
			require.True(t, ok)
			assert.Same(t, op, byHash)
			assert.Len(t, o.List(), before+1)
		})
	}
}

func TestDecideRevokeOperator(t *testing.T) {
	tests := []struct {
		name   string
		id     string
		revoke int // times it is revoked before
		want   error
	}{
		{"active", "oalice", 0, nil},
		{"twice", "oalice", 1, ErrOperatorRevoked},
		{"unknown id", "onobody", 0, ErrOperatorNotFound},
		{"empty id", "", 0, ErrOperatorNotFound},
		{"by name instead of id", "Alice", 0, ErrOperatorNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := operatorsWith(t, validCreateOperator())
			for i := 0; i < tc.revoke; i++ {
				evs, err := evsOf(o.Decide(RevokeOperator{ID: ids.OperatorID(tc.id)}, t0, operator))
				require.NoError(t, err)
				o.Apply(evs[0])
			}
			at := t0.Add(time.Hour)
			evs, err := evsOf(o.Decide(RevokeOperator{ID: ids.OperatorID(tc.id)}, at, "oadmin"))
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, "id", fe.Field)
				assert.Empty(t, evs)
				return
			}
			require.NoError(t, err)
			require.Len(t, evs, 1)
			assert.Equal(t, events.OperatorRevokedName, evs[0].Name)
			assert.Equal(t, "oadmin", evs[0].Actor)
			assert.Equal(t, &events.OperatorRevoked{ID: tc.id}, evs[0].Payload)

			before, _ := o.ByID(ids.OperatorID(tc.id))
			o.Apply(evs[0])
			after, ok := o.ByID(ids.OperatorID(tc.id))
			require.True(t, ok, "a revoked operator is still listed")
			assert.False(t, after.Active())
			assert.Equal(t, at.UnixMilli(), after.RevokedAt)
			assert.True(t, before.Active(), "the published value is not modified")
			byHash, ok := o.ByTokenHash(after.TokenHash)
			require.True(t, ok)
			assert.False(t, byHash.Active(), "the token lookup sees the revocation")
			require.Len(t, o.List(), 1)
			assert.False(t, o.List()[0].Active())
		})
	}
}

func TestOperators_Clone_isolatesReaders(t *testing.T) {
	o := operatorsWith(t, validCreateOperator())
	c := o.Clone()

	evs, err := evsOf(c.Decide(RevokeOperator{ID: "oalice"}, t0, operator))
	require.NoError(t, err)
	c.Apply(evs[0])
	second := CreateOperator{ID: "obob", Name: "Bob", Role: "auditor", TokenHash: tokenHash("op_bob")}
	evs, err = evsOf(c.Decide(second, t0, operator))
	require.NoError(t, err)
	c.Apply(evs[0])

	orig, _ := o.ByID("oalice")
	assert.True(t, orig.Active(), "the original does not see the clone's revocation")
	assert.Len(t, o.List(), 1)
	_, ok := o.ByTokenHash(second.TokenHash)
	assert.False(t, ok)
	assert.Len(t, c.List(), 2)
}

func TestOperators_Apply_ignoresRevocationOfUnknown(t *testing.T) {
	o := operatorsWith(t, validCreateOperator())
	o.Apply(events.Event{Name: events.OperatorRevokedName, Time: t0.UnixMilli(), Payload: &events.OperatorRevoked{ID: "onobody"}})
	require.Len(t, o.List(), 1)
	assert.True(t, o.List()[0].Active())
}
