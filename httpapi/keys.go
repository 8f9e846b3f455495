package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
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
		if string(bytes.TrimSpace(val)) == "null" && f.Type.Kind() == reflect.Pointer {
			hint := ""
			if f.Type.Elem().Kind() == reflect.String {
				hint = `; send "" to remove it, or leave the field out to keep it`
			} else {
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
