package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/ids"
)

// AdminActor names the bootstrap admin (the --admin-token) in events.
const AdminActor = "admin"

func (s *Server) opsRoutes(r chi.Router) {
	r.Use(s.opsAuth)
	// Every route names the least role that may call it (roles are
	// ordered: admin ⊃ operator ⊃ auditor), and the query parameters it
	// takes (only); the transactions listing checks its filters itself.
	read := r.With(s.need(aggregates.RoleAuditor))
	act := r.With(s.need(aggregates.RoleOperator))
	admin := r.With(s.need(aggregates.RoleAdmin))

	read.Get("/sites", s.only(s.listSites))
	admin.Post("/sites", s.only(s.createSite))
	read.Get("/sites/{id}", s.only(s.getSite))
	admin.Patch("/sites/{id}", s.only(s.updateSite))
	admin.Post("/sites/{id}/secret", s.only(s.rotateSecret(false)))
	admin.Post("/sites/{id}/webhook-secret", s.only(s.rotateSecret(true)))
	admin.Post("/sites/{id}/adjustments", s.only(s.adjust))
	admin.Put("/sites/{id}/methods", s.only(s.setSiteMethods))
	read.Get("/sites/{id}/events", s.only(s.siteEvents, "cursor", "limit"))
	read.Get("/banks", s.only(s.opsBanks))
	admin.Post("/banks", s.only(s.createBank))
	admin.Patch("/banks/{id}", s.only(s.updateBank))
	read.Get("/transactions", s.listTransactions)
	read.Get("/transactions/{id}", s.only(s.opsTransaction))
	read.Post("/matches", s.only(s.matches, "site"))
	act.Post("/deposits/{id}/approve", s.only(s.txAction(func(id ids.TxID, b actionBody, role aggregates.Role) aggregates.Command {
		return aggregates.ApproveDeposit{TxID: id, Amount: derefInt(b.Amount), AnyAmount: role.Allows(aggregates.RoleAdmin)}
	})))
	act.Post("/deposits/{id}/reject", s.only(s.txAction(func(id ids.TxID, b actionBody, _ aggregates.Role) aggregates.Command {
		return aggregates.RejectDeposit{TxID: id, Reason: b.Reason}
	})))
	act.Post("/withdrawals/{id}/process", s.only(s.txAction(func(id ids.TxID, _ actionBody, _ aggregates.Role) aggregates.Command {
		return aggregates.ProcessWithdrawal{TxID: id}
	})))
	act.Post("/withdrawals/{id}/pay", s.only(s.txAction(func(id ids.TxID, b actionBody, _ aggregates.Role) aggregates.Command {
		return aggregates.PayWithdrawal{TxID: id, Reference: b.Reference}
	})))
	act.Post("/withdrawals/{id}/reject", s.only(s.txAction(func(id ids.TxID, b actionBody, _ aggregates.Role) aggregates.Command {
		return aggregates.RejectWithdrawal{TxID: id, Reason: b.Reason}
	})))
	admin.Get("/operators", s.only(s.listOperators))
	admin.Post("/operators", s.only(s.createOperator))
	admin.Delete("/operators/{id}", s.only(s.revokeOperator))
	if s.cfg.Callbacks != nil {
		read.Get("/callbacks", s.only(s.listCallbacks, "status", "site", "cursor", "limit"))
		act.Post("/callbacks/{eventId}/resend", s.only(s.resendCallback))
	}
}

// roleKey carries the authenticated caller's role in the request context.
type roleKey struct{}

// operatorTokenPrefix starts every named operator's token, so other strings
// are refused without looking them up.
const operatorTokenPrefix = "op_"

// opsAuth resolves the bearer token to an actor and a role: the bootstrap
// admin token (compared in constant time, as hashes, so its length does not
// leak either) or a named operator's token (found by its SHA-256; a revoked
// or unknown token is refused). The actor is recorded on every event the
// request causes.
func (s *Server) opsAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := s.authenticate(r, bearer(r.Header))
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if who.actor == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ops"`)
			s.writeErr(w, r, &apiError{status: 401, code: "unauthorized", message: "a valid operator bearer token is required"})
			return
		}
		info(r).actor = who.actor
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), roleKey{}, who.role)))
	})
}

// bearer returns the token of the request's one Authorization header in
// the Bearer scheme, whose name is case-insensitive (RFC 9110 section
// 11.1); "" for none, another scheme, or two headers, which could carry
// two identities.
func bearer(h http.Header) string {
	vals := h.Values("Authorization")
	if len(vals) != 1 {
		return ""
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return tok
}

// caller is who an operator token belongs to.
type caller struct {
	// actor is recorded in events ("" for no valid token).
	actor string
	// name is the operator's name, for people to read.
	name string
	role aggregates.Role
}

// authenticate resolves an operator token: the bootstrap admin token
// (compared in constant time, as hashes, so its length does not leak
// either) or a named operator's token (found by its SHA-256; a revoked or
// unknown token is no caller).
func (s *Server) authenticate(r *http.Request, tok string) (caller, error) {
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return caller{}, nil
	}
	got := sha256.Sum256([]byte(tok))
	if s.cfg.AdminToken != "" && subtle.ConstantTimeCompare(got[:], s.adminHash[:]) == 1 {
		return caller{actor: AdminActor, name: AdminActor, role: aggregates.RoleAdmin}, nil
	}
	if !strings.HasPrefix(tok, operatorTokenPrefix) {
		return caller{}, nil
	}
	op, err := s.operatorByToken(r, hex.EncodeToString(got[:]))
	if err != nil || op == nil {
		return caller{}, err
	}
	return caller{actor: op.ID, name: op.Name, role: op.Role}, nil
}

// operatorByToken returns the active operator whose token hashes to h, or
// nil. The map lookup is not constant-time, but it is keyed by the token's
// SHA-256, and timing that reveals a hash's prefix does not help anyone
// find a token. A miss first waits for this process to catch up with the
// stream, so an operator created through another gateway process is
// accepted at once; a revoked operator is refused without waiting.
func (s *Server) operatorByToken(r *http.Request, h string) (*aggregates.Operator, error) {
	op, ok := s.cfg.Ledger.Operators().ByTokenHash(h)
	if !ok {
		// Throttled and shared: a flood of unknown tokens costs no store
		// reads of its own.
		if err := s.cfg.Ledger.CatchUpMiss(r.Context()); err != nil {
			return nil, err
		}
		op, ok = s.cfg.Ledger.Operators().ByTokenHash(h)
	}
	if !ok || !op.Active() {
		return nil, nil
	}
	return op, nil
}

// need refuses, before anything is read or written, a caller whose role does
// not include role.
func (s *Server) need(role aggregates.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			have, _ := r.Context().Value(roleKey{}).(aggregates.Role)
			if !have.Allows(role) {
				s.writeErr(w, r, &apiError{status: 403, code: "forbidden",
					message: fmt.Sprintf("this call needs the %s role; the token has the %s role", role, have)})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// only serves h when the request's query holds only the parameters named,
// each once (docs/errors.md "invalid_request"): a misspelt filter that was
// ignored would answer with everything, which looks like a result.
func (s *Server) only(h http.HandlerFunc, names ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Strictly parsed: a pair that cannot be read (a bad escape, a
		// ';') would otherwise be dropped, its filter with it.
		if _, err := queryParams(r, names...); err != nil {
			s.writeErr(w, r, err)
			return
		}
		h(w, r)
	}
}
