package httpapi

// A merchant call's credentials: the appKey, the IP allowlist and the
// signature over the exact bytes received, checked before anything in the
// call is parsed (docs/merchant-api.md "Authentication").

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/records"
)

type ctxBody struct{}

// ctxSigner holds the secret a merchant call was signed with: the call's
// answer is hashed with it (answerFor).
type ctxSigner struct{}

// merchantAuth authenticates a merchant call before anything in it is
// parsed: body size, appKey, IP allowlist, then the signature over the exact
// bytes received, then the site's rate limit.
func (s *Server) merchantAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := info(r)
		if !s.merchantPath(r) {
			// No credentials make an unknown path known: say so first.
			ri.unmatched = true
			s.writeErr(w, r, &apiError{status: 404, code: "not_found", message: "no such endpoint"})
			return
		}
		body, err := readBody(w, r)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		signed := body
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			signed = []byte(r.URL.RawQuery)
		}
		siteID, cfg, signer, err := s.merchantCredentials(r, signed)
		ri.siteID = siteID
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if ok, wait := s.limiter.allow("site:"+string(siteID), cfg.RateLimit); !ok {
			s.writeErr(w, r, &apiError{status: 429, code: "rate_limited", retryAfter: wait,
				message: "the site's rate limit of " + strconv.FormatInt(cfg.RateLimit, 10) + " requests per second is exceeded"})
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), ctxBody{}, body), ctxSigner{}, signer)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// merchantCredentials checks a merchant call's credentials against the
// site's settings as they are now: the appKey, the caller's address
// against the IP allowlist, then the signature over signed (the previous
// secret counting while its overlap lasts), and returns the secret the
// signature was made with. The site is returned once the appKey is known,
// refused or not. The callback stream calls it again while it is open, so
// that a stream ends when its credentials stop being accepted
// (docs/callbacks.md).
func (s *Server) merchantCredentials(r *http.Request, signed []byte) (ids.SiteID, *aggregates.Config, string, error) {
	if len(r.Header.Values("appKey")) > 1 {
		// Two identities in one request: taking either would be a guess.
		return "", nil, "", &apiError{status: 401, code: "unknown_app_key", field: "appKey", message: "send one appKey header"}
	}
	appKey := r.Header.Get("appKey")
	if appKey == "" {
		return "", nil, "", &apiError{status: 401, code: "unknown_app_key", field: "appKey", message: "the appKey header is missing"}
	}
	siteID, cfg, ok := s.cfg.Ledger.SiteByAppKey(appKey)
	if !ok && s.cfg.Ledger.CatchUpMiss(r.Context()) == nil {
		// The site may have just been created through another
		// gateway process. Unknown appKeys are also what a flood
		// of bad credentials sends: the catch-up is shared and
		// throttled, so the flood costs no store reads of its own.
		siteID, cfg, ok = s.cfg.Ledger.SiteByAppKey(appKey)
	}
	if !ok {
		return "", nil, "", &apiError{status: 401, code: "unknown_app_key", field: "appKey", message: "appKey is not known"}
	}
	// Computed for every request, so that a trusted proxy's unreadable
	// X-Forwarded-For is refused whatever the site's settings.
	ip, err := s.clientIP(r)
	if err != nil {
		return siteID, nil, "", badForwardedFor(err)
	}
	if len(cfg.IPAllowlist) > 0 && !allowed(cfg.IPAllowlist, ip) {
		return siteID, nil, "", &apiError{status: 403, code: "not_authorized",
			message: "this site accepts requests only from its IP allowlist"}
	}
	signer, problem := s.checkSignature(cfg, r, signed)
	if problem != "" {
		return siteID, nil, "", &apiError{status: 401, code: "invalid_signature", field: "sign", message: problem}
	}
	return siteID, cfg, signer, nil
}

// signRule is what a valid sign header is.
const signRule = "sign must be base64(HMAC-SHA256(secret, S)), S being the exact body of a POST or the exact query of a GET (the bytes after ?)"

// checkSignature returns the secret that made a valid sign header, and
// otherwise what is wrong with it, as far as that can be said without
// weakening it: a header that is missing or is not base64 of 32 bytes, or
// a signature over the request as a common mistake changes it (a trailing
// newline, a leading "?", the path included, parameters sorted). Only
// someone who holds the secret can make a signature that matches such a
// variant, so naming it tells nobody else anything.
func (s *Server) checkSignature(cfg *aggregates.Config, r *http.Request, signed []byte) (signer, problem string) {
	if len(r.Header.Values("sign")) > 1 {
		return "", "send one sign header; " + signRule
	}
	sign := r.Header.Get("sign")
	if sign == "" {
		return "", "the sign header is missing; " + signRule
	}
	got, ok := decodeSign(sign)
	if !ok {
		if len(sign) == 2*sha256.Size && strings.Trim(strings.ToLower(sign), "0123456789abcdef") == "" {
			return "", "sign is a hex digest; send the 32 bytes of the HMAC-SHA256 in base64 instead"
		}
		return "", "sign is not base64 of 32 bytes; " + signRule
	}
	if signer, ok := s.signer(cfg, got, signed); ok {
		return signer, ""
	}
	for _, m := range signMistakes(r, signed) {
		if _, ok := s.signer(cfg, got, m.signed); ok {
			return "", "sign was computed over " + m.what + "; sign the exact bytes sent"
		}
	}
	return "", "sign does not match the request: " + signRule + "; check the secret (rotated?) and that the bytes signed are the bytes sent"
}

// signMistake is the request as a common signing mistake sees it.
type signMistake struct {
	what   string
	signed []byte
}

func signMistakes(r *http.Request, signed []byte) []signMistake {
	var out []signMistake
	add := func(what string, b []byte) {
		if !bytes.Equal(b, signed) {
			out = append(out, signMistake{what, b})
		}
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		q := string(signed)
		add("the query with a leading ?", []byte("?"+q))
		add("the path and the query", []byte(r.URL.Path+"?"+q))
		add("the path", []byte(r.URL.Path))
		if v, err := url.ParseQuery(q); err == nil {
			add("the query with its parameters sorted", []byte(v.Encode()))
		}
		if d, err := url.QueryUnescape(q); err == nil {
			add("the decoded query", []byte(d))
		}
	} else {
		add("the path and the body", append([]byte(r.URL.Path), signed...))
		if v, err := url.ParseQuery(string(signed)); err == nil {
			add("the body with its fields sorted", []byte(v.Encode()))
		}
	}
	add("the "+signedName(r)+" with a trailing newline", append(append([]byte{}, signed...), '\n'))
	if t := bytes.TrimRight(signed, "\r\n"); len(t) < len(signed) {
		add("the "+signedName(r)+" without its trailing newline", t)
	}
	if len(signed) > 0 {
		add("an empty string", nil)
	}
	return out
}

func signedName(r *http.Request) string {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return "query"
	}
	return "body"
}

// signer compares got with the HMAC of signed under the site's secret,
// and under the previous one while it is still valid, and returns the
// secret it matched.
func (s *Server) signer(cfg *aggregates.Config, got, signed []byte) (string, bool) {
	current := hmac.Equal(got, mac(cfg.Secret, signed))
	if cfg.PrevSecret != "" && s.cfg.Ledger.Now().UnixMilli() < cfg.PrevSecretUntil {
		// Both are always compared so the answer time does not tell
		// which secret matched.
		if hmac.Equal(got, mac(cfg.PrevSecret, signed)) && !current {
			return cfg.PrevSecret, true
		}
	}
	return cfg.Secret, current
}

// signerOf returns the secret a merchant call was signed with ("" for a
// call that is not a merchant's).
func signerOf(r *http.Request) string {
	s, _ := r.Context().Value(ctxSigner{}).(string)
	return s
}

// answerFor returns rec as the answer to r: hashed with the secret r was
// signed with. During a rotation's overlap a merchant still holding the
// previous secret can verify the answers to what it signs with it, as it
// could before the rotation (docs/merchant-api.md "Response hash"); and a
// rotation between the call's check and the record's read does not
// change the secret of its answer.
func answerFor(r *http.Request, rec records.Record) records.Record {
	if signer := signerOf(r); signer != "" {
		return rec.HashedWith(signer)
	}
	return rec
}

func mac(secret string, data []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(data)
	return m.Sum(nil)
}

// decodeSign accepts standard base64 with or without padding (and the URL
// alphabet, which some HTTP clients produce).
func decodeSign(s string) ([]byte, bool) {
	if s == "" || len(s) > 128 {
		return nil, false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == sha256.Size {
			return b, true
		}
	}
	return nil, false
}
