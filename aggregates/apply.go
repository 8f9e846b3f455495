package aggregates

import (
	"fmt"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// journal records how to undo the events applied since Begin, so a batch
// decided against the in-memory state can be rolled back when its append is
// refused (a conflict with another writer, or a store failure) without
// reloading the site.
type journal struct {
	balance  int64
	pending  int64
	cfg      *Config
	nTxs     int
	arena    uint32
	nEvents  int
	txs      []txUndo
	users    []userUndo
	rotation []rotUndo
	reasons  []reasonUndo
	// adjusted lists the adjustment keys recorded in the batch.
	adjusted []string
	// aliases lists the aliases added in the batch.
	aliases []string
	created *Config
}

type txUndo struct {
	i  int32
	tx Tx
}

// userUndo is one change to the pending-deposit index: the entry of key in
// byKey, or of userID in collide when side is set, and what it held before.
type userUndo struct {
	key    uint64
	userID string
	side   bool
	i      int32
	had    bool
}
type rotUndo struct {
	bank string
	n    uint64
	had  bool
}
type reasonUndo struct {
	i   int32
	r   string
	had bool
}

// Begin starts a batch: events applied until Commit or Rollback can be undone.
func (s *Site) Begin() {
	s.j = &journal{balance: s.Balance, pending: s.PendingWithdrawals,
		cfg: s.Cfg, created: s.created, nTxs: len(s.Txs), arena: uint32(len(s.pids.arena))}
}

// Commit ends a batch whose events were stored in the message at seq.
func (s *Site) Commit(seq uint64) {
	for i := s.j.nTxs; i < len(s.Txs); i++ {
		s.Txs[i].Seq = seq
	}
	s.j = nil
}

// Rollback undoes every event applied since Begin.
func (s *Site) Rollback() {
	j := s.j
	s.j = nil
	for _, key := range j.adjusted {
		delete(s.adjusted, key)
	}
	for _, pid := range j.aliases {
		delete(s.aliases, pid)
	}
	for k := len(j.reasons) - 1; k >= 0; k-- {
		u := j.reasons[k]
		if u.had {
			s.reasons[u.i] = u.r
		} else {
			delete(s.reasons, u.i)
		}
	}
	for k := len(j.rotation) - 1; k >= 0; k-- {
		if u := j.rotation[k]; u.had {
			s.rotation[u.bank] = u.n
		} else {
			delete(s.rotation, u.bank)
		}
	}
	for k := len(j.users) - 1; k >= 0; k-- {
		s.pending.undo(j.users[k])
	}
	for k := len(j.txs) - 1; k >= 0; k-- {
		s.Txs[j.txs[k].i] = j.txs[k].tx
	}
	s.pids.truncate(s.Txs, j.nTxs, j.arena)
	clear(s.Txs[j.nTxs:])
	s.Txs = s.Txs[:j.nTxs]
	s.Balance, s.PendingWithdrawals, s.Cfg, s.created = j.balance, j.pending, j.cfg, j.created
}

// ApplyMessage folds a stored message (all of its events) into the state.
// A message that cannot be this site's (see checkOwn) is refused whole and
// leaves the state unchanged.
func (s *Site) ApplyMessage(seq uint64, evs []events.Event) error {
	if err := s.checkOwn(seq, evs); err != nil {
		return err
	}
	for i, e := range evs {
		s.apply(e, seq, uint16(i))
	}
	return nil
}

// checkOwn refuses a message that cannot belong to this site: a
// site.created of another site or a second one, an event of the catalog or
// the operators, or anything before the site was created. The subject a
// message was read from names its site; this is the defence behind that,
// so a read that caught other subjects can never merge sites.
func (s *Site) checkOwn(seq uint64, evs []events.Event) error {
	created := s.Created()
	for i, e := range evs {
		switch p := e.Payload.(type) {
		case *events.SiteCreated:
			if ids.SiteID(p.SiteID) != s.ID {
				return fmt.Errorf("%w: message %d event %d creates site %q, not %q", ErrForeignEvent, seq, i, p.SiteID, s.ID)
			}
			if created {
				return fmt.Errorf("%w: message %d event %d creates site %q again", ErrForeignEvent, seq, i, s.ID)
			}
			created = true
		case *events.BankCreated, *events.BankUpdated, *events.BankScoped, *events.OperatorCreated, *events.OperatorRevoked:
			return fmt.Errorf("%w: message %d event %d is a %s, not a site event", ErrForeignEvent, seq, i, e.Name)
		default:
			if !created {
				return fmt.Errorf("%w: message %d event %d (%s) comes before site %q was created", ErrForeignEvent, seq, i, e.Name, s.ID)
			}
		}
	}
	return nil
}

// replaceCfg publishes c as the site's settings. An event of the creation
// itself also changes what a repeat of a keyed creation answers.
func (s *Site) replaceCfg(c *Config, ofCreation bool) {
	if ofCreation && s.created != nil && s.created == s.Cfg {
		s.created = c
	}
	s.Cfg = c
}

// Apply folds one event decided in the current batch (between Begin and
// Commit) into the state.
func (s *Site) Apply(e events.Event) {
	idx := uint16(s.j.nEvents)
	s.j.nEvents++
	s.apply(e, 0, idx)
}

// apply never fails: an event in the stream was valid when decided. An event
// naming a transaction this state does not know is ignored rather than
// crashing a replica; the audit reports such histories.
func (s *Site) apply(e events.Event, seq uint64, evIdx uint16) {
	switch p := e.Payload.(type) {
	case *events.SiteCreated:
		s.Cfg = &Config{Settings: createdSettings(p), AppKey: p.AppKey, Secret: p.Secret, WebhookSecret: p.WebhookSecret,
			CreatedAt: e.Time, IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash}
		if p.IdempotencyKey != "" {
			s.created = s.Cfg
		}
	case *events.SiteUpdated:
		c := *s.Cfg
		c.Settings = c.Settings.With(updatedSettings(p))
		s.Cfg = &c
	case *events.SitePageUpdated:
		c := *s.Cfg
		c.Settings = c.Settings.With(pageSettings(p))
		s.replaceCfg(&c, p.AtCreation)
	case *events.DepositAliasAdded:
		i := s.indexOf(p.TxID)
		if i < 0 {
			return // the audit reports a history that names nothing
		}
		if s.aliases == nil {
			s.aliases = map[string]Alias{}
		}
		s.aliases[p.ProcessID] = Alias{Tx: i, Fingerprint: Fingerprint(KindDeposit, p.Amount, p.BankID, p.UserID)}
		if s.j != nil {
			s.j.aliases = append(s.j.aliases, p.ProcessID)
		}
	case *events.SiteMethodsSet:
		c := *s.Cfg
		c.OwnMethods, c.Methods = !p.All, p.Methods
		s.Cfg = &c
	case *events.SiteSandbox:
		c := *s.Cfg
		c.Sandbox = p.Sandbox
		s.replaceCfg(&c, true) // only ever written by the creation
	case *events.SiteSecretRotated:
		c := *s.Cfg
		c.PrevSecret, c.PrevSecretUntil, c.Secret = c.Secret, p.PreviousValidUntil, p.Secret
		s.Cfg = &c
	case *events.SiteWebhookSecretRotated:
		c := *s.Cfg
		c.PrevWebhookSecret, c.PrevWebhookSecretUntil, c.WebhookSecret = c.WebhookSecret, p.PreviousValidUntil, p.Secret
		s.Cfg = &c
	case *events.TreasuryAdjusted:
		s.Balance += p.Amount
		if p.IdempotencyKey != "" {
			s.recordAdjustment(p)
		}
	case *events.DepositRequested:
		user := s.userKey(p.UserID)
		i := s.addTx(p.ProcessID, p.UserID, Tx{Kind: KindDeposit, Status: StatusPending, EvIdx: evIdx, Amount: p.Amount,
			Requested: p.Amount, Fingerprint: Fingerprint(KindDeposit, p.Amount, p.BankID, p.UserID),
			ExpiresAt: p.ExpiresAt, UpdatedAt: e.Time, Seq: seq, HostedKey: HostedKey(p.HostedToken)})
		s.setPendingUser(user, p.UserID, i)
		s.bumpRotation(p.BankID)
	case *events.WithdrawalRequested:
		s.addTx(p.ProcessID, "", Tx{Kind: KindWithdrawal, Status: StatusPending, EvIdx: evIdx, Amount: p.Amount,
			Requested: p.Amount, Fingerprint: Fingerprint(KindWithdrawal, p.Amount, p.BankID, p.UserID),
			UpdatedAt: e.Time, Seq: seq})
		s.PendingWithdrawals += p.Amount
	case *events.DepositApproved:
		s.update(p.TxID, e.Time, func(tx *Tx) {
			s.clearPendingUser(s.indexOf(p.TxID))
			tx.Status, tx.Amount = StatusApproved, p.Amount
			s.Balance += p.Amount
		})
	case *events.DepositRejected:
		s.update(p.TxID, e.Time, func(tx *Tx) {
			i := s.indexOf(p.TxID)
			s.clearPendingUser(i)
			tx.Status = StatusRejected
			s.setReason(i, p.Reason)
		})
	case *events.DepositExpired:
		s.update(p.TxID, e.Time, func(tx *Tx) {
			s.clearPendingUser(s.indexOf(p.TxID))
			tx.Status = StatusExpired
		})
	case *events.WithdrawalProcessing:
		s.update(p.TxID, e.Time, func(tx *Tx) { tx.Status = StatusProcessing })
	case *events.WithdrawalPaid:
		s.update(p.TxID, e.Time, func(tx *Tx) {
			tx.Status = StatusPaid
			s.PendingWithdrawals -= tx.Amount
			s.Balance -= tx.Amount
			if p.Reference != "" {
				s.setReason(s.indexOf(p.TxID), p.Reference)
			}
		})
	case *events.WithdrawalRejected:
		s.update(p.TxID, e.Time, func(tx *Tx) {
			tx.Status = StatusRejected
			s.PendingWithdrawals -= tx.Amount
			s.setReason(s.indexOf(p.TxID), p.Reason)
		})
	}
}

func (s *Site) indexOf(txID string) int32 {
	i, _ := s.Lookup(ids.TxID(txID))
	return i
}

// addTx appends tx with its processId and, for a deposit, its userId.
func (s *Site) addTx(pid, user string, tx Tx) int32 {
	i := int32(len(s.Txs))
	tx.PidOff = s.pids.add(pid, user, i)
	if len(s.Txs) == cap(s.Txs) {
		// Grow by a quarter rather than doubling: a site's transactions
		// are most of the gateway's memory, and doubling leaves up to
		// half of it unused.
		grown := make([]Tx, len(s.Txs), len(s.Txs)+len(s.Txs)/4+16)
		copy(grown, s.Txs)
		s.Txs = grown
	}
	s.Txs = append(s.Txs, tx)
	return i
}

func (s *Site) update(txID string, at int64, fn func(*Tx)) {
	i, ok := s.Lookup(ids.TxID(txID))
	if !ok {
		return
	}
	if s.j != nil && int(i) < s.j.nTxs {
		s.j.txs = append(s.j.txs, txUndo{i: i, tx: s.Txs[i]})
	}
	fn(&s.Txs[i])
	s.Txs[i].UpdatedAt = at
}

func (s *Site) bumpRotation(bank string) {
	if s.j != nil {
		n, had := s.rotation[bank]
		s.j.rotation = append(s.j.rotation, rotUndo{bank: bank, n: n, had: had})
	}
	s.rotation[s.internStr(bank)]++
}

func (s *Site) setReason(i int32, r string) {
	if s.j != nil {
		old, had := s.reasons[i]
		s.j.reasons = append(s.j.reasons, reasonUndo{i: i, r: old, had: had})
	}
	s.reasons[i] = r
}
