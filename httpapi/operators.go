package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// operatorView is a named operator as the operator API shows it. The token
// appears only in the answer that creates it.
type operatorView struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Role      string  `json:"role"`
	Token     string  `json:"token,omitempty"`
	CreatedAt string  `json:"createdAt"`
	RevokedAt *string `json:"revokedAt"`
}

func viewOperator(o *aggregates.Operator) operatorView {
	v := operatorView{ID: o.ID, Name: o.Name, Role: string(o.Role), CreatedAt: records.FormatTime(o.CreatedAt)}
	if !o.Active() {
		at := records.FormatTime(o.RevokedAt)
		v.RevokedAt = &at
	}
	return v
}

func (s *Server) createOperator(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name *string `json:"name"`
		Role *string `json:"role"`
	}
	if err := decodeJSON(w, r, &b); err != nil {
		s.writeErr(w, r, err)
		return
	}
	// 256 random bits: the stored SHA-256 needs no salt or stretching.
	token := operatorTokenPrefix + randomSecret()
	sum := sha256.Sum256([]byte(token))
	opID := ids.NewOperator()
	cmd := aggregates.CreateOperator{ID: string(opID), Name: deref(b.Name), Role: deref(b.Role),
		TokenHash: hex.EncodeToString(sum[:])}
	if _, err := s.cfg.Ledger.ExecuteOperators(r.Context(), cmd, info(r).actor); err != nil {
		s.writeErr(w, r, err)
		return
	}
	op, ok := s.cfg.Ledger.Operators().ByID(opID)
	if !ok {
		s.writeErr(w, r, fmt.Errorf("operator %s missing after creation", opID))
		return
	}
	v := viewOperator(op)
	v.Token = token
	s.writeData(w, r, v)
}

func (s *Server) listOperators(w http.ResponseWriter, r *http.Request) {
	// Read-your-writes across gateway processes: an operator created or
	// revoked through another one is listed as it is.
	if err := s.cfg.Ledger.CatchUp(r.Context()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	out := struct {
		Items      []operatorView `json:"items"`
		NextCursor *string        `json:"nextCursor"`
	}{Items: []operatorView{}}
	for _, o := range s.cfg.Ledger.Operators().List() {
		out.Items = append(out.Items, viewOperator(o))
	}
	s.writeData(w, r, out)
}

func (s *Server) revokeOperator(w http.ResponseWriter, r *http.Request) {
	if err := decodeJSON(w, r, &struct{}{}); err != nil {
		s.writeErr(w, r, err)
		return
	}
	id, err := ids.ParseOperator(chi.URLParam(r, "id"))
	if err != nil {
		s.writeErr(w, r, notFound("operator"))
		return
	}
	if _, err := s.cfg.Ledger.ExecuteOperators(r.Context(), aggregates.RevokeOperator{ID: id}, info(r).actor); err != nil {
		s.writeErr(w, r, err)
		return
	}
	op, ok := s.cfg.Ledger.Operators().ByID(id)
	if !ok {
		s.writeErr(w, r, fmt.Errorf("operator %s missing after revocation", id))
		return
	}
	s.writeData(w, r, viewOperator(op))
}
