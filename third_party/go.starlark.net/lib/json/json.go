// Copyright 2020 The Bazel Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package json defines utilities for converting Starlark values
// to/from JSON strings. The most recent IETF standard for JSON is
// https://www.ietf.org/rfc/rfc7159.txt.
package json // import "github.com/larkrun/lark/third_party/go.starlark.net/lib/json"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlarkstruct"
)

// Module json is a Starlark module of JSON-related functions.
//
//	json = module(
//	   encode,
//	   encode_indent,
//	   decode,
//	   indent,
//	)
//
// def encode(x):
//
// The encode function accepts one required positional argument,
// which it converts to JSON by cases:
//   - A Starlark value that implements Go's standard json.Marshal
//     interface defines its own JSON encoding.
//   - None, True, and False are converted to null, true, and false, respectively.
//   - Starlark int values, no matter how large, are encoded as decimal integers.
//     Some decoders may not be able to decode very large integers.
//   - Starlark float values are encoded using decimal point notation,
//     even if the value is an integer.
//     It is an error to encode a non-finite floating-point value.
//   - Starlark strings are encoded as JSON strings, using UTF-16 escapes.
//   - a Starlark IterableMapping (e.g. dict) is encoded as a JSON object.
//     It is an error if any key is not a string.
//   - any other Starlark Iterable (e.g. list, tuple) is encoded as a JSON array.
//   - a Starlark HasAttrs (e.g. struct) is encoded as a JSON object.
//
// It an application-defined type matches more than one the cases describe above,
// (e.g. it implements both Iterable and HasFields), the first case takes precedence.
// Encoding any other value yields an error.
//
// def encode_indent(x, *, prefix="", indent="\t"):
//
// Equivalent to json.indent(json.encode(x), prefix=prefix, indent=indent).
//
// def decode(x[, default]):
//
// The decode function has one required positional parameter, a JSON string.
// It returns the Starlark value that the string denotes.
//   - Numbers are parsed as int or float, depending on whether they
//     contain a decimal point.
//   - JSON objects are parsed as new unfrozen Starlark dicts.
//   - JSON arrays are parsed as new unfrozen Starlark lists.
//
// If x is not a valid JSON string, the behavior depends on the "default"
// parameter: if present, Decode returns its value; otherwise, Decode fails.
//
// def indent(str, *, prefix="", indent="\t"):
//
// The indent function pretty-prints a valid JSON encoding,
// and returns a string containing the indented form.
// It accepts one required positional parameter, the JSON string,
// and two optional keyword-only string parameters, prefix and indent,
// that specify a prefix of each new line, and the unit of indentation.
var Module = &starlarkstruct.Module{
	Name: "json",
	Members: starlark.StringDict{
		"encode":        starlark.NewBuiltin("json.encode", encode),
		"encode_indent": starlark.NewBuiltin("json.encode_indent", encodeIndent),
		"decode":        starlark.NewBuiltin("json.decode", decode),
		"indent":        starlark.NewBuiltin("json.indent", indent),
	},
}

// Lark patch: the steps encoding and decoding count per value, and how many
// bytes of JSON text count as one more step (calibrated so that they count
// about as many steps per second as the interpreter's loops, ~100 million
// on one core).
const (
	encodeStepsPerValue = 10
	encodeBytesPerStep  = 8
	decodeStepsPerValue = 8
	decodeBytesPerStep  = 8
	encodeChargeBytes   = 64 << 10
)

func encode(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
		return nil, err
	}

	data, err := encodeValue(thread, x)
	if err != nil {
		return nil, allocErr(err, fmt.Errorf("%s: %v", b.Name(), err))
	}
	return starlark.String(data), nil
}

// encodeValue returns the JSON encoding of x, charged to thread (Lark
// patch: the output is bounded by the thread's remaining allocation
// budget and nesting by starlark.MaxNestingDepth).
func encodeValue(thread *starlark.Thread, x starlark.Value) (string, error) {
	limit := -1
	if thread != nil && thread.MaxAllocBytes() > 0 {
		limit = max(int(min(thread.MaxAllocBytes()-thread.AllocBytes(), math.MaxInt32)), 0)
	}
	buf := &cappedBuffer{max: limit}
	depth := 0
	over := false // a write was dropped because of the limit

	var quoteSpace [128]byte
	quote := func(s string) {
		if limit >= 0 && len(s) > limit-buf.Len() {
			over = true
			return
		}
		// Non-trivial escaping is handled by Go's encoding/json.
		if isPrintableASCII(s) {
			buf.Write(strconv.AppendQuote(quoteSpace[:0], s))
		} else {
			// TODO(adonovan): opt: RFC 8259 mandates UTF-8 for JSON.
			// Can we avoid this call?
			data, _ := json.Marshal(s)
			buf.Write(data)
		}
	}

	path := make([]unsafe.Pointer, 0, 8)

	// Lark patch: the work counts as steps (one per value, one per
	// encodeBytesPerStep bytes written), which also observes cancellation.
	counted := 0
	// Lark patch: the output is charged as it grows (every encodeChargeBytes),
	// so that an encoding stopped by cancellation shows in the peak.
	charged := 0
	var emit func(x starlark.Value) error
	emit = func(x starlark.Value) error {
		if over || limit >= 0 && buf.Len() > limit {
			return errTooLarge
		}
		if err := thread.AddSteps(encodeStepsPerValue + uint64(buf.Len()-counted)/encodeBytesPerStep); err != nil {
			return err
		}
		counted = buf.Len() - (buf.Len()-counted)%encodeBytesPerStep
		if buf.Len()-charged >= encodeChargeBytes {
			if err := thread.AddAllocBytes(int64(buf.Len() - charged)); err != nil {
				return err
			}
			charged = buf.Len()
		}
		if depth >= starlark.MaxNestingDepth {
			return errTooDeep
		}
		depth++
		defer func() { depth-- }()

		// It is only necessary to push/pop the item when it might contain
		// itself (i.e. the last three switch cases), but omitting it in the other
		// cases did not show significant improvement on the benchmarks.
		if ptr := pointer(x); ptr != nil {
			if pathContains(path, ptr) {
				return fmt.Errorf("cycle in JSON structure")
			}

			path = append(path, ptr)
			defer func() { path = path[0 : len(path)-1] }()
		}

		switch x := x.(type) {
		case json.Marshaler:
			// Application-defined starlark.Value types
			// may define their own JSON encoding.
			data, err := x.MarshalJSON()
			if err != nil {
				return err
			}
			buf.Write(data)

		case starlark.NoneType:
			buf.WriteString("null")

		case starlark.Bool:
			if x {
				buf.WriteString("true")
			} else {
				buf.WriteString("false")
			}

		case starlark.Int:
			fmt.Fprint(buf, x)

		case starlark.Float:
			if !isFinite(float64(x)) {
				return fmt.Errorf("cannot encode non-finite float %v", x)
			}
			// Float.String always contains a decimal point. (%g does not!)
			buf.WriteString(x.String())

		case starlark.String:
			quote(string(x))

		case starlark.IterableMapping:
			// e.g. dict (must have string keys)
			buf.WriteByte('{')
			items := x.Items()
			for _, item := range items {
				if _, ok := item[0].(starlark.String); !ok {
					return fmt.Errorf("%s has %s key, want string", x.Type(), item[0].Type())
				}
			}
			sort.Slice(items, func(i, j int) bool {
				return items[i][0].(starlark.String) < items[j][0].(starlark.String)
			})
			for i, item := range items {
				if i > 0 {
					buf.WriteByte(',')
				}
				k, _ := starlark.AsString(item[0])
				quote(k)
				buf.WriteByte(':')
				if err := emit(item[1]); err != nil {
					return wrapErr(err, "in %s key %s", x.Type(), shortRepr(item[0]))
				}
			}
			buf.WriteByte('}')

		case starlark.Iterable:
			// e.g. tuple, list
			buf.WriteByte('[')
			iter := x.Iterate()
			defer iter.Done()
			var elem starlark.Value
			for i := 0; iter.Next(&elem); i++ {
				if i > 0 {
					buf.WriteByte(',')
				}
				if err := emit(elem); err != nil {
					return wrapErr(err, "at %s index %d", x.Type(), i)
				}
			}
			buf.WriteByte(']')

		case starlark.HasAttrs:
			// e.g. struct
			buf.WriteByte('{')
			var names []string
			names = append(names, x.AttrNames()...)
			sort.Strings(names)
			for i, name := range names {
				v, err := x.Attr(name)
				if err != nil {
					return fmt.Errorf("cannot access attribute %s.%s: %w", x.Type(), name, err)
				}
				if v == nil {
					// x.AttrNames() returned name, but x.Attr(name) returned nil, stating
					// that the field doesn't exist.
					return fmt.Errorf("missing attribute %s.%s (despite %q appearing in dir()", x.Type(), name, name)
				}
				if i > 0 {
					buf.WriteByte(',')
				}
				quote(name)
				buf.WriteByte(':')
				if err := emit(v); err != nil {
					return wrapErr(err, "in field .%s", shortName(name))
				}
			}
			buf.WriteByte('}')

		default:
			return fmt.Errorf("cannot encode %s as JSON", x.Type())
		}
		return nil
	}

	err := emit(x)
	if err == nil && (over || limit >= 0 && buf.Len() > limit) {
		err = errTooLarge
	}
	if err == errTooLarge {
		return "", thread.AddAllocBytes(int64(buf.Len()) + int64(limit) + 1) // fails
	} else if err != nil {
		return "", err
	}
	if err := thread.AddAllocBytes(int64(buf.Len() - charged)); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// A cappedBuffer is a byte buffer whose capacity does not grow beyond max
// bytes (max < 0: no limit) unless a write needs it, so that encoding a
// value that ends up too large does not allocate twice the limit first.
type cappedBuffer struct {
	b   []byte
	max int
}

func (c *cappedBuffer) grow(n int) {
	need := len(c.b) + n
	if need <= cap(c.b) {
		return
	}
	newCap := max(2*cap(c.b), need, 64)
	if c.max >= 0 && newCap > c.max {
		newCap = max(c.max, need)
	}
	b := make([]byte, len(c.b), newCap)
	copy(b, c.b)
	c.b = b
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.grow(len(p))
	c.b = append(c.b, p...)
	return len(p), nil
}

func (c *cappedBuffer) WriteString(s string) {
	c.grow(len(s))
	c.b = append(c.b, s...)
}

func (c *cappedBuffer) WriteByte(b byte) error {
	c.grow(1)
	c.b = append(c.b, b)
	return nil
}

func (c *cappedBuffer) Len() int       { return len(c.b) }
func (c *cappedBuffer) String() string { return unsafe.String(unsafe.SliceData(c.b), len(c.b)) }

var (
	errTooLarge = errors.New("output too large")
	errTooDeep  = fmt.Errorf("value nested too deeply (more than %d levels)", starlark.MaxNestingDepth)
)

// wrapErr adds context to an encoding error, unless it is a limit error,
// which is returned as is, or the message is already long (so that the
// error of a deep value cannot grow quadratically).
func wrapErr(err error, format string, args ...any) error {
	var allocErr *starlark.AllocLimitError
	if err == errTooLarge || err == errTooDeep || errors.As(err, &allocErr) || len(err.Error()) > 1024 {
		return err
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// shortRepr returns the string form of a dict key, abbreviated.
func shortRepr(v starlark.Value) string {
	if s, ok := v.(starlark.String); ok {
		return shortString(string(s))
	}
	return v.Type()
}

func shortName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return s
}

func shortString(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// allocErr returns err if it is an *AllocLimitError, else wrapped.
func allocErr(err, wrapped error) error {
	var e *starlark.AllocLimitError
	if errors.As(err, &e) {
		return err
	}
	return wrapped
}

// chargeIndent charges the approximate size of the indented form of the
// JSON text s (Lark patch).
func chargeIndent(thread *starlark.Thread, s, prefix, indent string) error {
	if thread == nil || thread.MaxAllocBytes() == 0 {
		return nil
	}
	// Every structural character may start a new line with the prefix and
	// one indent per level of nesting.
	size := int64(len(s))
	depth := int64(0)
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			continue
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
		default:
			continue
		}
		size += 2 + int64(len(prefix)) + max(depth, 0)*int64(len(indent))
		if size > thread.MaxAllocBytes() {
			break
		}
	}
	return thread.AddAllocBytes(size)
}

func encodeIndent(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	prefix, indent := "", "\t" // keyword-only
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs,
		"prefix?", &prefix,
		"indent?", &indent,
	); err != nil {
		return nil, err
	}
	// Rely on encode() to parse the positional parameter (since the signature matches); use our b so
	// error messages are attributed to json.encode_indent.
	str, err := encode(thread, b, args, nil)
	if err != nil {
		return nil, err
	}
	if err := chargeIndent(thread, string(str.(starlark.String)), prefix, indent); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(str.(starlark.String)), prefix, indent); err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return starlark.String(buf.String()), nil
}

func pointer(i any) unsafe.Pointer {
	v := reflect.ValueOf(i)
	switch v.Kind() {
	case reflect.Pointer, reflect.Chan, reflect.Map, reflect.UnsafePointer, reflect.Slice:
		// TODO(adonovan): use v.Pointer() when we drop go1.17.
		return unsafe.Pointer(v.Pointer())
	default:
		return nil
	}
}

func pathContains(path []unsafe.Pointer, item unsafe.Pointer) bool {
	return slices.Contains(path, item)
}

// isPrintableASCII reports whether s contains only printable ASCII.
func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < 0x20 || b >= 0x80 {
			return false
		}
	}
	return true
}

// isFinite reports whether f represents a finite rational value.
// It is equivalent to !math.IsNan(f) && !math.IsInf(f, 0).
func isFinite(f float64) bool {
	return math.Abs(f) <= math.MaxFloat64
}

func indent(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	prefix, indent := "", "\t" // keyword-only
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs,
		"prefix?", &prefix,
		"indent?", &indent,
	); err != nil {
		return nil, err
	}
	var str string // positional-only
	if err := starlark.UnpackPositionalArgs(b.Name(), args, nil, 1, &str); err != nil {
		return nil, err
	}

	if err := chargeIndent(thread, str, prefix, indent); err != nil {
		return nil, err
	}
	buf := new(bytes.Buffer)
	if err := json.Indent(buf, []byte(str), prefix, indent); err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return starlark.String(buf.String()), nil
}

func decode(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (v starlark.Value, err error) {
	var s string
	var d starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "x", &s, "default?", &d); err != nil {
		return nil, err
	}
	if len(args) < 1 {
		// "x" parameter is positional only; UnpackArgs does not allow us to
		// directly express "def decode(x, *, default)"
		return nil, fmt.Errorf("%s: unexpected keyword argument x", b.Name())
	}

	// The decoder necessarily makes certain representation choices
	// such as list vs tuple, struct vs dict, int vs float.
	// In principle, we could parameterize it to allow the caller to
	// control the returned types, but there's no compelling need yet.

	// Use panic/recover with a distinguished type (failure) for error handling.
	// If "default" is set, we only want to return it when encountering invalid
	// json - not for any other possible causes of panic.
	// In particular, if we ever extend the json.decode API to take a callback,
	// a distinguished, private failure type prevents the possibility of
	// json.decode with "default" becoming abused as a try-catch mechanism.
	type failure string
	fail := func(format string, args ...any) {
		panic(failure(fmt.Sprintf(format, args...)))
	}

	// Lark patch: values are charged to the thread, and nesting is
	// bounded. These failures are errors even if "default" is set.
	type limitFailure struct{ err error }
	charge := func(n int64) {
		if err := thread.AddAllocBytes(n); err != nil {
			panic(limitFailure{err})
		}
	}
	limited := thread != nil && thread.MaxAllocBytes() > 0
	depth := 0
	stepped := 0 // input bytes counted as steps

	i := 0

	// skipSpace consumes leading spaces, and reports whether there is more input.
	skipSpace := func() bool {
		for ; i < len(s); i++ {
			b := s[i]
			if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
				return true
			}
		}
		return false
	}

	// next consumes leading spaces and returns the first non-space.
	// It panics if at EOF.
	next := func() byte {
		if skipSpace() {
			return s[i]
		}
		fail("unexpected end of file")
		panic("unreachable")
	}

	// parse returns the next JSON value from the input.
	// It consumes leading but not trailing whitespace.
	// It panics on error.
	var parse func() starlark.Value
	parse = func() starlark.Value {
		// Lark patch: one step per value (and per decodeBytesPerStep
		// bytes of input), which also observes cancellation.
		if err := thread.AddSteps(decodeStepsPerValue + uint64(i-stepped)/decodeBytesPerStep); err != nil {
			panic(limitFailure{err})
		}
		stepped = i - (i-stepped)%decodeBytesPerStep
		b := next()
		switch b {
		case '"':
			// string

			// Find end of quotation.
			// Also, record whether trivial unquoting is safe.
			// Non-trivial unquoting is handled by Go's encoding/json.
			safe := true
			closed := false
			j := i + 1
			for ; j < len(s); j++ {
				b := s[j]
				if b == '\\' {
					safe = false
					j++ // skip x in \x
				} else if b == '"' {
					closed = true
					j++ // skip '"'
					break
				} else if b >= utf8.RuneSelf {
					safe = false
				}
			}
			if !closed {
				fail("unclosed string literal")
			}

			r := s[i:j]
			i = j

			// unquote
			charge(int64(len(r)) + 16)
			if safe {
				r = r[1 : len(r)-1]
			} else if err := json.Unmarshal([]byte(r), &r); err != nil {
				fail("%s", err)
			}
			return starlark.String(r)

		case 'n':
			if strings.HasPrefix(s[i:], "null") {
				i += len("null")
				return starlark.None
			}

		case 't':
			if strings.HasPrefix(s[i:], "true") {
				i += len("true")
				return starlark.True
			}

		case 'f':
			if strings.HasPrefix(s[i:], "false") {
				i += len("false")
				return starlark.False
			}

		case '[':
			// array
			var elems []starlark.Value
			if depth++; depth > starlark.MaxNestingDepth {
				panic(limitFailure{fmt.Errorf("json.decode: value nested too deeply (more than %d levels)", starlark.MaxNestingDepth)})
			}
			charge(32)

			i++ // '['
			b = next()
			if b != ']' {
				for {
					charge(16)
					elem := parse()
					elems = append(elems, elem)
					b = next()
					if b != ',' {
						if b != ']' {
							fail("got %q, want ',' or ']'", b)
						}
						break
					}
					i++ // ','
				}
			}
			i++ // ']'
			depth--
			return starlark.NewList(elems)

		case '{':
			// object
			if depth++; depth > starlark.MaxNestingDepth {
				panic(limitFailure{fmt.Errorf("json.decode: value nested too deeply (more than %d levels)", starlark.MaxNestingDepth)})
			}
			charge(starlark.AllocDictBytes)
			dict := new(starlark.Dict)

			i++ // '{'
			b = next()
			if b != '}' {
				for {
					charge(starlark.AllocEntryBytes)
					key := parse()
					if _, ok := key.(starlark.String); !ok {
						fail("got %s for object key, want string", key.Type())
					}
					b = next()
					if b != ':' {
						fail("after object key, got %q, want ':' ", b)
					}
					i++ // ':'
					value := parse()
					dict.SetKey(key, value) // can't fail
					b = next()
					if b != ',' {
						if b != '}' {
							fail("in object, got %q, want ',' or '}'", b)
						}
						break
					}
					i++ // ','
				}
			}
			i++ // '}'
			depth--
			return dict

		default:
			// number?
			if isdigit(b) || b == '-' {
				// scan literal. Allow [0-9+-eE.] for now.
				float := false
				var j int
				for j = i + 1; j < len(s); j++ {
					b = s[j]
					if isdigit(b) {
						// ok
					} else if b == '.' ||
						b == 'e' ||
						b == 'E' ||
						b == '+' ||
						b == '-' {
						float = true
					} else {
						break
					}
				}
				num := s[i:j]
				i = j
				if limited && len(num) > 300000 {
					panic(limitFailure{fmt.Errorf("json.decode: number too long (more than 300000 digits)")})
				}
				charge(int64(len(num)) + 16)

				// Unlike most C-like languages,
				// JSON disallows a leading zero before a digit.
				digits := num
				if num[0] == '-' {
					digits = num[1:]
				}
				if digits == "" || digits[0] == '0' && len(digits) > 1 && isdigit(digits[1]) {
					fail("invalid number: %s", num)
				}

				// parse literal
				if float {
					x, err := strconv.ParseFloat(num, 64)
					if err != nil {
						fail("invalid number: %s", num)
					}
					return starlark.Float(x)
				} else {
					x, ok := new(big.Int).SetString(num, 10)
					if !ok {
						fail("invalid number: %s", num)
					}
					return starlark.MakeBigInt(x)
				}
			}
		}
		fail("unexpected character %q", b)
		panic("unreachable")
	}
	defer func() {
		x := recover()
		switch x := x.(type) {
		case failure:
			if d != nil {
				v = d
			} else {
				err = fmt.Errorf("json.decode: at offset %d, %s", i, x)
			}
		case limitFailure:
			v, err = nil, x.err
		case nil:
			// nop
		default:
			panic(x) // unexpected panic
		}
	}()
	v = parse()
	if skipSpace() {
		fail("unexpected character %q after value", s[i])
	}
	return v, nil
}

func isdigit(b byte) bool {
	return b >= '0' && b <= '9'
}
