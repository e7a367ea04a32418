package invocation

import (
	"encoding/json"
	"strconv"
	"strings"
)

// MaxJSONDepth is the deepest nesting of arrays and objects Lark accepts in a JSON value it stores:
// no value may sit inside more than 100 arrays and objects. It bounds invocation params (refused
// with 422 at start), and results, step outputs and other values user code hands back (the sandbox
// refuses to convert deeper ones, so the execution fails). SQLite's JSON functions stop near 1,000
// levels; every stored document stays an order of magnitude below that, so the maintenance SQL over
// stored records never meets a document it cannot parse.
const MaxJSONDepth = 100

// TooDeep reports the JSON path (under root, e.g. "$.params") of the first value of v, decoded JSON
// (map[string]any, []any or scalars; json.RawMessage is decoded), that sits inside more than
// MaxJSONDepth arrays and objects. ok is false when v is within the limit.
func TooDeep(root string, v any) (path string, ok bool) {
	if raw, isRaw := v.(json.RawMessage); isRaw {
		var x any
		if err := json.Unmarshal(raw, &x); err != nil {
			return "", false // not JSON: not this check's business
		}
		v = x
	}
	segs, deep := tooDeep(v, 0)
	if !deep {
		return "", false
	}
	var b strings.Builder
	b.WriteString(root)
	for i := len(segs) - 1; i >= 0; i-- {
		b.WriteString(segs[i])
	}
	return b.String(), true
}

// tooDeep returns the path segments, innermost first, of the first value nested too deep; the
// path is built only on the way out of a failure, so the common (shallow) case allocates nothing.
func tooDeep(v any, depth int) ([]string, bool) {
	if depth > MaxJSONDepth {
		return nil, true
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if segs, ok := tooDeep(e, depth+1); ok {
				return append(segs, memberSegment(k)), true
			}
		}
	case []any:
		for i, e := range x {
			if segs, ok := tooDeep(e, depth+1); ok {
				return append(segs, "["+strconv.Itoa(i)+"]"), true
			}
		}
	}
	return nil, false
}

// memberSegment is ".name" for a plain identifier and "['name']" otherwise.
func memberSegment(k string) string {
	plain := k != ""
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9'
	}
	if plain {
		return "." + k
	}
	return "['" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(k) + "']"
}
