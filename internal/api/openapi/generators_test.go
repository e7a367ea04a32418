package openapi_test

// What the common client generators need of the document (issue 35; .ci/generated-clients runs
// oapi-codegen, ogen and openapi-typescript on it and compiles what they write): no type arrays,
// request schemas that say which members are required, and a registration body typed down to its
// traits, schema and implementation.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/larkrun/lark/internal/api/openapi"
	lschema "github.com/larkrun/lark/internal/schema"
)

// loadDocument decodes the embedded document.
func loadDocument(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestNoTypeArrays: oapi-codegen ("unhandled Schema type") and ogen ("multiple types are not
// supported") reject "type": [...]; any value is {} and a nullable one anyOf [X, {"type": "null"}].
func TestNoTypeArrays(t *testing.T) {
	t.Parallel()
	var found []string
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ty, ok := v["type"].([]any); ok {
				found = append(found, fmt.Sprintf("%s: %v", at, ty))
			}
			for k, x := range v {
				walk(at+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s/%d", at, i), x)
			}
		}
	}
	walk("#", loadDocument(t))
	sort.Strings(found)
	if len(found) > 0 {
		t.Errorf("%d schemas have a type array, e.g. %s", len(found), strings.Join(found[:min(5, len(found))], "; "))
	}
}

// requestBodySchemas returns each operation's JSON request body schema, resolved one level
// through components, keyed by the component's name or "METHOD path".
func requestBodySchemas(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	comps := doc["components"].(map[string]any)["schemas"].(map[string]any)
	out := map[string]map[string]any{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			rb, ok := o.(map[string]any)["requestBody"].(map[string]any)
			if !ok {
				continue
			}
			mt, ok := rb["content"].(map[string]any)["application/json"].(map[string]any)
			if !ok {
				continue
			}
			s := mt["schema"].(map[string]any)
			key := strings.ToUpper(method) + " " + path
			if r, ok := s["$ref"].(string); ok {
				key = strings.TrimPrefix(r, "#/components/schemas/")
				s = comps[key].(map[string]any)
			}
			out[key] = s
		}
	}
	return out
}

// TestRequestSchemasDeclareRequired: every request body with members lists the ones the server
// requires, or is a merge patch, or is listed in optionalRequests with the reason none is.
func TestRequestSchemasDeclareRequired(t *testing.T) {
	t.Parallel()
	bodies := requestBodySchemas(t, loadDocument(t))
	for name, s := range bodies {
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			continue
		}
		req, _ := s["required"].([]any)
		desc, _ := s["description"].(string)
		switch {
		case strings.HasPrefix(desc, "An RFC 7396 JSON merge patch"):
			if len(req) > 0 {
				t.Errorf("%s: a merge patch requires nothing, has required %v", name, req)
			}
		case len(req) == 0 && optionalRequests[name] == "":
			t.Errorf("%s: no required members and not in optionalRequests", name)
		case len(req) > 0 && optionalRequests[name] != "":
			t.Errorf("%s: in optionalRequests but requires %v", name, req)
		}
		for _, m := range req {
			if _, ok := props[m.(string)]; !ok {
				t.Errorf("%s: required member %v is not a property", name, m)
			}
		}
	}
	for _, name := range slices.Concat(slices.Collect(maps.Keys(requestRequired)), slices.Collect(maps.Keys(optionalRequests))) {
		if _, ok := bodies[name]; !ok {
			t.Errorf("%s is listed but is no operation's request body", name)
		}
	}
	if got := bodies["EntrypointDefinition"]["required"]; fmt.Sprint(got) != "[entrypoint_id title schema traits implementation]" {
		t.Errorf("EntrypointDefinition required = %v", got)
	}
}

// TestRegistrationTyped: traits, schema and implementation of a registration are typed objects
// whose members are the built-in GTS schemas' (so a strict TypeScript client needs no any).
func TestRegistrationTyped(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	comps := doc["components"].(map[string]any)["schemas"].(map[string]any)
	def := comps["EntrypointDefinition"].(map[string]any)["properties"].(map[string]any)
	reg, err := lschema.New()
	if err != nil {
		t.Fatal(err)
	}
	gtsProps := func(id string, path ...string) []string {
		raw, ok := reg.Raw(id)
		if !ok {
			t.Fatalf("no built-in schema %s", id)
		}
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		for _, p := range path {
			s = s["properties"].(map[string]any)[p].(map[string]any)
		}
		return slices.Sorted(maps.Keys(s["properties"].(map[string]any)))
	}
	resolve := func(s map[string]any) map[string]any {
		if r, ok := s["$ref"].(string); ok {
			return comps[strings.TrimPrefix(r, "#/components/schemas/")].(map[string]any)
		}
		return s
	}
	ours := func(s map[string]any) []string {
		return slices.Sorted(maps.Keys(resolve(s)["properties"].(map[string]any)))
	}
	traits := resolve(def["traits"].(map[string]any))
	tprops := traits["properties"].(map[string]any)
	for _, c := range []struct {
		what   string
		schema map[string]any
		want   []string
		extra  []string // members Lark adds to the spec's
	}{
		{"traits", traits, gtsProps("gts.x.core.serverless.entrypoint.v1~", "traits"), []string{"entrypoint", "workflow"}},
		{"schema", def["schema"].(map[string]any), gtsProps("gts.x.core.serverless.io_schema.v1~"), nil},
		{"traits.retry", tprops["retry"].(map[string]any), gtsProps("gts.x.core.serverless.retry_policy.v1~"), nil},
		{"traits.limits", tprops["limits"].(map[string]any), gtsProps("gts.x.core.serverless.limits.v1~"), []string{"cpu", "memory_mb"}},
		{"traits.workflow", tprops["workflow"].(map[string]any), gtsProps("gts.x.core.serverless.workflow_traits.v1~"), nil},
		{"implementation", def["implementation"].(map[string]any), gtsProps("gts.x.core.serverless.implementation.v1~"),
			[]string{"adapter_ref", "code", "kind", "workflow_spec"}},
	} {
		want := slices.Sorted(slices.Values(slices.Concat(c.want, c.extra)))
		if got := ours(c.schema); !slices.Equal(got, want) {
			t.Errorf("%s members = %v, want the spec's %v", c.what, got, want)
		}
	}
	if fmt.Sprint(traits["required"]) != "[invocation retry]" {
		t.Errorf("traits required = %v", traits["required"])
	}
}
