package openapi_test

// The members of an entrypoint definition (000, docs/api.md §6), typed as the built-in GTS schemas
// the server validates a registration against (internal/schema/builtin: entrypoint.v1~,
// io_schema.v1~, limits.v1~ and the Starlark adapter's, retry_policy.v1~, workflow_traits.v1~,
// implementation.v1~), so that a generated client can build a registration body without an escape
// hatch. Objects stay open, as in those schemas; required lists what the server requires of a
// request (a workflow must also have traits.workflow: one schema serves both kinds).

// definitionSchemas are the component schemas of a definition's members.
func definitionSchemas(s schema) {
	str := schema{"type": "string"}
	integer := func(min int, desc string) schema {
		return schema{"type": "integer", "minimum": min, "description": desc}
	}
	mode := schema{"type": "string", "enum": []any{"sync", "async"}}
	s["EntrypointIOSchema"] = schema{"type": "object",
		"description": "io_schema.v1~: the params and returns JSON Schemas (null or absent: void) and the GTS error type ids.",
		"properties": schema{
			"params":  nullable(schema{"type": "object", "additionalProperties": true, "description": "A JSON Schema of the params."}),
			"returns": nullable(schema{"type": "object", "additionalProperties": true, "description": "A JSON Schema of the result."}),
			"errors":  schema{"type": "array", "items": str},
		}}
	s["EntrypointTraits"] = schema{"type": "object",
		"description": "entrypoint.v1~'s traits; workflow is required for workflows.",
		"required":    []any{"invocation", "retry"},
		"properties": schema{
			"invocation": schema{"type": "object", "required": []any{"supported", "default"}, "properties": schema{
				"supported": schema{"type": "array", "items": mode}, "default": mode}},
			"is_idempotent": schema{"type": "boolean"},
			"entrypoint":    schema{"type": "boolean", "description": "Whether callers may invoke it directly (default true)."},
			"caching": schema{"type": "object", "properties": schema{
				"max_age_seconds": integer(0, "Seconds a successful result is reused for an Idempotency-Key (0: never).")}},
			"rate_limit": nullable(schema{"type": "object", "required": []any{"strategy", "config"}, "properties": schema{
				"strategy": schema{"type": "string", "description": "The GTS type id of the rate limiter."},
				"config":   schema{"type": "object", "additionalProperties": true}}}),
			"limits": ref("EntrypointLimits"),
			"retry":  ref("RetryPolicy"),
			"workflow": schema{"type": "object", "description": "workflow_traits.v1~.",
				"required": []any{"compensation", "checkpointing", "max_suspension_days"},
				"properties": schema{
					"compensation": schema{"type": "object", "properties": schema{
						"on_failure": nullable(schema{"type": "string", "description": "The entrypoint to run on failure."}),
						"on_cancel":  nullable(schema{"type": "string", "description": "The entrypoint to run on cancellation."})}},
					"checkpointing": schema{"type": "object", "properties": schema{
						"strategy": schema{"type": "string", "enum": []any{"automatic", "manual", "disabled"}}}},
					"max_suspension_days": integer(1, "")}},
		}}
	s["EntrypointLimits"] = schema{"type": "object",
		"description": "limits.v1~ and the adapter's: the tenant's defaults apply to what is absent.",
		"properties": schema{
			"timeout_seconds": integer(1, "Longest run, in seconds."),
			"max_concurrent":  integer(1, "Most runs at once."),
			"memory_mb":       schema{"type": "integer", "minimum": 1, "maximum": 512, "description": "Starlark: memory in MB."},
			"cpu":             schema{"type": "number", "minimum": 0.1, "maximum": 1, "description": "Starlark: fraction of a core."},
		}}
	s["RetryPolicy"] = schema{"type": "object", "description": "retry_policy.v1~.", "required": []any{"max_attempts"},
		"properties": schema{
			"max_attempts":         integer(0, ""),
			"initial_delay_ms":     integer(0, ""),
			"max_delay_ms":         integer(0, ""),
			"backoff_multiplier":   schema{"type": "number", "minimum": 1},
			"non_retryable_errors": schema{"type": "array", "items": str},
		}}
	s["EntrypointImplementation"] = schema{"type": "object",
		"description": "implementation.v1~: an adapter and, by kind, code (Starlark), adapter_ref (a worker, docs/workers.md) " +
			"or workflow_spec (a DAG, docs/dag.md). code.source is left out of a read without include_source=true.",
		"required": []any{"adapter", "kind"},
		"properties": schema{
			"adapter": schema{"type": "string", "description": "The adapter's GTS type id (gts.x.core.serverless.adapter.starlark.v1~, …worker.v1~, …dag.v1~)."},
			"kind":    schema{"type": "string", "enum": []any{"code", "workflow_spec", "adapter_ref"}},
			"code": schema{"type": "object", "required": []any{"language"}, "properties": schema{
				"language": str, "source": schema{"type": "string", "description": "Required in a registration."}}},
			"workflow_spec": schema{"type": "object", "required": []any{"format", "spec"}, "properties": schema{
				"format": str, "spec": schema{"type": "object", "additionalProperties": true}}},
			"adapter_ref": schema{"type": "object", "required": []any{"definition_id"}, "properties": schema{
				"definition_id": str}},
		}}
}
