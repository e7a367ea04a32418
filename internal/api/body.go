package api

import (
	"encoding"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/larkrun/lark/internal/problem"
)

// Request bodies follow one rule on every resource (docs/api.md §1, "Read-only and unknown
// members"): a member the resource renders but does not let the request set (its id, status,
// timestamps, counters, creator) is accepted and ignored, so a document read with GET can be
// edited and sent back; any other member the request does not take is 422 UNKNOWN_FIELD, one
// issue per member, nested ones included, all in one problem.

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Types are few and fixed, so their JSON members and read-only members are worked out once per
// type (they were a few percent of a sync invocation's CPU when worked out per request). The maps
// are shared: callers only read them.
var (
	fieldsCache   sync.Map // reflect.Type → map[string]reflect.Type
	readOnlyCache sync.Map // [2]reflect.Type → map[string]bool
)

// jsonFields returns the JSON member names of struct type t and their types, as encoding/json
// sees them (embedded structs without a name are flattened; "-" is skipped).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := structFields(t)
	fieldsCache.Store(t, m)
	return m
}

func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// readOnlyOf returns the members the representation rep renders that the request type req does
// not take: the members a body may carry and the server ignores.
func readOnlyOf(req, rep any) map[string]bool {
	if rep == nil {
		return nil
	}
	key := [2]reflect.Type{reflect.TypeOf(req), reflect.TypeOf(rep)}
	if m, ok := readOnlyCache.Load(key); ok {
		return m.(map[string]bool)
	}
	m := readOnlyMembers(req, rep)
	readOnlyCache.Store(key, m)
	return m
}

func readOnlyMembers(req, rep any) map[string]bool {
	takes := jsonFields(reflect.TypeOf(req))
	out := map[string]bool{}
	for k := range jsonFields(reflect.TypeOf(rep)) {
		if _, ok := takes[k]; !ok {
			out[k] = true
		}
	}
	return out
}

// unknownMembers appends an UNKNOWN_FIELD issue for every member of v (decoded JSON) that type t
// does not have, descending into nested objects and arrays of structs.
func unknownMembers(v any, t reflect.Type, path string, issues []problem.Issue) []problem.Issue {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return issues
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return issues
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				issues = append(issues, problem.Issue{Path: path + "." + k, Code: "UNKNOWN_FIELD", Message: "unknown field '" + k + "'"})
				continue
			}
			issues = unknownMembers(m[k], ft, path+"."+k, issues)
		}
	case reflect.Slice, reflect.Array:
		a, ok := v.([]any)
		if !ok {
			return issues
		}
		for i, e := range a {
			issues = unknownMembers(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", issues)
		}
	}
	return issues
}

// decodeBody decodes the JSON body b into v (a pointer to a struct) by the rule above: members of
// rep's type (the resource's representation; nil when the body is not a resource) that v does
// not take are dropped, every other member v does not take is reported, all at once.
func decodeBody(b []byte, v any, rep any) error {
	// The common case first: a body with only members v takes decodes in one pass. Anything else
	// (read-only members to drop, unknown ones to report all at once, a type mismatch) takes the
	// full path below, from a zero v.
	if strictDecode(b, v, true) == nil {
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().SetZero()
	}
	var doc any
	if err := strictDecode(b, &doc, false); err != nil {
		return err
	}
	m, ok := doc.(map[string]any)
	if !ok {
		// Not an object: let the typed decode report the mismatch.
		return strictDecode(b, v, true)
	}
	for k := range readOnlyOf(v, rep) {
		delete(m, k)
	}
	if issues := unknownMembers(m, reflect.TypeOf(v), "$", nil); len(issues) > 0 {
		msg := "unknown field"
		if len(issues) > 1 {
			msg = "unknown fields"
		}
		return problem.Validation(msg, issues)
	}
	clean, err := json.Marshal(m)
	if err != nil {
		return problem.Internal(err)
	}
	return strictDecode(clean, v, true)
}

// decodeResource reads a request body into v by decodeBody's rule; an empty body is allowed
// when optional is set.
func decodeResource(r *http.Request, v any, rep any, optional bool) error {
	b, err := readJSON(r, optional)
	if err != nil || b == nil {
		return err
	}
	return decodeBody(b, v, rep)
}
