package openapi_test

// build_test.go describes Lark's HTTP API and renders it as openapi.json. The resource schemas are
// reflected from the Go types the handlers encode (schema_test.go), so that a field added to a type
// shows up in the document at the next -update; the answers the handlers assemble by hand, the
// entrypoint (a stored definition plus server members) and the problem document are written out
// here. Every request and response of the API suite is checked against the result
// (internal/api/apispec), which is what keeps this description honest.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/api/apispec"
	"github.com/larkrun/lark/internal/api/openapi"
	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/assetops"
	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/eventbus"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/eventtrigger"
	"github.com/larkrun/lark/internal/federation"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/registry"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/scheduler"
	"github.com/larkrun/lark/internal/secrets"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
	"github.com/larkrun/lark/internal/tokens"
	"github.com/larkrun/lark/internal/trigger"
	"github.com/larkrun/lark/internal/usage"
	"github.com/larkrun/lark/internal/webhook"
	"github.com/larkrun/lark/internal/webhookrecv"
	"github.com/larkrun/lark/internal/workerhub"
	"github.com/larkrun/lark/internal/workerproto"
)

var update = flag.Bool("update", false, "rewrite openapi.json from build_test.go")

// TestDocumentIsCurrent fails when openapi.json is not what build renders (run with -update).
func TestDocumentIsCurrent(t *testing.T) {
	want, err := build()
	if err != nil {
		t.Fatal(err)
	}
	// It must be a valid OpenAPI 3.1 document whose references all resolve.
	if _, err := apispec.Parse(want); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(openapi.Document(), want) {
		t.Fatal("openapi.json is stale: run go test ./internal/api/openapi -update and review the diff")
	}
}

// ref refers to a component schema.
func ref(name string) schema { return schema{"$ref": "#/components/schemas/" + name} }

// listOf is the list envelope with items of the named schema.
func listOf(item string) schema {
	return schema{"allOf": []any{ref("List"), schema{"type": "object", "properties": schema{
		"items": schema{"type": "array", "items": ref(item)}}}}}
}

// op is one operation.
type op struct {
	method, path, id, summary, tag string
	public                         bool     // no bearer token
	params                         []any    // parameter objects or $refs
	body                           schema   // request body schema (application/json), nil: none
	bodyRequired                   bool     // the body must be sent
	rawBody                        bool     // the body is any media type (the webhook receiver)
	ok                             []answer // success answers
	errs                           []int    // problem statuses besides the common ones
	noCommon                       bool     // only errs, not the common problem statuses
	desc                           string   // a longer description
	role                           string   // the minimum role (from docs/api.md's route table)
}

// answer is one success response.
type answer struct {
	status int
	schema schema // nil: no body
	desc   string
	media  []string // the media types of schema (default application/json)
	// location: the answer carries a Location header naming the resource (201) or invocation (202).
	location bool
	// deprecation: the answer may carry the Deprecation, Sunset and Link headers of an invocation
	// of a deprecated entrypoint.
	deprecation bool
}

// deprecationHeaders are the headers of an answer that started a deprecated entrypoint.
var deprecationHeaders = schema{
	"Deprecation": schema{"description": "The entrypoint is deprecated (RFC 9745): @ and the Unix time it was deprecated.",
		"schema": schema{"type": "string", "pattern": "^@-?[0-9]+$"}},
	"Sunset": schema{"description": "When the deprecated entrypoint stops being served (RFC 8594, an HTTP-date), if it has a sunset_date.",
		"schema": schema{"type": "string"}},
	"Link": schema{"description": "The successor entrypoint, rel=\"successor-version\", if the deprecation names one.",
		"schema": schema{"type": "string"}},
}

// problemResponses names the shared problem responses by status.
var problemResponses = map[int]string{
	400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
	409: "Conflict", 413: "PayloadTooLarge", 415: "UnsupportedMediaType", 422: "ValidationFailed", 429: "TooManyRequests",
	500: "InternalError", 503: "Unavailable",
}

// common are the problem statuses any authenticated operation may answer: a bad query parameter,
// no or a bad token, a missing role, an unknown or foreign resource, the rate limits and in-flight
// cap, and a store that is down or slow.
var common = []int{400, 401, 403, 404, 429, 500, 503}

// writeErrs are added to operations with a request body.
var writeErrs = []int{409, 413, 415, 422}

// idParam is a path parameter.
func idParam(name, desc string) schema {
	return schema{"name": name, "in": "path", "required": true, "description": desc, "schema": schema{"type": "string"}}
}

// query is a query parameter.
func query(name, desc string, s schema) schema {
	return schema{"name": name, "in": "query", "description": desc, "schema": s}
}

// pref refers to a shared parameter.
func pref(name string) schema { return schema{"$ref": "#/components/parameters/" + name} }

var listParams = []any{pref("limit"), pref("cursor"), pref("filter"), pref("orderby")}

// build renders the document.
func build() ([]byte, error) {
	comps := map[reflect.Type]string{}
	enums := enumValues()
	resp := &reflector{components: comps, enums: enums}
	req := &reflector{components: map[reflect.Type]string{}, request: true, enums: enums}
	schemas := schema{}
	component := func(name string, v any) {
		comps[reflect.TypeOf(v)] = name
	}
	// Named first, so that references between them resolve to $refs.
	component("Token", auth.Token{})
	component("Whoami", api.Whoami{})
	component("CreatedToken", tokens.CreatedToken{})
	component("IdentityProvider", identity.Provider{})
	component("Worker", workerhub.WorkerView{})
	component("TenantPolicy", tenant.Policy{})
	component("ValidationReport", registry.Report{})
	component("Finding", registry.Finding{})
	component("VersionSummary", registry.VersionSummary{})
	component("DAGPlan", registry.PlanResult{})
	component("Invocation", api.RecordView{})
	component("InvocationResult", api.ResultView{})
	component("TimelineEvent", api.TimelineEvent{})
	component("Event", events.Event{})
	component("EventType", events.Type{})
	component("Schedule", schedule.Schedule{})
	component("ScheduleResumed", scheduler.Resumed{})
	component("ScheduleDeleted", scheduler.Deleted{})
	component("Backfill", schedule.Backfill{})
	component("Partition", schedule.Partition{})
	component("Secret", secrets.Secret{})
	component("WebhookTrigger", webhookrecv.View{})
	component("WebhookDeleted", webhookrecv.Deleted{})
	component("WebhookDelivery", webhook.Delivery{})
	component("WebhookAccepted", webhookrecv.Accepted{})
	component("Trigger", trigger.Trigger{})
	component("DeadLetter", trigger.DeadLetter{})
	component("Redriven", eventtrigger.Redriven{})
	component("TriggerMetrics", eventtrigger.Metrics{})
	component("UsageReport", usage.Report{})
	component("UsageHistory", usage.History{})
	component("AuditEvent", audit.Event{})
	component("Asset", asset.Asset{})
	component("Materialization", asset.Materialization{})
	component("WorkerEnvelope", workerproto.Envelope{})
	for t, name := range comps {
		schemas[name] = resp.of(t, 0)
	}
	for name, d := range componentDocs {
		sc, ok := schemas[name].(schema)
		if !ok {
			return nil, fmt.Errorf("componentDocs: no schema %s", name)
		}
		sc["description"] = d
	}
	requests := map[string]any{
		"CreateTokenRequest":      tokens.CreateTokenRequest{},
		"IdentityProviderRequest": federation.CreateRequest{},
		"TenantPolicyRequest":     tenant.Policy{},
		"StatusRequest":           registry.StatusRequest{},
		"PlanRequest":             registry.PlanRequest{},
		"StartRequest":            invoke.StartRequest{},
		"PublishRequest":          eventbus.PublishRequest{},
		"EventTypeRequest":        eventbus.TypeRequest{},
		"ScheduleRequest":         scheduler.Spec{},
		"BackfillRequest":         scheduler.BackfillSpec{},
		"SecretCreateRequest":     secrets.Create{},
		"SecretUpdateRequest":     secrets.Update{},
		"WebhookRequest":          webhookrecv.Spec{},
		"RegenerateRequest":       webhookrecv.Regenerate{},
		"TriggerRequest":          eventtrigger.Spec{},
		"ControlRequest": struct {
			Action string `json:"action"`
		}{},
		"ResumeRequest": struct {
			CatchUpMissed bool `json:"catch_up_missed"`
		}{},
		"ScheduleTriggerReq": struct {
			ParamsOverride json.RawMessage `json:"params_override"`
		}{},
		"WorkerEnvelopeRequest": workerproto.Envelope{},
		"DecisionRequest":       assetops.Decision{},
	}
	for name, v := range requests {
		sc := req.of(reflect.TypeOf(v), 0)
		if members := requestRequired[name]; len(members) > 0 {
			sc["required"] = members
		}
		schemas[name] = sc
	}
	manual(schemas)

	ops := operations()
	roles, err := documentedRoles()
	if err != nil {
		return nil, err
	}
	paths := schema{}
	for _, o := range ops {
		role, ok := roles[o.method+" "+anyParams(o.path)]
		if !ok {
			return nil, fmt.Errorf("%s %s is not in docs/api.md's route table", o.method, o.path)
		}
		o.role = role
		item, _ := paths[o.path].(schema)
		if item == nil {
			item = schema{}
			paths[o.path] = item
		}
		item[strings.ToLower(o.method)] = o.render()
	}
	responses := schema{}
	for status, name := range problemResponses {
		r := schema{"description": problemDesc[status], "content": schema{
			"application/problem+json": schema{"schema": ref("Problem")}}}
		if status == 429 || status == 503 {
			r["headers"] = schema{"Retry-After": schema{"description": "Seconds to wait before retrying.",
				"schema": schema{"type": "integer"}}}
		}
		if status == 405 {
			r["headers"] = schema{"Allow": schema{"description": "The methods the resource supports.",
				"schema": schema{"type": "string"}}}
		}
		responses[name] = r
	}
	doc := schema{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
		"info": schema{
			"title":   "Lark serverless runtime API",
			"version": "1.0.0",
			"description": "Lark's HTTP API. docs/api.md explains each route; this document is checked " +
				"against the server by the API test suite. Errors are RFC 9457 problem documents " +
				"(application/problem+json) with a GTS error type.",
		},
		"servers":  []any{schema{"url": "/"}},
		"security": []any{schema{"bearer": []any{}}},
		"tags":     tags(ops),
		"paths":    paths,
		"components": schema{
			"securitySchemes": schema{
				"bearer": schema{"type": "http", "scheme": "bearer",
					"description": "A token issued by POST /tokens, or the platform operator's admin token."},
			},
			"schemas":    schemas,
			"responses":  responses,
			"parameters": parameters(),
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// requestRequired lists, per request schema, the members the server answers 422 without (its
// validation says "is required"); the reflected request objects have none of their own, since a
// Go field without omitempty is not one a client must send. A member that has an alternative
// (a schedule's cron for expression) is not listed. TestRequestSchemasDeclareRequired checks that
// every request schema is here or in optionalRequests.
var requestRequired = map[string][]any{
	"CreateTokenRequest":      {"subject_id", "roles"},
	"IdentityProviderRequest": {"issuer", "audiences"},
	"StatusRequest":           {"action"},
	"StartRequest":            {"entrypoint_id"},
	"PublishRequest":          {"event_type_id"},
	"EventTypeRequest":        {"event_type_id", "schema"},
	"ScheduleRequest":         {"entrypoint_id"},
	"SecretCreateRequest":     {"name", "value", "allowed_hosts"},
	"WebhookRequest":          {"entrypoint_id", "authentication"},
	"TriggerRequest":          {"event_type_id", "entrypoint_id"},
	"ControlRequest":          {"action"},
	"BackfillRequest":         {"start", "end"},
	"WorkerEnvelopeRequest":   {"body", "kid", "nonce", "sig"},
}

// optionalRequests are the request schemas whose members are all optional, and why.
var optionalRequests = map[string]string{
	"TenantPolicyRequest": "every policy member has a default",
	"PlanRequest":         "partition_key only for a partitioned DAG",
	"SecretUpdateRequest": "any one of value, description, allowed_hosts",
	"RegenerateRequest":   "both members have defaults",
	"ResumeRequest":       "catch_up_missed defaults to false",
	"ScheduleTriggerReq":  "params_override is optional",
	"DecisionRequest":     "reason is optional",
	"EntrypointDraft":     "a definition to validate: the report says what is missing",
}

// componentDocs describe the reflected schemas (docs/api.md and the pages it links have the detail).
var componentDocs = map[string]string{
	"Token":            "An API token, without its secret (tokens, docs/api.md §4).",
	"CreatedToken":     "A new token with its secret, shown this once.",
	"IdentityProvider": "An OIDC issuer whose JWTs authenticate callers, and how its claims map to tenant and roles (docs/api.md, Identity providers).",
	"Whoami":           "Who the bearer token authenticates as: tenant, subject, roles.",
	"TenantPolicy":     "A tenant's runtime policy: enablement, quotas, retention, governance, defaults (§5).",
	"ValidationReport": "001's validation report: valid, errors[], warnings[] and what the code uses.",
	"DAGPlan":          "A DAG run's plan for a partition key and its fingerprint (docs/dag.md).",
	"Finding":          "One validation finding, with its source location when it has one.",
	"VersionSummary":   "One version of an entrypoint family.",
	"Invocation":       "000's InvocationRecord.",
	"InvocationResult": "000's InvocationResult: the record, and whether it was a dry run or a cached answer.",
	"TimelineEvent":    "000's InvocationTimelineEvent plus the log sequence number.",
	"Event":            "A published event (docs/events.md).",
	"EventType":        "A registered event type with its payload schema (docs/events.md).",
	"Schedule":         "A schedule (docs/schedules.md).",
	"ScheduleResumed":  "A resumed schedule and how many catch-up runs it queued.",
	"ScheduleDeleted":  "What deleting a schedule did.",
	"Backfill":         "A backfill of a schedule over a past range (docs/schedules.md#backfills).",
	"Partition":        "One instant of a backfill and its invocation.",
	"Secret":           "A tenant secret's metadata; its value is never returned (docs/secrets.md).",
	"WebhookTrigger":   "A webhook trigger; secret only in the answers of create and :regenerate-secret (docs/webhooks.md).",
	"WebhookDeleted":   "What deleting a webhook trigger did.",
	"WebhookDelivery":  "One delivery a webhook trigger received.",
	"WebhookAccepted":  "The receiver's answer to an accepted delivery.",
	"Trigger":          "An event trigger (docs/events.md#triggers).",
	"DeadLetter":       "An event a trigger could not deliver (docs/events.md#dead-letters).",
	"Redriven":         "The dead letters a redrive took, each with the invocation it started.",
	"TriggerMetrics":   "An event trigger's counters over a window (docs/events.md#metrics).",
	"UsageReport":      "A tenant's current usage against its quotas, and its cost.",
	"UsageHistory":     "A tenant's usage and cost per bucket.",
	"AuditEvent":       "One audit record (§9).",
	"Asset":            "An asset: its latest promoted materialization and its health (docs/dag.md#assets).",
	"Materialization":  "One task attempt's output of an asset for a partition, with its state, metadata and checks (docs/dag.md#assets).",
	"Worker":           "A remote worker as one node saw it: its key and tenants, when it was seen, whether it is online, the tasks it holds (docs/workers.md).",
	"WorkerEnvelope":   "A signed worker envelope: body is the message, sig an HMAC over it (docs/workers.md).",
}

// enumValues lists the values of the named string types the API shows, from their constants.
func enumValues() map[reflect.Type][]any {
	m := map[reflect.Type][]any{}
	add := func(vals ...any) { m[reflect.TypeOf(vals[0])] = vals }
	roles := make([]any, 0, len(auth.Roles))
	for _, r := range auth.Roles {
		roles = append(roles, r)
	}
	add(roles...)
	eps := make([]any, 0, len(entrypoint.Statuses))
	for _, s := range entrypoint.Statuses {
		eps = append(eps, s)
	}
	add(eps...)
	add(entrypoint.KindFunction, entrypoint.KindWorkflow)
	add(entrypoint.OwnerUser, entrypoint.OwnerTenant, entrypoint.OwnerSystem)
	add(entrypoint.ActionActivate, entrypoint.ActionDeprecate, entrypoint.ActionDisable, entrypoint.ActionEnable, entrypoint.ActionArchive)
	add(invocation.StatusQueued, invocation.StatusRunning, invocation.StatusSuspended, invocation.StatusSucceeded,
		invocation.StatusFailed, invocation.StatusCanceled, invocation.StatusCompensating, invocation.StatusCompensated,
		invocation.StatusDeadLettered)
	add(invocation.ModeSync, invocation.ModeAsync)
	add(invoke.ActionCancel, invoke.ActionRetry, invoke.ActionReplay, invoke.ActionSuspend, invoke.ActionResume)
	add(schedule.StatusActive, schedule.StatusPaused, schedule.StatusDisabled)
	add(trigger.StatusActive, trigger.StatusPaused, trigger.StatusDisabled)
	add(webhook.StatusActive, webhook.StatusDisabled)
	add(workerhub.StatusOnline, workerhub.StatusOffline)
	states := make([]any, 0, len(asset.States))
	for _, st := range asset.States {
		states = append(states, st)
	}
	add(states...)
	add(asset.GatingAllow, asset.GatingAllowWithWarning, asset.GatingQuarantine, asset.GatingBlock)
	registrars := make([]any, 0, len(identity.Registrars))
	for _, r := range identity.Registrars {
		registrars = append(registrars, r)
	}
	add(registrars...)
	return m
}

var problemDesc = map[int]string{
	400: "Bad request: malformed JSON, or a bad query parameter or header.",
	401: "No token, or an unknown, revoked or expired one.",
	403: "The token lacks the role, or the tenant is disabled.",
	404: "No such resource (also for another tenant's).",
	405: "The method is not allowed on this resource.",
	409: "The request conflicts with the resource's state (the problem's reason says how).",
	413: "The request body is too large.",
	415: "The request body's Content-Type is not JSON (application/json or a +json type).",
	422: "The request is well-formed JSON but invalid; errors[] lists every finding.",
	429: "A rate limit, quota or the tenant's in-flight cap was hit.",
	500: "An internal error (the detail never carries the cause).",
	503: "The store or a dependency is unavailable; retry after Retry-After.",
}

// routeRow is a row of docs/api.md's route table: | `METHOD` | `/path` [(no base path)] | role | section |
var routeRow = regexp.MustCompile("^\\| `([A-Z]+)` \\| `(/[^`]*)`( \\(no base path\\))? \\| ([^|]+) \\| [^|]+ \\|$")

var paramName = regexp.MustCompile(`\{[^}]*\}`)

// anyParams writes every path parameter {}: the docs name some for the reader ({event_id}).
func anyParams(path string) string { return paramName.ReplaceAllString(path, "{}") }

// documentedRoles reads the minimum role of each route from docs/api.md's route table (the rows
// before §1), keyed "METHOD /full/path" with parameters written {}.
func documentedRoles() (map[string]string, error) {
	raw, err := os.ReadFile("../../../docs/api.md")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "## 1.") {
			break
		}
		m := routeRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		path := "/api/serverless-runtime/v1" + m[2]
		if m[3] != "" {
			path = m[2]
		}
		out[m[1]+" "+anyParams(path)] = strings.TrimSpace(m[4])
	}
	return out, nil
}

// tags lists the operations' tags in order of first use.
func tags(ops []op) []any {
	seen := map[string]bool{}
	var names []string
	for _, o := range ops {
		if !seen[o.tag] {
			seen[o.tag] = true
			names = append(names, o.tag)
		}
	}
	out := make([]any, 0, len(names))
	for _, n := range names {
		out = append(out, schema{"name": n})
	}
	return out
}

// render returns the OpenAPI operation object.
func (o op) render() schema {
	out := schema{"operationId": o.id, "summary": o.summary, "tags": []any{o.tag},
		"x-minimum-role": o.role}
	desc := "Minimum role: " + o.role + "."
	if o.desc != "" {
		desc = o.desc + "\n\n" + desc
	}
	out["description"] = desc
	if o.public {
		out["security"] = []any{}
	}
	var params []any
	for _, name := range pathParams(o.path) {
		params = append(params, idParam(name, pathParamDesc(name)))
	}
	params = append(params, o.params...)
	if len(params) > 0 {
		out["parameters"] = params
	}
	if o.rawBody {
		out["requestBody"] = schema{"required": false, "content": schema{"*/*": schema{"schema": anyValue()}}}
	}
	if o.body != nil {
		content := schema{"application/json": schema{"schema": o.body}}
		if o.method == "PATCH" {
			// A merge patch may be declared as such (RFC 7396); any other +json type is read as
			// JSON too (docs/api.md §1), but only these two are advertised.
			content["application/merge-patch+json"] = schema{"schema": o.body}
		}
		out["requestBody"] = schema{"required": o.bodyRequired, "content": content}
	}
	responses := schema{}
	for _, a := range o.ok {
		r := schema{"description": a.desc}
		if r["description"] == "" {
			r["description"] = "Success."
		}
		if a.schema != nil {
			media := a.media
			if media == nil {
				media = []string{"application/json"}
			}
			content := schema{}
			for _, m := range media {
				content[m] = schema{"schema": a.schema}
			}
			r["content"] = content
		}
		headers := schema{}
		if a.location {
			headers["Location"] = schema{"required": true, "description": "The path of the resource it created or started.",
				"schema": schema{"type": "string"}}
		}
		if a.deprecation {
			for k, v := range deprecationHeaders {
				headers[k] = v
			}
		}
		if len(headers) > 0 {
			r["headers"] = headers
		}
		responses[strconv.Itoa(a.status)] = r
	}
	statuses := o.errs
	if !o.noCommon {
		statuses = append(append([]int(nil), common...), o.errs...)
		if o.body != nil {
			statuses = append(statuses, writeErrs...)
		}
	}
	for _, st := range statuses {
		responses[strconv.Itoa(st)] = schema{"$ref": "#/components/responses/" + problemResponses[st]}
	}
	out["responses"] = responses
	return out
}

// pathParams returns the names of a path template's parameters, in order.
func pathParams(path string) []string {
	var out []string
	for {
		i := strings.IndexByte(path, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(path[i:], '}')
		out = append(out, path[i+1:i+j])
		path = path[i+j+1:]
	}
}

// pathParamDesc describes a path parameter.
func pathParamDesc(name string) string {
	switch name {
	case "id":
		return "The resource's id (URL-escaped)."
	case "tenant_id":
		return "The tenant's id."
	case "asset_key":
		return "The asset's key (segments joined by dots: sales.clean)."
	}
	return "The " + strings.ReplaceAll(name, "_", " ") + "."
}

// parameters are the shared list parameters (docs/api.md §3).
func parameters() schema {
	return schema{
		"limit": query("limit", fmt.Sprintf("Largest number of items in a page (default %d). A page also ends before "+
			"the item that would take its stored bytes over the byte budget (default %d MiB, --max-page-bytes), "+
			"always holding at least one item; it then says has_more with a next_cursor that continues after its "+
			"last item (docs/api.md, \"Page byte budget\").", store.DefaultLimit, store.DefaultPageBytes>>20),
			schema{"type": "integer", "minimum": 1, "maximum": store.MaxLimit}),
		"cursor": query("cursor", "The next_cursor (or prev_cursor) of the previous page; opaque.",
			schema{"type": "string"}),
		"filter": query("$filter", "An OData filter over the resource's filterable fields (docs/api.md §1).",
			schema{"type": "string"}),
		"orderby": query("$orderby", "OData ordering: field [asc|desc], comma-separated.",
			schema{"type": "string"}),
	}
}
