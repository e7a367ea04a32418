package schema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/stretchr/testify/require"
)

const (
	calculateTaxFile  = "testdata/calculate_tax_function.json"
	processOrderFile  = "testdata/process_order_workflow.json"
	compensationCtxID = "gts.x.core.serverless.compensation_context.v1~"
)

var (
	regOnce sync.Once
	regVal  *Registry
	regErr  error
)

// testRegistry returns a Registry shared by the tests (New is also tested on its own).
func testRegistry(t testing.TB) *Registry {
	t.Helper()
	regOnce.Do(func() { regVal, regErr = New() })
	require.NoError(t, regErr)
	return regVal
}

// loadDoc decodes a testdata file the way the server does (UseNumber).
func loadDoc(t testing.TB, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	v, err := decodeJSON(data)
	require.NoError(t, err)
	return v.(map[string]any)
}

// set assigns value at the object path given by keys, creating objects on the way.
func set(doc map[string]any, value any, keys ...string) {
	cur := doc
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[keys[len(keys)-1]] = value
}

// del removes the member at the object path given by keys.
func del(doc map[string]any, keys ...string) {
	cur := doc
	for _, k := range keys[:len(keys)-1] {
		cur = cur[k].(map[string]any)
	}
	delete(cur, keys[len(keys)-1])
}

// pathsAndCodes strips messages so tests can compare the stable parts.
func pathsAndCodes(issues []Issue) []Issue {
	if len(issues) == 0 {
		return nil
	}
	out := make([]Issue, len(issues))
	for i, is := range issues {
		out[i] = Issue{Path: is.Path, Code: is.Code}
	}
	return out
}

func TestNewBuiltins(t *testing.T) {
	r, err := New()
	require.NoError(t, err)

	want := []string{
		"gts.x.core.serverless.compensation_context.v1~",
		"gts.x.core.serverless.entrypoint.v1~",
		"gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~",
		"gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~",
		"gts.x.core.serverless.err.v1~",
		"gts.x.core.serverless.err.v1~x.core.serverless.err.not_active.v1~",
		"gts.x.core.serverless.err.v1~x.core.serverless.err.not_found.v1~",
		"gts.x.core.serverless.err.v1~x.core.serverless.err.quota_exceeded.v1~",
		"gts.x.core.serverless.err.v1~x.core.serverless.err.rate_limited.v1~",
		"gts.x.core.serverless.err.v1~x.core.serverless.err.validation.v1~",
		"gts.x.core.serverless.implementation.v1~",
		"gts.x.core.serverless.invocation.v1~",
		"gts.x.core.serverless.io_schema.v1~",
		"gts.x.core.serverless.limits.v1~",
		"gts.x.core.serverless.limits.v1~x.core.serverless.adapter.dag.limits.v1~",
		"gts.x.core.serverless.limits.v1~x.core.serverless.adapter.lambda.limits.v1~",
		"gts.x.core.serverless.limits.v1~x.core.serverless.adapter.starlark.limits.v1~",
		"gts.x.core.serverless.limits.v1~x.core.serverless.adapter.temporal.limits.v1~",
		"gts.x.core.serverless.owner_ref.v1~",
		"gts.x.core.serverless.rate_limit.v1~",
		"gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.token_bucket.v1~",
		"gts.x.core.serverless.retry_policy.v1~",
		"gts.x.core.serverless.schedule.v1~",
		"gts.x.core.serverless.status.v1~",
		"gts.x.core.serverless.tenant_policy.v1~",
		"gts.x.core.serverless.timeline_event.v1~",
		"gts.x.core.serverless.trigger.v1~",
		"gts.x.core.serverless.workflow_traits.v1~",
	}
	require.Equal(t, want, r.IDs())

	for _, id := range r.IDs() {
		t.Run(id, func(t *testing.T) {
			s, err := r.Schema(id)
			require.NoError(t, err)
			require.NotNil(t, s)
			s2, err := r.Schema(gtsScheme + id)
			require.NoError(t, err)
			require.Same(t, s, s2)

			raw, ok := r.Raw(id)
			require.True(t, ok)
			var doc map[string]any
			require.NoError(t, json.Unmarshal(raw, &doc))
			require.Equal(t, gtsScheme+id, doc["$id"])
			require.Equal(t, "https://json-schema.org/draft/2020-12/schema", doc["$schema"])
		})
	}

	_, err = r.Schema("gts.x.core.serverless.nope.v1~")
	require.ErrorContains(t, err, "unknown GTS type")
	_, ok := r.Raw("gts.x.core.serverless.nope.v1~")
	require.False(t, ok)

	// Raw hands out copies.
	raw, _ := r.Raw(ownerRefID)
	raw[0] = 'X'
	raw2, _ := r.Raw(ownerRefID)
	require.Equal(t, byte('{'), raw2[0])

	// IDs hands out a copy.
	ids := r.IDs()
	ids[0] = "changed"
	require.Equal(t, want[0], r.IDs()[0])
}

func TestBuiltinSchemasValidateSpecExamples(t *testing.T) {
	r := testRegistry(t)
	tests := []struct {
		id   string
		doc  string
		want []Issue
	}{
		{id: "gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.token_bucket.v1~",
			doc: `{"max_requests_per_second": 50, "max_requests_per_minute": 1000, "burst_size": 20}`},
		{id: compensationCtxID, doc: `{"trigger": "failure", "original_workflow_invocation_id": "inv_a1b2c3d4",
			"failed_step_id": "create_shipping_label", "workflow_state_snapshot": {}, "timestamp": "2026-02-08T10:00:47Z",
			"invocation_metadata": {"entrypoint_id": "gts.x", "original_input": {}, "tenant_id": "t_123"}}`},
		{id: compensationCtxID, doc: `{"trigger": "failure", "original_workflow_invocation_id": "inv",
			"failed_step_id": "s", "workflow_state_snapshot": {}, "timestamp": "yesterday",
			"invocation_metadata": {"entrypoint_id": "gts.x", "original_input": {}, "tenant_id": "t_123"}}`,
			want: []Issue{{Path: "$.timestamp", Code: CodeSchemaMismatch}}},
		{id: "gts.x.core.serverless.status.v1~", doc: `"running"`},
		{id: "gts.x.core.serverless.status.v1~", doc: `"sleeping"`, want: []Issue{{Path: "$", Code: CodeSchemaMismatch}}},
		{id: "gts.x.core.serverless.err.v1~x.core.serverless.err.rate_limited.v1~", doc: `{"message": "slow down", "category": "retryable"}`},
		{id: "gts.x.core.serverless.err.v1~x.core.serverless.err.not_found.v1~", doc: `{"message": "gone"}`,
			want: []Issue{{Path: "$.category", Code: CodeMissingField}}},
		{id: "gts.x.core.serverless.limits.v1~x.core.serverless.adapter.temporal.limits.v1~", doc: `{"timeout_seconds": 0}`,
			want: []Issue{{Path: "$.timeout_seconds", Code: CodeSchemaMismatch}}},
		{id: "gts.x.core.serverless.invocation.v1~", doc: `{"invocation_id": "inv_abc", "entrypoint_id": "gts.x",
			"entrypoint_version": "1.0.0", "tenant_id": "t_123", "status": "running", "mode": "async",
			"params": {"invoice_id": "inv_001", "amount": 100.0}, "result": null,
			"error": {"error_type_id": "gts.x", "message": "m", "category": "timeout"},
			"timestamps": {"created_at": "2026-01-01T00:00:00.000Z", "started_at": null},
			"observability": {"correlation_id": "corr_789"}}`},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("%d_%s", i, tc.id), func(t *testing.T) {
			s, err := r.Schema(tc.id)
			require.NoError(t, err)
			got := r.ValidateValue(s, "$", json.RawMessage(tc.doc))
			require.Equal(t, tc.want, pathsAndCodes(got), "issues: %+v", got)
		})
	}
}

func TestAdaptersAndStrategies(t *testing.T) {
	r := testRegistry(t)
	require.Equal(t, []string{DAGAdapter, StarlarkAdapter, WorkerAdapter}, r.Adapters())
	require.Equal(t, []string{TokenBucketStrategy}, r.RateLimitStrategies())
	for _, id := range r.RateLimitStrategies() {
		_, err := r.Schema(id)
		require.NoError(t, err, "every strategy has a built-in config schema")
	}
}

func TestSpecExamplesValidate(t *testing.T) {
	r := testRegistry(t)
	require.Empty(t, r.ValidateEntrypoint(KindFunction, loadDoc(t, calculateTaxFile)))
	require.Empty(t, r.ValidateEntrypoint(KindWorkflow, loadDoc(t, processOrderFile)))
	// A workflow is valid as a function too (it only adds traits.workflow).
	require.Empty(t, r.ValidateEntrypoint(KindFunction, loadDoc(t, processOrderFile)))

	// Bodies decoded without UseNumber (float64 numbers) validate the same.
	for _, f := range []string{calculateTaxFile, processOrderFile} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(data, &doc))
		epKind := KindFunction
		if f == processOrderFile {
			epKind = KindWorkflow
		}
		require.Empty(t, r.ValidateEntrypoint(epKind, doc), f)
	}
}

func TestValidateEntrypointRules(t *testing.T) {
	r := testRegistry(t)
	tests := []struct {
		name    string
		kind    string
		file    string // defaults to the calculate_tax function
		mutate  func(d map[string]any)
		want    []Issue // paths and codes, sorted
		message string  // substring of the first issue's message
	}{
		{name: "unknown top-level field", mutate: func(d map[string]any) { d["colour"] = "red" },
			want: []Issue{{Path: "$.colour", Code: CodeUnknownField}}, message: "unknown field 'colour'"},
		{name: "odd top-level key uses bracket notation", mutate: func(d map[string]any) { d["x-y"] = 1 },
			want: []Issue{{Path: "$['x-y']", Code: CodeUnknownField}}},
		{name: "unknown traits field", mutate: func(d map[string]any) { set(d, true, "traits", "foo") },
			want: []Issue{{Path: "$.traits.foo", Code: CodeUnknownField}}},
		{name: "unknown invocation field", mutate: func(d map[string]any) { set(d, 1, "traits", "invocation", "mode") },
			want: []Issue{{Path: "$.traits.invocation.mode", Code: CodeUnknownField}}},
		{name: "unknown caching field", mutate: func(d map[string]any) { set(d, 1, "traits", "caching", "ttl") },
			want: []Issue{{Path: "$.traits.caching.ttl", Code: CodeUnknownField}}},
		{name: "unknown retry field", mutate: func(d map[string]any) { set(d, 1, "traits", "retry", "jitter") },
			want: []Issue{{Path: "$.traits.retry.jitter", Code: CodeUnknownField}}},
		{name: "unknown owner field", mutate: func(d map[string]any) { set(d, "x", "owner", "email") },
			want: []Issue{{Path: "$.owner.email", Code: CodeUnknownField}}},
		{name: "unknown schema field", mutate: func(d map[string]any) { set(d, map[string]any{}, "schema", "input") },
			want: []Issue{{Path: "$.schema.input", Code: CodeUnknownField}}},
		{name: "unknown rate_limit field", mutate: func(d map[string]any) { set(d, 1, "traits", "rate_limit", "scope") },
			want: []Issue{{Path: "$.traits.rate_limit.scope", Code: CodeUnknownField}}},
		{name: "lark additions accepted", mutate: func(d map[string]any) {
			d["entrypoint_id"] = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.calculate_tax.v1~"
			d["shared"] = true
			set(d, false, "traits", "entrypoint")
			set(d, nil, "traits", "rate_limit")
		}},
		{name: "traits.entrypoint must be boolean", mutate: func(d map[string]any) { set(d, "no", "traits", "entrypoint") },
			want: []Issue{{Path: "$.traits.entrypoint", Code: CodeSchemaMismatch}}, message: "expected boolean, got string"},
		{name: "shared must be boolean", mutate: func(d map[string]any) { d["shared"] = json.Number("1") },
			want: []Issue{{Path: "$.shared", Code: CodeSchemaMismatch}}},
		{name: "missing title", mutate: func(d map[string]any) { delete(d, "title") },
			want: []Issue{{Path: "$.title", Code: CodeMissingField}}, message: "missing required property 'title'"},
		{name: "tag of wrong type", mutate: func(d map[string]any) { d["tags"] = []any{"ok", json.Number("3")} },
			want: []Issue{{Path: "$.tags[1]", Code: CodeSchemaMismatch}}, message: "expected string, got number"},
		{name: "bad status", mutate: func(d map[string]any) { d["status"] = "live" },
			want: []Issue{{Path: "$.status", Code: CodeSchemaMismatch}}, message: "value must be one of"},
		{name: "bad created_at format", mutate: func(d map[string]any) { d["created_at"] = "yesterday" },
			want: []Issue{{Path: "$.created_at", Code: CodeSchemaMismatch}}, message: "date-time"},
		{name: "memory_mb too large", mutate: func(d map[string]any) { set(d, json.Number("1024"), "traits", "limits", "memory_mb") },
			want: []Issue{{Path: "$.traits.limits.memory_mb", Code: CodeSchemaMismatch}}, message: "must be <= 512, got 1024"},
		{name: "cpu too large", mutate: func(d map[string]any) { set(d, json.Number("2"), "traits", "limits", "cpu") },
			want: []Issue{{Path: "$.traits.limits.cpu", Code: CodeSchemaMismatch}}, message: "must be <= 1, got 2"},
		{name: "cpu too small (float64)", mutate: func(d map[string]any) { set(d, 0.05, "traits", "limits", "cpu") },
			want: []Issue{{Path: "$.traits.limits.cpu", Code: CodeSchemaMismatch}}, message: "must be >= 0.1, got 0.05"},
		{name: "memory_mb not an integer", mutate: func(d map[string]any) { set(d, 1.5, "traits", "limits", "memory_mb") },
			want: []Issue{{Path: "$.traits.limits.memory_mb", Code: CodeSchemaMismatch}}},
		{name: "timeout below base minimum reported once", mutate: func(d map[string]any) { set(d, json.Number("0"), "traits", "limits", "timeout_seconds") },
			want: []Issue{{Path: "$.traits.limits.timeout_seconds", Code: CodeSchemaMismatch}}},
		{name: "unknown limits field", mutate: func(d map[string]any) { set(d, json.Number("1"), "traits", "limits", "gpu") },
			want: []Issue{{Path: "$.traits.limits.gpu", Code: CodeUnknownField}}, message: "not a limit of adapter"},
		{name: "lambda-only limit rejected for starlark", mutate: func(d map[string]any) {
			set(d, json.Number("512"), "traits", "limits", "ephemeral_storage_mb")
		}, want: []Issue{{Path: "$.traits.limits.ephemeral_storage_mb", Code: CodeUnknownField}}},
		{name: "missing limits", mutate: func(d map[string]any) { del(d, "traits", "limits") },
			want: []Issue{{Path: "$.traits.limits", Code: CodeMissingField}}},
		{name: "workflow without traits.workflow", kind: KindWorkflow,
			want: []Issue{{Path: "$.traits.workflow", Code: CodeMissingField}}, message: "missing required property 'workflow'"},
		{name: "unknown traits.workflow field", kind: KindWorkflow, file: processOrderFile,
			mutate: func(d map[string]any) { set(d, true, "traits", "workflow", "durable") },
			want:   []Issue{{Path: "$.traits.workflow.durable", Code: CodeUnknownField}}},
		{name: "unknown compensation field", kind: KindWorkflow, file: processOrderFile,
			mutate: func(d map[string]any) { set(d, nil, "traits", "workflow", "compensation", "on_timeout") },
			want:   []Issue{{Path: "$.traits.workflow.compensation.on_timeout", Code: CodeUnknownField}}},
		{name: "compensation handler of wrong type", kind: KindWorkflow, file: processOrderFile,
			mutate:  func(d map[string]any) { set(d, json.Number("5"), "traits", "workflow", "compensation", "on_cancel") },
			want:    []Issue{{Path: "$.traits.workflow.compensation.on_cancel", Code: CodeSchemaMismatch}},
			message: "invalid type: expected string or null, got number"},
		{name: "bad checkpointing strategy", kind: KindWorkflow, file: processOrderFile,
			mutate: func(d map[string]any) { set(d, "sometimes", "traits", "workflow", "checkpointing", "strategy") },
			want:   []Issue{{Path: "$.traits.workflow.checkpointing.strategy", Code: CodeSchemaMismatch}}},
		{name: "unknown adapter", mutate: func(d map[string]any) {
			set(d, "gts.x.core.serverless.adapter.lambda.v1~", "implementation", "adapter")
		},
			want: []Issue{{Path: "$.implementation.adapter", Code: CodeInvalidValue}}, message: "unknown adapter"},
		{name: "unknown adapter: only base limits apply", mutate: func(d map[string]any) {
			set(d, "gts.x.core.serverless.adapter.wasm.v1~", "implementation", "adapter")
			set(d, json.Number("4096"), "traits", "limits", "memory_mb")
			set(d, json.Number("0"), "traits", "limits", "max_concurrent")
		}, want: []Issue{
			{Path: "$.implementation.adapter", Code: CodeInvalidValue},
			{Path: "$.traits.limits.max_concurrent", Code: CodeSchemaMismatch},
		}},
		{name: "missing adapter", mutate: func(d map[string]any) { del(d, "implementation", "adapter") },
			want: []Issue{{Path: "$.implementation.adapter", Code: CodeMissingField}}},
		{name: "starlark needs kind code", mutate: func(d map[string]any) {
			d["implementation"] = map[string]any{"adapter": StarlarkAdapter, "kind": "adapter_ref",
				"adapter_ref": map[string]any{"definition_id": "x"}}
		}, want: []Issue{{Path: "$.implementation.kind", Code: CodeInvalidValue}}, message: "requires kind 'code'"},
		{name: "dag workflow without code", kind: KindWorkflow, file: processOrderFile, mutate: func(d map[string]any) {
			d["implementation"] = dagImplementation("dag")
			del(d, "traits", "limits", "memory_mb")
			del(d, "traits", "limits", "cpu")
		}},
		{name: "dag is for workflows", mutate: func(d map[string]any) {
			d["implementation"] = dagImplementation("dag")
			del(d, "traits", "limits", "memory_mb")
			del(d, "traits", "limits", "cpu")
		}, want: []Issue{{Path: "$.implementation.adapter", Code: CodeInvalidValue}}, message: "is for workflows only; this GTS id names a function"},
		{name: "dag needs kind workflow_spec", kind: KindWorkflow, file: processOrderFile, mutate: func(d map[string]any) {
			set(d, DAGAdapter, "implementation", "adapter")
			del(d, "traits", "limits", "memory_mb")
			del(d, "traits", "limits", "cpu")
		}, want: []Issue{{Path: "$.implementation.kind", Code: CodeInvalidValue}}, message: "the dag adapter requires kind 'workflow_spec', got 'code'"},
		{name: "dag needs format dag", kind: KindWorkflow, file: processOrderFile, mutate: func(d map[string]any) {
			d["implementation"] = dagImplementation("serverless-workflow")
			del(d, "traits", "limits", "memory_mb")
			del(d, "traits", "limits", "cpu")
		}, want: []Issue{{Path: "$.implementation.workflow_spec.format", Code: CodeInvalidValue}}, message: "requires format 'dag'"},
		{name: "dag takes the base limits only", kind: KindWorkflow, file: processOrderFile, mutate: func(d map[string]any) {
			d["implementation"] = dagImplementation("dag")
			del(d, "traits", "limits", "cpu")
		}, want: []Issue{{Path: "$.traits.limits.memory_mb", Code: CodeUnknownField}}, message: "not a limit of adapter"},
		{name: "starlark needs kind code, not workflow_spec", kind: KindWorkflow, file: processOrderFile, mutate: func(d map[string]any) {
			d["implementation"] = dagImplementation("dag")
			set(d, StarlarkAdapter, "implementation", "adapter")
		}, want: []Issue{{Path: "$.implementation.kind", Code: CodeInvalidValue}}, message: "requires kind 'code'"},
		{name: "starlark needs language starlark", mutate: func(d map[string]any) { set(d, "wasm", "implementation", "code", "language") },
			want: []Issue{{Path: "$.implementation.code.language", Code: CodeInvalidValue}}},
		{name: "unknown implementation kind", mutate: func(d map[string]any) { set(d, "binary", "implementation", "kind") },
			want: []Issue{
				{Path: "$.implementation.kind", Code: CodeInvalidValue},
				{Path: "$.implementation.kind", Code: CodeSchemaMismatch},
			}},
		{name: "missing implementation source", mutate: func(d map[string]any) { del(d, "implementation", "code", "source") },
			want: []Issue{{Path: "$.implementation.code.source", Code: CodeMissingField}}},
		{name: "unknown rate limit strategy", mutate: func(d map[string]any) {
			set(d, "gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.sliding_window.v1~", "traits", "rate_limit", "strategy")
		}, want: []Issue{{Path: "$.traits.rate_limit.strategy", Code: CodeInvalidValue}}, message: "unknown rate limit strategy"},
		{name: "unknown token bucket config field", mutate: func(d map[string]any) {
			set(d, json.Number("10"), "traits", "rate_limit", "config", "window_size_seconds")
		}, want: []Issue{{Path: "$.traits.rate_limit.config.window_size_seconds", Code: CodeUnknownField}}},
		{name: "token bucket burst below minimum", mutate: func(d map[string]any) {
			set(d, json.Number("0"), "traits", "rate_limit", "config", "burst_size")
		}, want: []Issue{{Path: "$.traits.rate_limit.config.burst_size", Code: CodeSchemaMismatch}}},
		{name: "token bucket all zero accepted (limiting disabled)", mutate: func(d map[string]any) {
			set(d, map[string]any{"max_requests_per_second": json.Number("0"), "max_requests_per_minute": json.Number("0")}, "traits", "rate_limit", "config")
		}},
		{name: "rate limit without config", mutate: func(d map[string]any) { del(d, "traits", "rate_limit", "config") },
			want: []Issue{{Path: "$.traits.rate_limit.config", Code: CodeMissingField}}},
		{name: "rate limit of wrong type", mutate: func(d map[string]any) { set(d, "fast", "traits", "rate_limit") },
			want: []Issue{{Path: "$.traits.rate_limit", Code: CodeSchemaMismatch}}, message: "expected object or null, got string"},
		{name: "default mode not supported", mutate: func(d map[string]any) { set(d, []any{"sync"}, "traits", "invocation", "supported") },
			want: []Issue{{Path: "$.traits.invocation.default", Code: CodeInvalidValue}}, message: "not in supported modes ['sync']"},
		{name: "empty supported modes", mutate: func(d map[string]any) { set(d, []any{}, "traits", "invocation", "supported") },
			want: []Issue{{Path: "$.traits.invocation.supported", Code: CodeInvalidValue}}},
		{name: "duplicate supported modes", mutate: func(d map[string]any) { set(d, []any{"async", "sync", "async"}, "traits", "invocation", "supported") },
			want: []Issue{{Path: "$.traits.invocation.supported[2]", Code: CodeInvalidValue}}},
		{name: "unknown invocation mode", mutate: func(d map[string]any) { set(d, []any{"async", "batch"}, "traits", "invocation", "supported") },
			want: []Issue{{Path: "$.traits.invocation.supported[1]", Code: CodeSchemaMismatch}}},
		{name: "invalid params schema", mutate: func(d map[string]any) { set(d, map[string]any{"type": json.Number("12")}, "schema", "params") },
			want: []Issue{{Path: "$.schema.params.type", Code: CodeInvalidSchema}}},
		{name: "invalid returns schema", mutate: func(d map[string]any) {
			set(d, map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"minimum": "one"}}}, "schema", "returns")
		}, want: []Issue{{Path: "$.schema.returns.properties.a.minimum", Code: CodeInvalidSchema}}},
		{name: "params $ref to compensation context", mutate: func(d map[string]any) {
			set(d, map[string]any{"$ref": gtsScheme + compensationCtxID}, "schema", "params")
		}},
		{name: "params $ref to unknown gts id", mutate: func(d map[string]any) {
			set(d, map[string]any{"$ref": "gts://gts.x.core.serverless.nope.v1~"}, "schema", "params")
		}, want: []Issue{{Path: "$.schema.params['$ref']", Code: CodeInvalidSchema}}, message: "unknown GTS type 'gts.x.core.serverless.nope.v1~'"},
		{name: "params $ref to http refused", mutate: func(d map[string]any) {
			set(d, map[string]any{"$ref": "http://example.com/schema.json"}, "schema", "params")
		}, want: []Issue{{Path: "$.schema.params['$ref']", Code: CodeInvalidSchema}}, message: "refused"},
		{name: "void params and returns", mutate: func(d map[string]any) {
			set(d, nil, "schema", "params")
			del(d, "schema", "returns")
		}},
		{name: "params not an object", mutate: func(d map[string]any) { set(d, "object", "schema", "params") },
			want: []Issue{{Path: "$.schema.params", Code: CodeSchemaMismatch}}},
		{name: "error ids must be GTS ids", mutate: func(d map[string]any) { set(d, []any{"gts.x.ok.v1~", "timeout"}, "schema", "errors") },
			want: []Issue{{Path: "$.schema.errors[1]", Code: CodeInvalidValue}}},
		{name: "unknown kind", kind: "job",
			want: []Issue{{Path: "$", Code: CodeInvalidValue}}, message: "unknown entrypoint kind 'job'"},
		{name: "typed Go values are accepted", mutate: func(d map[string]any) { d["tags"] = []string{"billing"} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file == "" {
				file = calculateTaxFile
			}
			epKind := tc.kind
			if epKind == "" {
				epKind = KindFunction
			}
			d := loadDoc(t, file)
			if tc.mutate != nil {
				tc.mutate(d)
			}
			got := r.ValidateEntrypoint(epKind, d)
			require.Equal(t, tc.want, pathsAndCodes(got), "issues: %+v", got)
			if tc.message != "" {
				require.Contains(t, got[0].Message, tc.message)
			}
			for _, is := range got {
				require.NotEmpty(t, is.Message)
			}
		})
	}
}

func TestValidateEntrypointReportsAllIssuesSorted(t *testing.T) {
	r := testRegistry(t)
	d := loadDoc(t, calculateTaxFile)
	d["colour"] = "red"
	delete(d, "title")
	set(d, true, "traits", "foo")
	set(d, json.Number("1024"), "traits", "limits", "memory_mb")
	set(d, json.Number("2"), "traits", "limits", "cpu")
	set(d, json.Number("1"), "traits", "limits", "gpu")
	set(d, json.Number("1"), "traits", "rate_limit", "config", "leak_rate")
	set(d, "gts.x.core.serverless.adapter.starlark.v1~", "implementation", "adapter")
	set(d, map[string]any{"type": json.Number("12")}, "schema", "params")

	got := r.ValidateEntrypoint(KindFunction, d)
	require.Equal(t, []Issue{
		{Path: "$.colour", Code: CodeUnknownField},
		{Path: "$.schema.params.type", Code: CodeInvalidSchema},
		{Path: "$.title", Code: CodeMissingField},
		{Path: "$.traits.foo", Code: CodeUnknownField},
		{Path: "$.traits.limits.cpu", Code: CodeSchemaMismatch},
		{Path: "$.traits.limits.gpu", Code: CodeUnknownField},
		{Path: "$.traits.limits.memory_mb", Code: CodeSchemaMismatch},
		{Path: "$.traits.rate_limit.config.leak_rate", Code: CodeUnknownField},
	}, pathsAndCodes(got), "issues: %+v", got)

	// Deterministic: the same input gives the same output.
	for range 5 {
		require.Equal(t, got, r.ValidateEntrypoint(KindFunction, d))
	}
}

func TestValidateEntrypointNeverPanics(t *testing.T) {
	r := testRegistry(t)
	bodies := []map[string]any{
		nil,
		{},
		{"traits": "x", "schema": []any{}, "implementation": json.Number("1"), "owner": nil},
		{"traits": map[string]any{"invocation": map[string]any{"supported": "sync", "default": json.Number("1")},
			"limits": []any{}, "rate_limit": map[string]any{"strategy": json.Number("1"), "config": "x"}, "workflow": "y"}},
		{"traits": map[string]any{"invocation": map[string]any{"supported": []any{nil, map[string]any{}}}},
			"implementation": map[string]any{"adapter": StarlarkAdapter, "code": "x", "kind": json.Number("2")},
			"schema":         map[string]any{"params": map[string]any{"$ref": json.Number("1")}, "errors": "x"}},
		{"tags": []any{map[string]any{"a": func() {}}}},
	}
	for i, b := range bodies {
		for _, epKind := range []string{KindFunction, KindWorkflow} {
			require.NotPanics(t, func() {
				got := r.ValidateEntrypoint(epKind, b)
				require.NotEmpty(t, got, "body %d", i)
			})
		}
	}
	got := r.ValidateEntrypoint(KindWorkflow, nil)
	require.Contains(t, pathsAndCodes(got), Issue{Path: "$.traits", Code: CodeMissingField})
}

func TestCompileUserSchema(t *testing.T) {
	r := testRegistry(t)
	tests := []struct {
		name    string
		schema  any
		want    []Issue
		message string
	}{
		{name: "object schema", schema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer"}}}},
		{name: "raw JSON", schema: json.RawMessage(`{"type": "array", "items": {"type": "string"}}`)},
		{name: "empty schema accepts anything", schema: map[string]any{}},
		{name: "explicit 2020-12", schema: map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema"}},
		{name: "gts ref", schema: map[string]any{"$ref": "gts://" + compensationCtxID}},
		{name: "local defs ref", schema: json.RawMessage(`{"$defs": {"id": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/id"}}}`)},
		{name: "bad type", schema: map[string]any{"type": json.Number("12")},
			want: []Issue{{Path: "$.p.type", Code: CodeInvalidSchema}}, message: "value must be one of"},
		{name: "misspelled type", schema: json.RawMessage(`{"properties": {"a": {"type": "strin"}}}`),
			want: []Issue{{Path: "$.p.properties.a.type", Code: CodeInvalidSchema}}},
		{name: "required not an array", schema: map[string]any{"required": "a"},
			want: []Issue{{Path: "$.p.required", Code: CodeInvalidSchema}}, message: "expected array, got string"},
		{name: "items array element", schema: json.RawMessage(`{"prefixItems": [{"type": "string"}, {"type": 1}]}`),
			want: []Issue{{Path: "$.p.prefixItems[1].type", Code: CodeInvalidSchema}}},
		{name: "unknown gts id", schema: map[string]any{"properties": map[string]any{"x": map[string]any{"$ref": "gts://gts.x.nope.v1~"}}},
			want: []Issue{{Path: "$.p.properties.x['$ref']", Code: CodeInvalidSchema}}, message: "unknown GTS type"},
		{name: "http refused", schema: map[string]any{"$ref": "https://example.com/s.json"},
			want: []Issue{{Path: "$.p['$ref']", Code: CodeInvalidSchema}}, message: "refused"},
		{name: "file refused", schema: map[string]any{"$ref": "file:///etc/passwd"},
			want: []Issue{{Path: "$.p['$ref']", Code: CodeInvalidSchema}}, message: "refused"},
		{name: "relative refused", schema: map[string]any{"$ref": "other.json"},
			want: []Issue{{Path: "$.p['$ref']", Code: CodeInvalidSchema}}, message: "reference 'other.json' refused"},
		{name: "other draft refused", schema: map[string]any{"$schema": "http://json-schema.org/draft-07/schema#"},
			want: []Issue{{Path: "$.p['$schema']", Code: CodeInvalidSchema}}, message: "2020-12"},
		{name: "bad regex", schema: map[string]any{"pattern": "(?<=a)b"},
			want: []Issue{{Path: "$.p.pattern", Code: CodeInvalidSchema}}},
		{name: "dangling local ref", schema: json.RawMessage(`{"properties": {"a": {"$ref": "#/$defs/missing"}}}`),
			want: []Issue{{Path: "$.p.properties.a['$ref']", Code: CodeInvalidSchema}}, message: "#/$defs/missing"},
		{name: "not an object", schema: true,
			want: []Issue{{Path: "$.p", Code: CodeInvalidSchema}}, message: "must be a JSON object, got boolean"},
		{name: "null", schema: nil,
			want: []Issue{{Path: "$.p", Code: CodeInvalidSchema}}},
		{name: "broken raw JSON", schema: json.RawMessage(`{"type":`),
			want: []Issue{{Path: "$.p", Code: CodeInvalidSchema}}, message: "invalid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, got := r.CompileUserSchema("$.p", tc.schema)
			require.Equal(t, tc.want, pathsAndCodes(got), "issues: %+v", got)
			if tc.want == nil {
				require.NotNil(t, s)
			} else {
				require.Nil(t, s)
			}
			if tc.message != "" {
				require.Contains(t, got[0].Message, tc.message)
			}
			for _, is := range got {
				require.NotContains(t, is.Message, userSchemaBase, "internal URLs do not leak")
			}
		})
	}
}

func TestCompileUserSchemaCache(t *testing.T) {
	r := testRegistry(t)
	a, issues := r.CompileUserSchema("$.a", map[string]any{"type": "object", "required": []any{"x"}, "title": "cache-test"})
	require.Empty(t, issues)
	// Same content, different key order and map instance: cached.
	b, issues := r.CompileUserSchema("$.b", json.RawMessage(`{"title": "cache-test", "required": ["x"], "type": "object"}`))
	require.Empty(t, issues)
	require.Same(t, a, b)

	// Cached failures are rebased onto each caller's path.
	bad := map[string]any{"type": "nope", "title": "cache-test"}
	_, i1 := r.CompileUserSchema("$.schema.params", bad)
	_, i2 := r.CompileUserSchema("$.schema.returns", bad)
	require.Equal(t, "$.schema.params.type", i1[0].Path)
	require.Equal(t, "$.schema.returns.type", i2[0].Path)
	_, i3 := r.CompileUserSchema("", bad)
	require.Equal(t, "$.type", i3[0].Path)

	// The compiled schema shares no memory with the caller's value.
	obj := map[string]any{"const": map[string]any{"a": "b"}, "title": "cache-test"}
	cs, issues := r.CompileUserSchema("$", obj)
	require.Empty(t, issues)
	obj["const"].(map[string]any)["a"] = "changed"
	require.Empty(t, r.ValidateValue(cs, "$", map[string]any{"a": "b"}))

	// The cache is bounded and evicts the least recently used entry.
	c := newSchemaCache(2)
	c.put("a", cacheEntry{})
	c.put("b", cacheEntry{})
	_, ok := c.get("a") // a is now more recent than b
	require.True(t, ok)
	c.put("c", cacheEntry{})
	require.Equal(t, 2, c.len())
	_, ok = c.get("b")
	require.False(t, ok)
	_, ok = c.get("a")
	require.True(t, ok)
	_, ok = c.get("c")
	require.True(t, ok)
}

func TestValidateValue(t *testing.T) {
	r := testRegistry(t)
	params := loadDoc(t, calculateTaxFile)["schema"].(map[string]any)["params"]
	s, issues := r.CompileUserSchema("$.schema.params", params)
	require.Empty(t, issues)

	orders, issues := r.CompileUserSchema("$", json.RawMessage(`{
		"type": "object",
		"properties": {
			"items": {"type": "array", "items": {"type": "object", "required": ["sku"],
				"properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
				"additionalProperties": false}},
			"when": {"type": "string", "format": "date-time"},
			"meta": {"type": "object", "properties": {"0": {"type": "string"}, "a.b": {"type": "string"}}}
		},
		"additionalProperties": false
	}`))
	require.Empty(t, issues)
	ctx, err := r.Schema(compensationCtxID)
	require.NoError(t, err)

	tests := []struct {
		name   string
		schema *jsonschema.Schema // defaults to the calculate_tax params schema
		path   string
		value  any
		want   []Issue
	}{
		{name: "valid json.Number", path: "$.params", value: map[string]any{"invoice_id": "i", "amount": json.Number("100.0")}},
		{name: "valid float64", path: "$.params", value: map[string]any{"invoice_id": "i", "amount": 100.5}},
		{name: "valid int", path: "$.params", value: map[string]any{"invoice_id": "i", "amount": 7}},
		{name: "valid raw JSON", path: "$.params", value: json.RawMessage(`{"invoice_id": "i", "amount": 1e3}`)},
		{name: "wrong type", path: "$.params", value: map[string]any{"invoice_id": "i", "amount": "100"},
			want: []Issue{{Path: "$.params.amount", Code: CodeSchemaMismatch}}},
		{name: "missing fields", path: "$.params", value: map[string]any{},
			want: []Issue{{Path: "$.params.amount", Code: CodeMissingField}, {Path: "$.params.invoice_id", Code: CodeMissingField}}},
		{name: "not an object", path: "$.params", value: []any{},
			want: []Issue{{Path: "$.params", Code: CodeSchemaMismatch}}},
		{name: "empty path means root", path: "", value: nil,
			want: []Issue{{Path: "$", Code: CodeSchemaMismatch}}},
		{name: "array paths", schema: orders, path: "$.input", value: json.RawMessage(`{
			"items": [{"sku": "a", "qty": 1}, {"qty": 0, "colour": "red"}, "x"],
			"when": "soon", "meta": {"0": 1, "a.b": 2}, "extra": true}`),
			want: []Issue{
				{Path: "$.input.extra", Code: CodeUnknownField},
				{Path: "$.input.items[1].colour", Code: CodeUnknownField},
				{Path: "$.input.items[1].qty", Code: CodeSchemaMismatch},
				{Path: "$.input.items[1].sku", Code: CodeMissingField},
				{Path: "$.input.items[2]", Code: CodeSchemaMismatch},
				{Path: "$.input.meta['0']", Code: CodeSchemaMismatch},
				{Path: "$.input.meta['a.b']", Code: CodeSchemaMismatch},
				{Path: "$.input.when", Code: CodeSchemaMismatch},
			}},
		{name: "built-in schema", schema: ctx, path: "$.params", value: map[string]any{"trigger": "oops"},
			want: []Issue{
				{Path: "$.params.failed_step_id", Code: CodeMissingField},
				{Path: "$.params.invocation_metadata", Code: CodeMissingField},
				{Path: "$.params.original_workflow_invocation_id", Code: CodeMissingField},
				{Path: "$.params.timestamp", Code: CodeMissingField},
				{Path: "$.params.trigger", Code: CodeSchemaMismatch},
				{Path: "$.params.workflow_state_snapshot", Code: CodeMissingField},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sch := s
			if tc.schema != nil {
				sch = tc.schema
			}
			got := r.ValidateValue(sch, tc.path, tc.value)
			require.Equal(t, tc.want, pathsAndCodes(got), "issues: %+v", got)
		})
	}

	got := r.ValidateValue(nil, "$.params", map[string]any{})
	require.Equal(t, []Issue{{Path: "$.params", Code: CodeInvalidSchema}}, pathsAndCodes(got))
	got = r.ValidateValue(s, "$.params", map[string]any{"invoice_id": "i", "amount": func() {}})
	require.Equal(t, []Issue{{Path: "$.params", Code: CodeSchemaMismatch}}, pathsAndCodes(got))
}

func TestGTSLoader(t *testing.T) {
	r := testRegistry(t)
	l := gtsLoader{raw: r.raw}
	doc, err := l.Load(gtsScheme + ownerRefID)
	require.NoError(t, err)
	require.Equal(t, gtsScheme+ownerRefID, doc.(map[string]any)["$id"])

	// Each load is a fresh document.
	doc.(map[string]any)["title"] = "changed"
	doc2, err := l.Load(gtsScheme + ownerRefID)
	require.NoError(t, err)
	require.Equal(t, "Owner Reference", doc2.(map[string]any)["title"])

	for _, u := range []string{"gts://gts.x.unknown.v1~", "http://example.com/a.json", "https://example.com/a.json", "file:///etc/passwd", "ftp://x/y"} {
		_, err := l.Load(u)
		require.Error(t, err, u)
	}
}

func TestConcurrentUse(t *testing.T) {
	r := testRegistry(t)
	data, err := os.ReadFile(calculateTaxFile)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				v, err := decodeJSON(data)
				if err != nil {
					t.Errorf("decode: %v", err)
					return
				}
				d := v.(map[string]any)
				// A few distinct schemas per goroutine exercise both cache hits and misses.
				set(d, map[string]any{"type": "object", "title": fmt.Sprintf("g%d-%d", g, i%3)}, "schema", "params")
				if !assertEmpty(r.ValidateEntrypoint(KindFunction, d)) {
					t.Errorf("unexpected issues")
					return
				}
				s, iss := r.CompileUserSchema("$.p", d["schema"].(map[string]any)["params"])
				if len(iss) != 0 || len(r.ValidateValue(s, "$.params", map[string]any{})) != 0 {
					t.Errorf("unexpected issues")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func assertEmpty(issues []Issue) bool { return len(issues) == 0 }

func TestPaths(t *testing.T) {
	require.Equal(t, "$.a", childPath("$", "a"))
	require.Equal(t, "$.a_1", childPath("$", "a_1"))
	require.Equal(t, "$['1a']", childPath("$", "1a"))
	require.Equal(t, "$['it\\'s']", childPath("$", "it's"))
	require.Equal(t, "$['']", childPath("$", ""))
	require.Equal(t, "$.tags[0]", indexPath("$.tags", 0))
	require.Equal(t, "$.params.amount", rebase("$.params", "$.amount"))
	require.Equal(t, "$.params", rebase("$.params", "$"))
	doc := map[string]any{"a": []any{map[string]any{"0": "x"}}}
	require.Equal(t, "$.a[0]['0']", tokensPath("$", doc, []string{"a", "0", "0"}))
	require.Equal(t, "$.a[3].b", tokensPath("$", doc, []string{"a", "3", "b"}))
	require.True(t, strings.HasPrefix(tokensPath("$.x", nil, []string{"y"}), "$.x.y"))
}

func TestMessages(t *testing.T) {
	tests := []struct {
		kind jsonschema.ErrorKind
		code string
		msg  string
	}{
		{&kind.Required{Missing: []string{"title"}}, CodeMissingField, "missing required property 'title'"},
		{&kind.AdditionalProperties{Properties: []string{"x"}}, CodeUnknownField, "unknown field 'x'"},
		{&kind.Type{Got: "string", Want: []string{"object", "null"}}, CodeSchemaMismatch, "invalid type: expected object or null, got string"},
		{&kind.Enum{Got: "x", Want: []any{"a", "b"}}, CodeSchemaMismatch, "value must be one of 'a', 'b'"},
		{&kind.Const{Got: "x", Want: "code"}, CodeSchemaMismatch, "value must be 'code'"},
		{&kind.Pattern{Got: "1.0", Want: `^\d+$`}, CodeSchemaMismatch, `'1.0' does not match pattern '^\\d+$'`},
		{&kind.Maximum{Got: big.NewRat(1024, 1), Want: big.NewRat(512, 1)}, CodeSchemaMismatch, "must be <= 512, got 1024"},
		{&kind.Minimum{Got: big.NewRat(1, 20), Want: big.NewRat(1, 10)}, CodeSchemaMismatch, "must be >= 0.1, got 0.05"},
		{&kind.MinItems{Got: 0, Want: 1}, CodeSchemaMismatch, "must have at least 1 items, got 0"},
		{&kind.OneOf{Subschemas: []int{0, 2}}, CodeSchemaMismatch, "value matches more than one allowed alternative (oneOf subschemas 0 and 2)"},
		{&kind.Not{}, CodeSchemaMismatch, "'not' failed"},
	}
	for _, tc := range tests {
		code, msg := describe(tc.kind)
		require.Equal(t, tc.code, code)
		require.Equal(t, tc.msg, msg)
	}
}

func BenchmarkValidateValue(b *testing.B) {
	r := testRegistry(b)
	params := loadDoc(b, calculateTaxFile)["schema"].(map[string]any)["params"]
	s, issues := r.CompileUserSchema("$.schema.params", params)
	require.Empty(b, issues)
	v := map[string]any{"invoice_id": "inv_001", "amount": json.Number("100.0")}
	b.ReportAllocs()
	for b.Loop() {
		if len(r.ValidateValue(s, "$.params", v)) != 0 {
			b.Fatal("unexpected issues")
		}
	}
}

func BenchmarkCompileUserSchemaCached(b *testing.B) {
	r := testRegistry(b)
	params := loadDoc(b, calculateTaxFile)["schema"].(map[string]any)["params"]
	b.ReportAllocs()
	for b.Loop() {
		if _, issues := r.CompileUserSchema("$.schema.params", params); len(issues) != 0 {
			b.Fatal("unexpected issues")
		}
	}
}

func BenchmarkValidateEntrypoint(b *testing.B) {
	r := testRegistry(b)
	d := loadDoc(b, calculateTaxFile)
	b.ReportAllocs()
	for b.Loop() {
		if len(r.ValidateEntrypoint(KindFunction, d)) != 0 {
			b.Fatal("unexpected issues")
		}
	}
}

// dagImplementation is a DAG implementation of one task (its spec is package dag's business).
func dagImplementation(format string) map[string]any {
	return map[string]any{"adapter": DAGAdapter, "kind": "workflow_spec", "workflow_spec": map[string]any{
		"format": format, "spec": map[string]any{"tasks": []any{map[string]any{"id": "a", "entrypoint_id": "x"}}}}}
}
