package records

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/events"
)

func TestResponseHash(t *testing.T) {
	// Computed independently: HMAC-SHA256("demo-secret", "demo-1" + "97b48bfb7fb34aedd95fd145" + "25000").
	assert.Equal(t, "KMhoqhmVN6ZpZ5VyiaQ0cJ/ntMMtxIFsu6hTnRjHiGo=", ResponseHash("demo-secret", "demo-1", "97b48bfb7fb34aedd95fd145", 25000))
	assert.NotEqual(t, ResponseHash("demo-secret", "demo-1", "97b48bfb7fb34aedd95fd145", 25000),
		ResponseHash("demo-secret", "demo-1", "97b48bfb7fb34aedd95fd145", 24000))
}

func TestBuildRecordShapes(t *testing.T) {
	dep := events.Event{Time: 1_700_000_000_000, Payload: &events.DepositRequested{TxID: "s1-1", ProcessID: "p1", BankID: "b1",
		BankCode: "ZC", BankName: "ZainCash", IdentifierKind: "PHONE", Amount: 25000, UserID: "u1", UserName: "ali",
		Name: "Ali", ConvertedName: "ali", Lang: "en", AccountName: "Store", AccountNumber: "07801234567",
		ExpiresAt: 1_700_001_800_000, HostedToken: "tok"}}
	tx := aggregates.Tx{Kind: aggregates.KindDeposit, Status: aggregates.StatusApproved, Amount: 24000,
		Requested: 25000, UpdatedAt: 1_700_000_100_000}
	r, ok := build(tx, "", dep, "s1-1", "sec", "https://pay.example")
	require.True(t, ok)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, "b1", m["bankId"])
	assert.Equal(t, "ZC", m["bank"])
	assert.EqualValues(t, 24000, m["amount"])
	assert.EqualValues(t, 25000, m["requestedAmount"])
	assert.Equal(t, "approved", m["status"])
	assert.Nil(t, m["statusReason"])
	assert.Equal(t, "https://pay.example/pay/s1-1?t=tok", m["url"])
	assert.Equal(t, "2023-11-14T22:13:20.000Z", m["createdAt"])
	assert.Equal(t, "2023-11-14T22:43:20.000Z", m["expiresAt"])
	assert.Equal(t, ResponseHash("sec", "s1-1", "b1", 24000), m["hash"])
	for _, k := range []string{"bankName", "bankAccountName", "bankAccountIban", "alreadyPending", "senderName"} {
		assert.Contains(t, m, k)
	}
	assert.NotContains(t, m, "iban")

	wd := events.Event{Time: 1, Payload: &events.WithdrawalRequested{TxID: "s1-2", BankID: "b1", BankCode: "ZC", Amount: 5000,
		AccountName: "Ali", IBAN: "07701234567"}}
	r, ok = build(aggregates.Tx{Kind: aggregates.KindWithdrawal, Status: aggregates.StatusRejected, Amount: 5000}, "closed", wd, "s1-2", "sec", "")
	require.True(t, ok)
	b, _ = json.Marshal(OpsRecord{SiteID: "s1", Record: r})
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, "s1", m["siteId"])
	assert.Equal(t, "closed", m["statusReason"])
	assert.Equal(t, "07701234567", m["iban"])
	assert.Equal(t, "withdrawal", m["type"])

	// A creation event of another transaction or kind is refused.
	_, ok = build(tx, "", wd, "s1-1", "sec", "")
	assert.False(t, ok)
	_, ok = build(tx, "", dep, "s1-9", "sec", "")
	assert.False(t, ok)
}

func TestCursor(t *testing.T) {
	f := Filter{SiteID: "s1", Status: aggregates.StatusPending, Name: "ali", From: time.Unix(1700000000, 0)}
	for _, o := range []Order{Oldest, Newest} {
		f.Order = o
		c := encodeCursor(f, pos{42, 3})
		p, started, err := decodeCursor(c, f)
		require.NoError(t, err)
		assert.True(t, started)
		assert.Equal(t, pos{42, 3}, p)
		// A cursor of the other order would skip or repeat transactions;
		// one of other filters would page through another listing.
		other := f
		other.Order = 1 - o
		_, _, err = decodeCursor(c, other)
		assert.ErrorIs(t, err, ErrCursorFilters)
		for _, change := range []func(*Filter){
			func(g *Filter) { g.SiteID = "s2" },
			func(g *Filter) { g.Status = aggregates.StatusApproved },
			func(g *Filter) { g.Name = "alі" },
			func(g *Filter) { g.From = time.Time{} },
			func(g *Filter) { g.MaxAmount = 1 },
		} {
			g := f
			change(&g)
			_, _, err = decodeCursor(c, g)
			assert.ErrorIs(t, err, ErrCursorFilters, "%+v", g)
		}
		// The page size is no filter.
		g := f
		g.Limit = 7
		_, _, err = decodeCursor(c, g)
		assert.NoError(t, err)
	}
	oldest := Filter{Order: Oldest}
	_, started, err := decodeCursor("", oldest)
	require.NoError(t, err)
	assert.False(t, started)
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	// A cursor of the version before (no fingerprint) is still taken, its
	// order checked.
	p, _, err := decodeCursor(enc("c2:0:12:1"), Filter{Order: Oldest, SiteID: "s9"})
	require.NoError(t, err)
	assert.Equal(t, pos{12, 1}, p)
	_, _, err = decodeCursor(enc("c2:0:12:1"), Filter{Order: Newest})
	assert.ErrorIs(t, err, ErrCursorFilters)
	for _, bad := range []string{"!!", "czE", enc("s1\x001"), enc("c2:0:0:0"), enc("c2:0:1"), enc("c2:0:1:2:3"),
		enc("c1:0:1:0"), enc("c2:0:-1:0"), enc("c2:0:1:70000"), enc("c2:0:x:0"), enc("c2:0:18446744073709551616:0"),
		enc("c3:0:12:0"), enc("c3:0:00000000:0:0"),
		// Other spellings of a position this server would issue otherwise.
		enc("c2:0:012:0"), enc("c2:0:12:00"), enc("c2:0:+12:0"), encodeCursor(oldest, pos{12, 0}) + "A",
		enc(fmt.Sprintf("c3:0:%08x:012:0", oldest.fingerprint()))} {
		_, _, err := decodeCursor(bad, oldest)
		assert.ErrorIs(t, err, ErrBadCursor, bad)
	}
}

func TestGroup(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 25000: "25,000", 1234567: "1,234,567",
		-1: "-1", -1000000: "-1,000,000", -9223372036854775808: "-9,223,372,036,854,775,808"} {
		assert.Equal(t, want, Group(n))
	}
}

// HashedWith makes the hash with the secret given: the one a merchant's
// request was signed with, whichever the record was read with.
func TestRecord_HashedWith(t *testing.T) {
	r := Record{Common: Common{TransactionID: "demo-1", BankID: "97b48bfb7fb34aedd95fd145", Amount: 25000}}
	for _, secret := range []string{"demo-secret", "new-secret", "demo-secret"} {
		r = r.HashedWith(secret)
		assert.Equal(t, ResponseHash(secret, "demo-1", "97b48bfb7fb34aedd95fd145", 25000), r.Hash, secret)
	}
	assert.Equal(t, "KMhoqhmVN6ZpZ5VyiaQ0cJ/ntMMtxIFsu6hTnRjHiGo=", r.Hash)
}
