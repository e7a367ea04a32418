package schema

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Issue is one validation problem, located by a JSON path. It maps onto an entry of 000's
// ValidationError issues (error_type = Code, location.path = Path) and of the problem document's
// errors array.
type Issue struct {
	// Path is a JSON path: "$" is the root, object members are ".name" (or "['odd key']" when the
	// name is not a plain identifier) and array elements "[i]", e.g. "$.traits.limits.memory_mb"
	// or "$.tags[0]". For a missing required property the path names the missing property itself.
	Path string `json:"path"`
	// Code classifies the issue; it is one of the Code* constants.
	Code string `json:"code"`
	// Message is a human-readable description.
	Message string `json:"message"`
}

// Issue codes.
const (
	// CodeSchemaMismatch: a value violates a JSON Schema keyword (type, range, enum, pattern,
	// format, ...) of the schema it is validated against.
	CodeSchemaMismatch = "schema_mismatch"
	// CodeMissingField: a required property is absent.
	CodeMissingField = "missing_field"
	// CodeUnknownField: a property that is not part of the type. Lark never ignores unknown fields.
	CodeUnknownField = "unknown_field"
	// CodeInvalidSchema: a user-supplied JSON Schema is not a valid JSON Schema 2020-12 document
	// or references something that cannot be resolved.
	CodeInvalidSchema = "invalid_schema"
	// CodeInvalidValue: a value is well-formed but breaks a Lark rule that the JSON Schemas do not
	// express (unknown adapter or rate-limit strategy, default mode not supported, ...).
	CodeInvalidValue = "invalid_value"
)

// rootPath is the JSON path of the document root.
const rootPath = "$"

// childPath appends an object member to a JSON path.
func childPath(path, key string) string {
	if isIdent(key) {
		return path + "." + key
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return path + "['" + r.Replace(key) + "']"
}

// indexPath appends an array index to a JSON path.
func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// isIdent reports whether key can use dot notation: [A-Za-z_][A-Za-z0-9_]*.
func isIdent(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// rebase moves a path relative to "$" under base: rebase("$.params", "$.amount") is
// "$.params.amount".
func rebase(base, rel string) string {
	if base == "" {
		base = rootPath
	}
	return base + strings.TrimPrefix(rel, rootPath)
}

// tokensPath converts JSON pointer tokens into a JSON path under base. The instance is walked
// alongside to tell array indexes from object members whose names are digits.
func tokensPath(base string, instance any, tokens []string) string {
	p := base
	cur := instance
	for _, tok := range tokens {
		switch v := cur.(type) {
		case []any:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 {
				p = indexPath(p, i)
				if i < len(v) {
					cur = v[i]
				} else {
					cur = nil
				}
				continue
			}
			p = childPath(p, tok)
			cur = nil
		case map[string]any:
			p = childPath(p, tok)
			cur = v[tok]
		default:
			p = childPath(p, tok)
			cur = nil
		}
	}
	return p
}

// finalize removes duplicate issues and sorts them by path, then message, then code.
func finalize(issues []Issue) []Issue {
	if len(issues) == 0 {
		return nil
	}
	sort.Slice(issues, func(i, j int) bool {
		a, b := issues[i], issues[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Message != b.Message {
			return a.Message < b.Message
		}
		return a.Code < b.Code
	})
	return slices.Compact(issues)
}

// leaf is one elementary validation failure.
type leaf struct {
	loc  []string
	kind jsonschema.ErrorKind
}

func (l leaf) key() string { return strings.Join(l.loc, "\x00") + "\x01" + describeMsg(l.kind) }

// validationIssues converts a validation error into issues under base. The instance is the value
// that was validated (used to render array indexes). If code is non-empty every issue gets it;
// otherwise the code follows from the failed keyword.
func validationIssues(err error, base string, instance any, code string) []Issue {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		c := code
		if c == "" {
			c = CodeSchemaMismatch
		}
		return []Issue{{Path: base, Code: c, Message: err.Error()}}
	}
	leaves := suppressUnderTypeErrors(collectLeaves(ve))
	out := make([]Issue, 0, len(leaves))
	for _, l := range leaves {
		c, msg := describe(l.kind)
		if code != "" {
			c = code
		}
		out = append(out, Issue{Path: tokensPath(base, instance, l.loc), Code: c, Message: msg})
	}
	return out
}

// collectLeaves flattens a validation error tree into its leaf causes. Required and
// additionalProperties failures are split per property and located at the property itself.
// Failed oneOf/anyOf are narrowed to the alternative the value most plausibly meant.
func collectLeaves(e *jsonschema.ValidationError) []leaf {
	switch k := e.ErrorKind.(type) {
	case *kind.OneOf, *kind.AnyOf:
		if len(e.Causes) > 0 {
			return alternativeLeaves(e)
		}
	case *kind.Required:
		out := make([]leaf, 0, len(k.Missing))
		for _, m := range k.Missing {
			out = append(out, leaf{loc: appendTok(e.InstanceLocation, m), kind: &kind.Required{Missing: []string{m}}})
		}
		return out
	case *kind.AdditionalProperties:
		out := make([]leaf, 0, len(k.Properties))
		for _, p := range k.Properties {
			out = append(out, leaf{loc: appendTok(e.InstanceLocation, p), kind: &kind.AdditionalProperties{Properties: []string{p}}})
		}
		return out
	}
	if len(e.Causes) == 0 {
		return []leaf{{loc: e.InstanceLocation, kind: e.ErrorKind}}
	}
	var out []leaf
	for _, c := range e.Causes {
		out = append(out, collectLeaves(c)...)
	}
	return out
}

func appendTok(loc []string, tok string) []string {
	out := make([]string, 0, len(loc)+1)
	return append(append(out, loc...), tok)
}

// alternativeLeaves picks the leaves of a failed oneOf/anyOf. An alternative is ruled out when
// the value has the wrong type for it, or a member of the value fails a const/enum (a
// discriminator such as implementation.kind). If exactly one alternative remains its failures are
// reported; if several remain, the failures they share (or else all of them); if none remains, one
// merged message ("expected string or null", "value must be one of 'code', 'workflow_spec'").
func alternativeLeaves(e *jsonschema.ValidationError) []leaf {
	loc := e.InstanceLocation
	var kept [][]leaf
	var typeDiscr, valueDiscr []leaf
	for _, c := range e.Causes {
		ls := collectLeaves(c)
		ruledOut := false
		for _, l := range ls {
			switch l.kind.(type) {
			case *kind.Type:
				if slices.Equal(l.loc, loc) {
					typeDiscr = append(typeDiscr, l)
					ruledOut = true
				}
			case *kind.Const, *kind.Enum:
				if len(l.loc) == len(loc)+1 && slices.Equal(l.loc[:len(loc)], loc) {
					valueDiscr = append(valueDiscr, l)
					ruledOut = true
				}
			}
		}
		if !ruledOut {
			kept = append(kept, ls)
		}
	}
	switch {
	case len(kept) == 1:
		return kept[0]
	case len(kept) > 1:
		if common := intersectLeaves(kept); len(common) > 0 {
			return common
		}
		var all []leaf
		for _, ls := range kept {
			all = append(all, ls...)
		}
		return all
	case len(valueDiscr) > 0:
		return mergeValueLeaves(valueDiscr)
	case len(typeDiscr) > 0:
		return []leaf{mergeTypeLeaves(loc, typeDiscr)}
	default:
		return []leaf{{loc: loc, kind: e.ErrorKind}}
	}
}

// intersectLeaves returns the leaves present (same location and message) in every list.
func intersectLeaves(lists [][]leaf) []leaf {
	counts := map[string]int{}
	for _, ls := range lists {
		seen := map[string]bool{}
		for _, l := range ls {
			k := l.key()
			if !seen[k] {
				seen[k] = true
				counts[k]++
			}
		}
	}
	var out []leaf
	added := map[string]bool{}
	for _, l := range lists[0] {
		k := l.key()
		if counts[k] == len(lists) && !added[k] {
			added[k] = true
			out = append(out, l)
		}
	}
	return out
}

// mergeTypeLeaves merges type mismatches at loc into one "expected A or B" failure.
func mergeTypeLeaves(loc []string, ls []leaf) leaf {
	merged := &kind.Type{}
	for _, l := range ls {
		t := l.kind.(*kind.Type)
		if merged.Got == "" {
			merged.Got = t.Got
		}
		for _, w := range t.Want {
			if !slices.Contains(merged.Want, w) {
				merged.Want = append(merged.Want, w)
			}
		}
	}
	return leaf{loc: loc, kind: merged}
}

// mergeValueLeaves merges const/enum failures per location into one enum failure.
func mergeValueLeaves(ls []leaf) []leaf {
	var order []string
	byLoc := map[string]*leaf{}
	for _, l := range ls {
		k := strings.Join(l.loc, "\x00")
		m, ok := byLoc[k]
		if !ok {
			m = &leaf{loc: l.loc, kind: &kind.Enum{}}
			byLoc[k] = m
			order = append(order, k)
		}
		en := m.kind.(*kind.Enum)
		var got any
		var want []any
		switch lk := l.kind.(type) {
		case *kind.Const:
			got, want = lk.Got, []any{lk.Want}
		case *kind.Enum:
			got, want = lk.Got, lk.Want
		}
		if en.Got == nil {
			en.Got = got
		}
		for _, w := range want {
			if !slices.ContainsFunc(en.Want, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(w) }) {
				en.Want = append(en.Want, w)
			}
		}
	}
	out := make([]leaf, 0, len(order))
	for _, k := range order {
		out = append(out, *byLoc[k])
	}
	return out
}

// suppressUnderTypeErrors drops every other failure at a location whose type is already wrong:
// once the type is wrong, the other keywords there only add noise.
func suppressUnderTypeErrors(ls []leaf) []leaf {
	typed := map[string]bool{}
	for _, l := range ls {
		if _, ok := l.kind.(*kind.Type); ok {
			typed[strings.Join(l.loc, "\x00")] = true
		}
	}
	if len(typed) == 0 {
		return ls
	}
	out := ls[:0:0]
	for _, l := range ls {
		if _, ok := l.kind.(*kind.Type); !ok && typed[strings.Join(l.loc, "\x00")] {
			continue
		}
		out = append(out, l)
	}
	return out
}

func describeMsg(k jsonschema.ErrorKind) string {
	_, msg := describe(k)
	return msg
}

// describe returns the issue code and a readable message for a failed keyword.
func describe(k jsonschema.ErrorKind) (string, string) {
	switch k := k.(type) {
	case *kind.Required:
		return CodeMissingField, fmt.Sprintf("missing required property %s", quote(strings.Join(k.Missing, "', '")))
	case *kind.AdditionalProperties:
		return CodeUnknownField, fmt.Sprintf("unknown field %s", quote(strings.Join(k.Properties, "', '")))
	case *kind.Type:
		return CodeSchemaMismatch, fmt.Sprintf("invalid type: expected %s, got %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Minimum:
		return CodeSchemaMismatch, fmt.Sprintf("must be >= %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.Maximum:
		return CodeSchemaMismatch, fmt.Sprintf("must be <= %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMinimum:
		return CodeSchemaMismatch, fmt.Sprintf("must be > %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMaximum:
		return CodeSchemaMismatch, fmt.Sprintf("must be < %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.MultipleOf:
		return CodeSchemaMismatch, fmt.Sprintf("must be a multiple of %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.MinLength:
		return CodeSchemaMismatch, fmt.Sprintf("length must be >= %d, got %d", k.Want, k.Got)
	case *kind.MaxLength:
		return CodeSchemaMismatch, fmt.Sprintf("length must be <= %d, got %d", k.Want, k.Got)
	case *kind.MinItems:
		return CodeSchemaMismatch, fmt.Sprintf("must have at least %d items, got %d", k.Want, k.Got)
	case *kind.MaxItems:
		return CodeSchemaMismatch, fmt.Sprintf("must have at most %d items, got %d", k.Want, k.Got)
	case *kind.MinProperties:
		return CodeSchemaMismatch, fmt.Sprintf("must have at least %d properties, got %d", k.Want, k.Got)
	case *kind.MaxProperties:
		return CodeSchemaMismatch, fmt.Sprintf("must have at most %d properties, got %d", k.Want, k.Got)
	case *kind.FalseSchema:
		return CodeSchemaMismatch, "value is not allowed here"
	case *kind.OneOf:
		if len(k.Subschemas) == 2 {
			return CodeSchemaMismatch, fmt.Sprintf("value matches more than one allowed alternative (oneOf subschemas %d and %d)", k.Subschemas[0], k.Subschemas[1])
		}
		return CodeSchemaMismatch, "value does not match any allowed alternative"
	case *kind.AnyOf:
		return CodeSchemaMismatch, "value does not match any allowed alternative"
	case *kind.InvalidJsonValue:
		return CodeSchemaMismatch, fmt.Sprintf("value of Go type %T is not a JSON value", k.Value)
	case nil:
		return CodeSchemaMismatch, "invalid value"
	default:
		return CodeSchemaMismatch, libraryMessage(k)
	}
}

// libraryMessage is the jsonschema library's own (English) message for a failed keyword.
func libraryMessage(k jsonschema.ErrorKind) string {
	msg := (&jsonschema.ValidationError{ErrorKind: k}).Error()
	return strings.TrimPrefix(msg, "at '': ")
}

// quote single-quotes s for messages.
func quote(s string) string { return "'" + s + "'" }

// ratString renders a number the way it would appear in JSON.
func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
