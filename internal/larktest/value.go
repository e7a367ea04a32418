package larktest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlarkstruct"
)

// maxValueDepth bounds the nesting of values converted either way.
const maxValueDepth = 64

// toStarlark converts a JSON-shaped Go value (json.Number numbers) into Starlark: objects become
// dicts, arrays lists.
func toStarlark(v any, depth int) (starlark.Value, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("value nested more than %d levels deep", maxValueDepth)
	}
	switch x := v.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(x), nil
	case string:
		return starlark.String(x), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return starlark.MakeInt64(i), nil
		}
		if b, ok := new(big.Int).SetString(string(x), 10); ok {
			return starlark.MakeBigInt(b), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, err
		}
		return starlark.Float(f), nil
	case float64:
		return starlark.Float(x), nil
	case int:
		return starlark.MakeInt(x), nil
	case int64:
		return starlark.MakeInt64(x), nil
	case []any:
		out := make([]starlark.Value, 0, len(x))
		for _, e := range x {
			sv, err := toStarlark(e, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, sv)
		}
		return starlark.NewList(out), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := starlark.NewDict(len(x))
		for _, k := range keys {
			sv, err := toStarlark(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			if err := d.SetKey(starlark.String(k), sv); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	return nil, fmt.Errorf("cannot convert %T", v)
}

// fromStarlark converts a Starlark value into a JSON-shaped Go value.
func fromStarlark(v starlark.Value, depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("value nested more than %d levels deep", maxValueDepth)
	}
	switch x := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(x), nil
	case starlark.String:
		return string(x), nil
	case starlark.Int:
		return json.Number(x.String()), nil
	case starlark.Float:
		return float64(x), nil
	case *starlark.List:
		return seq(x, x.Len(), depth)
	case starlark.Tuple:
		return seq(x, x.Len(), depth)
	case *starlark.Dict:
		out := make(map[string]any, x.Len())
		for _, kv := range x.Items() {
			k, ok := kv[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("dict keys must be strings, got %s", kv[0].Type())
			}
			e, err := fromStarlark(kv[1], depth+1)
			if err != nil {
				return nil, err
			}
			out[string(k)] = e
		}
		return out, nil
	case *starlarkstruct.Struct:
		d := starlark.StringDict{}
		x.ToStringDict(d)
		out := make(map[string]any, len(d))
		for k, fv := range d {
			e, err := fromStarlark(fv, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot convert a %s to JSON", v.Type())
}

func seq(it starlark.Indexable, n, depth int) (any, error) {
	out := make([]any, 0, n)
	for i := 0; i < n; i++ {
		e, err := fromStarlark(it.Index(i), depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
