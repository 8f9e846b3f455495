package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
)

// sign returns base64(HMAC-SHA256(secret, payload)), the value of the `sign`
// header. The payload is the exact body bytes for POST and the raw query
// string for GET (docs/merchant-api.md "Authentication"), so callers must sign the very string they send.
func sign(secret, payload string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// expectedHash computes the raw response hash of docs/merchant-api.md "Response hash":
// HMAC-SHA256(secret, transactionId + bankId + amount) with the amount written
// as a decimal integer (CONTRACT: "25000", never "25000.00").
func expectedHash(secret, txID, bankID string, amount int64) [32]byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(txID))
	m.Write([]byte(bankID))
	m.Write([]byte(strconv.FormatInt(amount, 10)))
	var out [32]byte
	copy(out[:], m.Sum(nil))
	return out
}

// decodeHash turns the base64 `data.hash` of a response into its 32 raw
// bytes. Keeping 32 bytes instead of the 44-character string keeps a million
// stored results small; ok is false when the text is not a base64 SHA-256.
func decodeHash(s string) (h [32]byte, ok bool) {
	var buf [48]byte
	if len(s) != 44 {
		return h, false
	}
	n, err := base64.StdEncoding.Decode(buf[:], []byte(s))
	if err != nil || n != 32 {
		return h, false
	}
	copy(h[:], buf[:32])
	return h, true
}

// verifyHash reports whether the base64 hash text matches docs/merchant-api.md "Response hash" for the
// given record values. The comparison is constant time only out of habit:
// the load test holds the secret itself.
func verifyHash(secret, txID, bankID string, amount int64, hash string) bool {
	got, ok := decodeHash(hash)
	if !ok {
		return false
	}
	want := expectedHash(secret, txID, bankID, amount)
	return hmac.Equal(got[:], want[:])
}

// randomHex returns n random bytes as lowercase hex. Lowercase hex is used for
// bank codes, tags and tokens because it fits any plausible identifier rule.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on supported platforms; if it does, nothing
		// sensible can be generated, so stop rather than run with weak values.
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}
