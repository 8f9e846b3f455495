package main

import (
	"encoding/json"
	"strings"
)

// decodeAnswer reads a 200 answer into a txEnvelope, exactly as
// json.Unmarshal would. The load test shares the two cores with the server
// it measures, and encoding/json's reflection took about 6 µs an answer:
// CPU the gateway's runs lost that refgw's, whose answers are not read,
// never did. So the shape the gateway writes (one flat record in one flat
// envelope, strings without escapes) is read by a scanner; anything else (an
// escape or a byte outside ASCII in a string, a nested value, a key that
// differs from a field's name only in case, which encoding/json matches too,
// a repeated "data") goes to json.Unmarshal.
func decodeAnswer(raw []byte) (txEnvelope, error) {
	s := answerScanner{b: raw}
	if env, ok := s.envelope(); ok {
		return env, nil
	}
	var env txEnvelope
	err := json.Unmarshal(raw, &env)
	return env, err
}

// answerScanner reads b from i; every method reports false for input it
// does not read the way json.Unmarshal would.
type answerScanner struct {
	b []byte
	i int
}

var envelopeKeys = []string{"data", "code", "message"}

var recordKeys = []string{"transactionId", "bankId", "amount", "processId", "hash", "alreadyPending"}

func (s *answerScanner) envelope() (txEnvelope, bool) {
	var env txEnvelope
	seenData := false
	ok := s.object(envelopeKeys, func(key []byte) bool {
		switch string(key) {
		case "data":
			if seenData {
				return false // json.Unmarshal merges a second one into the first
			}
			seenData = true
			if s.literal("null") {
				return true
			}
			env.Data = &txData{}
			return s.record(env.Data)
		case "code":
			return s.stringInto(&env.Code)
		case "message":
			return s.stringInto(&env.Message)
		}
		return s.scalar()
	})
	s.space()
	return env, ok && s.i == len(s.b)
}

func (s *answerScanner) record(d *txData) bool {
	return s.object(recordKeys, func(key []byte) bool {
		switch string(key) {
		case "transactionId":
			return s.stringInto(&d.TransactionID)
		case "bankId":
			return s.stringInto(&d.BankID)
		case "processId":
			return s.stringInto(&d.ProcessID)
		case "hash":
			return s.stringInto(&d.Hash)
		case "amount":
			start := s.i
			if !s.scalar() {
				return false
			}
			d.Amount = json.RawMessage(s.b[start:s.i:s.i])
			return true
		case "alreadyPending":
			switch {
			case s.literal("true"):
				d.AlreadyPending = true
			case s.literal("false"):
				d.AlreadyPending = false
			default:
				return s.literal("null")
			}
			return true
		}
		return s.scalar()
	})
}

// object reads an object whose values value reads, given each key; a key
// that equals one of fields only when case is ignored is refused (keys are
// ASCII here, so only a key of the same length can).
func (s *answerScanner) object(fields []string, value func(key []byte) bool) bool {
	s.space()
	if !s.byte('{') {
		return false
	}
	s.space()
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.str()
		if !ok {
			return false
		}
		for _, f := range fields {
			if len(key) == len(f) && string(key) != f && strings.EqualFold(string(key), f) {
				return false
			}
		}
		s.space()
		if !s.byte(':') {
			return false
		}
		s.space()
		if !value(key) {
			return false
		}
		s.space()
		if s.byte('}') {
			return true
		}
		if !s.byte(',') {
			return false
		}
		s.space()
	}
}

// stringInto reads a string into dst, or a null, which leaves dst as it is.
func (s *answerScanner) stringInto(dst *string) bool {
	if s.literal("null") {
		return true
	}
	v, ok := s.str()
	if ok {
		*dst = string(v)
	}
	return ok
}

// str reads a string of printable ASCII without escapes; it returns its
// bytes in b.
func (s *answerScanner) str() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// scalar reads past a string, a number, true, false or null.
func (s *answerScanner) scalar() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return s.literal("true") || s.literal("false") || s.literal("null")
}

// number reads a number of JSON's grammar.
func (s *answerScanner) number() bool {
	s.byte('-')
	switch {
	case s.byte('0'):
	case s.digits() == 0:
		return false
	}
	if s.byte('.') && s.digits() == 0 {
		return false
	}
	if s.byte('e') || s.byte('E') {
		if !s.byte('+') {
			s.byte('-')
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *answerScanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *answerScanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *answerScanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *answerScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}
