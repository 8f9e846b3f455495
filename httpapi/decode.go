package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/iqdgateway/gateway/aggregates"
)

// decodeJSON reads an operator body strictly: JSON only, no unknown fields,
// no key given twice, nothing after the object. An empty body leaves v as it is.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	_, err := decodeJSONBody(w, r, v)
	return err
}

// idempotencyHeader makes an operator write that is not a transition safe
// to retry (README "Retrying operator writes").
const idempotencyHeader = "Idempotency-Key"

// decodeKeyed is decodeJSON for the calls that take an Idempotency-Key: it
// also returns the key ("" when the header is absent) and the SHA-256 (hex)
// of the exact body bytes, which a repeat of the key must match. A header
// that is present must hold one valid key.
func decodeKeyed(w http.ResponseWriter, r *http.Request, v any) (key, hash string, err error) {
	vals := r.Header.Values(idempotencyHeader)
	switch {
	case len(vals) > 1:
		return "", "", errBad("invalid_request", idempotencyHeader, "send one Idempotency-Key")
	case len(vals) == 1:
		key = vals[0]
		if err := aggregates.CheckIdempotencyKey(key); err != nil {
			return "", "", err
		}
	}
	body, err := decodeJSONBody(w, r, v)
	if err != nil || key == "" {
		return "", "", err
	}
	sum := sha256.Sum256(body)
	return key, hex.EncodeToString(sum[:]), nil
}

// decodeJSONBody is decodeJSON returning the body as it was read.
func decodeJSONBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	body, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	return body, unmarshalStrict(r, body, v)
}

// unmarshalStrict decodes an operator body read already (see decodeJSON).
func unmarshalStrict(r *http.Request, body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		// No body. A JSON client with nothing to send often sends null
		// (json.Marshal(nil), JSON.stringify(null)).
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errBad("invalid_request", "", "the body must be application/json")
		}
	}
	if !utf8.Valid(body) {
		// encoding/json would read each bad byte as U+FFFD, and a name
		// or reason would be stored other than it was sent.
		return errBad("invalid_request", "", "the body is not valid UTF-8")
	}
	if loneSurrogate(body) {
		// encoding/json would read it as U+FFFD, as it would a bad byte.
		return errBad("invalid_request", "", `the body holds a \u escape of half a UTF-16 surrogate pair, which is no character`)
	}
	if trimmed[0] != '{' {
		// An array or a scalar would decode to a type error without a
		// field, or to nothing at all.
		return errBad("invalid_request", "", "the body must hold one JSON object")
	}
	if k := duplicateKey(body); k != "" {
		return errBad("invalid_request", k, k+" is given more than once")
	}
	if err := checkKeys(body, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errBad("invalid_request", te.Field, fmt.Sprintf("%s must be %s", te.Field, typeWords(te.Field, te.Type)))
		}
		// encoding/json has no typed error for DisallowUnknownFields; its
		// message is `json: unknown field "name"`. Name the field.
		if _, q, ok := strings.Cut(err.Error(), "unknown field "); ok {
			if name, uerr := strconv.Unquote(q); uerr == nil {
				return errBad("invalid_request", name, name+" is not a field of this call")
			}
		}
		return errBad("invalid_request", "", "the body is not valid JSON for this call: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return errBad("invalid_request", "", "the body must hold one JSON object")
	}
	return nil
}

func queryLimit(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 1000 {
		return 0, errBad("invalid_request", "limit", "limit must be 1 to 1000")
	}
	return n, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefBool(p *bool) bool { return p != nil && *p }

// readBody reads at most MaxBody bytes of the body.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return readBodyUpTo(w, r, MaxBody)
}

// readBodyUpTo is readBody with another limit, in bytes (a multiple of
// 1 KiB).
func readBodyUpTo(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		// The body would be read (and its signature checked) as the
		// encoded bytes, and refused for what they look like.
		return nil, errBad("invalid_request", "Content-Encoding", fmt.Sprintf("Content-Encoding %q is not accepted; send the body as it is", ce))
	}
	tooLarge := &apiError{status: 413, code: "body_too_large", message: fmt.Sprintf("the request body is over %d KiB", limit>>10)}
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		return nil, errBad("invalid_request", "", "the request body could not be read")
	}
	return b, nil
}
