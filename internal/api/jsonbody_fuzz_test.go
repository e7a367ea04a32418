package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// jsonDepth is the nesting depth of a valid JSON document (the top-level container counts as 1).
func jsonDepth(b []byte) int {
	depth, most := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return most
}

// FuzzCheckJSON: the body gate never panics; what it accepts is one valid UTF-8 JSON value within
// the depth limit; a valid shallow document with distinct member names is accepted.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{}{}`, `{"a":1,"a":2}`, `[[[]]]`, "{\"s\":\"\xff\"}", `{"s":"\ud800"}`,
		`{"entrypoint_id":"x","params":{"n":[1,2.5,"z",null,true]}}`, `  {"a" : {"b": []}}  `, `{} x`, `"str"`, `12`,
		`{"a":1,"\u0061":2}`, `{"s":"\ud83d\ude00"}`, `{"s":"\ud83d x"}`, `{"s":"\\ud800"}`, `{"k\"":1,"k\u0022":2}`,
		string(bytes.Repeat([]byte("["), 101)) + string(bytes.Repeat([]byte("]"), 101))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if fastCheckJSON(b) {
			if err := explainJSON(b); err != nil {
				t.Fatalf("the fast path accepted %q, which the walk refuses: %v", b, err)
			}
		}
		err := checkJSON(b)
		if err != nil {
			return
		}
		if !json.Valid(b) || !utf8.Valid(b) {
			t.Fatalf("accepted invalid JSON or UTF-8: %q", b)
		}
		if d := jsonDepth(b); d > MaxJSONDepth {
			t.Fatalf("accepted depth %d > %d: %q", d, MaxJSONDepth, b)
		}
		// Re-encoding a decoded value (canonical, duplicate members merged) is accepted too.
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("accepted but does not decode: %v", err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if err := checkJSON(out); err != nil {
			t.Fatalf("refused the canonical form %q of an accepted body: %v", out, err)
		}
	})
}
