// Package schema holds Lark's built-in GTS type schemas (the JSON Schemas of ADR 000) and the
// validation that is built on them: registration bodies of functions and workflows
// ([Registry.ValidateEntrypoint]), user-supplied params/returns schemas
// ([Registry.CompileUserSchema]) and instances checked against them ([Registry.ValidateValue]).
//
// Every built-in schema is embedded from builtin/*.json and is addressed by its GTS id; inside
// schemas it is referenced as "gts://<gts id>". References are resolved only against the built-ins:
// an unknown GTS id is an error and every other URL scheme (http, https, file, ...) is refused, so
// compiling a schema never touches the network or the file system. The JSON Schema 2020-12
// metaschema itself comes from the jsonschema library's embedded copy.
//
// Validation results are reported as [Issue] values with JSON paths ("$.traits.limits.memory_mb"),
// all at once and in a deterministic order.
package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed builtin/*.json
var builtinFS embed.FS

// gtsScheme is the URL scheme under which built-in GTS types are referenced ("gts://<gts id>").
const gtsScheme = "gts://"

// GTS ids of built-in types that the validation code uses directly.
const (
	entrypointFunctionID = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~"
	entrypointWorkflowID = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~"
	ownerRefID           = "gts.x.core.serverless.owner_ref.v1~"
	retryPolicyID        = "gts.x.core.serverless.retry_policy.v1~"
	workflowTraitsID     = "gts.x.core.serverless.workflow_traits.v1~"
	starlarkLimitsID     = "gts.x.core.serverless.limits.v1~x.core.serverless.adapter.starlark.limits.v1~"
	dagLimitsID          = "gts.x.core.serverless.limits.v1~x.core.serverless.adapter.dag.limits.v1~"
)

// StarlarkAdapter is the GTS type id of the embedded Starlark adapter, the only adapter Lark can
// execute. Entrypoints name it in implementation.adapter.
const StarlarkAdapter = "gts.x.core.serverless.adapter.starlark.v1~"

// WorkerAdapter is the GTS type id of worker-provided implementations (implementation.kind
// adapter_ref, docs/workers.md): a remote worker that advertises the entrypoint's
// adapter_ref.definition_id runs it. It takes the Starlark adapter's limits.
const WorkerAdapter = "gts.x.core.serverless.adapter.worker.v1~"

// DAGAdapter is the GTS type id of Lark's DAG adapter: a workflow declared as a graph of function
// tasks (implementation.kind workflow_spec, workflow_spec.format "dag"; package dag, docs/dag.md)
// rather than written as Starlark. Only workflows name it. It takes the base limits.
const DAGAdapter = "gts.x.core.serverless.adapter.dag.v1~"

// TokenBucketStrategy is the GTS type id of the built-in (system default) token bucket rate
// limiter. Entrypoints name it in traits.rate_limit.strategy; its config is validated against the
// built-in schema of the same id.
const TokenBucketStrategy = "gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.token_bucket.v1~"

// adapterSpec describes an executable adapter: the GTS type of its limits, the checks it
// imposes on implementation and, when set, the one entrypoint kind that may name it.
type adapterSpec struct {
	limitsID string
	check    func(impl map[string]any) []Issue
	only     string // KindFunction or KindWorkflow; "": both
}

// Registry holds the built-in GTS schemas, compiled once, and a bounded cache of compiled user
// schemas. A Registry is immutable after [New] apart from that cache, and is safe for concurrent
// use.
type Registry struct {
	ids      []string                      // sorted built-in GTS ids
	raw      map[string][]byte             // GTS id -> schema document as embedded
	compiled map[string]*jsonschema.Schema // GTS id -> compiled schema
	props    map[string]map[string]bool    // GTS id -> property names the type declares (incl. allOf/$ref)
	adapters map[string]adapterSpec        // executable adapter GTS id -> spec
	limiters map[string]string             // rate-limit strategy GTS id -> config schema GTS id
	// property names of traits.workflow.compensation / .checkpointing (from workflow_traits)
	wfSubProps map[string]map[string]bool
	cache      *schemaCache
	flightMu   sync.Mutex
	inflight   map[string]*flight // user schemas being compiled, by cache key
}

// New loads and compiles every built-in schema. It fails only if the embedded schemas are broken.
func New() (*Registry, error) {
	r := &Registry{
		raw:      map[string][]byte{},
		compiled: map[string]*jsonschema.Schema{},
		props:    map[string]map[string]bool{},
		cache:    newSchemaCache(defaultCacheSize),
		inflight: map[string]*flight{},
	}
	entries, err := fs.ReadDir(builtinFS, "builtin")
	if err != nil {
		return nil, fmt.Errorf("schema: reading built-ins: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := builtinFS.ReadFile("builtin/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("schema: reading %s: %w", e.Name(), err)
		}
		doc, err := decodeJSON(data)
		if err != nil {
			return nil, fmt.Errorf("schema: parsing %s: %w", e.Name(), err)
		}
		obj, _ := doc.(map[string]any)
		id, _ := obj["$id"].(string)
		gtsID, ok := strings.CutPrefix(id, gtsScheme)
		if !ok || gtsID == "" {
			return nil, fmt.Errorf("schema: %s: $id %q is not a gts:// URI", e.Name(), id)
		}
		if _, dup := r.raw[gtsID]; dup {
			return nil, fmt.Errorf("schema: %s: duplicate built-in %s", e.Name(), gtsID)
		}
		r.raw[gtsID] = data
		r.ids = append(r.ids, gtsID)
	}
	sort.Strings(r.ids)

	c := r.newCompiler()
	for _, id := range r.ids {
		s, err := c.Compile(gtsScheme + id)
		if err != nil {
			return nil, fmt.Errorf("schema: compiling built-in %s: %w", id, err)
		}
		r.compiled[id] = s
	}
	for _, id := range r.ids {
		r.props[id] = r.collectProps(id)
	}
	r.wfSubProps = map[string]map[string]bool{}
	for _, sub := range []string{"compensation", "checkpointing"} {
		r.wfSubProps[sub] = r.nestedProps(workflowTraitsID, sub)
	}

	r.adapters = map[string]adapterSpec{
		StarlarkAdapter: {limitsID: starlarkLimitsID, check: checkStarlarkImplementation},
		WorkerAdapter:   {limitsID: starlarkLimitsID, check: checkWorkerImplementation},
		DAGAdapter:      {limitsID: dagLimitsID, check: checkDAGImplementation, only: KindWorkflow},
	}
	r.limiters = map[string]string{TokenBucketStrategy: TokenBucketStrategy}
	for _, a := range r.adapters {
		if _, ok := r.compiled[a.limitsID]; !ok {
			return nil, fmt.Errorf("schema: adapter limits schema %s is not built in", a.limitsID)
		}
	}
	for strategy, cfg := range r.limiters {
		if _, ok := r.compiled[cfg]; !ok {
			return nil, fmt.Errorf("schema: rate-limit strategy %s has no built-in config schema", strategy)
		}
	}
	return r, nil
}

// IDs returns the GTS ids of all built-in schemas, sorted.
func (r *Registry) IDs() []string { return slices.Clone(r.ids) }

// Raw returns the JSON document of a built-in schema as embedded (its $id is "gts://<gtsID>").
// The id may be given with or without the "gts://" prefix. The returned slice is a copy.
func (r *Registry) Raw(gtsID string) (json.RawMessage, bool) {
	data, ok := r.raw[strings.TrimPrefix(gtsID, gtsScheme)]
	if !ok {
		return nil, false
	}
	return json.RawMessage(bytes.Clone(data)), true
}

// Schema returns the compiled built-in schema of a GTS type, with or without the "gts://" prefix.
// It fails for ids that are not built in.
func (r *Registry) Schema(gtsID string) (*jsonschema.Schema, error) {
	s, ok := r.compiled[strings.TrimPrefix(gtsID, gtsScheme)]
	if !ok {
		return nil, fmt.Errorf("schema: unknown GTS type %q (not a built-in schema)", gtsID)
	}
	return s, nil
}

// Adapters returns the adapter GTS ids that entrypoints may name in implementation.adapter, sorted.
// An adapter is listed only if Lark can execute it and knows its limits schema. Limits types of the
// Lambda and Temporal adapters are built in as GTS types (000 defines them), but Lark cannot run
// those adapters, so the result is [StarlarkAdapter], [WorkerAdapter] (run by remote workers) and
// [DAGAdapter] (workflows declared as a graph of function tasks).
func (r *Registry) Adapters() []string {
	out := make([]string, 0, len(r.adapters))
	for id := range r.adapters {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// RateLimitStrategies returns the rate limiter strategy GTS ids that entrypoints may name in
// traits.rate_limit.strategy, sorted. Each has a built-in config schema of the same id; today the
// only one is [TokenBucketStrategy].
func (r *Registry) RateLimitStrategies() []string {
	out := make([]string, 0, len(r.limiters))
	for id := range r.limiters {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// newCompiler returns a compiler that resolves gts:// against the built-ins, refuses every other
// scheme, asserts formats and defaults to draft 2020-12. The library validates every compiled
// schema against its metaschema.
func (r *Registry) newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(gtsLoader{raw: r.raw})
	return c
}

// gtsLoader resolves gts://<id> to a built-in schema and refuses everything else. It hands out a
// freshly decoded document on every load so concurrent compilers never share mutable state.
type gtsLoader struct {
	raw map[string][]byte
}

// errRefused marks a reference the loader will not follow.
type errRefused struct{ msg string }

func (e *errRefused) Error() string { return e.msg }

// Load implements jsonschema.URLLoader.
func (l gtsLoader) Load(u string) (any, error) {
	if id, ok := strings.CutPrefix(u, gtsScheme); ok {
		data, ok := l.raw[id]
		if !ok {
			return nil, &errRefused{fmt.Sprintf("unknown GTS type %s: no built-in schema has this id", quote(id))}
		}
		return decodeJSON(data)
	}
	// A relative reference in a user schema resolves against the (unresolvable) base URL under
	// which user schemas are compiled; show it as the user wrote it.
	shown := strings.TrimPrefix(u, userSchemaBase)
	return nil, &errRefused{fmt.Sprintf("reference %s refused: only gts:// references to built-in GTS types are allowed (no network, file or relative references)", quote(shown))}
}

// collectProps returns the property names a built-in type declares, following allOf/anyOf/oneOf
// and gts:// $refs to other built-ins.
func (r *Registry) collectProps(id string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		if props, ok := obj["properties"].(map[string]any); ok {
			for k := range props {
				out[k] = true
			}
		}
		for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
			if arr, ok := obj[kw].([]any); ok {
				for _, sub := range arr {
					walk(sub)
				}
			}
		}
		if ref, ok := obj["$ref"].(string); ok {
			if rid, ok := strings.CutPrefix(ref, gtsScheme); ok && !seen[rid] {
				seen[rid] = true
				if data, ok := r.raw[rid]; ok {
					if doc, err := decodeJSON(data); err == nil {
						walk(doc)
					}
				}
			}
		}
	}
	seen[id] = true
	if doc, err := decodeJSON(r.raw[id]); err == nil {
		walk(doc)
	}
	return out
}

// decodeJSON decodes one JSON document keeping numbers as json.Number.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the JSON document")
	}
	return v, nil
}
