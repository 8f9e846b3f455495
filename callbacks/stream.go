package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
)

// StreamEvent is one callback as a merchant's stream carries it: what its
// delivery would send, headers and body, signed now with the site's
// webhook secret (docs/callbacks.md "Following callbacks without a public
// URL").
type StreamEvent struct {
	// ID is the webhook-id.
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

// StreamConfig is what a stream reads: the stream's messages, the ledger's
// state and the records.
type StreamConfig struct {
	Store   Store
	Ledger  Ledger
	Records Records
	// Poll is how often the stream looks for new messages (500 ms when 0).
	Poll time.Duration
	// Check, when set, is called before every look for new messages and
	// before every event is handed over; its error ends the stream. A
	// stream outlives the moment its reader was let in: Check is where it
	// is let in again (the merchant's credentials, still accepted).
	Check func(ctx context.Context) error
	// Secret is the secret the records' hash is made with: the one the
	// stream's request was signed with, so that the merchant following it
	// verifies them as it verifies the answers to its requests. When
	// empty, it is a delivery's (hashSecret).
	Secret string
	// Applied, when set, returns the stream sequence of the last message
	// of a site that the ledger has applied. The stream then reads the
	// store only once there is a message of its site it has not read:
	// every read makes the store create a consumer, which an idle stream
	// would otherwise do every Poll.
	Applied func(ids.SiteID) uint64
}

// Head returns the stream's end as a position in webhook-id form: Stream
// from it streams the events stored after Head read it, and a stream
// resumed from it later misses none of them. It names the last message's
// highest possible index (ids.MaxEventIndex), so no event of that message
// is streamed again (docs/callbacks.md "Following callbacks without a
// public URL").
func Head(ctx context.Context, store Store) (string, error) {
	last, err := store.LastSeq(ctx)
	if err != nil {
		return "", err
	}
	if last == 0 {
		// Every site is created by a message of the stream, so a stream
		// followed for a site is never empty.
		return "", errors.New("callback stream: the event stream is empty")
	}
	return WebhookID(last, ids.MaxEventIndex), nil
}

// Stream calls fn, in order, for every callback event of site stored
// after the event after (a webhook-id, or a position from Head: a stream
// from now on starts at Head, read before its caller tells the position),
// whether or not the site has a callbackUrl, until ctx ends or fn fails. Nothing is recorded: any number of streams
// may follow a site, in any gateway process, beside the dispatcher's
// deliveries.
func Stream(ctx context.Context, cfg StreamConfig, site ids.SiteID, after string, fn func(StreamEvent) error) error {
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	subj, err := events.SiteSubject(site)
	if err != nil {
		return fmt.Errorf("stream site %s: %w", site, err)
	}
	k, ok := keyOf(after)
	if !ok {
		return notFound(after)
	}
	next := key{seq: k.seq, idx: k.idx + 1} // the first event to stream
	check := func() error {
		if cfg.Check == nil {
			return nil
		}
		return cfg.Check(ctx)
	}
	tick := time.NewTicker(cfg.Poll)
	defer tick.Stop()
	for {
		if err := check(); err != nil {
			return err
		}
		// Without a message of the site that it has not read, the store
		// is not asked: the ledger applies a message before it is
		// streamed anyway (streamEvent).
		if cfg.Applied == nil || cfg.Applied(site) >= next.seq {
			err := cfg.Store.Read(ctx, subj, next.seq, func(m events.Msg) error {
				evs, err := events.Decode(m.Data)
				if err != nil {
					return fmt.Errorf("message %d: %w", m.Seq, err)
				}
				for i, e := range evs {
					if m.Seq == next.seq && i < next.idx || callbackType(e) == "" {
						continue
					}
					ev, err := streamEvent(ctx, cfg, site, m.Seq, i, e)
					if err != nil {
						return err
					}
					if err := check(); err != nil {
						return err
					}
					if err := fn(ev); err != nil {
						return err
					}
				}
				next = key{seq: m.Seq + 1}
				return nil
			})
			if err != nil && !errors.Is(err, events.ErrNotFound) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// streamEvent renders the callback of event e, index i of the message at
// seq, as its delivery would.
func streamEvent(ctx context.Context, cfg StreamConfig, site ids.SiteID, seq uint64, i int, e events.Event) (StreamEvent, error) {
	// The record is read from the ledger's state, which must have
	// applied the message.
	for cfg.Ledger.Followed() < seq {
		select {
		case <-ctx.Done():
			return StreamEvent{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	id := WebhookID(seq, i)
	tx := txOf(e)
	rec, err := cfg.Records.ByIDLocal(ctx, site, tx)
	if err != nil {
		return StreamEvent{}, fmt.Errorf("callback %s: %w", id, err)
	}
	var from uint64
	err = cfg.Ledger.Read(ctx, site, local, func(s *aggregates.Site) error {
		j, ok := s.Lookup(tx)
		if !ok {
			return fmt.Errorf("transaction %s: %w", tx, aggregates.ErrNotFound)
		}
		from = s.Txs[j].Seq
		return nil
	})
	if err != nil {
		return StreamEvent{}, err
	}
	h, err := scanHistory(ctx, cfg.Store, site, tx, from, key{seq: seq, idx: i})
	if err != nil {
		return StreamEvent{}, err
	}
	sc, ok := cfg.Ledger.SiteConfig(site)
	if !ok {
		return StreamEvent{}, fmt.Errorf("site %s: %w", site, aggregates.ErrSiteNotFound)
	}
	now := time.Now()
	secret := cfg.Secret
	if secret == "" {
		secret = hashSecret(sc, now.UnixMilli())
	}
	typ := callbackType(e)
	b, err := body(typ, e, asOf(rec, e, secret), h.prev)
	if err != nil {
		return StreamEvent{}, err
	}
	ts := now.Unix()
	return StreamEvent{ID: id, Type: typ, Body: b, Headers: map[string]string{
		"content-type": "application/json", "webhook-id": id, "webhook-timestamp": strconv.FormatInt(ts, 10),
		"webhook-signature": signatures(sc, id, ts, b, now.UnixMilli())}}, nil
}
