package audit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/aggregates/recipient"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// env is an embedded JetStream server on a temp dir with the ledger store.
type env struct {
	st *jsstore.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{st: testkit.StartServer(t, jsstore.ServerConfig{}).Store("audit-test")}
}

// generate writes a history into the env's store.
func (e *env) generate(t *testing.T, o audit.GenOptions) *audit.GenResult {
	t.Helper()
	res, err := audit.Generate(context.Background(), e.st, o)
	require.NoError(t, err)
	for _, g := range res.Sites {
		positions.Store(g.State, g.Position)
	}
	return res
}

// positions is where the tests' site states stand in the stream: the
// position is kept beside an aggregate, not in it.
var positions sync.Map // *aggregates.Site → events.Position

func posOf(s *aggregates.Site) events.Position {
	p, _ := positions.Load(s)
	pos, _ := p.(events.Position)
	return pos
}

// runAudit audits the env's store.
func (e *env) runAudit(t *testing.T, o audit.Options) *audit.Report {
	t.Helper()
	rep, err := audit.Run(context.Background(), e.st, o)
	require.NoError(t, err)
	return rep
}

// messages reads every ledger message of the store.
func (e *env) messages(t *testing.T) []events.Msg {
	t.Helper()
	var out []events.Msg
	require.NoError(t, e.st.Read(context.Background(), events.SubjectPrefix+">", 1, func(m events.Msg) error {
		out = append(out, m)
		return nil
	}))
	return out
}

// copyInto appends msgs to dst in order, each with the expected last
// sequence of its subject in dst, after rewrite (which may change a
// message's bytes). dst must be empty: its sequences then equal the source's.
func copyInto(t *testing.T, dst *jsstore.Store, msgs []events.Msg, rewrite func(m events.Msg) []byte) {
	t.Helper()
	last := map[string]uint64{}
	for _, m := range msgs {
		data := m.Data
		if rewrite != nil {
			data = rewrite(m)
		}
		seq, err := dst.Append(context.Background(), m.Subject, last[m.Subject], data)
		require.NoError(t, err)
		require.Equal(t, m.Seq, seq, "the copy keeps the stream sequences")
		last[m.Subject] = seq
	}
}

// The stored shape of a message, as an attacker with write access to the
// store sees it (mirrors events' wire format).
type wireEvent struct {
	Name  string             `msgpack:"n"`
	Time  int64              `msgpack:"t"`
	Actor string             `msgpack:"a"`
	Data  msgpack.RawMessage `msgpack:"d"`
	Prev  []byte             `msgpack:"p"`
}

type wireMessage struct {
	Version int         `msgpack:"v"`
	Events  []wireEvent `msgpack:"e"`
	Nonce   []byte      `msgpack:"w,omitempty"`
}

// rewritePayload re-encodes event idx of a stored message with payload p,
// keeping every Prev as stored.
func rewritePayload(t *testing.T, data []byte, idx int, p events.Payload) []byte {
	t.Helper()
	var m wireMessage
	require.NoError(t, msgpack.Unmarshal(data, &m))
	b, err := msgpack.Marshal(p)
	require.NoError(t, err)
	m.Events[idx].Data = b
	out, err := msgpack.Marshal(&m)
	require.NoError(t, err)
	return out
}

// appendEvents seals evs onto the site's chain and appends them, as a
// gateway would (correct chain and expected sequence).
func appendEvents(t *testing.T, st *jsstore.Store, s *aggregates.Site, evs ...events.Event) uint64 {
	t.Helper()
	pos := posOf(s)
	data, last, err := events.Seal(pos.Hash, evs)
	require.NoError(t, err)
	seq, err := st.Append(context.Background(), siteSubject(string(s.ID)), pos.Seq, data)
	require.NoError(t, err)
	require.NoError(t, s.ApplyMessage(seq, evs))
	next, err := pos.Next(seq, evs)
	require.NoError(t, err)
	require.Equal(t, last, next.Hash)
	positions.Store(s, next)
	return seq
}

// testBank is the method the hand-written histories use.
func testBank() *aggregates.Bank {
	return &aggregates.Bank{ID: "b0000000000000000000001", Code: "ZAIN", Name: events.LocalizedName{En: "Zain"}, IdentifierKind: recipient.Phone,
		MinAmount: 1000, MaxAmount: 1_000_000, Deposit: true, Withdraw: true, Enabled: true,
		Accounts: []events.Account{{AccountName: "Acme", AccountNumber: "0770000000"}}}
}

// handSite writes site id as the gateway would (a sandbox one when
// sandbox is set): funded, with a pending deposit and a paid withdrawal,
// whose ids it returns. Its creation is at now.
func handSite(t *testing.T, e *env, id string, sandbox bool, now time.Time) (s *aggregates.Site, pending, paid string) {
	t.Helper()
	s = aggregates.NewSite(ids.SiteID(id))
	name := "shop " + id
	decideAppend(t, e, s, aggregates.CreateSite{AppKey: "ak_" + id, Secret: "sec", WebhookSecret: "wh",
		Settings: aggregates.SiteSettings{Name: &name, Sandbox: &sandbox}}, now, "admin")
	require.Equal(t, sandbox, s.Cfg.Sandbox)
	decideAppend(t, e, s, aggregates.AdjustTreasury{Amount: 100_000, Reason: "opening"}, now, "admin")
	d := decideAppend(t, e, s, testkit.Deposit(testBank(), "d1", "u1", 5000), now, events.ActorMerchant)
	pending = txIDOf(s.ID, d.Tx)
	w := decideAppend(t, e, s, testkit.Withdrawal(testBank(), "w1", "u2", 3000, "07701234567"), now, events.ActorMerchant)
	paid = txIDOf(s.ID, w.Tx)
	mover := "admin"
	if sandbox {
		mover = events.ActorMerchant // a sandbox's transactions move only by its merchant
	}
	decideAppend(t, e, s, aggregates.ProcessWithdrawal{TxID: ids.TxID(paid)}, now, mover)
	decideAppend(t, e, s, aggregates.PayWithdrawal{TxID: ids.TxID(paid), Reference: "ref"}, now, mover)
	return s, pending, paid
}

// replaySite rebuilds site id from its messages up to sequence upTo,
// leaving out the message at sequence skip (0: none).
func replaySite(t *testing.T, msgs []events.Msg, id string, upTo, skip uint64) *aggregates.Site {
	t.Helper()
	s, pos := aggregates.NewSite(ids.SiteID(id)), events.Position{}
	for _, m := range msgs {
		if m.Subject != siteSubject(id) || m.Seq > upTo || m.Seq == skip {
			continue
		}
		evs, err := events.Decode(m.Data)
		require.NoError(t, err)
		require.NoError(t, s.ApplyMessage(m.Seq, evs))
		// A skipped message breaks the chain on purpose: follow the
		// messages applied, as the audit's models do.
		pos.Seq = m.Seq
		if len(evs) > 0 {
			pos.Hash, err = events.Hash(evs[len(evs)-1])
			require.NoError(t, err)
		}
	}
	positions.Store(s, pos)
	return s
}

// findTx returns the first transaction of s with kind and status.
func findTx(t *testing.T, s *aggregates.Site, k aggregates.Kind, st aggregates.Status) int32 {
	t.Helper()
	for i := range s.Txs {
		if s.Txs[i].Kind == k && s.Txs[i].Status == st {
			return int32(i)
		}
	}
	t.Fatalf("site %s has no %s %s", s.ID, k, st)
	return -1
}

// check returns a site's named check.
func check(t *testing.T, rep *audit.Report, site, name string) audit.Check {
	t.Helper()
	s, ok := rep.Site(site)
	require.True(t, ok, "site %s in the report", site)
	c, ok := s.Check(name)
	require.True(t, ok, "check %s of site %s", name, site)
	return c
}

// failed lists the failed checks of a report as "site/check".
func failed(rep *audit.Report) []string {
	var out []string
	for _, c := range rep.Checks {
		if c.Status == audit.Fail {
			out = append(out, "/"+c.Name)
		}
	}
	for _, s := range rep.Subjects {
		for _, c := range s.Checks {
			if c.Status == audit.Fail {
				out = append(out, s.Subject+"/"+c.Name)
			}
		}
	}
	for _, s := range rep.Sites {
		for _, c := range s.Checks {
			if c.Status == audit.Fail {
				out = append(out, s.ID+"/"+c.Name)
			}
		}
	}
	return out
}

// txIDOf is the id of site's i-th transaction.
func txIDOf[S ~string](site S, i int32) string { return string(ids.NewTx(ids.SiteID(site), i)) }

// siteSubject is the site's subject.
func siteSubject(id string) string { return events.SitePrefix + id }
