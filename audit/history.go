package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

// Reader is what History reads.
type Reader interface {
	Read(ctx context.Context, filter string, from uint64, fn func(events.Msg) error) error
}

// Entry is one event of a site's history in readable form: the records'
// HistoryItem (secrets and hosted page tokens redacted) plus the payload's
// field names in the order the payload declares them.
type Entry struct {
	records.HistoryItem
	Fields []string `json:"-"`
}

var errLimit = errors.New("limit reached")

// History calls fn for up to limit events (0: all) of site's history, from
// the message at stream sequence from on, in order. A message that cannot
// be decoded ends the listing with an error naming it.
func History(ctx context.Context, src Reader, site string, from uint64, limit int, fn func(Entry) error) error {
	n := 0
	id, err := ids.ParseSite(site)
	if err != nil {
		return err
	}
	subj, err := events.SiteSubject(id)
	if err != nil {
		return err
	}
	err = src.Read(ctx, subj, from, func(m events.Msg) error {
		evs, err := events.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("message #%d: %w", m.Seq, err)
		}
		for i, e := range evs {
			it, err := records.Readable(m.Seq, i, e)
			if err != nil {
				return fmt.Errorf("event #%d.%d: %w", m.Seq, i, err)
			}
			if err := fn(Entry{HistoryItem: it, Fields: fieldOrder(e.Payload)}); err != nil {
				return err
			}
			n++
			if limit > 0 && n >= limit {
				return errLimit
			}
		}
		return nil
	})
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// fieldOrder returns the payload's keys in encoding (declaration) order;
// Readable's map has none.
func fieldOrder(p events.Payload) []string {
	b, err := msgpack.Marshal(p)
	if err != nil {
		return nil
	}
	d := msgpack.NewDecoder(bytes.NewReader(b))
	n, err := d.DecodeMapLen()
	if err != nil {
		return nil
	}
	keys := make([]string, 0, max(n, 0))
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return keys
		}
		keys = append(keys, k)
		if err := d.Skip(); err != nil {
			return keys
		}
	}
	return keys
}

// Line renders an entry as one line: "#seq.index time actor name k=v ...".
func (e Entry) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d.%d %s %s %s", e.Seq, e.Index, e.Time, quote(e.Actor), e.Name)
	seen := make(map[string]bool, len(e.Data))
	keys := e.Fields
	for _, k := range keys {
		seen[k] = true
	}
	for k := range e.Data { // keys the encoding did not list, if any
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		v, ok := e.Data[k]
		if !ok {
			continue
		}
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(value(v))
	}
	return b.String()
}

// value formats a payload value: strings bare when unambiguous, quoted
// otherwise; numbers and booleans as they are; lists and maps as JSON.
func value(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return quote(x)
	case bool:
		return strconv.FormatBool(x)
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
		return fmt.Sprint(x)
	}
	j, err := json.Marshal(v)
	if err != nil {
		return quote(fmt.Sprint(v))
	}
	return string(j)
}

func quote(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\r\"'=\\") || !strconv.CanBackquote(s) || s == "null" {
		return strconv.Quote(s)
	}
	return s
}
