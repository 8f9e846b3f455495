package aggregates

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Role is what a named operator may do. Roles are ordered: each includes
// everything the ones below it may do.
//
//   - RoleAuditor reads: every GET of the operator API.
//   - RoleOperator also acts on transactions: approve or reject deposits,
//     take, pay or reject withdrawals.
//   - RoleAdmin also manages sites, methods, operators, treasury
//     adjustments and secret rotation.
type Role string

// The roles, lowest first.
const (
	RoleAuditor  Role = "auditor"
	RoleOperator Role = "operator"
	RoleAdmin    Role = "admin"
)

// rank orders the roles; an unknown role ranks below every real one.
func (r Role) rank() int {
	switch r {
	case RoleAuditor:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// Allows reports whether an operator with role r may do what needs role need.
func (r Role) Allows(need Role) bool { return r.Valid() && r.rank() >= need.rank() }

// Operator errors. The HTTP layer maps them with errors.Is.
var (
	// ErrOperatorNotFound means no operator has the id given.
	ErrOperatorNotFound = errors.New("operator not found")
	// ErrOperatorRevoked means the operator was already revoked.
	ErrOperatorRevoked = errors.New("operator already revoked")
	// ErrOperatorExists means an active operator already has the name.
	ErrOperatorExists = errors.New("operator name already in use")
)

// Operator is a named person or system with its own bearer token and role.
// An Operator value is immutable once published in Operators: a revocation
// replaces it, so readers may keep a pointer.
type Operator struct {
	ID   string
	Name string
	Role Role
	// TokenHash is the hex SHA-256 of the bearer token. The token has 256
	// random bits, so a plain hash is as strong as a slow one here.
	TokenHash string
	// CreatedAt and RevokedAt are Unix milliseconds; RevokedAt is 0 while
	// the operator is active.
	CreatedAt int64
	RevokedAt int64
}

// Active reports whether the operator's token is still accepted.
func (o *Operator) Active() bool { return o.RevokedAt == 0 }

// Operators is the aggregate of all named operators. Like the catalog it
// lives on a subject of its own and is shared by every gateway process.
//
// Rules:
//   - a name is 1 to 128 bytes of printable UTF-8, not blank;
//   - no two active operators share a name (a revoked operator's name may
//     be given again: the new operator has a new id);
//   - the role is admin, operator or auditor;
//   - an operator is revoked at most once, and never comes back.
type Operators struct {
	list   []*Operator
	byID   map[string]*Operator
	byHash map[string]*Operator
}

// NewOperators returns an empty operators aggregate.
func NewOperators() *Operators {
	return &Operators{byID: map[string]*Operator{}, byHash: map[string]*Operator{}}
}

// List returns every operator, revoked ones included, in creation order.
func (o *Operators) List() []*Operator { return o.list }

// ByID finds an operator, active or revoked.
func (o *Operators) ByID(id ids.OperatorID) (*Operator, bool) {
	op, ok := o.byID[string(id)]
	return op, ok
}

// ByTokenHash finds the operator whose token hashes to h (hex SHA-256),
// active or revoked: the caller checks Active.
func (o *Operators) ByTokenHash(h string) (*Operator, bool) {
	op, ok := o.byHash[h]
	return op, ok
}

// CreateOperator adds an operator. ID and TokenHash are chosen by the caller
// (ids and secrets are passed in; the aggregate never sees the token).
type CreateOperator struct {
	ID        string
	Name      string
	Role      string
	TokenHash string
}

// RevokeOperator revokes an operator's token for good.
type RevokeOperator struct{ ID ids.OperatorID }

// OperatorsCommand is implemented by every operators command.
type OperatorsCommand interface{ operatorsCommand() }

func (CreateOperator) operatorsCommand() {}
func (RevokeOperator) operatorsCommand() {}

// Decide decides an operators command against the aggregate, which it does
// not change: the events it returns are applied once stored.
func (o *Operators) Decide(cmd OperatorsCommand, now time.Time, actor string) (Decision, error) {
	var evs []events.Event
	var err error
	switch cmd := cmd.(type) {
	case CreateOperator:
		evs, err = o.decideCreate(cmd, now, actor)
	case RevokeOperator:
		evs, err = o.decideRevoke(cmd.ID, now, actor)
	default:
		err = fmt.Errorf("%w: %T is no operators command", ErrInvalidRequest, cmd)
	}
	return Decision{Events: evs, Tx: -1}, err
}

const maxOperatorNameLen = 128

// reservedActors are actor names events use for non-operators; an operator
// id must never be mistaken for one of them in the history.
var reservedActors = map[string]bool{events.ActorMerchant: true, events.ActorSystem: true, "admin": true}

// decideCreate validates a new operator.
func (o *Operators) decideCreate(cmd CreateOperator, now time.Time, actor string) ([]events.Event, error) {
	if cmd.ID == "" || reservedActors[cmd.ID] {
		return nil, fieldErr("id", ErrInvalidRequest, "an operator id must be set and must not be a reserved actor name")
	}
	if _, ok := o.byID[cmd.ID]; ok {
		return nil, fieldErr("id", ErrOperatorExists, "an operator with id %q already exists", cmd.ID)
	}
	if err := checkOperatorName(cmd.Name); err != nil {
		return nil, err
	}
	if !Role(cmd.Role).Valid() {
		return nil, fieldErr("role", ErrInvalidRequest, "role must be admin, operator or auditor")
	}
	if !isHexSHA256(cmd.TokenHash) {
		return nil, fieldErr("tokenHash", ErrInvalidRequest, "tokenHash must be a hex SHA-256")
	}
	if _, ok := o.byHash[cmd.TokenHash]; ok {
		return nil, fieldErr("tokenHash", ErrOperatorExists, "an operator already has this token")
	}
	for _, op := range o.list {
		if op.Active() && op.Name == cmd.Name {
			return nil, fieldErr("name", ErrOperatorExists, "an active operator is already named %q", cmd.Name)
		}
	}
	return []events.Event{{Name: events.OperatorCreatedName, Time: now.UnixMilli(), Actor: actor, Payload: &events.OperatorCreated{
		ID: cmd.ID, Name: cmd.Name, Role: cmd.Role, TokenHash: cmd.TokenHash,
	}}}, nil
}

// decideRevoke validates revoking an operator's token.
func (o *Operators) decideRevoke(id ids.OperatorID, now time.Time, actor string) ([]events.Event, error) {
	op, ok := o.byID[string(id)]
	if !ok {
		return nil, fieldErr("id", ErrOperatorNotFound, "no operator with id %q", id)
	}
	if !op.Active() {
		return nil, fieldErr("id", ErrOperatorRevoked, "operator %q is already revoked", id)
	}
	return []events.Event{{Name: events.OperatorRevokedName, Time: now.UnixMilli(), Actor: actor,
		Payload: &events.OperatorRevoked{ID: string(id)}}}, nil
}

func checkOperatorName(name string) error {
	if name == "" || len(name) > maxOperatorNameLen || strings.TrimSpace(name) == "" {
		return fieldErr("name", ErrInvalidRequest, "name must be 1 to %d bytes and not blank", maxOperatorNameLen)
	}
	if !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return fieldErr("name", ErrInvalidRequest, "name must be printable UTF-8")
	}
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ApplyMessage folds a stored message into the aggregate. A message holding
// any event that is not the operators' is refused whole, the aggregate
// unchanged.
func (o *Operators) ApplyMessage(seq uint64, evs []events.Event) error {
	return applyOwn(seq, evs, "operators", func(p events.Payload) bool {
		switch p.(type) {
		case *events.OperatorCreated, *events.OperatorRevoked:
			return true
		}
		return false
	}, o.Apply)
}

// Apply folds one operators event into the aggregate. It never fails: events
// in the stream were valid when decided.
func (o *Operators) Apply(e events.Event) {
	switch p := e.Payload.(type) {
	case *events.OperatorCreated:
		op := &Operator{ID: p.ID, Name: p.Name, Role: Role(p.Role), TokenHash: p.TokenHash, CreatedAt: e.Time}
		o.list = append(o.list, op)
		o.byID[op.ID] = op
		o.byHash[op.TokenHash] = op
	case *events.OperatorRevoked:
		old, ok := o.byID[p.ID]
		if !ok || !old.Active() {
			return
		}
		n := *old
		n.RevokedAt = e.Time
		if n.RevokedAt == 0 {
			n.RevokedAt = 1 // an event at the epoch still revokes
		}
		nop := &n
		for i := range o.list {
			if o.list[i] == old {
				o.list[i] = nop
			}
		}
		o.byID[n.ID] = nop
		o.byHash[n.TokenHash] = nop
	}
}

// Clone returns a copy that shares the immutable Operator values, so a
// reader can keep using it while the original is updated.
func (o *Operators) Clone() *Operators {
	n := &Operators{list: append([]*Operator(nil), o.list...),
		byID: make(map[string]*Operator, len(o.byID)), byHash: make(map[string]*Operator, len(o.byHash))}
	for k, v := range o.byID {
		n.byID[k] = v
	}
	for k, v := range o.byHash {
		n.byHash[k] = v
	}
	return n
}
