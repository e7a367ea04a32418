package schema

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Entrypoint kinds accepted by [Registry.ValidateEntrypoint].
const (
	// KindFunction validates against gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~.
	KindFunction = "function"
	// KindWorkflow validates against gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~,
	// which additionally requires traits.workflow.
	KindWorkflow = "workflow"
)

// Allowed keys of the parts of a registration body that the GTS schemas leave open. Keys of
// $ref'd types (owner, traits.retry, traits.workflow) are taken from their built-in schemas.
var (
	topLevelKeys = keySet("entrypoint_id", "version", "tenant_id", "owner", "shared", "status", "tags",
		"title", "description", "schema", "traits", "implementation", "created_at", "updated_at")
	traitsKeys     = keySet("invocation", "is_idempotent", "caching", "rate_limit", "limits", "retry", "workflow", "entrypoint")
	invocationKeys = keySet("supported", "default")
	cachingKeys    = keySet("max_age_seconds")
	ioSchemaKeys   = keySet("params", "returns", "errors")
)

// invocationModes are the values of traits.invocation.supported/default.
var invocationModes = keySet("sync", "async")

// ValidateEntrypoint validates a function or workflow registration body and returns every issue
// found, sorted by path then message (nil when the body is valid). kind is [KindFunction] or
// [KindWorkflow]; def is the JSON-decoded body (json.Decoder.UseNumber is expected, float64
// numbers work too). It never panics.
//
// The body is validated as given: the entrypoint base schema requires version, tenant_id, owner
// and status, which Lark's server fills in (or overrides) itself, so callers must fill those
// server-owned fields before calling. Defaults are not applied.
//
// Beyond the GTS schema of the kind, Lark's rules apply:
//   - unknown fields are errors at the top level and in owner, schema, traits,
//     traits.invocation, traits.caching, traits.retry, traits.workflow (and its compensation and
//     checkpointing), traits.limits and traits.rate_limit(.config); the top level also allows
//     entrypoint_id (string) and shared (boolean), traits also allows entrypoint (boolean, 002);
//   - traits.invocation.supported is non-empty without duplicates and contains the default;
//   - implementation.adapter is one of [Registry.Adapters]; Starlark needs kind "code" and
//     code.language "starlark"; the DAG adapter is for workflows and needs kind "workflow_spec"
//     with format "dag";
//   - traits.limits is validated against the adapter's limits type (base fields plus the adapter's
//     own); with an unknown adapter only the base limits type applies;
//   - traits.rate_limit.strategy is one of [Registry.RateLimitStrategies] and its config is
//     validated against that strategy's type (all-zero token bucket limits are accepted: 000 says
//     that disables limiting);
//   - schema.params and schema.returns, when present and not null, compile with
//     [Registry.CompileUserSchema]; schema.errors entries are GTS ids ("gts." prefix).
func (r *Registry) ValidateEntrypoint(kind string, def map[string]any) []Issue {
	issues, err := r.ValidateEntrypointContext(context.Background(), kind, def)
	if err != nil { // the background context never ends; be safe
		return []Issue{{Path: rootPath, Code: CodeInvalidValue, Message: err.Error()}}
	}
	return issues
}

// ValidateEntrypointContext is [Registry.ValidateEntrypoint] that gives up when ctx ends while
// schema.params or schema.returns is being compiled ([Registry.CompileUserSchemaContext]): it then
// returns ctx's error and no issues.
func (r *Registry) ValidateEntrypointContext(ctx context.Context, kind string, def map[string]any) (issues []Issue, err error) {
	defer func() {
		if p := recover(); p != nil {
			issues = []Issue{{Path: rootPath, Code: CodeInvalidValue, Message: fmt.Sprintf("internal validation error: %v", p)}}
		}
	}()
	var schemaID string
	switch kind {
	case KindFunction:
		schemaID = entrypointFunctionID
	case KindWorkflow:
		schemaID = entrypointWorkflowID
	default:
		return []Issue{{Path: rootPath, Code: CodeInvalidValue, Message: fmt.Sprintf("unknown entrypoint kind %s: want 'function' or 'workflow'", quote(kind))}}, nil
	}
	if def == nil {
		def = map[string]any{}
	}
	norm, err := normalize(def)
	if err != nil {
		return []Issue{{Path: rootPath, Code: CodeSchemaMismatch, Message: err.Error()}}, nil
	}
	doc, _ := norm.(map[string]any)

	var out []Issue
	// 1. Strictness: unknown fields are errors, never silently ignored.
	out = append(out, r.strictIssues(doc)...)
	// 2. The GTS schema of the kind.
	if err := r.compiled[schemaID].Validate(doc); err != nil {
		out = append(out, validationIssues(err, rootPath, doc, "")...)
	}
	// 3. Invocation modes.
	out = append(out, invocationIssues(doc)...)
	// 4 and 5. Adapter, implementation and adapter limits.
	out = append(out, r.adapterIssues(kind, doc)...)
	// 6. Rate limit strategy and config.
	out = append(out, r.rateLimitIssues(doc)...)
	// 7. IO schemas.
	io, err := r.ioSchemaIssues(ctx, doc)
	if err != nil {
		return nil, err
	}
	out = append(out, io...)
	return finalize(out), nil
}

// strictIssues reports unknown keys and the types of Lark's additions (shared,
// traits.entrypoint, entrypoint_id) that no GTS schema covers.
func (r *Registry) strictIssues(doc map[string]any) []Issue {
	var out []Issue
	out = append(out, unknownKeys(doc, rootPath, topLevelKeys, "")...)
	out = append(out, expectType(doc, "shared", rootPath, "boolean")...)
	out = append(out, expectType(doc, "entrypoint_id", rootPath, "string")...)
	if owner, ok := doc["owner"].(map[string]any); ok {
		out = append(out, unknownKeys(owner, "$.owner", r.props[ownerRefID], "")...)
	}
	if sch, ok := doc["schema"].(map[string]any); ok {
		out = append(out, unknownKeys(sch, "$.schema", ioSchemaKeys, "")...)
	}
	traits, ok := doc["traits"].(map[string]any)
	if !ok {
		return out
	}
	out = append(out, unknownKeys(traits, "$.traits", traitsKeys, "")...)
	out = append(out, expectType(traits, "entrypoint", "$.traits", "boolean")...)
	if m, ok := traits["invocation"].(map[string]any); ok {
		out = append(out, unknownKeys(m, "$.traits.invocation", invocationKeys, "")...)
	}
	if m, ok := traits["caching"].(map[string]any); ok {
		out = append(out, unknownKeys(m, "$.traits.caching", cachingKeys, "")...)
	}
	if m, ok := traits["retry"].(map[string]any); ok {
		out = append(out, unknownKeys(m, "$.traits.retry", r.props[retryPolicyID], "")...)
	}
	if wf, ok := traits["workflow"].(map[string]any); ok {
		out = append(out, unknownKeys(wf, "$.traits.workflow", r.props[workflowTraitsID], "")...)
		for _, sub := range []string{"compensation", "checkpointing"} {
			if m, ok := wf[sub].(map[string]any); ok {
				out = append(out, unknownKeys(m, "$.traits.workflow."+sub, r.wfSubProps[sub], "")...)
			}
		}
	}
	return out
}

// invocationIssues checks traits.invocation: supported non-empty, no duplicates, default in it.
func invocationIssues(doc map[string]any) []Issue {
	inv, ok := getMap(doc, "traits", "invocation")
	if !ok {
		return nil
	}
	supported, ok := inv["supported"].([]any)
	if !ok {
		return nil
	}
	const base = "$.traits.invocation"
	var out []Issue
	if len(supported) == 0 {
		out = append(out, Issue{Path: base + ".supported", Code: CodeInvalidValue, Message: "must list at least one invocation mode"})
	}
	seen := map[string]int{}
	var modes []string
	for i, m := range supported {
		s, ok := m.(string)
		if !ok {
			continue
		}
		if j, dup := seen[s]; dup {
			out = append(out, Issue{Path: indexPath(base+".supported", i), Code: CodeInvalidValue,
				Message: fmt.Sprintf("duplicate invocation mode %s (already at index %d)", quote(s), j)})
			continue
		}
		seen[s] = i
		modes = append(modes, quote(s))
	}
	if d, ok := inv["default"].(string); ok && invocationModes[d] && len(supported) > 0 {
		if _, in := seen[d]; !in {
			out = append(out, Issue{Path: base + ".default", Code: CodeInvalidValue,
				Message: fmt.Sprintf("default invocation mode %s is not in supported modes [%s]", quote(d), strings.Join(modes, ", "))})
		}
	}
	return out
}

// adapterIssues checks implementation.adapter (for an entrypoint of kind), the adapter's
// implementation rules and traits.limits against the adapter's limits type.
func (r *Registry) adapterIssues(kind string, doc map[string]any) []Issue {
	impl, ok := doc["implementation"].(map[string]any)
	if !ok {
		return nil
	}
	adapter, ok := impl["adapter"].(string)
	if !ok {
		return nil // missing or mistyped: reported by the schema
	}
	spec, known := r.adapters[adapter]
	if !known {
		return []Issue{{Path: "$.implementation.adapter", Code: CodeInvalidValue,
			Message: fmt.Sprintf("unknown adapter %s; supported adapters: %s", quote(adapter), quoteList(r.Adapters()))}}
	}
	out := spec.check(impl)
	if spec.only != "" && spec.only != kind {
		out = append(out, Issue{Path: "$.implementation.adapter", Code: CodeInvalidValue,
			Message: fmt.Sprintf("adapter %s is for %ss only; this GTS id names a %s", quote(adapter), spec.only, kind)})
	}
	limits, ok := getMap(doc, "traits", "limits")
	if !ok {
		return out
	}
	const base = "$.traits.limits"
	if err := r.compiled[spec.limitsID].Validate(limits); err != nil {
		out = append(out, validationIssues(err, base, limits, "")...)
	}
	out = append(out, unknownKeys(limits, base, r.props[spec.limitsID],
		fmt.Sprintf(": not a limit of adapter %s", quote(adapter)))...)
	return out
}

// checkStarlarkImplementation: the Starlark adapter runs inline Starlark code only.
func checkStarlarkImplementation(impl map[string]any) []Issue {
	var out []Issue
	if k, ok := impl["kind"].(string); ok && k != "code" {
		out = append(out, Issue{Path: "$.implementation.kind", Code: CodeInvalidValue,
			Message: fmt.Sprintf("the starlark adapter requires kind 'code', got %s", quote(k))})
	}
	if code, ok := impl["code"].(map[string]any); ok {
		if lang, ok := code["language"].(string); ok && lang != "starlark" {
			out = append(out, Issue{Path: "$.implementation.code.language", Code: CodeInvalidValue,
				Message: fmt.Sprintf("the starlark adapter requires language 'starlark', got %s", quote(lang))})
		}
	}
	return out
}

// checkWorkerImplementation: a worker-provided implementation is an adapter_ref whose
// definition_id names what the worker serves (at most 256 bytes).
func checkWorkerImplementation(impl map[string]any) []Issue {
	if k, ok := impl["kind"].(string); ok && k != "adapter_ref" {
		return []Issue{{Path: "$.implementation.kind", Code: CodeInvalidValue,
			Message: fmt.Sprintf("the worker adapter requires kind 'adapter_ref', got %s", quote(k))}}
	}
	ref, _ := impl["adapter_ref"].(map[string]any)
	if id, _ := ref["definition_id"].(string); id == "" || len(id) > 256 {
		return []Issue{{Path: "$.implementation.adapter_ref.definition_id", Code: CodeInvalidValue,
			Message: "definition_id must be 1 to 256 bytes"}}
	}
	return nil
}

// checkDAGImplementation: the DAG adapter reads a workflow_spec of format "dag". The spec itself
// (tasks, graph, templates, and the task entrypoints, which need the registry) is validated by the
// registry through package dag.
func checkDAGImplementation(impl map[string]any) []Issue {
	if k, ok := impl["kind"].(string); ok && k != "workflow_spec" {
		return []Issue{{Path: "$.implementation.kind", Code: CodeInvalidValue,
			Message: fmt.Sprintf("the dag adapter requires kind 'workflow_spec', got %s", quote(k))}}
	}
	ws, _ := impl["workflow_spec"].(map[string]any)
	if f, ok := ws["format"].(string); ok && f != "dag" {
		return []Issue{{Path: "$.implementation.workflow_spec.format", Code: CodeInvalidValue,
			Message: fmt.Sprintf("the dag adapter requires format 'dag', got %s", quote(f))}}
	}
	return nil
}

// rateLimitIssues checks traits.rate_limit.strategy and validates its config.
func (r *Registry) rateLimitIssues(doc map[string]any) []Issue {
	rl, ok := getMap(doc, "traits", "rate_limit")
	if !ok {
		return nil // absent, null or mistyped (reported by the schema)
	}
	strategy, ok := rl["strategy"].(string)
	if !ok {
		return nil
	}
	const base = "$.traits.rate_limit"
	cfgID, known := r.limiters[strategy]
	if !known {
		return []Issue{{Path: base + ".strategy", Code: CodeInvalidValue,
			Message: fmt.Sprintf("unknown rate limit strategy %s; supported strategies: %s", quote(strategy), quoteList(r.RateLimitStrategies()))}}
	}
	cfg, ok := rl["config"].(map[string]any)
	if !ok {
		return nil
	}
	var out []Issue
	if err := r.compiled[cfgID].Validate(cfg); err != nil {
		out = append(out, validationIssues(err, base+".config", cfg, "")...)
	}
	out = append(out, unknownKeys(cfg, base+".config", r.props[cfgID], ": not a setting of this rate limit strategy")...)
	return out
}

// ioSchemaIssues compiles schema.params/returns and checks schema.errors entries; it fails only
// when ctx ends during a compilation.
func (r *Registry) ioSchemaIssues(ctx context.Context, doc map[string]any) ([]Issue, error) {
	sch, ok := doc["schema"].(map[string]any)
	if !ok {
		return nil, nil
	}
	var out []Issue
	for _, k := range []string{"params", "returns"} {
		if m, ok := sch[k].(map[string]any); ok { // null/absent is void; other types: reported by the schema
			_, iss, err := r.CompileUserSchemaContext(ctx, "$.schema."+k, m)
			if err != nil {
				return nil, err
			}
			out = append(out, iss...)
		}
	}
	if errs, ok := sch["errors"].([]any); ok {
		for i, e := range errs {
			if s, ok := e.(string); ok && !strings.HasPrefix(s, "gts.") {
				out = append(out, Issue{Path: indexPath("$.schema.errors", i), Code: CodeInvalidValue,
					Message: fmt.Sprintf("error type must be a GTS type id (starting with 'gts.'), got %s", quote(s))})
			}
		}
	}
	return out, nil
}

// unknownKeys reports the keys of obj that are not in allowed. suffix is appended to the message.
func unknownKeys(obj map[string]any, path string, allowed map[string]bool, suffix string) []Issue {
	var out []Issue
	for _, k := range sortedKeys(obj) {
		if !allowed[k] {
			out = append(out, Issue{Path: childPath(path, k), Code: CodeUnknownField,
				Message: fmt.Sprintf("unknown field %s%s", quote(k), suffix)})
		}
	}
	return out
}

// expectType reports obj[key] (when present) if it is not of the JSON type want.
func expectType(obj map[string]any, key, path, want string) []Issue {
	v, ok := obj[key]
	if !ok {
		return nil
	}
	if got := jsonTypeName(v); got != want {
		return []Issue{{Path: childPath(path, key), Code: CodeSchemaMismatch,
			Message: fmt.Sprintf("invalid type: expected %s, got %s", want, got)}}
	}
	return nil
}

// nestedProps returns the property names of properties.<name> of a built-in type.
func (r *Registry) nestedProps(id, name string) map[string]bool {
	out := map[string]bool{}
	doc, err := decodeJSON(r.raw[id])
	if err != nil {
		return out
	}
	sub, _ := getMap(asMap(doc), "properties", name, "properties")
	for k := range sub {
		out[k] = true
	}
	return out
}

// getMap follows object keys and returns the object found there.
func getMap(m map[string]any, keys ...string) (map[string]any, bool) {
	cur := m
	for _, k := range keys {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, cur != nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func keySet(keys ...string) map[string]bool {
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = quote(s)
	}
	return strings.Join(q, ", ")
}
