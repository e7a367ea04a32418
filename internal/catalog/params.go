package catalog

import (
	"encoding/json"

	"github.com/larkrun/lark/internal/invocation"
)

// Params defaults. Every invocation's params — API starts (sync, async and dry runs), schedule runs
// and backfill partitions (Plan), and r_invoke_v1 children — go through ValidateParams, which first
// fills in the JSON Schema `default`s that schema.params declares, so that the recorded params, the
// program's input and the Idempotency-Key's request are the params with the defaults applied.
//
// The rule: for an object in the params and a schema with `properties`, each property the object
// lacks and whose schema has a `default` gets (a copy of) that default; then the same rule applies
// to the property's value (present or defaulted) with the property's schema, recursively. Under an
// array, the single-schema form of `items` applies to each element. Only `properties` and `items`
// written in the schema itself are followed: `$ref`, `allOf`/`anyOf`/`oneOf`, conditionals,
// `patternProperties`, `additionalProperties` and tuple `prefixItems` are not, and a `null` value
// is left as it is.

// defaultsNode is the part of a params schema that declares defaults: per property, its default
// and the defaults below it; for arrays, those of items. A schema without any default has none
// (nil), which costs nothing to apply.
type defaultsNode struct {
	props map[string]propDefaults
	items *defaultsNode
}

// propDefaults is one property's default (nil when it declares none) and the defaults inside it.
type propDefaults struct {
	def  json.RawMessage
	node *defaultsNode
}

// parseDefaults reads the defaults a stored params schema declares (nil when it declares none).
func parseDefaults(raw json.RawMessage) (*defaultsNode, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var sch any
	if err := invocation.DecodeJSON(raw, &sch); err != nil {
		return nil, err
	}
	return defaultsOf(sch)
}

// defaultsOf builds the defaults of one (sub)schema.
func defaultsOf(sch any) (*defaultsNode, error) {
	m, ok := sch.(map[string]any)
	if !ok {
		return nil, nil
	}
	var n defaultsNode
	if props, ok := m["properties"].(map[string]any); ok {
		for name, ps := range props {
			var p propDefaults
			if pm, ok := ps.(map[string]any); ok {
				if d, ok := pm["default"]; ok {
					raw, err := json.Marshal(d)
					if err != nil {
						return nil, err
					}
					p.def = raw
				}
			}
			below, err := defaultsOf(ps)
			if err != nil {
				return nil, err
			}
			p.node = below
			if p.def == nil && p.node == nil {
				continue
			}
			if n.props == nil {
				n.props = map[string]propDefaults{}
			}
			n.props[name] = p
		}
	}
	items, err := defaultsOf(m["items"])
	if err != nil {
		return nil, err
	}
	n.items = items
	if n.props == nil && n.items == nil {
		return nil, nil
	}
	return &n, nil
}

// apply fills in the defaults of n inside v (params decoded with UseNumber), in place.
func (n *defaultsNode) apply(v any) error {
	if n == nil {
		return nil
	}
	switch v := v.(type) {
	case map[string]any:
		for name, p := range n.props {
			if _, ok := v[name]; !ok && p.def != nil {
				var d any // decoded afresh: each invocation gets its own copy of a default object
				if err := invocation.DecodeJSON(p.def, &d); err != nil {
					return err
				}
				v[name] = d
			}
			if val, ok := v[name]; ok {
				if err := p.node.apply(val); err != nil {
					return err
				}
			}
		}
	case []any:
		for _, el := range v {
			if err := n.items.apply(el); err != nil {
				return err
			}
		}
	}
	return nil
}

// paramsDefaults returns the defaults of d's params schema, parsed once per definition.
func (c *Catalog) paramsDefaults(d Definition) (*defaultsNode, error) {
	if d.schemas == nil {
		return parseDefaults(d.Schema.Params)
	}
	d.schemas.defaults.Do(func() { d.schemas.defaultsN, d.schemas.defaultsErr = parseDefaults(d.Schema.Params) })
	return d.schemas.defaultsN, d.schemas.defaultsErr
}
