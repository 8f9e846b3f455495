package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// checkKeys holds an operator body to the field names of v exactly:
// encoding/json matches a key to a field without regard to case
// ("ratelimit" would set rateLimit), so each key of each object is
// checked against the JSON names of the struct it decodes into, nested
// objects and arrays of objects included. A null is refused too, where
// the field is a pointer that null would leave unchanged (the body would
// look like it removes something and would not).
func checkKeys(body []byte, v any) error {
	return checkObject(json.RawMessage(body), reflect.TypeOf(v), "")
}

func checkObject(raw json.RawMessage, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil // the decoder names the type error
		}
		for i, it := range items {
			if err := checkObject(it, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Struct:
	default:
		return nil
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	fields := jsonFields(t)
	for k, val := range obj {
		name := k
		if path != "" {
			name = path + "." + k
		}
		f, ok := fields[k]
		if !ok {
			msg := name + " is not a field of this call"
			for real := range fields {
				if strings.EqualFold(real, k) {
					msg += "; the field is " + real + " (names are matched exactly)"
				}
			}
			return errBad("invalid_request", name, msg)
		}
		if string(bytes.TrimSpace(val)) == "null" && f.Type != rawMessage && f.Type.Kind() != reflect.Interface {
			// encoding/json leaves a field at what it was for a null:
			// taken, a null would read as false, 0 or "" unsaid.
			hint := "; give a value, or leave the field out"
			switch {
			case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.String:
				hint = `; send "" to remove it, or leave the field out to keep it`
			case f.Type.Kind() == reflect.Pointer:
				hint = "; leave the field out to keep it"
			}
			return errBad("invalid_request", name, name+" cannot be null"+hint)
		}
		if err := checkObject(val, f.Type, name); err != nil {
			return err
		}
	}
	return nil
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// jsonFields are a struct's fields by JSON name, embedded structs' too.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && tag == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, shadowed := out[k]; !shadowed {
						out[k] = v
					}
				}
				continue
			}
		}
		if tag == "" {
			tag = f.Name
		}
		out[tag] = f
	}
	return out
}

// typeWords says what a value of t is, as a person reads it.
func typeWords(field string, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if strings.Contains(strings.ToLower(field), "amount") || strings.Contains(strings.ToLower(field), "limit") && field != "rateLimit" {
			return "an integer number of IQD (no decimals, no quotes)"
		}
		return "an integer (no decimals, no quotes)"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}

// duplicateKey names the first key given twice in one object of body, at
// any depth, by its path as checkKeys names fields (accounts[0].name), or
// returns "". encoding/json keeps the last of two values silently, so
// {"amount":1000,"amount":25000} would approve 25,000 and a repeated
// ipAllowlist could empty it; the merchant API refuses a field given twice
// for the same reason (docs/operator-api.md "Requests and responses"). A
// body that is not valid JSON returns "" where it breaks: the decoder
// names that.
func duplicateKey(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	// keys holds the keys of the open objects, each frame's from its
	// start.
	var keys []string
	var stack []keyFrame
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			f := &stack[n-1]
			k, ok := tok.(string)
			if !ok { // the object's end
				keys, stack = keys[:f.start], stack[:n-1]
				valueDone()
				continue
			}
			if f.set == nil && len(keys)-f.start >= setAfter {
				f.set = make(map[string]struct{}, 2*setAfter)
				for _, k := range keys[f.start:] {
					f.set[k] = struct{}{}
				}
			}
			var seen bool
			if f.set != nil {
				_, seen = f.set[k]
				f.set[k] = struct{}{}
			} else {
				seen = slices.Contains(keys[f.start:], k)
			}
			if seen {
				return keyPath(stack, keys, k)
			}
			keys = append(keys, k)
			f.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, keyFrame{object: true, wantKey: true, start: len(keys)})
		case json.Delim('['):
			stack = append(stack, keyFrame{start: len(keys)})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// keyFrame is an object or array open in duplicateKey's walk.
type keyFrame struct {
	object bool
	// wantKey: the object's next token is a key or its end.
	wantKey bool
	// start is where the frame's keys begin in the walk's keys.
	start int
	// index is an array's next element.
	index int
	// set holds the keys of an object with more than setAfter of them,
	// so that a body of many keys costs linear time, not quadratic.
	set map[string]struct{}
}

// setAfter is how many keys of one object are compared one by one before
// they go into a set.
const setAfter = 16

// keyPath is the path of key k of the innermost open object.
func keyPath(stack []keyFrame, keys []string, k string) string {
	var b strings.Builder
	for i, f := range stack[:len(stack)-1] {
		if !f.object {
			fmt.Fprintf(&b, "[%d]", f.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(keys[stack[i+1].start-1])
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(k)
	return b.String()
}

// loneSurrogate reports whether a string of body has a \u escape of a
// UTF-16 surrogate (D800 to DFFF) that is not the high half of a pair
// followed at once by its low half. It reads only escapes inside strings;
// whether the rest is valid JSON is the decoder's to say.
func loneSurrogate(body []byte) bool {
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			if i+1 < len(body) && body[i+1] != 'u' {
				i++ // an escape of one character: \" and \\ end nothing
				continue
			}
			r, ok := escapedUnit(body, i)
			if !ok || r < 0xd800 || r > 0xdfff {
				continue
			}
			if r >= 0xdc00 { // a low half with no high half before it
				return true
			}
			low, ok := escapedUnit(body, i+6)
			if !ok || low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 11
		}
	}
	return false
}

// escapedUnit reads the \uXXXX escape at body[i:], if there is one.
func escapedUnit(body []byte, i int) (rune, bool) {
	if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
	return rune(v), err == nil
}
