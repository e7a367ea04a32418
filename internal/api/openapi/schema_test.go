package openapi_test

// A small reflector that turns the Go types the API encodes and decodes into JSON Schema 2020-12,
// the schema language of OpenAPI 3.1. It follows encoding/json: the json tag names a member,
// omitempty makes it optional, a pointer, slice or map may be null (Go encodes nil as null),
// time.Time is an RFC 3339 string and json.RawMessage any JSON value.

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

type schema = map[string]any

// anyValue is any JSON value: the empty schema. The generators read it as their "any" type
// (oapi-codegen interface{}, ogen jx.Raw, openapi-typescript unknown), where a union of every type
// made oapi-codegen and ogen fail. Bodies are checked with a JSON Schema 2020-12 validator
// (internal/api/apispec), under which {} accepts null too.
func anyValue() schema { return schema{} }

// nullType is the schema of null.
func nullType() schema { return schema{"type": "null"} }

// reflector renders Go types; named struct types it was told about (components) become $refs.
// Response objects are closed (additionalProperties: false); request objects are open, and their
// required members are listed by hand (requestRequired in build_test.go).
type reflector struct {
	components map[reflect.Type]string
	// request: objects are open and no member is required by reflection (a Go field without
	// omitempty is not one a client must send; requestRequired lists what the server requires).
	request bool
	// enums are the values of named string types.
	enums map[reflect.Type][]any
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
	durType  = reflect.TypeFor[time.Duration]()
)

// nullable is s or null: anyOf [s, {"type": "null"}], the OpenAPI 3.1 spelling the generators
// read as an optional or nullable value (a type array such as ["string", "null"] is not read by
// all of them). Any value and a schema that already admits null are returned as they are.
func nullable(s schema) schema {
	if len(s) == 0 || admitsNull(s) {
		return s
	}
	return schema{"anyOf": []any{s, nullType()}}
}

// admitsNull reports whether s is already an anyOf with a null branch.
func admitsNull(s schema) bool {
	alts, _ := s["anyOf"].([]any)
	for _, a := range alts {
		if m, ok := a.(schema); ok && m["type"] == "null" && len(m) == 1 {
			return true
		}
	}
	return false
}

func (r *reflector) of(t reflect.Type, depth int) schema {
	if depth > 12 {
		return anyValue()
	}
	switch t {
	case timeType:
		return schema{"type": "string", "format": "date-time"}
	case rawType:
		return anyValue()
	case durType:
		return schema{"type": "integer"}
	}
	if name, ok := r.components[t]; ok && depth > 0 {
		return schema{"$ref": "#/components/schemas/" + name}
	}
	if vals, ok := r.enums[t]; ok {
		return schema{"type": "string", "enum": vals}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(r.of(t.Elem(), depth+1))
	case reflect.Interface:
		return anyValue()
	case reflect.String:
		return schema{"type": "string"}
	case reflect.Bool:
		return schema{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return schema{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return schema{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return schema{"type": "string", "contentEncoding": "base64"}
		}
		s := schema{"type": "array", "items": r.of(t.Elem(), depth+1)}
		if t.Kind() == reflect.Slice {
			return nullable(s)
		}
		return s
	case reflect.Map:
		return nullable(schema{"type": "object", "additionalProperties": r.of(t.Elem(), depth+1)})
	case reflect.Struct:
		return r.object(t, depth)
	}
	return anyValue()
}

func (r *reflector) object(t reflect.Type, depth int) schema {
	props := schema{}
	var required []any
	r.fields(t, depth, props, &required)
	s := schema{"type": "object", "properties": props}
	if !r.request {
		// The server encodes exactly these members. A request may carry more: the resource's
		// read-only members are accepted and dropped, unknown ones answer 422.
		s["additionalProperties"] = false
		if len(required) > 0 {
			s["required"] = required
		}
	}
	return s
}

func (r *reflector) fields(t reflect.Type, depth int, props schema, required *[]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				r.fields(ft, depth, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = r.of(f.Type, depth+1)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
}
