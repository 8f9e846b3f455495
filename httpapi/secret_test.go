package httpapi_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func rotate(t *testing.T, s *stack, st site, body any) (site, time.Time) {
	t.Helper()
	r := s.ops("POST", "/ops/v1/sites/"+st.ID+"/secret", body)
	requireOK(t, r)
	var out struct {
		Secret             string `json:"secret"`
		PreviousValidUntil string `json:"previousValidUntil"`
	}
	r.decode(t, &out)
	require.NotEmpty(t, out.Secret)
	require.NotEqual(t, st.Secret, out.Secret)
	ns := st
	ns.Secret = out.Secret
	return ns, parseTime(t, out.PreviousValidUntil)
}

func TestSecretRotation(t *testing.T) {
	e := newEnv(t)
	s := e.newStack(stackOptions{})
	s.seedBanks()

	t.Run("default overlap keeps the old secret valid", func(t *testing.T) {
		old := s.newSite(nil, 1_000_000)
		d := rec(t, s.post(old, pathDeposit, depositForm("ZAINCASH", "sr-1", "u1", 25000)))
		before := time.Now()
		cur, until := rotate(t, s, old, nil)
		require.WithinDuration(t, before.Add(24*time.Hour), until, time.Minute, "default overlap is 24 h")
		for name, st := range map[string]site{"new": cur, "old": old} {
			t.Run(name, func(t *testing.T) {
				requireOK(t, s.get(st, "/v1/balance", ""))
				requireOK(t, s.get(st, "/v1/transactions", "processId=sr-1"))
				rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "sr-w-"+name, "u9", 1000, "07712345678")))
			})
		}
		// An answer's hash is made with the secret its request was signed
		// with: a merchant still holding the old one verifies what it is
		// answered throughout the overlap (docs/merchant-api.md "Response
		// hash").
		for name, st := range map[string]site{"new": cur, "old": old} {
			for _, g := range []record{
				rec(t, s.get(st, "/v1/transactions/"+d.TransactionID, "")),
				rec(t, s.get(st, "/v1/transactions", "processId=sr-1")),
				rec(t, s.post(st, pathDeposit, depositForm("ZAINCASH", "sr-1", "u1", 25000))),
			} {
				require.Equal(t, responseHash(st.Secret, d.TransactionID, d.BankID, d.Amount), g.Hash, "signed with the %s secret", name)
			}
			w := rec(t, s.post(st, pathWithdraw, withdrawForm("ZAINCASH", "sr-w-"+name, "u9", 1000, "07712345678")))
			require.Equal(t, responseHash(st.Secret, w.TransactionID, w.BankID, w.Amount), w.Hash, "a creation signed with the %s secret", name)
		}
		// The operator API has no signer: the current secret.
		require.Equal(t, responseHash(cur.Secret, d.TransactionID, d.BankID, d.Amount),
			rec(t, s.ops("GET", "/ops/v1/transactions/"+d.TransactionID, nil)).Hash)

		// A second rotation ends the first secret at once: only one
		// previous secret is kept.
		third, _ := rotate(t, s, cur, map[string]any{"overlapSeconds": 3600})
		requireErr(t, s.get(old, "/v1/balance", ""), 401, "invalid_signature", "sign")
		requireOK(t, s.get(cur, "/v1/balance", ""))
		requireOK(t, s.get(third, "/v1/balance", ""))
	})

	t.Run("overlap 0 refuses the old secret", func(t *testing.T) {
		old := s.newSite(nil, 0)
		cur, _ := rotate(t, s, old, map[string]any{"overlapSeconds": 0})
		before := s.eventCount(t, old.ID)
		requireErr(t, s.post(old, pathDeposit, depositForm("ZAINCASH", "sr-0", "u1", 25000)), 401, "invalid_signature", "sign")
		requireErr(t, s.get(old, "/v1/balance", ""), 401, "invalid_signature", "sign")
		s.unchanged(t, cur, before, "sr-0")
		rec(t, s.post(cur, pathDeposit, depositForm("ZAINCASH", "sr-0", "u1", 25000)))
	})

	t.Run("bad overlap", func(t *testing.T) {
		st := s.newSite(nil, 0)
		before := s.eventCount(t, st.ID)
		for _, body := range []map[string]any{{"overlapSeconds": -1}, {"overlapSeconds": 30*86400 + 1}} {
			requireErr(t, s.ops("POST", "/ops/v1/sites/"+st.ID+"/secret", body), 400, "invalid_request", "overlapSeconds")
		}
		requireErr(t, s.ops("POST", "/ops/v1/sites/"+st.ID+"/secret", map[string]any{"overlapSeconds": "1"}), 400, "invalid_request", "overlapSeconds")
		requireErr(t, s.ops("POST", "/ops/v1/sites/"+st.ID+"/secret", map[string]any{"overlap": 1}), 400, "invalid_request", "overlap")
		require.Equal(t, before, s.eventCount(t, st.ID))
		requireOK(t, s.get(st, "/v1/balance", ""))
		requireErr(t, s.ops("POST", "/ops/v1/sites/snope/secret", nil), 404, "not_found", "")
	})

	t.Run("webhook secret rotation leaves the signing secret alone", func(t *testing.T) {
		st := s.newSite(nil, 0)
		r := s.ops("POST", "/ops/v1/sites/"+st.ID+"/webhook-secret", map[string]any{"overlapSeconds": 0})
		requireOK(t, r)
		m := decodeAny(t, r)
		require.Regexp(t, `^whsec_`, m["webhookSecret"])
		require.NotEqual(t, st.WebhookSecret, m["webhookSecret"])
		requireOK(t, s.get(st, "/v1/balance", ""))
	})
}
