package quality

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/larkrun/lark/internal/schema"
)

// definition is a check's decoded JSON being validated: its members, where it is, and the issues
// found so far.
type definition struct {
	obj    map[string]any
	path   string
	issues []schema.Issue
}

// at is the JSON path of member key ("" is the check itself).
func (d *definition) at(key string) string {
	if key == "" {
		return d.path
	}
	return d.path + "." + key // "fields[2]" too
}

// add records an issue at member key.
func (d *definition) add(key, code, format string, args ...any) {
	d.issues = append(d.issues, schema.Issue{Path: d.at(key), Code: code, Message: fmt.Sprintf(format, args...)})
}

// require records a missing_field issue if key is absent and reports whether it was.
func (d *definition) require(key string) bool {
	if _, ok := d.obj[key]; ok {
		return false
	}
	d.add(key, schema.CodeMissingField, "%s is required", key)
	return true
}

// check decodes the members into a Check, recording members that are unknown, missing or of the
// wrong JSON type.
func (d *definition) check() Check {
	var c Check
	d.str("name", &c.Name, true)
	var typ string
	d.str("type", &typ, true)
	c.Type = Type(typ)
	if s, ok := d.obj["type"].(string); ok && !slices.Contains(Types, Type(s)) {
		d.add("type", schema.CodeInvalidValue, "type must be one of %s", quoteList(Types))
	}
	d.unknownKeys(c.Type)
	var severity, phase string
	d.str("severity", &severity, true)
	d.str("phase", &phase, false)
	c.Severity, c.Phase = Severity(severity), Phase(phase)
	d.integer("timeout_ms", &c.TimeoutMS)
	d.str("path", &c.Path, false)
	if v, ok := d.obj["schema"]; ok {
		b, err := json.Marshal(v)
		if err != nil { // decoded JSON always encodes
			d.add("schema", schema.CodeSchemaMismatch, "schema: %v", err)
		}
		c.Schema = b
	}
	c.Min, c.Max = d.optionalInteger("min"), d.optionalInteger("max")
	c.MinRatio = d.optionalNumber("min_ratio")
	c.Fields = d.strings("fields")
	d.str("field", &c.Field, false)
	d.str("max_age", &c.MaxAge, false)
	d.str("source", &c.Source, false)
	return c
}

// unknownKeys records the members that are not those of a check of type t.
func (d *definition) unknownKeys(t Type) {
	allowed := slices.Clone(commonKeys)
	if keys, known := typeKeys[t]; known {
		allowed = append(allowed, keys...)
	} else {
		for _, keys := range typeKeys { // the type is wrong already: do not report its members
			allowed = append(allowed, keys...)
		}
	}
	var unknown []string
	for k := range d.obj {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		if owner := keyOwner(k); owner != "" {
			d.add(k, schema.CodeUnknownField, "%s is a member of %s checks, not of %s checks", k, owner, t)
			continue
		}
		d.add(k, schema.CodeUnknownField, "unknown member %s of a check", strconv.Quote(k))
	}
}

// keyOwner names the check type a type-specific member belongs to ("" if none).
func keyOwner(key string) string {
	var owners []string
	for _, t := range Types {
		if slices.Contains(typeKeys[t], key) {
			owners = append(owners, string(t))
		}
	}
	return quoteList(owners)
}

// str decodes a string member.
func (d *definition) str(key string, dst *string, required bool) {
	v, ok := d.obj[key]
	if !ok {
		if required {
			d.require(key)
		}
		return
	}
	s, isStr := v.(string)
	if !isStr {
		d.add(key, schema.CodeSchemaMismatch, "%s must be a string", key)
		return
	}
	*dst = s
}

// integer decodes an integer member.
func (d *definition) integer(key string, dst *int64) {
	if p := d.optionalInteger(key); p != nil {
		*dst = *p
	}
}

// optionalInteger decodes an integer member, nil if absent or wrong.
func (d *definition) optionalInteger(key string) *int64 {
	v, ok := d.obj[key]
	if !ok {
		return nil
	}
	n, isNum := v.(json.Number)
	i, err := n.Int64()
	if !isNum || err != nil {
		d.add(key, schema.CodeSchemaMismatch, "%s must be an integer", key)
		return nil
	}
	return &i
}

// optionalNumber decodes a number member, nil if absent or wrong.
func (d *definition) optionalNumber(key string) *float64 {
	v, ok := d.obj[key]
	if !ok {
		return nil
	}
	n, isNum := v.(json.Number)
	f, err := n.Float64()
	if !isNum || err != nil || math.IsInf(f, 0) {
		d.add(key, schema.CodeSchemaMismatch, "%s must be a number", key)
		return nil
	}
	return &f
}

// strings decodes an array of strings.
func (d *definition) strings(key string) []string {
	v, ok := d.obj[key]
	if !ok {
		return nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		d.add(key, schema.CodeSchemaMismatch, "%s must be an array of strings", key)
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, item := range arr {
		s, isStr := item.(string)
		if !isStr {
			d.add(key+"["+strconv.Itoa(i)+"]", schema.CodeSchemaMismatch, "%s[%d] must be a string", key, i)
			continue
		}
		out = append(out, s)
	}
	return out
}
