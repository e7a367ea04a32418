// Package workerproto is the wire protocol between the server and remote workers (`lark worker`
// and programs built on the Go worker SDK): canonical JSON (004 §15) and envelopes signed with
// HMAC-SHA256 over it, with a key id, an expiry and a nonce, verified against a keyset that accepts
// several keys during a rotation while one signs. It is pure: no I/O, no clock of its own, no store.
package workerproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of a value Canonical accepts.
const MaxDepth = 100

// ErrNotCanonicalizable is returned for input that is not exactly one valid UTF-8 JSON value.
var ErrNotCanonicalizable = errors.New("workerproto: not a single valid JSON value")

// Canonical returns the canonical form of the JSON value in data (004 §15): object keys sorted by
// their UTF-8 bytes, no whitespace between tokens, numbers exactly as given, strings re-escaped the
// one way encoding/json does without HTML escaping, valid UTF-8 only. A repeated object key is
// refused (its meaning would differ between parsers).
func Canonical(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: invalid UTF-8", ErrNotCanonicalizable)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := canonValue(dec, &buf, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data", ErrNotCanonicalizable)
	}
	return buf.Bytes(), nil
}

// Marshal encodes v as JSON and returns its canonical form.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonical(b)
}

// canonValue reads one JSON value from dec and writes its canonical form to buf: an object or an
// array through canonObject or canonArray (one level deeper), a scalar as itself.
func canonValue(dec *json.Decoder, buf *bytes.Buffer, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrNotCanonicalizable, MaxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonObject(dec, buf, depth)
		case '[':
			return canonArray(dec, buf, depth)
		default:
			return fmt.Errorf("%w: unexpected %v", ErrNotCanonicalizable, t)
		}
	case string:
		writeString(buf, t)
	case json.Number:
		buf.WriteString(t.String())
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case nil:
		buf.WriteString("null")
	default:
		return fmt.Errorf("%w: unexpected token %v", ErrNotCanonicalizable, tok)
	}
	return nil
}

// member is one object member: its key and its value already in canonical form.
type member struct {
	key string
	val []byte
}

// canonObject reads the members of an object whose '{' was read (through its '}') and writes the
// object with its members sorted by key.
func canonObject(dec *json.Decoder, buf *bytes.Buffer, depth int) error {
	ms, err := canonMembers(dec, depth)
	if err != nil {
		return err
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].key < ms[j].key })
	buf.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeString(buf, m.key)
		buf.WriteByte(':')
		buf.Write(m.val)
	}
	buf.WriteByte('}')
	return nil
}

// canonMembers reads an object's members in their order, each value canonicalized one level
// deeper, and consumes the closing '}'. A repeated key is refused.
func canonMembers(dec *json.Decoder, depth int) ([]member, error) {
	var ms []member
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
		}
		k, _ := kt.(string)
		if seen[k] {
			return nil, fmt.Errorf("%w: repeated key %q", ErrNotCanonicalizable, k)
		}
		seen[k] = true
		var vb bytes.Buffer
		if err := canonValue(dec, &vb, depth+1); err != nil {
			return nil, err
		}
		ms = append(ms, member{k, vb.Bytes()})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	return ms, nil
}

// canonArray writes the elements of an array whose '[' was read, each canonicalized one level
// deeper in their order, and consumes the closing ']'.
func canonArray(dec *json.Decoder, buf *bytes.Buffer, depth int) error {
	buf.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := canonValue(dec, buf, depth+1); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	buf.WriteByte(']')
	return nil
}

// writeString writes s as a JSON string: `"` and `\` escaped, control characters as \n, \r, \t
// or \u00XX, U+2028 and U+2029 as \u2028 and \u2029, everything else as its UTF-8 bytes.
func writeString(buf *bytes.Buffer, s string) {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) //nolint:errchkjson // a string always encodes
	buf.WriteString(strings.TrimSuffix(sb.String(), "\n"))
}
