package audit

import (
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
)

// liveModel rebuilds a site the way a gateway starts: from its snapshot
// ("site-<id>", aggregates.UnmarshalSiteSnapshot) plus the site's messages
// stored after the snapshot's sequence. The audit compares it with the full
// replay from sequence 1, which catches a snapshot that is stale (claims a
// sequence whose messages it lacks) or wrong.
type liveModel struct {
	// metaSeq is the sequence the snapshot was saved at (object metadata).
	metaSeq uint64
	// snapSeq is the sequence inside the snapshot, where replay resumes.
	snapSeq uint64
	// site is nil when the snapshot cannot be used; skip says why. pos
	// is where it stands.
	site    *aggregates.Site
	pos     events.Position
	skip    string
	applied uint64
	p       problems
}

// newLiveModel decodes a snapshot of site id saved at metaSeq. A snapshot the
// build cannot read is skipped, as the gateway ignores it too.
func newLiveModel(id string, metaSeq uint64, data []byte, end uint64) *liveModel {
	l := &liveModel{metaSeq: metaSeq}
	s, pos, err := aggregates.UnmarshalSiteSnapshot(data)
	switch {
	case err != nil:
		l.skip = fmt.Sprintf("snapshot at seq %d unreadable by this build (%v): the gateway ignores it and replays from the stream", metaSeq, err)
	case string(s.ID) != id:
		l.skip = fmt.Sprintf("snapshot site-%s holds site %q: the gateway ignores it and replays from the stream", id, s.ID)
	case pos.Seq > end:
		l.skip = fmt.Sprintf("snapshot at seq %d is newer than the audited range (1..%d)", pos.Seq, end)
	default:
		l.site, l.pos, l.snapSeq = s, pos, pos.Seq
	}
	return l
}

// message applies a site message stored after the snapshot; hashes are
// its events' chain hashes.
func (l *liveModel) message(seq uint64, evs []events.Event, hashes [][32]byte) {
	if l.site == nil || seq <= l.snapSeq {
		return
	}
	l.applied++
	var applyErr error
	if err := safely(func() { applyErr = l.site.ApplyMessage(seq, evs) }); err != nil {
		applyErr = err
	}
	if applyErr != nil {
		l.p.addf(&Position{Seq: seq}, "", "the snapshot's state could not apply the message: %v", applyErr)
		return
	}
	l.pos = advance(l.pos, seq, hashes)
}

// advance is pos after the message at seq, whether or not the message
// extends pos's chain: the chain check reports breaks, the models only
// follow what was applied. hashes are the message's events' chain hashes,
// computed once when it was decoded.
func advance(pos events.Position, seq uint64, hashes [][32]byte) events.Position {
	if len(hashes) == 0 {
		return events.Position{Seq: seq, Hash: pos.Hash}
	}
	return events.Position{Seq: seq, Hash: hashes[len(hashes)-1]}
}

func (a *siteAudit) liveCheck() Check {
	l := a.live
	if l == nil {
		if a.checkpoint > 0 && a.firstSeq <= a.checkpoint {
			var p problems
			p.addf(&Position{Seq: a.firstSeq}, "", "no snapshot, although the site has messages before the checkpoint at seq %d, which promises one: "+
				"a gateway starting from the checkpoint would miss them", a.checkpoint)
			return p.check(CheckLiveModel, "")
		}
		return Check{Name: CheckLiveModel, Status: Skipped, Detail: "no snapshot: a gateway replays this site from the stream"}
	}
	if l.site == nil {
		return Check{Name: CheckLiveModel, Status: Skipped, Detail: l.skip}
	}
	if l.metaSeq != l.snapSeq {
		l.p.addf(nil, "", "the snapshot was saved as seq %d but holds the state at seq %d", l.metaSeq, l.snapSeq)
	}
	compareSites(a.agg, l.site, a.aggPos, l.pos, &l.p)
	return l.p.check(CheckLiveModel, fmt.Sprintf("snapshot at seq %d + %d later messages vs full replay to seq %d: balance, pending, settings, %d transactions, processIds, aliases, keyed answers",
		l.snapSeq, l.applied, a.aggPos.Seq, len(a.agg.Txs)))
}

// compareSites reports every way live differs from full.
func compareSites(full, live *aggregates.Site, fullPos, livePos events.Position, p *problems) {
	if live.ID != full.ID {
		p.addf(nil, "", "site id %q, full replay %q", live.ID, full.ID)
	}
	if livePos.Seq != fullPos.Seq {
		p.addf(nil, "", "at seq %d, the full replay at seq %d", livePos.Seq, fullPos.Seq)
	}
	if livePos.Hash != fullPos.Hash {
		p.addf(nil, "", "chain head %x, the full replay's %x", livePos.Hash[:8], fullPos.Hash[:8])
	}
	if live.Balance != full.Balance {
		p.addf(nil, "", "balance %d, the full replay's %d", live.Balance, full.Balance)
	}
	if live.PendingWithdrawals != full.PendingWithdrawals {
		p.addf(nil, "", "pending withdrawals %d, the full replay's %d", live.PendingWithdrawals, full.PendingWithdrawals)
	}
	if d := configDiff(full.Cfg, live.Cfg); d != "" {
		p.addf(nil, "", "settings differ: %s", d)
	}
	if d := configDiff(full.CreatedAs(), live.CreatedAs()); d != "" {
		p.addf(nil, "", "settings as the keyed creation answered them differ: %s", d)
	}
	keyedDiff(full, live, p)
	aliasDiff(full, live, p)
	if len(live.Txs) != len(full.Txs) {
		p.addf(nil, "", "%d transactions, the full replay %d", len(live.Txs), len(full.Txs))
	}
	n := int32(min(len(live.Txs), len(full.Txs)))
	for i := int32(0); i < n; i++ {
		id := txIDOf(full.ID, i)
		if d := txDiff(&full.Txs[i], &live.Txs[i]); d != "" {
			p.addf(nil, id, "%s", d)
		}
		if lr, fr := live.Reason(i), full.Reason(i); lr != fr {
			p.addf(nil, id, "status reason %q, the full replay's %q", lr, fr)
		}
		fp, lp := full.ProcessID(i), live.ProcessID(i)
		if lp != fp {
			p.addf(nil, id, "processId %q, the full replay's %q", lp, fp)
		}
		if j, ok := live.ByProcessID(fp); !ok || j != i {
			p.addf(nil, id, "processId %q does not find it in the live model's index", fp)
		}
	}
	lp, fp := pendingSet(live), pendingSet(full)
	for i := range fp {
		if !lp[i] {
			p.addf(nil, txIDOf(full.ID, i), "pending deposit of its user in the full replay, not in the live model")
		}
	}
	for i := range lp {
		if !fp[i] {
			p.addf(nil, txIDOf(full.ID, i), "pending deposit of its user in the live model, not in the full replay")
		}
	}
}

// keyedDiff reports the keyed treasury adjustments whose answers differ.
func keyedDiff(full, live *aggregates.Site, p *problems) {
	diffEntries(full.KeyedAdjustments(), live.KeyedAdjustments(), func(k string, f, l *aggregates.AdjustmentAnswer) {
		switch {
		case l == nil:
			p.addf(nil, "", "keyed adjustment %q of the full replay is not in the live model", k)
		case f == nil:
			p.addf(nil, "", "keyed adjustment %q of the live model is not in the full replay", k)
		default:
			p.addf(nil, "", "keyed adjustment %q answers %+v, the full replay's %+v", k, *l, *f)
		}
	})
}

// aliasDiff reports the aliases (deposit.alias_added) that differ: each
// makes a repeat of its request find a deposit.
func aliasDiff(full, live *aggregates.Site, p *problems) {
	diffEntries(full.Aliases(), live.Aliases(), func(pid string, f, l *aggregates.Alias) {
		switch {
		case l == nil:
			p.addf(nil, txIDOf(full.ID, f.Tx), "alias %q of the full replay is not in the live model", pid)
		case f == nil:
			p.addf(nil, txIDOf(full.ID, l.Tx), "alias %q of the live model is not in the full replay", pid)
		default:
			p.addf(nil, txIDOf(full.ID, f.Tx), "alias %q names %s (fingerprint %x), the full replay's %s (fingerprint %x)",
				pid, txIDOf(full.ID, l.Tx), l.Fingerprint, txIDOf(full.ID, f.Tx), f.Fingerprint)
		}
	})
}

// diffEntries calls differ for every key whose value is not the same in
// full and live: f is nil for a key only live has, l for one only full has.
func diffEntries[K, V comparable](full, live iter.Seq2[K, V], differ func(k K, f, l *V)) {
	lm := maps.Collect(live)
	for k, f := range full {
		l, ok := lm[k]
		switch {
		case !ok:
			differ(k, &f, nil)
		case l != f:
			differ(k, &f, &l)
		}
		delete(lm, k)
	}
	for k, l := range lm {
		differ(k, nil, &l)
	}
}

func pendingSet(s *aggregates.Site) map[int32]bool {
	m := map[int32]bool{}
	s.PendingDeposits(func(i int32, _ *aggregates.Tx) { m[i] = true })
	return m
}

// txDiff names the fields in which live differs from full.
func txDiff(full, live *aggregates.Tx) string {
	if *full == *live {
		return ""
	}
	var d []string
	add := func(name string, l, f any) { d = append(d, fmt.Sprintf("%s %v (full replay %v)", name, l, f)) }
	if live.Kind != full.Kind {
		add("kind", live.Kind, full.Kind)
	}
	if live.Status != full.Status {
		add("status", live.Status, full.Status)
	}
	if live.Amount != full.Amount {
		add("amount", live.Amount, full.Amount)
	}
	if live.Requested != full.Requested {
		add("requested", live.Requested, full.Requested)
	}
	if live.Fingerprint != full.Fingerprint {
		add("fingerprint", live.Fingerprint, full.Fingerprint)
	}
	if live.HostedKey != full.HostedKey {
		add("hostedKey", live.HostedKey, full.HostedKey)
	}
	if live.ExpiresAt != full.ExpiresAt {
		add("expiresAt", live.ExpiresAt, full.ExpiresAt)
	}
	if live.UpdatedAt != full.UpdatedAt {
		add("updatedAt", live.UpdatedAt, full.UpdatedAt)
	}
	if live.Seq != full.Seq || live.EvIdx != full.EvIdx {
		add("created at", fmt.Sprintf("#%d.%d", live.Seq, live.EvIdx), fmt.Sprintf("#%d.%d", full.Seq, full.EvIdx))
	}
	if live.PidOff != full.PidOff {
		add("processId offset", live.PidOff, full.PidOff)
	}
	return fmt.Sprintf("live model differs: %v", d)
}

// configDiff names the settings in which live differs from full.
func configDiff(full, live *aggregates.Config) string {
	if full == nil || live == nil {
		if (full == nil) != (live == nil) {
			return fmt.Sprintf("created: live %v, full replay %v", live != nil, full != nil)
		}
		return ""
	}
	var d []string
	cmp := func(name string, eq bool) {
		if !eq {
			d = append(d, name)
		}
	}
	cmp("name", live.Name == full.Name)
	cmp("appKey", live.AppKey == full.AppKey)
	cmp("secret", live.Secret == full.Secret && live.PrevSecret == full.PrevSecret && live.PrevSecretUntil == full.PrevSecretUntil)
	cmp("webhookSecret", live.WebhookSecret == full.WebhookSecret && live.PrevWebhookSecret == full.PrevWebhookSecret &&
		live.PrevWebhookSecretUntil == full.PrevWebhookSecretUntil)
	cmp("negativeLimit", live.NegativeLimit == full.NegativeLimit)
	cmp("ipAllowlist", slices.Equal(live.IPAllowlist, full.IPAllowlist))
	cmp("callbackUrl", live.CallbackURL == full.CallbackURL)
	cmp("hostedPage", live.HostedPage == full.HostedPage)
	cmp("depositTtlSeconds", live.DepositTTLSeconds == full.DepositTTLSeconds)
	cmp("rateLimit", live.RateLimit == full.RateLimit)
	cmp("returnUrl", live.ReturnURL == full.ReturnURL)
	cmp("supportContact", live.SupportContact == full.SupportContact)
	cmp("sandbox", live.Sandbox == full.Sandbox)
	cmp("methods", live.OwnMethods == full.OwnMethods && slices.EqualFunc(live.Methods, full.Methods, sameMethod))
	cmp("createdAt", live.CreatedAt == full.CreatedAt)
	cmp("idempotencyKey", live.IdempotencyKey == full.IdempotencyKey && live.RequestHash == full.RequestHash)
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprint(d)
}

func sameMethod(a, b events.SiteMethod) bool {
	return a.BankID == b.BankID && a.MinAmount == b.MinAmount && a.MaxAmount == b.MaxAmount && slices.Equal(a.Accounts, b.Accounts)
}
