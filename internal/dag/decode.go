package dag

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// walker reads a decoded JSON value (numbers as json.Number) into the spec's types, collecting an
// issue for every member of the wrong type, missing or unknown. A value it could not read is left
// zero, so positions (task i, depends_on j) keep their index for the paths of later checks.
type walker struct {
	issues []Issue
}

func (w *walker) add(path, code, format string, args ...any) {
	w.issues = append(w.issues, Issue{Path: path, Code: code, Message: fmt.Sprintf(format, args...)})
}

// object returns v as an object, reporting it when it is not one and reporting its members that
// are not in allowed.
func (w *walker) object(v any, path string, allowed ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		w.add(path, CodeSchemaMismatch, "invalid type: expected object, got %s", typeName(v))
		return nil, false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !contains(allowed, k) {
			w.add(child(path, k), CodeUnknownField, "unknown field %q", k)
		}
	}
	return m, true
}

// str reads m[key] as a string; a missing required member is reported.
func (w *walker) str(m map[string]any, key, path string, required bool) string {
	v, ok := m[key]
	if !ok {
		if required {
			w.add(child(path, key), CodeMissingField, "%s is required", key)
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		w.add(child(path, key), CodeSchemaMismatch, "invalid type: expected string, got %s", typeName(v))
	}
	return s
}

// strings reads m[key] as an array of strings of at most max entries; an entry of another type is
// reported and read as "".
func (w *walker) strings(m map[string]any, key, path string, max int) []string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	p := child(path, key)
	list, ok := v.([]any)
	if !ok {
		w.add(p, CodeSchemaMismatch, "invalid type: expected array, got %s", typeName(v))
		return nil
	}
	if len(list) > max {
		w.add(p, CodeTooMany, "at most %d entries, got %d", max, len(list))
		return nil
	}
	out := make([]string, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			w.add(index(p, i), CodeSchemaMismatch, "invalid type: expected string, got %s", typeName(x))
		}
		out[i] = s
	}
	return out
}

// boolean reads m[key] as a boolean (false when absent).
func (w *walker) boolean(m map[string]any, key, path string) bool {
	v, ok := m[key]
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		w.add(child(path, key), CodeSchemaMismatch, "invalid type: expected boolean, got %s", typeName(v))
	}
	return b
}

// number reads m[key] as a number within [min, max]; integer requires a whole number. ok is false
// when it is absent or wrong (wrong is reported).
func (w *walker) number(m map[string]any, key, path string, min, max float64, integer bool) (float64, bool) {
	v, present := m[key]
	if !present {
		return 0, false
	}
	p := child(path, key)
	n, isNum := v.(json.Number)
	f, err := n.Float64()
	if !isNum || err != nil {
		w.add(p, CodeSchemaMismatch, "invalid type: expected number, got %s", typeName(v))
		return 0, false
	}
	if integer && f != math.Trunc(f) {
		w.add(p, CodeSchemaMismatch, "invalid type: expected integer, got %s", n)
		return 0, false
	}
	if f < min || f > max {
		w.add(p, CodeInvalidValue, "must be between %s and %s, got %s", fmtNum(min), fmtNum(max), n)
		return 0, false
	}
	return f, true
}

// raw re-encodes a decoded value (json.Number keeps numbers as written).
func raw(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil // decoded JSON always encodes
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// decodeValue decodes one JSON document keeping numbers as json.Number.
func decodeValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the JSON document")
	}
	return v, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// child is path.key, or path["key"] when key is not a plain name.
func child(path, key string) string {
	for _, c := range key {
		if c == '-' || c > 0x7f || !isNameByte(byte(c)) {
			return path + "[" + strconv.Quote(key) + "]"
		}
	}
	if key == "" {
		return path + `[""]`
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sortIssues orders issues by path, then message: the order a report lists them in.
func sortIssues(issues []Issue) []Issue {
	sort.SliceStable(issues, func(i, j int) bool {
		if issues[i].Path != issues[j].Path {
			return issues[i].Path < issues[j].Path
		}
		return issues[i].Message < issues[j].Message
	})
	return issues
}
