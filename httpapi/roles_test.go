package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/httpapi"
	"github.com/iqdgateway/gateway/internal/testkit"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// operatorCreated is the answer to POST /ops/v1/operators.
type operatorCreated struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Role      string  `json:"role"`
	Token     string  `json:"token"`
	CreatedAt string  `json:"createdAt"`
	RevokedAt *string `json:"revokedAt"`
}

// opsAs calls the operator API with token.
func (s *stack) opsAs(t testing.TB, token, method, path string, body any) resp {
	t.Helper()
	hdr := map[string]string{"Authorization": "Bearer " + token}
	b := ""
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		b = string(raw)
		hdr["Content-Type"] = "application/json"
	}
	return s.send(t, method, path, b, hdr)
}

// newOperator creates a named operator as the bootstrap admin.
func (s *stack) newOperator(t testing.TB, name, role string) operatorCreated {
	t.Helper()
	r := s.opsT(t, "POST", "/ops/v1/operators", map[string]any{"name": name, "role": role})
	requireOK(t, r)
	var op operatorCreated
	r.decode(t, &op)
	return op
}

// operatorList is GET /ops/v1/operators as the bootstrap admin.
func (s *stack) operatorList(t testing.TB) (page[map[string]any], resp) {
	t.Helper()
	r := s.opsT(t, "GET", "/ops/v1/operators", nil)
	requireOK(t, r)
	var p page[map[string]any]
	r.decode(t, &p)
	return p, r
}

// count is the length of a JSON list answered by an admin GET; a listing
// page counts its items.
func (s *stack) count(t testing.TB, path string) int {
	t.Helper()
	r := s.opsT(t, "GET", path, nil)
	requireOK(t, r)
	var p page[json.RawMessage]
	r.decode(t, &p)
	return len(p.Items)
}

// written summarises everything an operator call could write: sites,
// methods, operators and the fixture site's history.
func (s *stack) written(t testing.TB, siteID string) string {
	t.Helper()
	return fmt.Sprintf("sites=%d banks=%d operators=%d events=%d", s.count(t, "/ops/v1/sites"), s.count(t, "/ops/v1/banks"),
		s.count(t, "/ops/v1/operators"), s.eventCount(t, siteID))
}

var seq atomic.Int64

// uniq returns a fresh suffix for names, codes and processIds.
func uniq() string { return itoa(seq.Add(1)) }

// TestOpsRoles_matrix calls representative endpoints with every role:
// allowed calls succeed, the others answer 403 forbidden naming the role
// needed and write nothing.
func TestOpsRoles_matrix(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 10_000_000)

	tokens := []struct {
		name, role, token string
	}{
		{"bootstrap admin", "admin", adminToken},
		{"admin", "admin", s.newOperator(t, "Ada Admin", "admin").Token},
		{"operator", "operator", s.newOperator(t, "Omar Operator", "operator").Token},
		{"auditor", "auditor", s.newOperator(t, "Aya Auditor", "auditor").Token},
	}
	rank := map[string]int{"auditor": 1, "operator": 2, "admin": 3}

	deposit := func(t testing.TB) string {
		u := uniq()
		return rec(t, s.postT(t, st, pathDeposit, depositForm("ZAINCASH", "d"+u, "u"+u, 5000))).TransactionID
	}
	processing := func(t testing.TB) string {
		u := uniq()
		id := rec(t, s.postT(t, st, pathWithdraw, withdrawForm("ZAINCASH", "w"+u, "u"+u, 5000, "07712345678"))).TransactionID
		requireOK(t, s.opsT(t, "POST", "/ops/v1/withdrawals/"+id+"/process", nil))
		return id
	}
	endpoints := []struct {
		name string
		need string
		// req prepares fixtures (as the bootstrap admin) and returns the call.
		req func(t testing.TB) (method, path string, body any)
	}{
		{"create site", "admin", func(testing.TB) (string, string, any) {
			return "POST", "/ops/v1/sites", map[string]any{"name": "site " + uniq()}
		}},
		{"update site", "admin", func(testing.TB) (string, string, any) {
			return "PATCH", "/ops/v1/sites/" + st.ID, map[string]any{"rateLimit": seq.Add(1)}
		}},
		{"rotate secret", "admin", func(testing.TB) (string, string, any) {
			return "POST", "/ops/v1/sites/" + st.ID + "/webhook-secret", map[string]any{"overlapSeconds": 60}
		}},
		{"adjust", "admin", func(testing.TB) (string, string, any) {
			return "POST", "/ops/v1/sites/" + st.ID + "/adjustments", map[string]any{"amount": 1000, "reason": "top-up"}
		}},
		{"create bank", "admin", func(testing.TB) (string, string, any) {
			return "POST", "/ops/v1/banks", map[string]any{"code": "B" + uniq(), "name": map[string]string{"en": "B"},
				"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 5000, "deposit": false, "withdraw": true}
		}},
		{"create operator", "admin", func(testing.TB) (string, string, any) {
			return "POST", "/ops/v1/operators", map[string]any{"name": "op " + uniq(), "role": "auditor"}
		}},
		{"list operators", "admin", func(testing.TB) (string, string, any) { return "GET", "/ops/v1/operators", nil }},
		{"revoke operator", "admin", func(t testing.TB) (string, string, any) {
			return "DELETE", "/ops/v1/operators/" + s.newOperator(t, "victim "+uniq(), "auditor").ID, nil
		}},
		{"approve deposit", "operator", func(t testing.TB) (string, string, any) {
			return "POST", "/ops/v1/deposits/" + deposit(t) + "/approve", nil
		}},
		{"reject deposit", "operator", func(t testing.TB) (string, string, any) {
			return "POST", "/ops/v1/deposits/" + deposit(t) + "/reject", map[string]any{"reason": "no transfer"}
		}},
		{"pay withdrawal", "operator", func(t testing.TB) (string, string, any) {
			return "POST", "/ops/v1/withdrawals/" + processing(t) + "/pay", map[string]any{"reference": "R1"}
		}},
		{"get transactions", "auditor", func(testing.TB) (string, string, any) { return "GET", "/ops/v1/transactions", nil }},
		{"get transaction", "auditor", func(t testing.TB) (string, string, any) {
			return "GET", "/ops/v1/transactions/" + deposit(t), nil
		}},
		{"get site events", "auditor", func(testing.TB) (string, string, any) {
			return "GET", "/ops/v1/sites/" + st.ID + "/events", nil
		}},
		{"get site", "auditor", func(testing.TB) (string, string, any) { return "GET", "/ops/v1/sites/" + st.ID, nil }},
		{"list sites", "auditor", func(testing.TB) (string, string, any) { return "GET", "/ops/v1/sites", nil }},
		{"list banks", "auditor", func(testing.TB) (string, string, any) { return "GET", "/ops/v1/banks", nil }},
	}
	for _, tok := range tokens {
		for _, ep := range endpoints {
			allowed := rank[tok.role] >= rank[ep.need]
			t.Run(fmt.Sprintf("%s %s allowed=%v", tok.name, ep.name, allowed), func(t *testing.T) {
				method, path, body := ep.req(t)
				before := s.written(t, st.ID)
				r := s.opsAs(t, tok.token, method, path, body)
				if allowed {
					requireOK(t, r)
					return
				}
				requireErr(t, r, 403, "forbidden", "")
				assert.Contains(t, r.Message, "the "+ep.need+" role")
				assert.Equal(t, before, s.written(t, st.ID), "a forbidden call wrote something")
			})
		}
	}
}

// TestOpsRoles_auditorCannotApprove: the deposit stays pending, the treasury
// untouched; an operator then approves it, and the history names each actor.
func TestOpsRoles_auditorCannotApprove(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	auditor := s.newOperator(t, "Aya", "auditor")
	operator := s.newOperator(t, "Omar", "operator")
	d := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "p1", "u1", 25000)))

	for _, body := range []any{nil, map[string]any{"amount": 25000}} {
		r := s.opsAs(t, auditor.Token, "POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", body)
		requireErr(t, r, 403, "forbidden", "")
		assert.Contains(t, r.Message, "operator role")
	}
	requireErr(t, s.opsAs(t, auditor.Token, "POST", "/ops/v1/deposits/"+d.TransactionID+"/reject", map[string]any{"reason": "x"}),
		403, "forbidden", "")
	assert.Equal(t, "pending", rec(t, s.get(st, "/v1/transactions/"+d.TransactionID, "")).Status)
	assert.Equal(t, int64(0), s.balanceOf(t, st).Balance)
	// The auditor can see it.
	seen := rec(t, s.opsAs(t, auditor.Token, "GET", "/ops/v1/transactions/"+d.TransactionID, nil))
	assert.Equal(t, "pending", seen.Status)

	a := rec(t, s.opsAs(t, operator.Token, "POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", nil))
	assert.Equal(t, "approved", a.Status)
	assert.Equal(t, int64(25000), s.balanceOf(t, st).Balance)

	items := s.history(t, st.ID)
	var names, actors []string
	for _, it := range items {
		names = append(names, it.Name)
		actors = append(actors, it.Actor)
	}
	assert.Equal(t, []string{"site.created.v2", "deposit.requested.v1", "deposit.approved.v1"}, names)
	assert.Equal(t, []string{"admin", "merchant", operator.ID}, actors)
}

// TestOpsOperators_actorInEvents: every event an operator causes names the
// operator's id, on sites, the catalog and the operators alike.
func TestOpsOperators_actorInEvents(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	admin := s.newOperator(t, "Ada", "admin")
	op := s.newOperator(t, "Omar", "operator")

	r := s.opsAs(t, admin.Token, "POST", "/ops/v1/sites", map[string]any{"name": "Shop"})
	requireOK(t, r)
	var st site
	r.decode(t, &st)
	requireOK(t, s.opsAs(t, admin.Token, "PATCH", "/ops/v1/sites/"+st.ID, map[string]any{"rateLimit": 5}))
	requireOK(t, s.opsAs(t, admin.Token, "POST", "/ops/v1/sites/"+st.ID+"/adjustments", map[string]any{"amount": 100_000, "reason": "float"}))
	r = s.opsAs(t, admin.Token, "POST", "/ops/v1/sites/"+st.ID+"/secret", map[string]any{"overlapSeconds": 3600})
	requireOK(t, r)
	st.Secret = decodeAny(t, r)["secret"].(string)
	d1 := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "a1", "u1", 5000)))
	d2 := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "a2", "u2", 5000)))
	w := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "a3", "u3", 5000, "07712345678")))
	requireOK(t, s.opsAs(t, op.Token, "POST", "/ops/v1/deposits/"+d1.TransactionID+"/approve", nil))
	requireOK(t, s.opsAs(t, op.Token, "POST", "/ops/v1/deposits/"+d2.TransactionID+"/reject", map[string]any{"reason": "none"}))
	requireOK(t, s.opsAs(t, op.Token, "POST", "/ops/v1/withdrawals/"+w.TransactionID+"/process", nil))
	requireOK(t, s.opsAs(t, op.Token, "POST", "/ops/v1/withdrawals/"+w.TransactionID+"/pay", nil))

	var got []string
	for _, it := range s.history(t, st.ID) {
		got = append(got, it.Name+" by "+it.Actor)
	}
	assert.Equal(t, []string{
		"site.created.v2 by " + admin.ID,
		"site.updated.v2 by " + admin.ID,
		"treasury.adjusted.v3 by " + admin.ID,
		"site.secret_rotated.v1 by " + admin.ID,
		"deposit.requested.v1 by merchant",
		"deposit.requested.v1 by merchant",
		"withdrawal.requested.v1 by merchant",
		"deposit.approved.v1 by " + op.ID,
		"deposit.rejected.v1 by " + op.ID,
		"withdrawal.processing.v1 by " + op.ID,
		"withdrawal.paid.v1 by " + op.ID,
	}, got)

	// Methods and operators have no history endpoint: read their subjects.
	r = s.opsAs(t, admin.Token, "POST", "/ops/v1/banks", map[string]any{"code": "ADA", "name": map[string]string{"en": "Ada"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 5000, "withdraw": true})
	requireOK(t, r)
	requireOK(t, s.opsAs(t, admin.Token, "PATCH", "/ops/v1/banks/ADA", map[string]any{"enabled": false}))
	third := createAs(t, s, admin.Token, "Third", "auditor")
	requireOK(t, s.opsAs(t, admin.Token, "DELETE", "/ops/v1/operators/"+third.ID, nil))

	catalog := storedEvents(t, e, events.CatalogSubject)
	require.GreaterOrEqual(t, len(catalog), 2)
	assert.Equal(t, events.BankCreatedName+" by "+admin.ID, catalog[len(catalog)-2])
	assert.Equal(t, events.BankUpdatedName+" by "+admin.ID, catalog[len(catalog)-1])
	assert.Equal(t, []string{
		events.OperatorCreatedName + " by admin",
		events.OperatorCreatedName + " by admin",
		events.OperatorCreatedName + " by " + admin.ID,
		events.OperatorRevokedName + " by " + admin.ID,
	}, storedEvents(t, e, events.OperatorsSubject))
}

// createAs creates an operator with token.
func createAs(t testing.TB, s *stack, token, name, role string) operatorCreated {
	t.Helper()
	r := s.opsAs(t, token, "POST", "/ops/v1/operators", map[string]any{"name": name, "role": role})
	requireOK(t, r)
	var op operatorCreated
	r.decode(t, &op)
	return op
}

// inspect opens a store of its own on the env's server.
func inspect(t testing.TB, e *env) *jsstore.Store {
	t.Helper()
	return testkit.OpenStore(t, e.srv.Conn("inspect"), jsstore.Options{})
}

// storedEvents lists a subject's events as "name by actor".
func storedEvents(t testing.TB, e *env, subject string) []string {
	t.Helper()
	var out []string
	require.NoError(t, inspect(t, e).Read(context.Background(), subject, 1, func(m events.Msg) error {
		evs, err := events.Decode(m.Data)
		require.NoError(t, err)
		for _, ev := range evs {
			out = append(out, ev.Name+" by "+ev.Actor)
		}
		return nil
	}))
	return out
}

// TestOpsOperators_lifecycle: create, list (no tokens), use, revoke.
func TestOpsOperators_lifecycle(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	before := time.Now().Add(-time.Second)

	op := s.newOperator(t, "Omar Operator", "operator")
	assert.Regexp(t, `^op_[A-Za-z0-9_-]{43}$`, op.Token)
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(op.Token, "op_"))
	require.NoError(t, err)
	assert.Len(t, raw, 32)
	assert.NotEmpty(t, op.ID)
	assert.NotEqual(t, "admin", op.ID)
	assert.Equal(t, "Omar Operator", op.Name)
	assert.Equal(t, "operator", op.Role)
	assert.Nil(t, op.RevokedAt)
	assert.True(t, !parseTime(t, op.CreatedAt).Before(before))
	aud := s.newOperator(t, "Aya", "auditor")
	assert.NotEqual(t, op.Token, aud.Token)
	assert.NotEqual(t, op.ID, aud.ID)

	// Listed without tokens, in creation order.
	p, r := s.operatorList(t)
	assert.Nil(t, p.NextCursor)
	require.Len(t, p.Items, 2)
	assert.Equal(t, map[string]any{"id": op.ID, "name": op.Name, "role": "operator", "createdAt": op.CreatedAt, "revokedAt": nil}, p.Items[0])
	assert.Equal(t, aud.ID, p.Items[1]["id"])
	for _, tok := range []string{op.Token, aud.Token} {
		assert.NotContains(t, string(r.Raw), tok)
		assert.NotContains(t, string(r.Raw), strings.TrimPrefix(tok, "op_"))
	}

	// Stored hashed: the stream holds the token's SHA-256, never the token.
	sum := sha256.Sum256([]byte(op.Token))
	var hashes []string
	require.NoError(t, inspect(t, e).Read(context.Background(), events.SubjectPrefix+">", 1, func(m events.Msg) error {
		for _, tok := range []string{op.Token, aud.Token} {
			assert.NotContains(t, string(m.Data), strings.TrimPrefix(tok, "op_"), "a token is stored in %s", m.Subject)
		}
		evs, err := events.Decode(m.Data)
		require.NoError(t, err)
		for _, ev := range evs {
			if c, ok := ev.Payload.(*events.OperatorCreated); ok {
				hashes = append(hashes, c.TokenHash)
			}
		}
		return nil
	}))
	assert.Contains(t, hashes, hex.EncodeToString(sum[:]))

	// The token works, with its role.
	requireOK(t, s.opsAs(t, op.Token, "GET", "/ops/v1/transactions", nil))
	requireOK(t, s.opsAs(t, op.Token+" ", "GET", "/ops/v1/transactions", nil))

	// Revoke: the answer is the record, revokedAt set; the token is dead.
	r = s.opsT(t, "DELETE", "/ops/v1/operators/"+op.ID, nil)
	requireOK(t, r)
	var revoked operatorCreated
	r.decode(t, &revoked)
	assert.Equal(t, op.ID, revoked.ID)
	assert.Empty(t, revoked.Token)
	require.NotNil(t, revoked.RevokedAt)
	assert.False(t, parseTime(t, *revoked.RevokedAt).Before(parseTime(t, op.CreatedAt)))
	for _, ep := range []struct{ method, path string }{{"GET", "/ops/v1/transactions"}, {"GET", "/ops/v1/sites"},
		{"POST", "/ops/v1/deposits/s1-1/approve"}} {
		r := s.opsAs(t, op.Token, ep.method, ep.path, nil)
		requireErr(t, r, 401, "unauthorized", "")
		assert.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer")
	}
	requireOK(t, s.opsAs(t, aud.Token, "GET", "/ops/v1/transactions", nil)) // another operator is unaffected
	p, _ = s.operatorList(t)
	require.Len(t, p.Items, 2, "a revoked operator stays listed")
	assert.Equal(t, *revoked.RevokedAt, p.Items[0]["revokedAt"])
	assert.Nil(t, p.Items[1]["revokedAt"])

	// Revoking again, or an unknown id.
	requireErr(t, s.opsT(t, "DELETE", "/ops/v1/operators/"+op.ID, nil), 409, "conflict", "id")
	requireErr(t, s.opsT(t, "DELETE", "/ops/v1/operators/onobody", nil), 404, "not_found", "id")
	// The name of a revoked operator may be given again, with a new token.
	again := s.newOperator(t, "Omar Operator", "auditor")
	assert.NotEqual(t, op.ID, again.ID)
	requireOK(t, s.opsAs(t, again.Token, "GET", "/ops/v1/transactions", nil))
	requireErr(t, s.opsAs(t, op.Token, "GET", "/ops/v1/transactions", nil), 401, "unauthorized", "")
}

func TestOpsOperators_unknownTokens(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	op := s.newOperator(t, "Omar", "admin")
	other := make([]byte, 32)
	tokens := map[string]string{
		"unknown operator token": "op_" + base64.RawURLEncoding.EncodeToString(other),
		"token without prefix":   strings.TrimPrefix(op.Token, "op_"),
		"token with suffix":      op.Token + "x",
		"token cut short":        op.Token[:len(op.Token)-1],
		"token hash":             func() string { h := sha256.Sum256([]byte(op.Token)); return hex.EncodeToString(h[:]) }(),
		"prefix only":            "op_",
		"operator id":            op.ID,
		"upper-case token":       strings.ToUpper(op.Token),
	}
	for name, tok := range tokens {
		t.Run(name, func(t *testing.T) {
			for _, ep := range []struct{ method, path string }{{"GET", "/ops/v1/transactions"}, {"POST", "/ops/v1/sites"},
				{"GET", "/ops/v1/operators"}} {
				r := s.opsAs(t, tok, ep.method, ep.path, map[string]any{"name": "x"})
				requireErr(t, r, 401, "unauthorized", "")
			}
		})
	}
	requireOK(t, s.opsAs(t, op.Token, "GET", "/ops/v1/operators", nil))
	assert.Equal(t, 0, s.count(t, "/ops/v1/sites"))
}

func TestOpsOperators_createValidation(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.newOperator(t, "Taken", "auditor")
	tests := []struct {
		name   string
		body   string
		status int
		code   string
		field  string
	}{
		{"no body", ``, 400, "invalid_request", "name"},
		{"no name", `{"role":"admin"}`, 400, "invalid_request", "name"},
		{"blank name", `{"name":"  ","role":"admin"}`, 400, "invalid_request", "name"},
		{"name too long", `{"name":"` + strings.Repeat("n", 129) + `","role":"admin"}`, 400, "invalid_request", "name"},
		{"no role", `{"name":"New"}`, 400, "invalid_request", "role"},
		{"unknown role", `{"name":"New","role":"root"}`, 400, "invalid_request", "role"},
		{"role not a string", `{"name":"New","role":3}`, 400, "invalid_request", "role"},
		{"unknown field", `{"name":"New","role":"admin","token":"op_mine"}`, 400, "invalid_request", "token"},
		{"name in use", `{"name":"Taken","role":"admin"}`, 409, "conflict", "name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := s.send(t, "POST", "/ops/v1/operators", tc.body,
				map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
			requireErr(t, r, tc.status, tc.code, tc.field)
		})
	}
	assert.Equal(t, 1, s.count(t, "/ops/v1/operators"), "nothing was created")
	assert.Len(t, storedEvents(t, e, events.OperatorsSubject), 1)
}

// lagStore delays every message its follower delivers, as a gateway process
// whose follower is behind the stream.
type lagStore struct {
	*jsstore.Store
	lag time.Duration
}

func (s lagStore) Follow(ctx context.Context, filter string, from uint64, fn func(events.Msg)) error {
	return s.Store.Follow(ctx, filter, from, func(m events.Msg) {
		select {
		case <-time.After(s.lag):
			fn(m)
		case <-ctx.Done():
		}
	})
}

// newLaggingStack is env.newStack whose ledger follows the stream lag late.
func (e *env) newLaggingStack(lag time.Duration) *stack {
	t := e.t
	t.Helper()
	nc := e.srv.Conn("lagging")
	ctx := context.Background()
	store := testkit.OpenStore(t, nc, jsstore.Options{})
	log := e.log.Logger
	led := ledger.New(lagStore{Store: store, lag: lag}, ledger.Config{Logger: log})
	require.NoError(t, led.Start(ctx))
	rctx, cancel := context.WithTimeout(ctx, testkit.WaitFor)
	defer cancel()
	require.NoError(t, led.WaitReady(rctx))
	st := &stack{t: t, Ledger: led, closeConn: nc.Close}
	srv := httptest.NewServer(nil)
	st.srv, st.URL = srv, srv.URL
	srv.Config.Handler = httpapi.New(httpapi.Config{Ledger: led, Reader: records.NewReader(led, store, srv.URL),
		AdminToken: adminToken, AppVersion: "test", StoreReady: store.Ping, Logger: log})
	t.Cleanup(func() {
		srv.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = led.Close(cctx)
		nc.Close()
	})
	return st
}

// TestOpsOperators_acrossStacks: an operator created through one gateway
// process is accepted at once by another whose follower lags, acts there
// under its own id, and its revocation reaches the other process too.
func TestOpsOperators_acrossStacks(t *testing.T) {
	e := newEnv(t)
	// b starts on the empty stream (so it is ready) and then lags.
	b := e.newLaggingStack(300 * time.Millisecond)
	a := e.newStack(stackOptions{})

	op := a.newOperator(t, "Omar", "operator")
	r := b.opsAs(t, op.Token, "GET", "/ops/v1/transactions", nil)
	requireOK(t, r)

	// And the other way round: created on b, accepted on a.
	aud := createAs(t, b, adminToken, "Aya", "auditor")
	requireOK(t, a.opsAs(t, aud.Token, "GET", "/ops/v1/transactions", nil))
	requireErr(t, a.opsAs(t, aud.Token, "POST", "/ops/v1/sites", map[string]any{"name": "x"}), 403, "forbidden", "")

	// The operator acts on b; the event names it.
	a.seedBanks()
	st := a.newSite(nil, 0)
	d := rec(t, a.post(st, pathDeposit, depositForm("ZAINCASH", "x1", "u1", 5000)))
	requireOK(t, b.opsAs(t, op.Token, "POST", "/ops/v1/deposits/"+d.TransactionID+"/approve", nil))
	items := a.history(t, st.ID)
	last := items[len(items)-1]
	assert.Equal(t, "deposit.approved.v1", last.Name)
	assert.Equal(t, op.ID, last.Actor)

	// Revoked on a: refused on a at once, and on b once it has followed.
	requireOK(t, a.opsT(t, "DELETE", "/ops/v1/operators/"+op.ID, nil))
	requireErr(t, a.opsAs(t, op.Token, "GET", "/ops/v1/transactions", nil), 401, "unauthorized", "")
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		return b.opsAs(t, op.Token, "GET", "/ops/v1/transactions", nil).HTTP == 401
	}, "the revocation reaches the other process")
	// b lists it as revoked (the listing catches up first).
	p, _ := b.operatorList(t)
	require.Len(t, p.Items, 2)
	assert.NotNil(t, p.Items[0]["revokedAt"])
}

// TestOpsRoles_overApprovalNeedsAdmin: approving credits the treasury, so
// an operator approves at most twice the requested amount; more (a digit
// too many, or a made-up sum) is an administrator's, as an adjustment is.
func TestOpsRoles_overApprovalNeedsAdmin(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()
	st := s.newSite(nil, 0)
	operator := s.newOperator(t, "Omar", "operator")
	d1 := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "over-1", "u1", 25000)))
	d2 := rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "over-2", "u2", 25000)))
	for _, amt := range []int64{50001, 250000, 1 << 50} {
		r := s.opsAs(t, operator.Token, "POST", "/ops/v1/deposits/"+d1.TransactionID+"/approve", map[string]any{"amount": amt})
		requireErr(t, r, 403, "forbidden", "amount")
		assert.Contains(t, r.Message, "admin role")
	}
	assert.Equal(t, "pending", rec(t, s.get(st, "/v1/transactions/"+d1.TransactionID, "")).Status)
	assert.Equal(t, int64(0), s.balanceOf(t, st).Balance)

	a := rec(t, s.opsAs(t, operator.Token, "POST", "/ops/v1/deposits/"+d1.TransactionID+"/approve", map[string]any{"amount": 50000}))
	assert.Equal(t, int64(50000), a.Amount)
	b := rec(t, s.ops("POST", "/ops/v1/deposits/"+d2.TransactionID+"/approve", map[string]any{"amount": 250000}))
	assert.Equal(t, int64(250000), b.Amount)
	assert.Equal(t, int64(300000), s.balanceOf(t, st).Balance)
}
