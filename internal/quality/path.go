package quality

import (
	"fmt"
	"strconv"
	"strings"
)

// segment is one step of a JSON path: an object member or, if index >= 0, an array element.
type segment struct {
	key   string
	index int
}

// parsePath parses a JSON path of the subset issues use: "$", then members ".name" (a plain
// identifier) or "['any name']" / "[\"any name\"]", and array elements "[i]".
func parsePath(p string) ([]segment, error) {
	rest, ok := strings.CutPrefix(p, "$")
	if !ok {
		return nil, fmt.Errorf("a path starts with $")
	}
	var segs []segment
	for rest != "" {
		var seg segment
		var err error
		switch rest[0] {
		case '.':
			seg, rest, err = memberSegment(rest[1:])
		case '[':
			seg, rest, err = bracketSegment(rest[1:])
		default:
			err = fmt.Errorf("unexpected %q", rest[0])
		}
		if err != nil {
			return nil, fmt.Errorf("at %q: %w", p[:len(p)-len(rest)], err)
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// memberSegment reads an identifier after a dot.
func memberSegment(s string) (segment, string, error) {
	n := 0
	for n < len(s) && isIdentByte(s[n], n) {
		n++
	}
	if n == 0 {
		return segment{}, s, fmt.Errorf("a member name follows a dot")
	}
	return segment{key: s[:n], index: -1}, s[n:], nil
}

func isIdentByte(c byte, i int) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9'
}

// bracketSegment reads an index "i]" or a quoted member "'name']" after an opening bracket.
func bracketSegment(s string) (segment, string, error) {
	if s != "" && (s[0] == '\'' || s[0] == '"') {
		return quotedSegment(s)
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return segment{}, s, fmt.Errorf("unclosed [")
	}
	i, err := strconv.Atoi(s[:end])
	if err != nil || i < 0 || strings.HasPrefix(s[:end], "+") {
		return segment{}, s, fmt.Errorf("an index is a non-negative integer")
	}
	return segment{index: i}, s[end+1:], nil
}

// quotedSegment reads a quoted member name (backslash escapes the quote and itself) and the
// closing bracket.
func quotedSegment(s string) (segment, string, error) {
	quote := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == quote:
			if i+1 >= len(s) || s[i+1] != ']' {
				return segment{}, s, fmt.Errorf("a quoted name is followed by ]")
			}
			return segment{key: b.String(), index: -1}, s[i+2:], nil
		default:
			b.WriteByte(c)
		}
	}
	return segment{}, s, fmt.Errorf("unclosed quote")
}

// lookup returns the value at path in v (decoded JSON), or an error naming the part of the path
// that is not in v.
func lookup(v any, path string) (any, error) {
	segs, err := parsePath(path)
	if err != nil {
		return nil, err
	}
	cur := v
	for i, seg := range segs {
		var ok bool
		if seg.index >= 0 {
			arr, isArr := cur.([]any)
			ok = isArr && seg.index < len(arr)
			if ok {
				cur = arr[seg.index]
			}
		} else {
			obj, isObj := cur.(map[string]any)
			cur, ok = obj[seg.key]
			ok = ok && isObj
		}
		if !ok {
			return nil, fmt.Errorf("%s is not in the value", formatPath(segs[:i+1]))
		}
	}
	return cur, nil
}

// formatPath writes segments back as a JSON path.
func formatPath(segs []segment) string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range segs {
		switch {
		case s.index >= 0:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case isIdent(s.key):
			b.WriteString("." + s.key)
		default:
			b.WriteString("['" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s.key) + "']")
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i], i) {
			return false
		}
	}
	return s != ""
}
