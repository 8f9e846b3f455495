package httpapi

import (
	"net/http"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/records"
)

func (s *Server) rotateSecret(webhook bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			OverlapSeconds *int64 `json:"overlapSeconds"`
		}
		if err := decodeJSON(w, r, &b); err != nil {
			s.writeErr(w, r, err)
			return
		}
		overlap := int64(86400)
		if b.OverlapSeconds != nil {
			overlap = *b.OverlapSeconds
		}
		if overlap < 0 || overlap > 30*86400 {
			s.writeErr(w, r, errBad("invalid_request", "overlapSeconds", "overlapSeconds must be 0 to 2592000"))
			return
		}
		secret := randomSecret()
		if webhook {
			secret = newWebhookSecret()
		}
		id, err := siteParam(r)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		cmd := aggregates.RotateSecret{Webhook: webhook, Secret: secret, Overlap: time.Duration(overlap) * time.Second}
		if _, err := s.run(r, id, cmd); err != nil {
			s.writeErr(w, r, err)
			return
		}
		until := records.FormatTime(s.cfg.Ledger.Now().Add(cmd.Overlap).UnixMilli())
		key := "secret"
		if webhook {
			key = "webhookSecret"
		}
		s.writeData(w, r, map[string]string{key: secret, "previousValidUntil": until})
	}
}
