package schema

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/larkrun/lark/internal/invocation"
)

// Limits of a user-supplied JSON Schema (schema.params, schema.returns). A schema over a limit is
// refused with one issue of code [CodeSchemaTooComplex] before it is compiled, so no schema can
// make compilation, or the validation of every invocation's params, take long.
//
// Why: compiling a schema validates it against the JSON Schema 2020-12 metaschema, and the
// validator rebuilds the JSON pointer of every node it visits from the root (string concatenation
// per level), so its cost grows with the cube of the nesting depth: a 36 KB schema of about 3,000
// nested allOf took a minute of CPU. Validation follows every $ref where it appears, so a few $defs
// that each reference the next twice multiply the work of every invocation.
const (
	// MaxUserSchemaBytes bounds the size of a user schema's canonical JSON (object keys sorted, no
	// insignificant space): 64 KiB.
	MaxUserSchemaBytes = 64 << 10
	// MaxUserSchemaDepth bounds the nesting of subschemas: a subschema (the value of allOf, anyOf,
	// oneOf, not, if/then/else, properties, items, $defs, ...) of the root is at level 1, one of
	// its own at level 2, and none may be deeper than level 32.
	MaxUserSchemaDepth = 32
	// MaxUserSchemaExpanded bounds the size of the schema with every local $ref ("#", "#/$defs/x",
	// "#anchor", an embedded $id) replaced by what it points at, counted in subschemas ($defs are
	// counted where they are referenced, not where they are defined): 10,000. It bounds the
	// subschemas one validation visits for instances that do not recurse into the schema; a $ref
	// back to a schema that encloses it (recursion) counts once.
	MaxUserSchemaExpanded = 10000
)

// CodeSchemaTooComplex: a user-supplied JSON Schema exceeds MaxUserSchemaBytes, MaxUserSchemaDepth or
// MaxUserSchemaExpanded.
const CodeSchemaTooComplex = "schema_too_complex"

// Keywords whose value is one subschema, an array of subschemas, or an object of subschemas.
var (
	schemaKeywords = keySet("not", "if", "then", "else", "items", "contains", "additionalProperties",
		"propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema", "additionalItems")
	schemaArrayKeywords = keySet("allOf", "anyOf", "oneOf", "prefixItems")
	schemaMapKeywords   = keySet("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
)

// complexity checks a user schema (decoded canonical JSON of canonLen bytes) against the limits and
// returns the issues (paths relative to "$"), nil when it is within them.
func complexity(doc map[string]any, canonLen int) []Issue {
	if canonLen > MaxUserSchemaBytes {
		return []Issue{{Path: rootPath, Code: CodeSchemaTooComplex,
			Message: fmt.Sprintf("schema is %d bytes, more than the %d allowed", canonLen, MaxUserSchemaBytes)}}
	}
	// Arrays and objects anywhere in the schema (enum, const, default and examples values
	// included) nest no deeper than any JSON value Lark stores.
	if p, deep := invocation.TooDeep(rootPath, doc); deep {
		return []Issue{{Path: p, Code: CodeSchemaTooComplex,
			Message: fmt.Sprintf("schema is nested more than %d levels deep", invocation.MaxJSONDepth)}}
	}
	w := &schemaWalk{nodes: map[string]map[string]any{}, anchors: map[string]string{}, ids: map[string]string{}}
	if is := w.index(doc, "", rootPath, 0); is != nil {
		return []Issue{*is}
	}
	w.memo = map[string]int{}
	w.onStack = map[string]bool{}
	if n := w.cost(""); n > MaxUserSchemaExpanded {
		return []Issue{{Path: rootPath, Code: CodeSchemaTooComplex,
			Message: fmt.Sprintf("schema expands to more than %d subschemas when its $refs are followed", MaxUserSchemaExpanded)}}
	}
	return nil
}

// schemaWalk indexes the subschemas of a user schema by JSON pointer and measures its expanded size.
type schemaWalk struct {
	nodes   map[string]map[string]any // JSON pointer -> subschema (objects only; booleans cost nothing)
	anchors map[string]string         // $anchor / $dynamicAnchor name -> pointer
	ids     map[string]string         // $id as written -> pointer
	memo    map[string]int
	onStack map[string]bool
}

// subschemas calls fn for every subschema of obj with its pointer token(s) and path suffix.
func subschemas(obj map[string]any, fn func(ptr, path string, v any)) {
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		tok := "/" + escapePointer(k)
		switch {
		case schemaKeywords[k]:
			fn(tok, childPath("", k), v)
		case schemaArrayKeywords[k]:
			if arr, ok := v.([]any); ok {
				for i, e := range arr {
					fn(tok+"/"+strconv.Itoa(i), indexPath(childPath("", k), i), e)
				}
			}
		case schemaMapKeywords[k]:
			if m, ok := v.(map[string]any); ok {
				for _, name := range sortedKeys(m) {
					fn(tok+"/"+escapePointer(name), childPath(childPath("", k), name), m[name])
				}
			}
		}
	}
}

// index records every subschema and refuses nesting deeper than MaxUserSchemaDepth.
func (w *schemaWalk) index(v any, ptr, path string, level int) *Issue {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if level > MaxUserSchemaDepth {
		return &Issue{Path: path, Code: CodeSchemaTooComplex,
			Message: fmt.Sprintf("subschemas are nested more than %d levels deep", MaxUserSchemaDepth)}
	}
	w.nodes[ptr] = obj
	for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
		if a, ok := obj[kw].(string); ok {
			w.anchors[a] = ptr
		}
	}
	if id, ok := obj["$id"].(string); ok {
		w.ids[strings.TrimSuffix(id, "#")] = ptr
	}
	var issue *Issue
	subschemas(obj, func(tok, suffix string, sub any) {
		if issue == nil {
			issue = w.index(sub, ptr+tok, path+suffix, level+1)
		}
	})
	return issue
}

// resolve returns the pointer a $ref or $dynamicRef points at inside the document, if it does.
func (w *schemaWalk) resolve(ref string) (string, bool) {
	base, frag, _ := strings.Cut(ref, "#")
	if base != "" {
		p, ok := w.ids[base]
		if !ok || frag != "" {
			return "", false // a built-in (gts://) or a refused reference: constant cost
		}
		return p, true
	}
	if frag == "" || strings.HasPrefix(frag, "/") {
		ptr, err := url.PathUnescape(frag)
		if err != nil {
			return "", false
		}
		_, ok := w.nodes[ptr]
		return ptr, ok
	}
	p, ok := w.anchors[frag]
	return p, ok
}

// cost is the number of subschemas validation visits at one instance location from the node at
// ptr, $refs followed; it stops counting past MaxUserSchemaExpanded.
func (w *schemaWalk) cost(ptr string) int {
	if n, ok := w.memo[ptr]; ok {
		return n
	}
	if w.onStack[ptr] {
		return 1 // recursion: driven by the instance
	}
	w.onStack[ptr] = true
	defer delete(w.onStack, ptr)
	obj := w.nodes[ptr]
	n := 1
	add := func(m int) { n = min(n+m, MaxUserSchemaExpanded+1) }
	for _, kw := range []string{"$ref", "$dynamicRef"} {
		if ref, ok := obj[kw].(string); ok {
			if target, ok := w.resolve(ref); ok {
				add(w.cost(target))
			} else {
				add(1)
			}
		}
	}
	subschemas(obj, func(tok, _ string, sub any) {
		if strings.HasPrefix(tok, "/$defs/") || strings.HasPrefix(tok, "/definitions/") {
			return // applied only where referenced
		}
		if _, ok := sub.(map[string]any); ok {
			add(w.cost(ptr + tok))
		}
	})
	w.memo[ptr] = n
	return n
}

// escapePointer escapes a JSON pointer token (~ as ~0, / as ~1).
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
