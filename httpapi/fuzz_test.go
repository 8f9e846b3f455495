package httpapi_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Fuzz modes (bits of the mode argument).
const (
	fuzzWithdraw  = 1 << iota // post to withdraw instead of deposit
	fuzzSign                  // send the fuzzed sign header instead of the right one
	fuzzJSON                  // Content-Type application/json
	fuzzNoAppKey              // leave the appKey header out
	fuzzCharsetCT             // Content-Type with a charset parameter
)

// validHeaderValue reports whether net/http will send v as a header value.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// FuzzMerchantRequest posts arbitrary bodies, correctly signed or with an
// arbitrary sign header, to the create calls of one gateway and checks that
// the gateway never fails (5xx), always answers in the envelope, and writes
// nothing when it refuses.
func FuzzMerchantRequest(f *testing.F) {
	e := newEnv(f)
	s := e.newStack(stackOptions{})
	banks := s.seedBanks()
	st := s.newSite(map[string]any{"negativeLimit": -100_000}, 5_000_000)

	dep := depositForm("ZAINCASH", "fz-1", "fu1", 25000).Encode()
	wd := withdrawForm("ZAINCASH", "fz-2", "fu2", 25000, "07712345678").Encode()
	seeds := []struct {
		body, sign string
		mode       uint8
	}{
		{dep, "", 0},
		{wd, "", fuzzWithdraw},
		{depositForm(banks["NBI"].ID, "fz-3", "fu3", 1000).Encode() + "&lang=ar&senderName=%D8%B9%D9%84%D9%8A", "", fuzzCharsetCT},
		{withdrawForm("NBI", "fz-4", "fu4", 1000, iraqiIBAN("NBIQ", "850123456789012")).Encode(), "", fuzzWithdraw},
		{withdrawForm("GAMEWALLET", "fz-5", "fu5", 1000, "player.one").Encode(), "", fuzzWithdraw},
		{dep, "", 0}, // a repeat
		{strings.Replace(dep, "25000", "26000", 1), "", 0},                   // processId conflict
		{strings.Replace(wd, "fz-2", "fz-1", 1), "", fuzzWithdraw},           // processId of a deposit
		{strings.Replace(dep, "fz-1", "fz-6", 1), "", 0},                     // alreadyPending
		{dep[:len(dep)/2], "", 0},                                            // truncated
		{"amount=25000&bankId=ZAIN%4", "", 0},                                // truncated escape
		{"%%%%%zz%%", "", 0},                                                 // percent garbage
		{"amount=%FF%FE&name=%00%01", "", fuzzWithdraw},                      // invalid bytes
		{strings.Replace(dep, "25000", "99999999999999999999999", 1), "", 0}, // huge number
		{strings.Replace(dep, "25000", "9223372036854775807", 1), "", 0},
		{strings.Replace(wd, "25000", "-25000", 1), "", fuzzWithdraw},
		{strings.Replace(dep, "25000", "1e3", 1), "", 0},
		{strings.Replace(dep, "25000", "25000.00", 1), "", 0},
		{strings.Replace(dep, "Ali+Kareem", "%D8%B9%D9%84%D9%8A+%DA%A9%D9%88%D8%B1%D8%AF+%F0%9F%98%80", 1), "", 0},
		{"bankId=ZAINCASH&processId=fz-u&amount=5000&userId=fu9&userName=u&name=علي كريم", "", 0}, // raw UTF-8
		{dep + "&amount=25000", "", 0},                                                            // duplicate key
		{dep + "&" + dep, "", 0},                                                                  // everything twice
		{"", "", 0},                                                                               // empty
		{"", "", fuzzWithdraw},                                                                    //
		{"&&&===&&", "", 0},                                                                       //
		{"amount=25000;bankId=ZAINCASH", "", 0},                                                   // semicolons
		{dep, "not-a-signature", fuzzSign},                                                        // wrong sign
		{dep, "", fuzzSign},                                                                       // no sign
		{dep, sign(st.Secret, []byte(wd)), fuzzSign | fuzzWithdraw},                               // sign of another body
		{`{"bankId":"ZAINCASH","processId":"fz-j","amount":25000}`, "", fuzzJSON},
		{dep, "", fuzzNoAppKey},
		{strings.Replace(dep, "Ali+Kareem", strings.Repeat("n", 300), 1), "", 0},
		{dep + "&lang=" + strings.Repeat("x", 16<<10), "", 0}, // too large
		{strings.Replace(wd, "25000", "1000000", 1), "", fuzzWithdraw},
	}
	for _, sd := range seeds {
		f.Add(sd.body, sd.sign, sd.mode)
	}

	// lastSeq is the stream sequence of the site's newest event seen.
	items := s.history(f, st.ID)
	lastSeq := items[len(items)-1].Seq
	since := func(t *testing.T) []historyItem {
		r := s.opsT(t, "GET", "/ops/v1/sites/"+st.ID+"/events?limit=1000&cursor="+itoa(int64(lastSeq+1)), nil)
		requireOK(t, r)
		var p page[historyItem]
		r.decode(t, &p)
		return p.Items
	}

	f.Fuzz(func(t *testing.T, body, signHdr string, mode uint8) {
		path := pathDeposit
		if mode&fuzzWithdraw != 0 {
			path = pathWithdraw
		}
		hdr := map[string]string{"appKey": st.AppKey, "Content-Type": "application/x-www-form-urlencoded",
			"sign": sign(st.Secret, []byte(body))}
		if mode&fuzzSign != 0 {
			if !validHeaderValue(signHdr) {
				t.Skip("not a sendable header value")
			}
			hdr["sign"] = signHdr
		}
		if mode&fuzzJSON != 0 {
			hdr["Content-Type"] = "application/json"
		}
		if mode&fuzzCharsetCT != 0 {
			hdr["Content-Type"] = "application/x-www-form-urlencoded; charset=utf-8"
		}
		if mode&fuzzNoAppKey != 0 {
			delete(hdr, "appKey")
		}
		r := s.send(t, "POST", path, body, hdr)
		require.Less(t, r.HTTP, 500, "server error: %s", r.Raw)
		checkEnvelope(t, r)
		written := since(t)
		if r.HTTP != 200 {
			require.NotEmpty(t, r.Code, "error without code: %s", r.Raw)
			require.NotEmpty(t, r.Message)
			require.Equal(t, "null", string(r.Data), "data on error: %s", r.Raw)
			require.Empty(t, written, "HTTP %d %s wrote events", r.HTTP, r.Code)
			return
		}
		require.Empty(t, r.Code)
		var d record
		require.NoError(t, json.Unmarshal(r.Data, &d))
		require.NotEmpty(t, d.TransactionID)
		require.Equal(t, responseHash(st.Secret, d.TransactionID, d.BankID, d.Amount), d.Hash)
		form, err := url.ParseQuery(body)
		require.NoError(t, err, "a form the gateway accepted must parse")
		if !d.AlreadyPending {
			require.Equal(t, form.Get("processId"), d.ProcessID)
		}
		wantType := "deposit"
		if path == pathWithdraw {
			wantType = "withdrawal"
		}
		require.Equal(t, wantType, d.Type)
		for _, it := range written {
			require.Equal(t, "merchant", it.Actor)
			if it.Seq > lastSeq {
				lastSeq = it.Seq
			}
		}
	})
}
