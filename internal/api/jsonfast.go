package api

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// fastCheckJSON reports whether b certainly passes checkJSON: valid UTF-8, one valid JSON value
// (json.Valid, which allocates nothing), then one pass over its bytes for the rules json.Valid
// does not check: nesting depth, duplicate member names, escaped lone surrogates. It may answer
// false for a body that passes (a member name with escapes it cannot decode); never true for one
// that does not.
func fastCheckJSON(b []byte) bool {
	if !utf8.Valid(b) || !json.Valid(b) {
		return false
	}
	var objects []memberNames // the open objects' member names; nil entries for open arrays
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			if len(objects) >= MaxJSONDepth {
				return false
			}
			objects = append(objects, memberNames{object: b[i] == '{'})
		case '}', ']':
			objects = objects[:len(objects)-1]
		case '"':
			end, escaped := stringEnd(b, i)
			if escaped && loneSurrogate(b[i+1:end]) {
				return false
			}
			if isMemberName(b, end) && !objects[len(objects)-1].add(b[i:end+1], escaped) {
				return false
			}
			i = end
		}
	}
	return true
}

// memberNames are the member names of one open object (or, object false, an open array).
type memberNames struct {
	object bool
	names  [][]byte
	set    map[string]struct{} // once names grows past smallObject
}

// smallObject is how many member names an object compares one by one before it keeps a set.
const smallObject = 16

// add records the member name whose quoted token is tok (escaped: it holds escapes), and reports
// false when the object already has it, or when a name with escapes does not decode.
func (m *memberNames) add(tok []byte, escaped bool) bool {
	name := tok[1 : len(tok)-1]
	if escaped {
		var s string
		if json.Unmarshal(tok, &s) != nil {
			return false
		}
		name = []byte(s)
	}
	if m.set != nil {
		if _, dup := m.set[string(name)]; dup {
			return false
		}
		m.set[string(name)] = struct{}{}
		return true
	}
	for _, n := range m.names {
		if bytes.Equal(n, name) {
			return false
		}
	}
	m.names = append(m.names, name)
	if len(m.names) > smallObject {
		m.set = make(map[string]struct{}, 2*len(m.names))
		for _, n := range m.names {
			m.set[string(n)] = struct{}{}
		}
	}
	return true
}

// stringEnd returns the index of the quote that closes the string opening at b[start] (b is valid
// JSON), and whether the string holds escapes.
func stringEnd(b []byte, start int) (end int, escaped bool) {
	for i := start + 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i, escaped
		}
	}
	return len(b) - 1, escaped
}

// isMemberName reports whether the string closing at b[end] is a member name: a colon follows it.
func isMemberName(b []byte, end int) bool {
	for i := end + 1; i < len(b); i++ {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

// loneSurrogate reports whether the body of a string (between its quotes, valid JSON) holds a
// \u escape of a UTF-16 surrogate that is not half of a high-low pair (encoding/json would decode
// it to U+FFFD without a word).
func loneSurrogate(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++
		if s[i] != 'u' {
			continue
		}
		r := hex4(s[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
				return true
			}
			if lo := hex4(s[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 is the value of four hex digits (valid JSON guarantees them).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		default:
			r |= rune(c-'A') + 10
		}
	}
	return r
}
