package transactions

import "github.com/iqdgateway/gateway/records"

// Cursors are records.Reader.List's (records.EncodeCursor): a listing
// paged across the switch from one to the other goes on where it was.

func encodeCursor(f records.Filter, p pos) string { return records.EncodeCursor(f, p.seq, p.ev) }

func decodeCursor(c string, f records.Filter) (pos, bool, error) {
	f.Cursor = c
	seq, ev, ok, err := records.DecodeCursor(f)
	return pos{seq, ev}, ok, err
}
