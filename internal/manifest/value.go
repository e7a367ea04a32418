package manifest

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds of a manifest's value tree.
const (
	maxDepth = 64
	maxNodes = 100_000
)

// toValue converts a YAML node into JSON-shaped Go values: map[string]any, []any, string,
// json.Number, bool and nil. Keys must be strings and unique; YAML-only values (timestamps,
// binary, non-finite floats) are refused, so that what is read is what JSON would say.
func toValue(file string, n *yaml.Node) (any, error) {
	count := 0
	return convert(file, n, 0, &count)
}

func convert(file string, n *yaml.Node, depth int, count *int) (any, error) {
	*count++
	if *count > maxNodes {
		return nil, errAt(file, n, "more than %d values", maxNodes)
	}
	if depth > maxDepth {
		return nil, errAt(file, n, "nested more than %d levels deep", maxDepth)
	}
	switch n.Kind {
	case yaml.AliasNode:
		return convert(file, n.Alias, depth+1, count)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				return nil, errAt(file, k, "merge keys (<<) are not supported")
			}
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return nil, errAt(file, k, "keys must be strings")
			}
			if _, dup := m[k.Value]; dup {
				return nil, errAt(file, k, "key %q given twice", k.Value)
			}
			val, err := convert(file, v, depth+1, count)
			if err != nil {
				return nil, err
			}
			m[k.Value] = val
		}
		return m, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := convert(file, c, depth+1, count)
			if err != nil {
				return nil, err
			}
			out = append(out, val)
		}
		return out, nil
	case yaml.ScalarNode:
		return scalar(file, n)
	}
	return nil, errAt(file, n, "unsupported YAML node")
}

func scalar(file string, n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!str":
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, errAt(file, n, "invalid boolean %q", n.Value)
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return nil, errAt(file, n, "invalid integer %q", n.Value)
		}
		return json.Number(strconv.FormatInt(i, 10)), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, errAt(file, n, "invalid number %q (JSON has no infinities or NaN)", n.Value)
		}
		v := strings.ReplaceAll(n.Value, "_", "")
		if _, err := strconv.ParseFloat(v, 64); err != nil || strings.HasPrefix(v, "+") || strings.HasPrefix(v, ".") {
			v = strconv.FormatFloat(f, 'g', -1, 64)
		}
		return json.Number(v), nil
	}
	return nil, errAt(file, n, "unsupported value %q (tag %s): quote it to make it a string", n.Value, n.ShortTag())
}
