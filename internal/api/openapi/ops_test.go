package openapi_test

import (
	"net/http"
	"reflect"

	"github.com/larkrun/lark/internal/dagrun"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/scheduler"
)

// manual adds the schemas no single Go type describes.
func manual(s schema) {
	nstr := nullable(schema{"type": "string"})
	s["Problem"] = schema{
		"type":        "object",
		"description": "An RFC 9457 problem document. Extension members (such as reason on a 409) may follow.",
		"required":    []any{"type", "title", "status", "code", "instance"},
		"properties": schema{
			"type":     schema{"type": "string", "pattern": `^gts://gts\.x\.core\.serverless\.err\.v1~`, "description": "gts:// followed by code."},
			"title":    schema{"type": "string", "minLength": 1},
			"status":   schema{"type": "integer", "minimum": 400, "maximum": 599},
			"detail":   schema{"type": "string"},
			"instance": schema{"type": "string", "description": "The request path."},
			"code": schema{"type": "string", "description": "The GTS error type.",
				"pattern": `^gts\.x\.core\.serverless\.err\.v1~x\.core\.serverless\.err\.[a-z_]+\.v1~$`},
			"trace_id": schema{"type": "string", "description": "The request's correlation id (X-Correlation-Id)."},
			"reason":   schema{"type": "string", "description": "Why a 409 conflicted (already_exists, invalid_transition, …)."},
			"errors":   schema{"type": "array", "items": ref("Issue")},
		},
	}
	s["Issue"] = schema{
		"additionalProperties": false,
		"type":                 "object",
		"required":             []any{"path", "message", "code"},
		"properties": schema{
			"path":    schema{"type": "string", "minLength": 1, "description": "A JSON path into the request ($.a.b)."},
			"message": schema{"type": "string", "minLength": 1},
			"code":    schema{"type": "string", "pattern": "^[A-Z0-9_]+$"},
			"line":    schema{"type": "integer"},
			"column":  schema{"type": "integer"},
		},
	}
	s["PageInfo"] = schema{
		"additionalProperties": false,
		"type":                 "object",
		"description": "Where the page ends. has_more is true, with a next_cursor, when items follow: because " +
			"the page holds limit items, or because the next item would take it over the page's byte budget " +
			"(a page may then hold fewer than limit items; follow next_cursor until has_more is false).",
		"required": []any{"next_cursor", "prev_cursor", "has_more", "limit"},
		"properties": schema{
			"next_cursor": nstr, "prev_cursor": nstr,
			"has_more": schema{"type": "boolean"}, "limit": schema{"type": "integer"},
		},
	}
	s["List"] = schema{
		"type":        "object",
		"description": "000's list envelope: a page of items and how to get the next one.",
		"required":    []any{"items", "page_info"},
		"properties":  schema{"items": schema{"type": "array"}, "page_info": ref("PageInfo")},
	}
	s["Entrypoint"] = schema{
		"type": "object",
		"description": "A registered version: the definition as sent (implementation.code.source only with " +
			"include_source=true) plus the members the server keeps.",
		"required": []any{"id", "entrypoint_id", "kind", "version", "tenant_id", "owner", "shared", "status",
			"title", "tags", "created_at", "updated_at", "activated_at", "disabled_at", "archived_at"},
		"properties": schema{
			"id": schema{"type": "string"}, "entrypoint_id": schema{"type": "string"},
			"kind":    schema{"type": "string", "enum": []any{"function", "workflow"}},
			"version": schema{"type": "string"}, "tenant_id": schema{"type": "string"},
			"owner": (&reflector{enums: enumValues()}).of(reflect.TypeFor[entrypoint.Owner](), 0), "shared": schema{"type": "boolean"},
			"status":     schema{"type": "string", "enum": []any{"draft", "active", "deprecated", "disabled", "archived"}},
			"title":      schema{"type": "string"},
			"tags":       nullable(schema{"type": "array", "items": schema{"type": "string"}}),
			"created_at": schema{"type": "string", "format": "date-time"}, "updated_at": schema{"type": "string", "format": "date-time"},
			"activated_at": nstr, "disabled_at": nstr, "archived_at": nstr,
			"release_notes": schema{"type": "string"},
			"deprecation": schema{"type": "object", "required": []any{"deprecated_at"}, "properties": schema{
				"deprecated_at": schema{"type": "string"}, "reason": schema{"type": "string"},
				"successor_id": schema{"type": "string"}, "sunset_date": schema{"type": "string"}}},
			"warnings":    schema{"type": "array", "items": ref("Finding")},
			"description": schema{"type": "string"}, "schema": ref("EntrypointIOSchema"),
			"traits": ref("EntrypointTraits"), "implementation": ref("EntrypointImplementation"),
		},
	}
	s["EntrypointDefinition"] = schema{
		"type": "object",
		"description": "000's entrypoint definition (docs/api.md §6). The server validates it against its GTS " +
			"schemas (gts.x.core.serverless.entrypoint.v1~ and the function or workflow kind) and reports every " +
			"finding at once as a 422; the members the server keeps (id, status, timestamps…) are ignored.",
		"required":   []any{"entrypoint_id", "title", "schema", "traits", "implementation"},
		"properties": definitionMembers(),
	}
	draft := definitionMembers()
	for _, m := range []string{"schema", "traits", "implementation"} {
		draft[m] = schema{"type": "object", "additionalProperties": true, "description": "As in EntrypointDefinition; any part of it."}
	}
	s["EntrypointDraft"] = schema{"type": "object", "properties": draft,
		"description": "A definition to validate (POST /entrypoints:validate): any part of an EntrypointDefinition; the report lists what is missing or wrong."}
	definitionSchemas(s)
	s["EntrypointVersions"] = schema{
		"additionalProperties": false,
		"type":                 "object", "required": []any{"family", "items"},
		"properties": schema{"family": schema{"type": "string"}, "items": schema{"type": "array", "items": ref("VersionSummary")}},
	}
	s["PublishResult"] = schema{
		"additionalProperties": false,
		"type":                 "object", "required": []any{"event", "delivered", "triggered"},
		"properties": schema{"event": ref("Event"), "delivered": schema{"type": "integer"}, "triggered": schema{"type": "integer"}},
	}
	s["ScheduleTriggered"] = schema{
		"additionalProperties": false,
		"type":                 "object", "required": []any{"schedule_id", "run_id", "invocation", "triggered_at", "triggered_by", "params"},
		"properties": schema{"schedule_id": schema{"type": "string"}, "run_id": schema{"type": "string"},
			"invocation": ref("Invocation"), "triggered_at": schema{"type": "string", "format": "date-time"},
			"triggered_by": schema{"type": "string"}, "params": anyValue()},
	}
	runs := (&reflector{components: map[reflect.Type]string{}}).of(reflect.TypeFor[scheduler.RunView](), 0)
	s["ScheduleHistory"] = schema{
		"additionalProperties": false,
		"type":                 "object", "required": []any{"schedule_id", "items", "next_runs", "page_info"},
		"properties": schema{"schedule_id": schema{"type": "string"},
			"items": schema{"type": "array", "items": runs},
			"next_runs": schema{"type": "array", "items": schema{"type": "object", "required": []any{"scheduled_at"},
				"properties": schema{"scheduled_at": schema{"type": "string", "format": "date-time"}}}},
			"page_info": ref("PageInfo")},
	}
	s["DAGTasks"] = schema{"type": "object", "additionalProperties": false, "required": []any{"invocation_id", "items"},
		"properties": schema{"invocation_id": schema{"type": "string"},
			"items": schema{"type": "array", "items": (&reflector{components: map[reflect.Type]string{}}).of(reflect.TypeFor[dagrun.TaskView](), 0)}}}
	s["Timeline"] = schema{"allOf": []any{listOf("TimelineEvent"), schema{"type": "object",
		"required":   []any{"invocation_id", "status"},
		"properties": schema{"invocation_id": schema{"type": "string"}, "status": schema{"type": "string"}}}}}
	s["Purged"] = schema{"type": "object", "additionalProperties": false, "required": []any{"purged"}, "properties": schema{"purged": schema{"type": "integer"}}}
	s["Health"] = schema{"type": "object", "additionalProperties": false, "required": []any{"status"}, "properties": schema{"status": schema{"type": "string"}}}
	for patch, of := range map[string]string{"TenantPolicyPatch": "TenantPolicyRequest", "SchedulePatch": "ScheduleRequest",
		"WebhookPatch": "WebhookRequest", "TriggerPatch": "TriggerRequest"} {
		s[patch] = mergePatch(s[of].(schema), of)
	}
}

// mergePatch is an RFC 7396 merge patch of a request object: any member may be null (removes it,
// back to its default); objects are merged member by member.
func mergePatch(of schema, name string) schema {
	props := schema{}
	if p, ok := of["properties"].(schema); ok {
		for k, v := range p {
			props[k] = nullable(v.(schema))
		}
	}
	return schema{"type": "object", "properties": props,
		"description": "An RFC 7396 JSON merge patch of " + name + "'s members: null removes a member (back to its default)."}
}

// definitionMembers are the top-level members of an entrypoint definition.
func definitionMembers() schema {
	return schema{
		"entrypoint_id":  schema{"type": "string", "description": "The GTS id, ending in ~ (…function.v1~… or …workflow.v1~…)."},
		"version":        schema{"type": "string", "description": "Semantic version; must match the id's major (and minor)."},
		"title":          schema{"type": "string"},
		"description":    schema{"type": "string"},
		"tags":           schema{"type": "array", "items": schema{"type": "string"}},
		"shared":         schema{"type": "boolean", "description": "A user-owned entrypoint others in the tenant may invoke."},
		"schema":         ref("EntrypointIOSchema"),
		"traits":         ref("EntrypointTraits"),
		"implementation": ref("EntrypointImplementation"),
	}
}

var (
	get   = http.MethodGet
	post  = http.MethodPost
	put   = http.MethodPut
	patch = http.MethodPatch
	del   = http.MethodDelete
)

// ok, created, noContent and status are success answers; bool1 and qstr query parameters.
func ok(s schema) []answer { return []answer{{status: 200, schema: s}} }
func created(s schema) []answer {
	return []answer{{status: 201, schema: s, desc: "Created; Location names it."}}
}
func noContent() []answer            { return []answer{{status: 204, desc: "Done; no body."}} }
func status(n int, s schema) answer  { return answer{status: n, schema: s} }
func bool1(name, desc string) schema { return query(name, desc, schema{"type": "boolean"}) }
func qstr(name, desc string) schema  { return query(name, desc, schema{"type": "string"}) }

// operations lists every route of the router (internal/api), in the order of docs/api.md's table.
func operations() []op {
	ep := "/api/serverless-runtime/v1"
	p := func(s string) string { return ep + s }
	return []op{
		{method: get, path: p("/openapi.json"), id: "getOpenAPIDocument", tag: "Meta", public: true, noCommon: true,
			summary: "This OpenAPI document (public: it describes the API, not any tenant's data)",
			ok:      ok(schema{"type": "object", "additionalProperties": true})},

		{method: post, path: p("/tokens"), id: "createToken", tag: "Tokens", summary: "Issue a token (its secret is shown once)",
			body: ref("CreateTokenRequest"), bodyRequired: true, ok: created(ref("CreatedToken"))},
		{method: get, path: p("/admin/log-level"), id: "getLogLevel", tag: "Operations", summary: "The server's log level (platform operator)",
			ok: ok(schema{"type": "object", "required": []string{"level"}, "additionalProperties": false,
				"properties": schema{"level": schema{"type": "string", "enum": []string{"debug", "info", "warn", "error"}}}})},
		{method: put, path: p("/admin/log-level"), id: "putLogLevel", tag: "Operations", summary: "Change the server's log level at run time (platform operator)",
			body: schema{"type": "object", "required": []any{"level"}, "properties": schema{"level": schema{"type": "string"}}}, bodyRequired: true, errs: []int{422},
			ok: ok(schema{"type": "object", "required": []string{"level"}, "additionalProperties": false,
				"properties": schema{"level": schema{"type": "string", "enum": []string{"debug", "info", "warn", "error"}}}})},
		{method: get, path: p("/whoami"), id: "whoami", tag: "Tokens", summary: "Who the bearer token authenticates as", ok: ok(ref("Whoami"))},
		{method: post, path: p("/identity-providers"), id: "createIdentityProvider", tag: "Identity providers",
			summary: "Register an OIDC issuer whose JWTs authenticate callers", body: ref("IdentityProviderRequest"), bodyRequired: true,
			ok: created(ref("IdentityProvider")), errs: []int{409, 422}},
		{method: get, path: p("/identity-providers"), id: "listIdentityProviders", tag: "Identity providers",
			summary: "List identity providers", params: listParams, ok: ok(listOf("IdentityProvider"))},
		{method: get, path: p("/identity-providers/{id}"), id: "getIdentityProvider", tag: "Identity providers",
			summary: "Read an identity provider", ok: ok(ref("IdentityProvider"))},
		{method: del, path: p("/identity-providers/{id}"), id: "deleteIdentityProvider", tag: "Identity providers",
			summary: "Delete an identity provider", ok: noContent()},
		{method: get, path: p("/tokens"), id: "listTokens", tag: "Tokens", summary: "List tokens",
			params: listParams, ok: ok(listOf("Token"))},
		{method: del, path: p("/tokens/{token_id}"), id: "revokeToken", tag: "Tokens", summary: "Revoke a token",
			ok: noContent(), errs: []int{409}},

		{method: post, path: p("/tenants/{tenant_id}/serverless-runtime:enable"), id: "enableTenant", tag: "Tenants",
			summary: "Enable a tenant, with an optional policy", body: ref("TenantPolicyRequest"), ok: ok(ref("TenantPolicy"))},
		{method: post, path: p("/tenants/{tenant_id}/serverless-runtime:disable"), id: "disableTenant", tag: "Tenants",
			summary: "Disable a tenant", ok: ok(ref("TenantPolicy")), errs: []int{409}},
		{method: get, path: p("/tenants/{tenant_id}/serverless-runtime"), id: "getTenant", tag: "Tenants",
			summary: "Read a tenant's policy", ok: ok(ref("TenantPolicy"))},
		{method: patch, path: p("/tenants/{tenant_id}/serverless-runtime"), id: "patchTenant", tag: "Tenants",
			summary: "Change a tenant's policy (JSON merge patch)", body: ref("TenantPolicyPatch"), bodyRequired: true, ok: ok(ref("TenantPolicy"))},
		{method: get, path: p("/tenants/{tenant_id}/runtime-policy"), id: "getRuntimePolicy", tag: "Tenants",
			summary: "Read a tenant's policy (000's path)", ok: ok(ref("TenantPolicy"))},
		{method: put, path: p("/tenants/{tenant_id}/runtime-policy"), id: "replaceRuntimePolicy", tag: "Tenants",
			summary: "Replace a tenant's policy", body: ref("TenantPolicyRequest"), bodyRequired: true, ok: ok(ref("TenantPolicy"))},
		{method: get, path: p("/tenants/{tenant_id}/usage"), id: "getUsage", tag: "Usage", summary: "Current usage and cost",
			ok: ok(ref("UsageReport"))},
		{method: get, path: p("/tenants/{tenant_id}/usage/history"), id: "getUsageHistory", tag: "Usage",
			summary: "Usage history by period", ok: ok(ref("UsageHistory")), errs: []int{422},
			params: []any{query("granularity", "Bucket size (default daily).", schema{"type": "string", "enum": []any{"hourly", "daily", "weekly"}}), qstr("start", "RFC 3339 start (inclusive)."),
				qstr("end", "RFC 3339 end (exclusive).")}},

		{method: post, path: p("/entrypoints"), id: "registerEntrypoint", tag: "Entrypoints", summary: "Register an entrypoint version (draft)",
			body: ref("EntrypointDefinition"), bodyRequired: true, ok: created(ref("Entrypoint"))},
		{method: post, path: p("/entrypoints:validate"), id: "validateEntrypoint", tag: "Entrypoints",
			summary: "Validate a definition without registering it", body: ref("EntrypointDraft"), bodyRequired: true,
			ok: ok(ref("ValidationReport"))},
		{method: get, path: p("/entrypoints"), id: "listEntrypoints", tag: "Entrypoints", summary: "List entrypoints",
			params: append(append([]any(nil), listParams...), bool1("include_source", "Include implementation.code.source.")),
			ok:     ok(listOf("Entrypoint"))},
		{method: get, path: p("/entrypoints/{id}"), id: "getEntrypoint", tag: "Entrypoints", summary: "Read an entrypoint",
			params: []any{bool1("include_source", "Include implementation.code.source.")}, ok: ok(ref("Entrypoint"))},
		{method: put, path: p("/entrypoints/{id}"), id: "updateEntrypoint", tag: "Entrypoints", summary: "Replace a draft's definition",
			body: ref("EntrypointDefinition"), bodyRequired: true, ok: ok(ref("Entrypoint"))},
		{method: del, path: p("/entrypoints/{id}"), id: "deleteEntrypoint", tag: "Entrypoints",
			summary: "Delete a version (a draft is removed: 204; others are archived: 200)",
			params:  []any{bool1("force", "Delete even with invocations in flight.")},
			ok:      []answer{status(200, ref("Entrypoint")), {status: 204, desc: "Removed."}}, errs: []int{409}},
		{method: post, path: p("/entrypoints/{id}:status"), id: "changeEntrypointStatus", tag: "Entrypoints",
			summary: "activate, deprecate, disable, enable or archive a version", body: ref("StatusRequest"), bodyRequired: true,
			ok: ok(ref("Entrypoint"))},
		{method: post, path: p("/entrypoints/{id}:validate"), id: "validateExistingEntrypoint", tag: "Entrypoints",
			summary: "Validate a registered version", ok: ok(ref("ValidationReport"))},
		{method: post, path: p("/entrypoints/{id}:plan"), id: "planEntrypoint", tag: "Entrypoints",
			summary: "Plan a DAG run for a partition key: tasks in order, pinned versions, fingerprint",
			body:    ref("PlanRequest"), ok: ok(ref("DAGPlan"))},
		{method: get, path: p("/entrypoints/{id}/versions"), id: "listEntrypointVersions", tag: "Entrypoints",
			summary: "The versions of an entrypoint's family", ok: ok(ref("EntrypointVersions"))},

		{method: post, path: p("/invocations"), id: "startInvocation", tag: "Invocations",
			summary: "Start an invocation (sync: 200 when done; async, or sync not done in time: 202)",
			params: []any{
				schema{"name": "Idempotency-Key", "in": "header", "schema": schema{"type": "string", "maxLength": 255},
					"description": "Replays the first answer for an identical request (Idempotency-Replayed: true)."},
				schema{"name": "X-Correlation-Id", "in": "header", "schema": schema{"type": "string"}},
				schema{"name": "traceparent", "in": "header", "schema": schema{"type": "string"}},
			},
			body: ref("StartRequest"), bodyRequired: true,
			ok: []answer{{status: 200, schema: ref("InvocationResult"), deprecation: true},
				{status: 202, schema: ref("InvocationResult"), desc: "Accepted; Location names the invocation.", location: true, deprecation: true}},
			errs: []int{409}},
		{method: get, path: p("/invocations"), id: "listInvocations", tag: "Invocations", summary: "List invocations",
			params: listParams, ok: ok(listOf("Invocation"))},
		{method: get, path: p("/invocations/{id}"), id: "getInvocation", tag: "Invocations", summary: "Read an invocation",
			ok: ok(ref("Invocation"))},
		{method: get, path: p("/invocations/{id}/timeline"), id: "getInvocationTimeline", tag: "Invocations",
			summary: "An invocation's timeline, a page at a time", params: []any{pref("limit"), pref("cursor")},
			ok: ok(ref("Timeline"))},
		{method: get, path: p("/invocations/{id}/tasks"), id: "getInvocationTasks", tag: "Invocations",
			summary: "A DAG run's tasks: state, child invocation, attempts, checks, gating, materialization (409 not_a_dag otherwise)",
			ok:      ok(ref("DAGTasks")), errs: []int{409}},
		{method: post, path: p("/invocations/{id}:control"), id: "controlInvocation", tag: "Invocations",
			summary: "cancel, suspend, resume, retry or replay an invocation", body: ref("ControlRequest"), bodyRequired: true,
			ok: []answer{status(200, ref("Invocation")), {status: 202, schema: ref("Invocation"), desc: "A new invocation (retry, replay); Location names it.", location: true}}},

		{method: post, path: p("/events"), id: "publishEvent", tag: "Events", summary: "Publish an event",
			body: ref("PublishRequest"), bodyRequired: true,
			ok: []answer{{status: 202, schema: ref("PublishResult"), desc: "Published; Location names the event.", location: true},
				{status: 200, schema: ref("PublishResult"), desc: "This event_id was published before (Idempotency-Replayed: true)."}}},
		{method: get, path: p("/events"), id: "listEvents", tag: "Events", summary: "List events", params: listParams, ok: ok(listOf("Event"))},
		{method: get, path: p("/events/{id}"), id: "getEvent", tag: "Events", summary: "Read an event", ok: ok(ref("Event"))},
		{method: get, path: p("/audit-events"), id: "listAuditEvents", tag: "Audit", summary: "List audit events",
			params: listParams, ok: ok(listOf("AuditEvent"))},

		{method: post, path: p("/schedules"), id: "createSchedule", tag: "Schedules", summary: "Create a schedule",
			body: ref("ScheduleRequest"), bodyRequired: true, ok: created(ref("Schedule"))},
		{method: get, path: p("/schedules"), id: "listSchedules", tag: "Schedules", summary: "List schedules", params: listParams,
			ok: ok(listOf("Schedule"))},
		{method: get, path: p("/schedules/{id}"), id: "getSchedule", tag: "Schedules", summary: "Read a schedule", ok: ok(ref("Schedule"))},
		{method: put, path: p("/schedules/{id}"), id: "replaceSchedule", tag: "Schedules", summary: "Replace a schedule",
			body: ref("ScheduleRequest"), bodyRequired: true, ok: ok(ref("Schedule"))},
		{method: patch, path: p("/schedules/{id}"), id: "patchSchedule", tag: "Schedules", summary: "Change a schedule (JSON merge patch)",
			body: ref("SchedulePatch"), bodyRequired: true, ok: ok(ref("Schedule"))},
		{method: del, path: p("/schedules/{id}"), id: "deleteSchedule", tag: "Schedules", summary: "Delete a schedule",
			params: []any{bool1("cancel_in_flight", "Cancel its runs in flight too.")}, ok: ok(ref("ScheduleDeleted")), errs: []int{409}},
		{method: post, path: p("/schedules/{id}:pause"), id: "pauseSchedule", tag: "Schedules", summary: "Pause a schedule",
			body: schema{"type": "object", "maxProperties": 0}, ok: ok(ref("Schedule"))},
		{method: post, path: p("/schedules/{id}:resume"), id: "resumeSchedule", tag: "Schedules", summary: "Resume a schedule",
			body: ref("ResumeRequest"), ok: ok(ref("ScheduleResumed"))},
		{method: post, path: p("/schedules/{id}:trigger"), id: "triggerSchedule", tag: "Schedules", summary: "Run a schedule now",
			body: ref("ScheduleTriggerReq"), ok: []answer{{status: 202, schema: ref("ScheduleTriggered"), desc: "Started; Location names the invocation.", location: true}}},
		{method: get, path: p("/schedules/{id}/history"), id: "getScheduleHistory", tag: "Schedules", summary: "A schedule's runs and next instants",
			params: append(append([]any(nil), listParams...), qstr("status", "Run statuses, comma-separated."),
				qstr("since", "RFC 3339."), qstr("until", "RFC 3339."),
				query("next_runs", "How many next instants to show (0 to 100).", schema{"type": "integer", "minimum": 0, "maximum": 100})),
			ok: ok(ref("ScheduleHistory"))},

		{method: post, path: p("/backfills"), id: "createBackfill", tag: "Backfills", summary: "Start a backfill",
			body: ref("BackfillRequest"), bodyRequired: true, ok: created(ref("Backfill"))},
		{method: get, path: p("/backfills"), id: "listBackfills", tag: "Backfills", summary: "List backfills", params: listParams,
			ok: ok(listOf("Backfill"))},
		{method: get, path: p("/backfills/{id}"), id: "getBackfill", tag: "Backfills", summary: "Read a backfill", ok: ok(ref("Backfill"))},
		{method: get, path: p("/backfills/{id}/partitions"), id: "listBackfillPartitions", tag: "Backfills", summary: "A backfill's partitions",
			params: listParams, ok: ok(listOf("Partition"))},
		backfillAction("pause"), backfillAction("resume"), backfillAction("cancel"), backfillAction("retry"),

		{method: post, path: p("/secrets"), id: "createSecret", tag: "Secrets", summary: "Create a secret (its value is never shown)",
			body: ref("SecretCreateRequest"), bodyRequired: true, ok: created(ref("Secret"))},
		{method: get, path: p("/secrets"), id: "listSecrets", tag: "Secrets", summary: "List secrets", params: listParams, ok: ok(listOf("Secret"))},
		{method: get, path: p("/secrets/{name}"), id: "getSecret", tag: "Secrets", summary: "Read a secret's metadata", ok: ok(ref("Secret"))},
		{method: put, path: p("/secrets/{name}"), id: "updateSecret", tag: "Secrets", summary: "Rotate or change a secret",
			body: ref("SecretUpdateRequest"), bodyRequired: true, ok: ok(ref("Secret"))},
		{method: del, path: p("/secrets/{name}"), id: "deleteSecret", tag: "Secrets", summary: "Delete a secret", ok: noContent()},

		{method: post, path: p("/webhook-triggers"), id: "createWebhookTrigger", tag: "Webhooks", summary: "Create a webhook trigger",
			body: ref("WebhookRequest"), bodyRequired: true, ok: created(ref("WebhookTrigger"))},
		{method: get, path: p("/webhook-triggers"), id: "listWebhookTriggers", tag: "Webhooks", summary: "List webhook triggers",
			params: listParams, ok: ok(listOf("WebhookTrigger"))},
		{method: get, path: p("/webhook-triggers/{id}"), id: "getWebhookTrigger", tag: "Webhooks", summary: "Read a webhook trigger",
			ok: ok(ref("WebhookTrigger"))},
		{method: put, path: p("/webhook-triggers/{id}"), id: "replaceWebhookTrigger", tag: "Webhooks", summary: "Replace a webhook trigger",
			body: ref("WebhookRequest"), bodyRequired: true, ok: ok(ref("WebhookTrigger"))},
		{method: patch, path: p("/webhook-triggers/{id}"), id: "patchWebhookTrigger", tag: "Webhooks", summary: "Change a webhook trigger (JSON merge patch)",
			body: ref("WebhookPatch"), bodyRequired: true, ok: ok(ref("WebhookTrigger"))},
		{method: del, path: p("/webhook-triggers/{id}"), id: "deleteWebhookTrigger", tag: "Webhooks", summary: "Delete a webhook trigger",
			ok: ok(ref("WebhookDeleted")), errs: []int{409}},
		{method: post, path: p("/webhook-triggers/{id}:enable"), id: "enableWebhookTrigger", tag: "Webhooks", summary: "Enable a webhook trigger",
			ok: ok(ref("WebhookTrigger")), errs: []int{409}},
		{method: post, path: p("/webhook-triggers/{id}:disable"), id: "disableWebhookTrigger", tag: "Webhooks", summary: "Disable a webhook trigger",
			ok: ok(ref("WebhookTrigger")), errs: []int{409}},
		{method: post, path: p("/webhook-triggers/{id}:regenerate-secret"), id: "regenerateWebhookSecret", tag: "Webhooks",
			summary: "Regenerate a webhook trigger's secret (shown once)", body: ref("RegenerateRequest"), ok: ok(ref("WebhookTrigger"))},
		{method: get, path: p("/webhook-triggers/{id}/deliveries"), id: "listWebhookDeliveries", tag: "Webhooks",
			summary: "A webhook trigger's deliveries", params: listParams, ok: ok(listOf("WebhookDelivery"))},
		{method: post, path: p("/webhooks/{tenant_id}/{trigger_id}"), id: "receiveWebhook", tag: "Webhooks", public: true,
			summary: "The receiver: a sender delivers a webhook (authenticated by the trigger, not by a token)",
			desc:    "The body is the sender's, in any media type; the trigger's authentication (HMAC, basic, token) decides.",
			rawBody: true,
			ok:      []answer{{status: 202, schema: ref("WebhookAccepted"), desc: "Accepted; Location names the invocation.", location: true}},
			errs:    []int{400, 401, 403, 404, 409, 413, 422, 429, 500, 503}, noCommon: true},
		receiverNotPost(get), receiverNotPost(http.MethodHead), receiverNotPost(put), receiverNotPost(patch),
		receiverNotPost(del), receiverNotPost(http.MethodOptions),

		{method: post, path: p("/event-types"), id: "createEventType", tag: "Events", summary: "Register an event type",
			body: ref("EventTypeRequest"), bodyRequired: true, ok: created(ref("EventType"))},
		{method: get, path: p("/event-types"), id: "listEventTypes", tag: "Events", summary: "List event types", params: listParams,
			ok: ok(listOf("EventType"))},
		{method: get, path: p("/event-types/{id}"), id: "getEventType", tag: "Events", summary: "Read an event type", ok: ok(ref("EventType"))},
		{method: del, path: p("/event-types/{id}"), id: "deleteEventType", tag: "Events", summary: "Delete an event type",
			ok: noContent(), errs: []int{409}},

		{method: post, path: p("/triggers"), id: "createTrigger", tag: "Triggers", summary: "Create an event trigger",
			body: ref("TriggerRequest"), bodyRequired: true, ok: created(ref("Trigger"))},
		{method: get, path: p("/triggers"), id: "listTriggers", tag: "Triggers", summary: "List event triggers", params: listParams,
			ok: ok(listOf("Trigger"))},
		{method: get, path: p("/triggers/{id}"), id: "getTrigger", tag: "Triggers", summary: "Read an event trigger", ok: ok(ref("Trigger"))},
		{method: put, path: p("/triggers/{id}"), id: "replaceTrigger", tag: "Triggers", summary: "Replace an event trigger",
			body: ref("TriggerRequest"), bodyRequired: true, ok: ok(ref("Trigger"))},
		{method: patch, path: p("/triggers/{id}"), id: "patchTrigger", tag: "Triggers", summary: "Change an event trigger (JSON merge patch)",
			body: ref("TriggerPatch"), bodyRequired: true, ok: ok(ref("Trigger"))},
		{method: del, path: p("/triggers/{id}"), id: "deleteTrigger", tag: "Triggers", summary: "Delete an event trigger",
			ok: noContent(), errs: []int{409}},
		{method: post, path: p("/triggers/{id}:enable"), id: "enableTrigger", tag: "Triggers", summary: "Enable an event trigger",
			ok: ok(ref("Trigger")), errs: []int{409}},
		{method: post, path: p("/triggers/{id}:disable"), id: "disableTrigger", tag: "Triggers", summary: "Disable an event trigger",
			ok: ok(ref("Trigger")), errs: []int{409}},
		{method: get, path: p("/triggers/{id}/metrics"), id: "getTriggerMetrics", tag: "Triggers", summary: "An event trigger's metrics",
			params: []any{query("window", "<n>h or <n>d, 1 hour to 90 days (default 24h).", schema{"type": "string", "pattern": "^[0-9]+[hd]$"})}, ok: ok(ref("TriggerMetrics")), errs: []int{422}},
		{method: get, path: p("/triggers/{id}/dead-letters"), id: "listDeadLetters", tag: "Triggers", summary: "An event trigger's dead letters",
			params: listParams, ok: ok(listOf("DeadLetter"))},
		{method: del, path: p("/triggers/{id}/dead-letters"), id: "purgeDeadLetters", tag: "Triggers", summary: "Purge an event trigger's dead letters",
			ok: ok(ref("Purged"))},
		{method: post, path: p("/triggers/{id}/dead-letters:redrive"), id: "redriveDeadLetters", tag: "Triggers",
			summary: "Redrive the oldest dead letters", ok: ok(ref("Redriven")), errs: []int{409}},
		{method: post, path: p("/triggers/{id}/dead-letters/{dead_letter_id}:redrive"), id: "redriveDeadLetter", tag: "Triggers",
			summary: "Redrive one dead letter", ok: ok(ref("Redriven")), errs: []int{409}},

		{method: get, path: p("/assets"), id: "listAssets", tag: "Assets", summary: "List assets with their health", params: listParams,
			ok: ok(listOf("Asset"))},
		{method: get, path: p("/assets/{asset_key}"), id: "getAsset", tag: "Assets", summary: "Read an asset", ok: ok(ref("Asset"))},
		{method: get, path: p("/assets/{asset_key}/materializations"), id: "listMaterializations", tag: "Assets",
			summary: "An asset's materializations, newest first",
			params: append(append([]any(nil), listParams...), qstr("partition_key", "Only this partition's (the same as $filter=partition_key eq '…')."),
				query("state", "Only those in this state (the same as $filter=state eq '…').", schema{"type": "string",
					"enum": []any{"staged", "committed", "promoted", "quarantined", "rejected"}})),
			ok: ok(listOf("Materialization"))},
		{method: get, path: p("/assets/{asset_key}/materializations/{id}"), id: "getMaterialization", tag: "Assets",
			summary: "Read a materialization with its metadata and checks", ok: ok(ref("Materialization"))},
		{method: get, path: p("/assets/{asset_key}/materializations/{id}/data"), id: "getMaterializationData", tag: "Assets",
			summary: "A materialization's data, as the task returned it", errs: []int{409},
			desc: "Read from the blob store (at most 2 MiB); 404 once it is gone (a rejected materialization's).",
			ok:   []answer{{status: 200, schema: anyValue(), desc: "The task's output (JSON)."}}},
		materializationDecision("approve", "Approve a quarantined materialization: it is promoted, the latest of its partition"),
		materializationDecision("reject", "Reject a quarantined materialization: it is discarded with its data"),

		{method: get, path: p("/workers"), id: "listWorkers", tag: "Workers", summary: "List the remote workers the nodes have seen",
			desc: "The platform operator sees every worker; a tenant's operator or admin the workers whose key is unbound or bound to " +
				"its tenant. One item per worker id and node; status is online when it was seen in the last 30 s. " +
				"Filters: worker_id, node, key_id, status, first_seen_at, last_seen_at (docs/workers.md, Seeing the workers).",
			params: listParams, ok: ok(listOf("Worker"))},
		workerOp("/workers/poll", "workerPoll", "Poll for a task (long poll)"),
		workerOp("/workers/heartbeat", "workerHeartbeat", "Extend a task's lease"),
		workerOp("/workers/tasks/{task_id}/result", "workerResult", "Report a task's result"),
		workerOp("/workers/tasks/{task_id}/secret", "workerSecret", "Resolve a secret reference of a running task's outbound request"),

		{method: get, path: "/healthz", id: "healthz", tag: "Health", public: true, noCommon: true,
			summary: "Liveness", ok: ok(ref("Health"))},
		{method: get, path: "/readyz", id: "readyz", tag: "Health", public: true, noCommon: true, errs: []int{503},
			summary: "Readiness: the store is reachable and migrated", ok: ok(ref("Health"))},
		{method: get, path: "/metrics", id: "metrics", tag: "Health", noCommon: true, errs: []int{401, 403},
			summary: "Prometheus metrics (the platform operator's token, unless served publicly)",
			ok: []answer{{status: 200, desc: "The Prometheus text exposition format (or OpenMetrics, when asked for).",
				schema: schema{"type": "string"}, media: []string{"text/plain", "application/openmetrics-text"}}}},
	}
}

// backfillAction is POST /backfills/{id}:<action>.
func backfillAction(action string) op {
	return op{method: post, path: "/api/serverless-runtime/v1/backfills/{id}:" + action, id: action + "Backfill", tag: "Backfills",
		summary: action + " a backfill", ok: ok(ref("Backfill")), errs: []int{409}}
}

// materializationDecision is POST /assets/{asset_key}/materializations/{id}:<action>.
func materializationDecision(action, summary string) op {
	return op{method: post, path: "/api/serverless-runtime/v1/assets/{asset_key}/materializations/{id}:" + action,
		id: action + "Materialization", tag: "Assets", summary: summary, body: ref("DecisionRequest"),
		desc: "409 invalid_transition unless the materialization is quarantined. Audited with who and why.",
		ok:   ok(ref("Materialization"))}
}

// receiverNotPost is a method the webhook receiver refuses with 405.
func receiverNotPost(method string) op {
	return op{method: method, path: "/api/serverless-runtime/v1/webhooks/{tenant_id}/{trigger_id}", public: true, noCommon: true,
		id: "receiveWebhookNot" + method, tag: "Webhooks", summary: "Not allowed: senders POST (405 with Allow: POST)",
		errs: []int{405}}
}

// workerOp is a route of the worker protocol (signed envelopes both ways).
func workerOp(path, id, summary string) op {
	return op{method: post, path: "/api/serverless-runtime/v1" + path, id: id, tag: "Workers", summary: summary, public: true,
		desc: "No bearer token: the body is an envelope signed with a worker key (docs/workers.md), and so is the answer.",
		body: ref("WorkerEnvelopeRequest"), bodyRequired: true, ok: ok(ref("WorkerEnvelope")),
		errs: []int{400, 401, 404, 409, 413, 422, 429, 500, 503}, noCommon: true}
}
