package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlarkstruct"

	"github.com/larkrun/lark/internal/invocation"
)

// maxDepth bounds the nesting of values converted from Go to Starlark
// (as deep as encoding/json decodes); deeper values fail to convert.
const maxDepth = 10000

// maxOutDepth bounds the nesting of values converted from Starlark to Go
// (results, step outputs, everything user code hands back, which Lark
// stores): no value may sit inside more than invocation.MaxJSONDepth lists
// and dicts; deeper or cyclic values fail to convert.
const maxOutDepth = invocation.MaxJSONDepth

// Approximate sizes charged for Go values built from Starlark values.
const (
	goMapEntryBytes = 64
	goElemBytes     = 16
	goHeaderBytes   = 48
)

// convertStepsPerValue is the steps converting one value between Go and
// Starlark counts (calibrated so that conversions count about as many steps
// per second as the interpreter's loops; see StepsPerCPUSecond).
const convertStepsPerValue = 8

// isAllocError reports whether err is, or wraps, an allocation-limit error.
func isAllocError(err error) bool {
	var e *starlark.AllocLimitError
	return errors.As(err, &e)
}

// toStarlark converts v, a decoded JSON value, to a Starlark value charged
// to thread: objects become *Object (keys sorted), arrays frozen lists,
// numbers Int when integral (json.Number, float64 and Go integers; big
// integers are exact) and Float otherwise. Other Go maps with string keys
// and slices are converted like objects and arrays.
func toStarlark(thread *starlark.Thread, v any) (starlark.Value, error) {
	return toStarlarkDepth(thread, v, 0)
}

func toStarlarkDepth(thread *starlark.Thread, v any, depth int) (starlark.Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested more than %d levels deep", maxDepth)
	}
	// A step per value: long conversions observe cancellation and the CPU budget.
	if err := thread.AddSteps(convertStepsPerValue); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(v), nil
	case string:
		return starlark.String(v), thread.AddAllocBytes(int64(len(v)) + starlark.AllocStringOverhead)
	case json.Number:
		return numberValue(thread, string(v))
	case json.RawMessage:
		if err := thread.AddAllocBytes(int64(len(v))); err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		return toStarlarkDepth(thread, x, depth)
	case float64:
		return floatValue(v)
	case float32:
		return floatValue(float64(v))
	case int:
		return starlark.MakeInt(v), nil
	case int64:
		return starlark.MakeInt64(v), nil
	case int32:
		return starlark.MakeInt64(int64(v)), nil
	case uint64:
		return starlark.MakeUint64(v), nil
	case uint:
		return starlark.MakeUint64(uint64(v)), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return objectOf(thread, keys, func(k string) any { return v[k] }, depth)
	case []any:
		return listOf(thread, len(v), func(i int) any { return v[i] }, depth)
	case starlark.Value:
		return nil, fmt.Errorf("unexpected Starlark value %s", v.Type())
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			keys := make([]string, 0, rv.Len())
			for _, k := range rv.MapKeys() {
				keys = append(keys, k.String())
			}
			slices.Sort(keys)
			return objectOf(thread, keys, func(k string) any {
				return rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface()
			}, depth)
		}
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return starlark.None, nil
		}
		return listOf(thread, rv.Len(), func(i int) any { return rv.Index(i).Interface() }, depth)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return starlark.MakeInt64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return starlark.MakeUint64(rv.Uint()), nil
	case reflect.String:
		return toStarlarkDepth(thread, rv.String(), depth)
	case reflect.Bool:
		return starlark.Bool(rv.Bool()), nil
	case reflect.Float32, reflect.Float64:
		return floatValue(rv.Float())
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return starlark.None, nil
		}
		return toStarlarkDepth(thread, rv.Elem().Interface(), depth)
	}
	return nil, fmt.Errorf("cannot convert Go value of type %T", v)
}

func objectOf(thread *starlark.Thread, keys []string, get func(string) any, depth int) (starlark.Value, error) {
	if err := thread.AddAllocBytes(goHeaderBytes + int64(len(keys))*(2*starlark.AllocElemBytes+starlark.AllocStringOverhead)); err != nil {
		return nil, err
	}
	values := make([]starlark.Value, len(keys))
	for i, k := range keys {
		if err := thread.AddAllocBytes(int64(len(k))); err != nil {
			return nil, err
		}
		x, err := toStarlarkDepth(thread, get(k), depth+1)
		if err != nil {
			return nil, err
		}
		values[i] = x
	}
	return newObject(keys, values), nil
}

func listOf(thread *starlark.Thread, n int, get func(int) any, depth int) (starlark.Value, error) {
	if err := chargeList(thread, n, 1); err != nil {
		return nil, err
	}
	elems := make([]starlark.Value, n)
	for i := range elems {
		x, err := toStarlarkDepth(thread, get(i), depth+1)
		if err != nil {
			return nil, err
		}
		elems[i] = x
	}
	l := starlark.NewList(elems)
	l.Freeze()
	return l, nil
}

// numberValue converts the text of a JSON number.
func numberValue(thread *starlark.Thread, s string) (starlark.Value, error) {
	if isIntegerLiteral(s) {
		if len(s) <= 18 {
			n, err := strconv.ParseInt(s, 10, 64)
			if err == nil {
				return starlark.MakeInt64(n), nil
			}
		}
		if err := thread.AddAllocBytes(int64(len(s)) + 32); err != nil {
			return nil, err
		}
		n, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("invalid number %q", truncate(s, 64))
		}
		return starlark.MakeBigInt(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("invalid or out-of-range number %q", truncate(s, 64))
	}
	return floatValue(f)
}

// isIntegerLiteral reports whether s is an optional minus sign and digits.
func isIntegerLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// floatValue converts a float: integral values that fit in 64 bits become
// Int, others Float; NaN and infinities are rejected (JSON has none).
func floatValue(f float64) (starlark.Value, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("non-finite number %v", f)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return starlark.MakeInt64(int64(f)), nil
	}
	return starlark.Float(f), nil
}

// A convertError is the failure to convert a Starlark value to JSON, with
// the path to the offending value, innermost last.
type convertError struct {
	path   []string // reversed: innermost first
	reason string
	cause  error // an allocation error, if that is the reason
}

func (e *convertError) Error() string {
	return "at " + e.Path() + ": " + e.reason
}

// Path returns the JSONPath-like location of the offending value, e.g.
// $.items[3].price.
func (e *convertError) Path() string {
	var b strings.Builder
	b.WriteString("$")
	for i := len(e.path) - 1; i >= 0; i-- {
		if b.Len() > 256 {
			b.WriteString("…")
			break
		}
		b.WriteString(e.path[i])
	}
	return b.String()
}

func (e *convertError) Unwrap() error { return e.cause }

func (e *convertError) at(segment string) *convertError {
	e.path = append(e.path, segment)
	return e
}

func fieldSegment(name string) string {
	if isIdentifier(name) {
		return "." + name
	}
	return "[" + strconv.Quote(truncate(name, 64)) + "]"
}

// toGo converts a Starlark value to a JSON-ready Go value (map[string]any,
// []any, json.Number, string, bool, nil), charging thread. Dicts (with
// string keys only), structs, Objects, lists, tuples, strings, ints,
// finite floats, bools and None convert; anything else is an error.
//
// The conversion is charged to the thread as the JSON text it stands for:
// every string is charged its length each time it occurs (a list holding
// one large string 200 times becomes 200 copies once encoded), and every
// value counts a step (so that it observes cancellation and the CPU
// budget). Its encoded size is bounded by the execution's payload limit
// (Limits.MaxPayloadBytes): beyond it, the conversion fails with a
// *PayloadError.
func toGo(thread *starlark.Thread, v starlark.Value, what string) (any, error) {
	return toGoLimit(thread, v, what, payloadLimit(thread))
}

// toGoLimit is toGo with a limit of its own on the encoded size.
func toGoLimit(thread *starlark.Thread, v starlark.Value, what string, limit int64) (any, error) {
	c := &goConverter{thread: thread, limit: limit, what: what}
	x, err := c.convert(v, 0)
	if err != nil {
		return nil, err
	}
	return x, nil
}

// payloadLimit is the payload limit of the execution thread belongs to.
func payloadLimit(thread *starlark.Thread) int64 {
	if r, ok := thread.Local(runKey).(*run); ok {
		return r.limits.MaxPayloadBytes
	}
	return DefaultMaxPayloadBytes
}

// A goConverter converts one value with toGo, counting the size of its JSON
// encoding (a lower bound: strings without their escapes).
type goConverter struct {
	thread *starlark.Thread
	limit  int64  // on size; <= 0: none
	size   int64  // estimated encoded size so far
	what   string // what is converted, for errors ("the result")
}

// add counts n bytes of JSON text and one step.
func (c *goConverter) add(n int64) *convertError {
	c.size += n
	if c.limit > 0 && c.size > c.limit {
		err := &PayloadError{What: c.what, Limit: c.limit}
		return &convertError{reason: err.Error(), cause: err}
	}
	if err := c.thread.AddSteps(convertStepsPerValue); err != nil {
		return &convertError{reason: err.Error(), cause: err}
	}
	return nil
}

// charge charges n bytes to the thread's allocation budget.
func (c *goConverter) charge(n int64) *convertError {
	if err := c.thread.AddAllocBytes(n); err != nil {
		return &convertError{reason: err.Error(), cause: err}
	}
	return nil
}

func (c *goConverter) convert(v starlark.Value, depth int) (any, *convertError) {
	if depth > maxOutDepth {
		return nil, &convertError{reason: fmt.Sprintf("value is cyclic or nested more than %d levels deep", maxOutDepth)}
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return nil, c.add(4)
	case starlark.Bool:
		return bool(v), c.add(5)
	case starlark.String:
		n := int64(len(v))
		if err := c.add(n + 2); err != nil {
			return nil, err
		}
		// The JSON text will hold a copy of this string wherever it occurs.
		return string(v), c.charge(n)
	case starlark.Int:
		if i, ok := v.Int64(); ok {
			s := strconv.FormatInt(i, 10)
			return json.Number(s), c.add(int64(len(s)))
		}
		s := v.String()
		if err := c.add(int64(len(s))); err != nil {
			return nil, err
		}
		if err := c.charge(int64(len(s))); err != nil {
			return nil, err
		}
		return json.Number(s), nil
	case starlark.Float:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &convertError{reason: fmt.Sprintf("float %v is not a JSON number", v)}
		}
		s := strconv.FormatFloat(f, 'g', -1, 64)
		return json.Number(s), c.add(int64(len(s)))
	case *starlark.Dict:
		if err := c.object(v.Len()); err != nil {
			return nil, err
		}
		m := make(map[string]any, v.Len())
		for k, x := range v.Entries() {
			ks, ok := k.(starlark.String)
			if !ok {
				return nil, &convertError{reason: fmt.Sprintf("dict key %s is a %s, not a string", truncate(k.String(), 64), k.Type())}
			}
			gx, err := c.member(string(ks), x, depth)
			if err != nil {
				return nil, err.at(fieldSegment(string(ks)))
			}
			m[string(ks)] = gx
		}
		return m, nil
	case *Object:
		if err := c.object(len(v.keys)); err != nil {
			return nil, err
		}
		m := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			gx, err := c.member(k, v.values[i], depth)
			if err != nil {
				return nil, err.at(fieldSegment(k))
			}
			m[k] = gx
		}
		return m, nil
	case *starlarkstruct.Struct:
		if err := c.object(v.Len()); err != nil {
			return nil, err
		}
		m := make(map[string]any, v.Len())
		for i := range v.Len() {
			name, x := v.AttrAt(i)
			gx, err := c.member(name, x, depth)
			if err != nil {
				return nil, err.at(fieldSegment(name))
			}
			m[name] = gx
		}
		return m, nil
	case *starlark.List:
		return c.slice(v.Len(), v.Index, depth)
	case starlark.Tuple:
		return c.slice(len(v), func(i int) starlark.Value { return v[i] }, depth)
	}
	return nil, &convertError{reason: fmt.Sprintf("a value of type %s cannot be converted to JSON", v.Type())}
}

// object counts and charges a JSON object of n members.
func (c *goConverter) object(n int) *convertError {
	if err := c.add(2); err != nil {
		return err
	}
	return c.charge(goHeaderBytes + int64(n)*goMapEntryBytes)
}

// member converts the value of one member of an object.
func (c *goConverter) member(key string, x starlark.Value, depth int) (any, *convertError) {
	if err := c.add(int64(len(key)) + 4); err != nil {
		return nil, err
	}
	return c.convert(x, depth+1)
}

func (c *goConverter) slice(n int, index func(int) starlark.Value, depth int) (any, *convertError) {
	if err := c.add(2 + int64(n)); err != nil {
		return nil, err
	}
	if err := c.charge(goHeaderBytes + int64(n)*goElemBytes); err != nil {
		return nil, err
	}
	out := make([]any, n)
	for i := range n {
		x, err := c.convert(index(i), depth+1)
		if err != nil {
			return nil, err.at("[" + strconv.Itoa(i) + "]")
		}
		out[i] = x
	}
	return out, nil
}

// PayloadError is a value, converted to JSON, that is larger than its
// limit (Limits.MaxPayloadBytes for results, step outputs and helper
// arguments; MaxErrorBytes for error details).
type PayloadError struct {
	What  string // "the result", "r_http_post_v1 body", ...
	Limit int64  // bytes
}

func (e *PayloadError) Error() string {
	return fmt.Sprintf("%s is larger than the limit of %d bytes once encoded as JSON", e.What, e.Limit)
}

// isPayloadError reports whether err is, or wraps, a *PayloadError.
func isPayloadError(err error) bool {
	var e *PayloadError
	return errors.As(err, &e)
}

// payloadError is the execution's error for a value over its size limit.
func payloadError(err error) *Error {
	var pe *PayloadError
	if !errors.As(err, &pe) {
		return newError(ErrPayloadTooLarge, CategoryNonRetryable, "%v", err)
	}
	return newError(ErrPayloadTooLarge, CategoryNonRetryable, "%s", pe.Error()).
		withDetail("limit_bytes", pe.Limit)
}

// isLimitError reports whether err is one that a helper must propagate
// rather than report as a misuse: an allocation or a payload error.
func isLimitError(err error) bool {
	return isAllocError(err) || isPayloadError(err)
}

// displayString returns s itself for a string, else the string form of v,
// charged to thread.
func displayString(thread *starlark.Thread, v starlark.Value) (string, error) {
	if s, ok := v.(starlark.String); ok {
		return string(s), nil
	}
	limit := -1
	if budget := thread.MaxAllocBytes(); budget > 0 {
		limit = int(min(max(budget-thread.AllocBytes(), 0), math.MaxInt32))
	}
	p := starlark.NewPrinter(limit)
	p.SetThread(thread)
	p.WriteValue(v)
	if err := p.Err(); err != nil {
		return "", err
	}
	if p.Truncated() {
		return "", thread.AddAllocBytes(int64(limit) + 1) // fails
	}
	return p.String(), thread.AddAllocBytes(int64(p.Len()))
}

// jsonSize is the length of the JSON encoding of v, a small JSON-ready value
// (0 if it does not encode).
func jsonSize(v any) int64 {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return int64(len(b))
}
