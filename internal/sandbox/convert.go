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

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

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
			return nil, fmt.Errorf("invalid JSON: %v", err)
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
func toGo(thread *starlark.Thread, v starlark.Value) (any, error) {
	x, err := toGoDepth(thread, v, 0)
	if err != nil {
		return nil, err
	}
	return x, nil
}

func toGoDepth(thread *starlark.Thread, v starlark.Value, depth int) (any, *convertError) {
	if depth > maxOutDepth {
		return nil, &convertError{reason: fmt.Sprintf("value is cyclic or nested more than %d levels deep", maxOutDepth)}
	}
	charge := func(n int64) *convertError {
		if err := thread.AddAllocBytes(n); err != nil {
			return &convertError{reason: err.Error(), cause: err}
		}
		return nil
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(v), nil
	case starlark.String:
		return string(v), nil
	case starlark.Int:
		if i, ok := v.Int64(); ok {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		s := v.String()
		if err := charge(int64(len(s))); err != nil {
			return nil, err
		}
		return json.Number(s), nil
	case starlark.Float:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &convertError{reason: fmt.Sprintf("float %v is not a JSON number", v)}
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case *starlark.Dict:
		if err := charge(goHeaderBytes + int64(v.Len())*goMapEntryBytes); err != nil {
			return nil, err
		}
		m := make(map[string]any, v.Len())
		for k, x := range v.Entries() {
			ks, ok := k.(starlark.String)
			if !ok {
				return nil, &convertError{reason: fmt.Sprintf("dict key %s is a %s, not a string", truncate(k.String(), 64), k.Type())}
			}
			gx, err := toGoDepth(thread, x, depth+1)
			if err != nil {
				return nil, err.at(fieldSegment(string(ks)))
			}
			m[string(ks)] = gx
		}
		return m, nil
	case *Object:
		if err := charge(goHeaderBytes + int64(len(v.keys))*goMapEntryBytes); err != nil {
			return nil, err
		}
		m := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			gx, err := toGoDepth(thread, v.values[i], depth+1)
			if err != nil {
				return nil, err.at(fieldSegment(k))
			}
			m[k] = gx
		}
		return m, nil
	case *starlarkstruct.Struct:
		if err := charge(goHeaderBytes + int64(v.Len())*goMapEntryBytes); err != nil {
			return nil, err
		}
		m := make(map[string]any, v.Len())
		for i := range v.Len() {
			name, x := v.AttrAt(i)
			gx, err := toGoDepth(thread, x, depth+1)
			if err != nil {
				return nil, err.at(fieldSegment(name))
			}
			m[name] = gx
		}
		return m, nil
	case *starlark.List:
		return sliceToGo(thread, v.Len(), v.Index, depth)
	case starlark.Tuple:
		return sliceToGo(thread, len(v), func(i int) starlark.Value { return v[i] }, depth)
	}
	return nil, &convertError{reason: fmt.Sprintf("a value of type %s cannot be converted to JSON", v.Type())}
}

func sliceToGo(thread *starlark.Thread, n int, index func(int) starlark.Value, depth int) (any, *convertError) {
	if err := thread.AddAllocBytes(goHeaderBytes + int64(n)*goElemBytes); err != nil {
		return nil, &convertError{reason: err.Error(), cause: err}
	}
	out := make([]any, n)
	for i := range n {
		x, err := toGoDepth(thread, index(i), depth+1)
		if err != nil {
			return nil, err.at("[" + strconv.Itoa(i) + "]")
		}
		out[i] = x
	}
	return out, nil
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
	p.WriteValue(v)
	if p.Truncated() {
		return "", thread.AddAllocBytes(int64(limit) + 1) // fails
	}
	return p.String(), thread.AddAllocBytes(int64(p.Len()))
}
