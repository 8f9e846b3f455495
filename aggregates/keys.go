package aggregates

import (
	"fmt"
	"iter"
	"maps"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// Operator writes that are not transitions (site creation, method creation,
// treasury adjustments) may carry an Idempotency-Key. The key and the hash
// of the request body are stored in the event the write produced, and the
// aggregates keep, derived from those events, what a repeat of the key is
// answered with:
//   - a site created with a key lives at ids.SiteForKey(key), so racing
//     creations address one subject; its settings as created are kept;
//   - a method created with a key has the _id ids.BankForKey(key) and is
//     kept as created;
//   - a site keeps, for each keyed adjustment, its request hash and the
//     balance it answered with.
//
// A repeat with the same request hash writes nothing and answers as the
// first request did; a different hash is ErrIdempotencyConflict. Keys are
// kept for good: they are in the ledger.

// MaxIdempotencyKeyLen bounds an Idempotency-Key: it is stored in an event.
const MaxIdempotencyKeyLen = 255

// idempotencyField names the header in errors.
const idempotencyField = "Idempotency-Key"

// CheckIdempotencyKey refuses a key that is not 1 to MaxIdempotencyKeyLen
// printable ASCII characters (space to '~'; no control characters).
func CheckIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return fieldErr(idempotencyField, ErrInvalidRequest, "Idempotency-Key must be 1 to %d printable ASCII characters", MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fieldErr(idempotencyField, ErrInvalidRequest, "Idempotency-Key must be 1 to %d printable ASCII characters", MaxIdempotencyKeyLen)
		}
	}
	return nil
}

// checkKeyed validates the key and request hash of a keyed command; ""
// keys are unkeyed commands and pass.
func checkKeyed(key, requestHash string) error {
	if key == "" {
		return nil
	}
	if err := CheckIdempotencyKey(key); err != nil {
		return err
	}
	if requestHash == "" {
		return fmt.Errorf("keyed command without a request hash: %w", ErrInvalidRequest)
	}
	return nil
}

func keyConflict(key string) error {
	return fieldErr(idempotencyField, ErrIdempotencyConflict,
		"Idempotency-Key %q was already used with a different body", key)
}

// AdjustmentAnswer is what a keyed treasury adjustment answered: the
// treasury right after its event. A repeat of the key is answered with it,
// whatever the treasury has become since.
type AdjustmentAnswer struct {
	//lint:ignore U1000 msgpack reads this field's tag: the struct is encoded as an array
	_msgpack struct{} `msgpack:",as_array"`
	// RequestHash is the SHA-256 (hex) of the first request's body.
	RequestHash        string
	Balance            int64
	PendingWithdrawals int64
	NegativeLimit      int64
}

// Available is what was left available right after the event
// (Treasury.Available).
func (a AdjustmentAnswer) Available() int64 {
	return Treasury{Balance: a.Balance, PendingWithdrawals: a.PendingWithdrawals, NegativeLimit: a.NegativeLimit}.Available()
}

// KeyedAdjustment returns the answer of the adjustment made with key.
func (s *Site) KeyedAdjustment(key string) (AdjustmentAnswer, bool) {
	a, ok := s.adjusted[key]
	return a, ok
}

// KeyedAdjustments returns every keyed adjustment's answer by key, in no
// particular order (audits compare them; the map is the site's own).
func (s *Site) KeyedAdjustments() iter.Seq2[string, AdjustmentAnswer] {
	return maps.All(s.adjusted)
}

// CreatedAs returns the site's settings as its creation answered them when
// it was created with an Idempotency-Key, nil otherwise: a repeat of the
// key shows them, secrets included, whatever was updated or rotated since.
func (s *Site) CreatedAs() *Config { return s.created }

// decideKeyedAdjustment answers an adjustment whose key was already used:
// a repeat when the body is the same, a conflict otherwise.
func (s *Site) decideKeyedAdjustment(c AdjustTreasury) (Decision, bool, error) {
	a, ok := s.adjusted[c.IdempotencyKey]
	if !ok {
		return Decision{}, false, nil
	}
	if a.RequestHash != c.RequestHash {
		return Decision{Tx: -1}, true, keyConflict(c.IdempotencyKey)
	}
	return Decision{Tx: -1, Repeat: true}, true, nil
}

// decideCreateAgain answers a creation that finds the site existing: a
// repeat of the keyed creation that made it, or a conflict (another body,
// or a site made without this key).
func (s *Site) decideCreateAgain(c CreateSite) (Decision, error) {
	if c.IdempotencyKey == "" {
		return Decision{Tx: -1}, ErrSiteExists
	}
	if s.Cfg.IdempotencyKey != c.IdempotencyKey || s.Cfg.RequestHash != c.RequestHash {
		return Decision{Tx: -1}, keyConflict(c.IdempotencyKey)
	}
	return Decision{Tx: -1, Repeat: true}, nil
}

// checkKeyedSite makes sure a keyed creation addresses the site its key
// derives: only then do racing repeats meet on one subject. Anything else
// is a caller's bug, not a request to refuse.
func (s *Site) checkKeyedSite(c CreateSite) error {
	if err := checkKeyed(c.IdempotencyKey, c.RequestHash); err != nil {
		return err
	}
	if c.IdempotencyKey != "" && s.ID != ids.SiteForKey(c.IdempotencyKey) {
		return fmt.Errorf("site %s created with a key that derives site %s", s.ID, ids.SiteForKey(c.IdempotencyKey))
	}
	return nil
}

// recordAdjustment keeps a keyed adjustment's answer (called by apply,
// after the balance moved). A key already recorded keeps its first answer:
// the ledger's expected sequences let only one event per key in, and a
// history that holds two anyway still answers as it first did.
func (s *Site) recordAdjustment(p *events.TreasuryAdjusted) {
	if _, ok := s.adjusted[p.IdempotencyKey]; ok {
		return
	}
	if s.adjusted == nil {
		s.adjusted = map[string]AdjustmentAnswer{}
	}
	s.adjusted[p.IdempotencyKey] = AdjustmentAnswer{RequestHash: p.RequestHash, Balance: s.Balance,
		PendingWithdrawals: s.PendingWithdrawals, NegativeLimit: s.Cfg.NegativeLimit}
	if s.j != nil {
		s.j.adjusted = append(s.j.adjusted, p.IdempotencyKey)
	}
}

// decideKeyedBank answers a keyed creation whose method _id exists: a
// repeat when it was created with this key and body, a conflict otherwise.
// It reports false when there is no such method.
func (c *Catalog) decideKeyedBank(cmd CreateBank) (bool, error) {
	if cmd.ID != string(ids.BankForKey(cmd.IdempotencyKey)) {
		return false, fmt.Errorf("method %s created with a key that derives _id %s", cmd.ID, ids.BankForKey(cmd.IdempotencyKey))
	}
	b, ok := c.byID[cmd.ID]
	if !ok {
		return false, nil
	}
	if b.IdempotencyKey != cmd.IdempotencyKey || b.RequestHash != cmd.RequestHash {
		return true, keyConflict(cmd.IdempotencyKey)
	}
	return true, nil
}

// AsCreated returns the method as its keyed creation answered it (itself
// when it was never updated, or was created without a key).
func (b *Bank) AsCreated() *Bank {
	if b.created != nil {
		return b.created
	}
	return b
}
