package manifest

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Bounds of a manifest's value tree.
const (
	maxDepth = 64
	maxNodes = 100_000
)

// converter turns a YAML node into JSON-shaped Go values: map[string]any, []any, string,
// json.Number (kept as written when it is a valid JSON number), bool and nil. Keys must be plain
// and unique; YAML that JSON cannot express (timestamps, binary, non-finite numbers, merge keys)
// is refused. Every problem of the tree is collected.
type converter struct {
	file  string
	count int
	probs Problems
}

// toJSON converts root; the problems say where it failed.
func toJSON(file string, root *yaml.Node) (any, Problems) {
	c := &converter{file: file}
	v, stop := c.convert(root, 0)
	if stop || len(c.probs) > 0 {
		return nil, c.probs
	}
	return v, nil
}

func (c *converter) bad(n *yaml.Node, format string, args ...any) {
	c.probs = append(c.probs, Problem{File: c.file, Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)})
}

// convert returns the value of n; stop is true when a bound was crossed (nothing more is read).
func (c *converter) convert(n *yaml.Node, depth int) (any, bool) {
	c.count++
	if c.count > maxNodes {
		c.bad(n, "more than %d values", maxNodes)
		return nil, true
	}
	if depth > maxDepth {
		c.bad(n, "nested more than %d levels deep", maxDepth)
		return nil, true
	}
	switch n.Kind {
	case yaml.AliasNode:
		return c.convert(n.Alias, depth+1)
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				c.bad(k, "keys must be plain strings (no merge keys)")
				continue
			}
			if _, dup := out[k.Value]; dup {
				c.bad(k, "key %q given twice", k.Value)
				continue
			}
			val, stop := c.convert(v, depth+1)
			if stop {
				return nil, true
			}
			out[k.Value] = val
		}
		return out, false
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			val, stop := c.convert(e, depth+1)
			if stop {
				return nil, true
			}
			out = append(out, val)
		}
		return out, false
	case yaml.ScalarNode:
		return c.scalar(n), false
	}
	c.bad(n, "unsupported YAML node")
	return nil, false
}

func (c *converter) scalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!str":
		return n.Value
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			c.bad(n, "invalid boolean %q", n.Value)
			return nil
		}
		return b
	case "!!int":
		if json.Valid([]byte(n.Value)) {
			return json.Number(n.Value)
		}
		var i int64
		if err := n.Decode(&i); err != nil {
			c.bad(n, "invalid integer %q", n.Value)
			return nil
		}
		return json.Number(strconv.FormatInt(i, 10))
	case "!!float":
		if json.Valid([]byte(n.Value)) {
			return json.Number(n.Value)
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			c.bad(n, "invalid number %q (JSON has no infinities or NaN)", n.Value)
			return nil
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	}
	c.bad(n, "unsupported value %q (tag %s): quote it to make it a string", n.Value, n.ShortTag())
	return nil
}
