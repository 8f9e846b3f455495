package transactions

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/iqdgateway/gateway/records"
)

// Cursors are records.Reader.List's, byte for byte (records/search.go,
// cursorVersion "c3"): a listing paged across the switch from one to the
// other goes on where it was. Package records keeps its encoder
// unexported, hence this copy; it should serve both once exported.
const cursorVersion = "c3"

// cursorV2 is the version before, without the fingerprint: still taken.
const cursorV2 = "c2"

func encodeCursor(f records.Filter, p pos) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d:%08x:%d:%d", cursorVersion, f.Order, fingerprint(f), p.seq, p.ev))
}

// fingerprint hashes the filters (not the order, which the cursor names,
// nor the cursor and the page size), as records.Filter's own.
func fingerprint(f records.Filter) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%q|%d|%d|%q|%q|%q|%d|%d|%q|%q|%d|%d", f.SiteID, f.Kind, f.Status, f.TxID, f.ProcessID, f.UserID,
		f.MinAmount, f.MaxAmount, f.Name, f.Method, unixNanoOrZero(f.From), unixNanoOrZero(f.To))
	return h.Sum32()
}

func unixNanoOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// decodeCursor parses a cursor: records.ErrBadCursor for one not issued
// by a gateway, records.ErrCursorFilters for one of other filters or the
// other order.
func decodeCursor(c string, f records.Filter) (pos, bool, error) {
	if c == "" {
		return pos{}, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return pos{}, false, records.ErrBadCursor
	}
	parts := strings.Split(string(b), ":")
	var order, fp, seqS, evS string
	switch {
	case len(parts) == 5 && parts[0] == cursorVersion:
		order, fp, seqS, evS = parts[1], parts[2], parts[3], parts[4]
	case len(parts) == 4 && parts[0] == cursorV2:
		order, seqS, evS = parts[1], parts[2], parts[3]
	default:
		return pos{}, false, records.ErrBadCursor
	}
	seq, err1 := strconv.ParseUint(seqS, 10, 64)
	ev, err2 := strconv.ParseUint(evS, 10, 16)
	if err1 != nil || err2 != nil || seq == 0 {
		return pos{}, false, records.ErrBadCursor
	}
	p := pos{seq, uint16(ev)}
	spelled := fmt.Sprintf("%s:%s:%d:%d", parts[0], order, p.seq, p.ev)
	if fp != "" {
		spelled = fmt.Sprintf("%s:%s:%s:%d:%d", parts[0], order, fp, p.seq, p.ev)
	}
	if base64.RawURLEncoding.EncodeToString([]byte(spelled)) != c {
		return pos{}, false, records.ErrBadCursor
	}
	if order != strconv.Itoa(int(f.Order)) || parts[0] == cursorVersion && fp != fmt.Sprintf("%08x", fingerprint(f)) {
		return pos{}, false, records.ErrCursorFilters
	}
	return p, true, nil
}
