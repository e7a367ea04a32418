package api_test

// HTTP-level tests of event types (POST/GET/DELETE /event-types) and event triggers (/triggers):
// CRUD and its validation, the max_triggers quota, tenant isolation, matching (exactly once per
// event, also when the event is published again), batching (max_size, max_wait_ms on the injected
// clock, after a restart), dead letters (redrive, purge) and metrics.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/server"
)

const (
	typesPath = base + "/event-types"
	trgPath   = base + "/triggers"
	orderType = "gts.x.core.events.event.v1~vendor.app.commerce.order_placed.v1~"
)

// orderSchema is the payload schema of orderType in these tests.
var orderSchema = obj{"type": "object", "required": []any{"order_id", "total"},
	"properties": obj{"order_id": obj{"type": "string"}, "total": obj{"type": "number", "minimum": 0}}}

// echoFn is a function that returns its input (so the test can read what a trigger passed).
func echoFn(t testing.TB, name string) obj {
	return invFn(t, name, "def main(ctx, input):\n    return {\"input\": input}\n",
		set("traits.invocation", obj{"supported": []any{"sync", "async"}, "default": "async"}))
}

// failFn is a function that always fails.
func failFn(t testing.TB, name string) obj {
	return invFn(t, name, "def main(ctx, input):\n    fail(\"boom\")\n",
		set("traits.invocation", obj{"supported": []any{"sync", "async"}, "default": "async"}))
}

// invocationsOf lists the invocations of an entrypoint (oldest first).
func invocationsOf(t testing.TB, e *env, tok, epID string) []obj {
	t.Helper()
	q := url.Values{"$filter": {fmt.Sprintf("entrypoint_id eq '%s'", epID)}, "$orderby": {"created_at asc"}, "limit": {"200"}}
	return e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+q.Encode(), tok, nil).items()
}

// awaitInvocations waits until the entrypoint has n invocations, all in a terminal status.
func awaitInvocations(t testing.TB, e *env, tok, epID string, n int) []obj {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list := invocationsOf(t, e, tok, epID)
		done := len(list) == n
		for _, rec := range list {
			done = done && slices.Contains(wfTerminal, rec["status"].(string))
		}
		if done {
			return list
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "invocations did not end", "want %d, have %v", n, list)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func auditTypes(t testing.TB, e *env, tok string) []string {
	t.Helper()
	var out []string
	for _, it := range e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?limit=200", tok, nil).items() {
		out = append(out, it["type"].(string))
	}
	return out
}

func TestEventTypesAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	other := invTenant(t, e, "globex")
	viewer := e.token(t, "acme", "v", "viewer")

	// Validation: id, schema, description; roles.
	r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, typesPath, adm,
		obj{"event_type_id": "gts.x.core.events.event.v1~vendor.app.x.v1", "schema": obj{"type": 12}})
	requireIssue(t, r, "$.event_type_id", "INVALID_VALUE")
	require.NotNil(t, issueAt(r, "$.schema.type"), "%s", r)
	r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, typesPath, adm, obj{"event_type_id": orderType})
	requireIssue(t, r, "$.schema", "MISSING_FIELD")
	r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, typesPath, adm,
		obj{"event_type_id": orderType, "schema": orderSchema, "description": string(make([]byte, 1025))})
	requireIssue(t, r, "$.description", "INVALID_VALUE")
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, typesPath, viewer, obj{"event_type_id": orderType, "schema": orderSchema})

	// Tenant scope.
	created := e.expect(t, http.StatusCreated, http.MethodPost, typesPath, adm, obj{"event_type_id": orderType, "schema": orderSchema}).Body
	require.Equal(t, "tenant", created["scope"])
	require.Equal(t, "acme", created["tenant_id"])
	e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, typesPath, adm, obj{"event_type_id": orderType, "schema": orderSchema})
	got := e.expect(t, http.StatusOK, http.MethodGet, typesPath+"/"+orderType, viewer, nil).Body
	require.Equal(t, orderType, got["event_type_id"])
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, typesPath+"/"+orderType, other, nil)
	require.Len(t, e.expect(t, http.StatusOK, http.MethodGet, typesPath, other, nil).items(), 0)

	// Published events of a registered type are validated; the issue names the path.
	publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": orderType, "payload": obj{"order_id": "o1", "total": 5}})
	r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, eventsPath, adm,
		obj{"event_type_id": orderType, "event_id": "bad-1", "payload": obj{"order_id": "o1", "total": -5}})
	require.NotNil(t, issueAt(r, "$.payload.total"), "%s", r)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, eventsPath+"/bad-1", adm, nil)
	// Another tenant's events of that type are not (the type is acme's).
	publish(t, e, other, http.StatusAccepted, obj{"event_type_id": orderType, "payload": obj{"anything": true}})

	// Platform scope (operator): applies to every tenant without its own; the tenant's wins.
	shipType := "gts.x.core.events.event.v1~vendor.app.commerce.shipped.v1~"
	p := e.expect(t, http.StatusCreated, http.MethodPost, typesPath, operator,
		obj{"event_type_id": shipType, "schema": obj{"type": "object", "required": []any{"carrier"}}}).Body
	require.Equal(t, "platform", p["scope"])
	e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, eventsPath, other, obj{"event_type_id": shipType, "payload": obj{}})
	publish(t, e, other, http.StatusAccepted, obj{"event_type_id": shipType, "payload": obj{"carrier": "ups"}})
	require.Equal(t, "platform", e.expect(t, http.StatusOK, http.MethodGet, typesPath+"/"+shipType, other, nil).Body["scope"])
	ids := []string{}
	for _, it := range e.expect(t, http.StatusOK, http.MethodGet, typesPath, adm, nil).items() {
		ids = append(ids, it["event_type_id"].(string)+"/"+it["scope"].(string))
	}
	require.ElementsMatch(t, []string{orderType + "/tenant", shipType + "/platform"}, ids)
	// A tenant cannot delete the platform's type.
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, typesPath+"/"+shipType, adm, nil)

	// Unregistered types: accepted by default, refused under the tenant policy.
	free := "gts.x.core.events.event.v1~vendor.app.misc.free.v1~"
	publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": free, "payload": obj{}})
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"policies": obj{"require_registered_event_types": true}})
	r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, eventsPath, adm, obj{"event_type_id": free, "payload": obj{}})
	requireIssue(t, r, "$.event_type_id", "UNREGISTERED_EVENT_TYPE")
	publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": shipType, "payload": obj{"carrier": "dhl"}}) // the platform's counts
	publish(t, e, other, http.StatusAccepted, obj{"event_type_id": free, "payload": obj{}})                   // globex's policy is its own

	// Delete: 204, then 404; audit events for both changes.
	e.expect(t, http.StatusNoContent, http.MethodDelete, typesPath+"/"+orderType, adm, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, typesPath+"/"+orderType, adm, nil)
	types := auditTypes(t, e, adm)
	require.Contains(t, types, auditBase+"event_type_created.v1~")
	require.Contains(t, types, auditBase+"event_type_deleted.v1~")
	// The platform's type is in the platform's audit log, which the operator reads.
	q := url.Values{"$filter": {"resource_type eq 'event_type' and resource_id eq '" + shipType + "'"}}
	pl := e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?"+q.Encode(), operator, nil).items()
	require.Len(t, pl, 1)
	require.Equal(t, "platform", pl[0]["tenant_id"])
}

func TestTriggersCRUD(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	other := invTenant(t, e, "globex")
	viewer := e.token(t, "acme", "v", "viewer")
	ep := e.registerActive(t, adm, echoFn(t, "orders.on_order.v1~"))["entrypoint_id"].(string)
	body := func(mods ...func(obj)) obj {
		b := obj{"trigger_id": "big-orders", "event_type_id": orderType, "entrypoint_id": ep, "event_filter_query": "payload.total > 100"}
		for _, m := range mods {
			m(b)
		}
		return b
	}

	// Validation: each rule answers 422 at its path.
	for _, c := range []struct {
		mod        func(obj)
		path, code string
	}{
		{del("event_type_id"), "$.event_type_id", "MISSING_FIELD"},
		{set("event_type_id", "gts.x.core.events.event.v1~vendor.app.x.v1"), "$.event_type_id", "INVALID_VALUE"},
		{del("entrypoint_id"), "$.entrypoint_id", "MISSING_FIELD"},
		{set("trigger_id", "bad id"), "$.trigger_id", "INVALID_VALUE"},
		{set("status", "sleeping"), "$.status", "INVALID_VALUE"},
		{set("execution_context", "user"), "$.execution_context", "INVALID_VALUE"},
		{set("batch", obj{"enabled": true, "max_size": 1001}), "$.batch.max_size", "INVALID_VALUE"},
		{set("batch", obj{"enabled": true, "max_wait_ms": 99}), "$.batch.max_wait_ms", "INVALID_VALUE"},
		{set("retry_policy", obj{"max_attempts": 11}), "$.retry_policy.max_attempts", "INVALID_VALUE"},
		{set("event_filter_query", string(make([]byte, 4097))), "$.event_filter_query", "INVALID_VALUE"},
	} {
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, trgPath, adm, body(c.mod))
		requireIssue(t, r, c.path, c.code)
	}
	// A filter that does not compile or type-check: 422 with its position.
	r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, trgPath, adm,
		body(set("event_filter_query", "payload.total >")))
	requireIssue(t, r, "$.event_filter_query", "INVALID_FILTER")
	require.EqualValues(t, 1, r.Body["line"], "%s", r)
	require.NotZero(t, r.Body["column"], "%s", r)
	r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, trgPath, adm,
		body(set("event_filter_query", "event_id + 1 == 2")))
	requireIssue(t, r, "$.event_filter_query", "INVALID_FILTER")
	// An entrypoint that does not exist, or another tenant's: 404.
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, trgPath, adm, body(set("entrypoint_id", fnPrefix+"vendor.app.nope.v1~")))
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, trgPath, other, body())
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, trgPath, viewer, body())

	// Create: defaults filled in.
	created := e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, body())
	require.Equal(t, trgPath+"/big-orders", created.Header.Get("Location"))
	tr := created.Body
	require.Equal(t, "active", tr["status"])
	require.Equal(t, "active", tr["connection_status"])
	require.Equal(t, "system", tr["execution_context"])
	require.Equal(t, false, tr["batch"].(obj)["enabled"])
	require.Equal(t, true, tr["dead_letter_queue"].(obj)["enabled"])
	e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, trgPath, adm, body())
	assigned := e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, body(del("trigger_id"), set("batch", obj{"enabled": true}))).Body
	require.Regexp(t, `^trg_`, assigned["trigger_id"])
	require.EqualValues(t, 100, assigned["batch"].(obj)["max_size"])
	require.EqualValues(t, 5000, assigned["batch"].(obj)["max_wait_ms"])

	// Read, list with $filter, tenant isolation.
	require.Equal(t, "big-orders", e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/big-orders", viewer, nil).Body["trigger_id"])
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, trgPath+"/big-orders", other, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPatch, trgPath+"/big-orders", other, obj{"status": "disabled"})
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, trgPath+"/big-orders", other, nil)
	require.Len(t, e.expect(t, http.StatusOK, http.MethodGet, trgPath, other, nil).items(), 0)
	require.Len(t, e.expect(t, http.StatusOK, http.MethodGet, trgPath, adm, nil).items(), 2)
	q := url.Values{"$filter": {"trigger_id eq 'big-orders'"}}
	require.Len(t, e.expect(t, http.StatusOK, http.MethodGet, trgPath+"?"+q.Encode(), adm, nil).items(), 1)
	q = url.Values{"$filter": {"nope eq 1"}}
	e.expect(t, http.StatusBadRequest, http.MethodGet, trgPath+"?"+q.Encode(), adm, nil)

	// PATCH merges, PUT replaces, both validated.
	p := e.expect(t, http.StatusOK, http.MethodPatch, trgPath+"/big-orders", adm, obj{"event_filter_query": "payload.total > 500"}).Body
	require.Equal(t, "payload.total > 500", p["event_filter_query"])
	require.Equal(t, orderType, p["event_type_id"])
	r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPatch, trgPath+"/big-orders", adm, obj{"event_filter_query": "(("})
	requireIssue(t, r, "$.event_filter_query", "INVALID_FILTER")
	pu := e.expect(t, http.StatusOK, http.MethodPut, trgPath+"/big-orders", adm, body(del("event_filter_query"))).Body
	require.Nil(t, pu["event_filter_query"])
	e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPut, trgPath+"/big-orders", adm, body(set("trigger_id", "renamed")))

	// :disable / :enable: status and connection status.
	d := e.expect(t, http.StatusOK, http.MethodPost, trgPath+"/big-orders:disable", adm, nil).Body
	require.Equal(t, "disabled", d["status"])
	require.Equal(t, "paused", d["connection_status"])
	en := e.expect(t, http.StatusOK, http.MethodPost, trgPath+"/big-orders:enable", adm, nil).Body
	require.Equal(t, "active", en["status"])
	require.Equal(t, "active", en["connection_status"])
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, trgPath+"/big-orders:disable", viewer, nil)

	// The max_triggers quota, and total_triggers in the usage report.
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"quotas": obj{"max_triggers": 2}})
	u := e.expect(t, http.StatusOK, http.MethodGet, base+"/tenants/acme/usage", adm, nil).Body
	require.EqualValues(t, 2, u["current"].(obj)["total_triggers"], "%v", u)
	require.EqualValues(t, 100, u["utilization_percent"].(obj)["triggers"], "%v", u)
	qe := e.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, trgPath, adm, body(set("trigger_id", "third")))
	require.Equal(t, "max_triggers", qe.Body["quota"])
	require.NotEmpty(t, qe.Header.Get("Retry-After"))

	// Delete.
	e.expect(t, http.StatusNoContent, http.MethodDelete, trgPath+"/big-orders", adm, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, trgPath+"/big-orders", adm, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, trgPath+"/big-orders/metrics", adm, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, trgPath+"/big-orders/dead-letters", adm, nil)
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, body(set("trigger_id", "third")))

	types := auditTypes(t, e, adm)
	for _, k := range []string{"created", "updated", "enabled", "disabled", "deleted"} {
		require.Contains(t, types, auditBase+"event_trigger_"+k+".v1~")
	}
}

func TestTriggerMatching(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	pub := e.token(t, "acme", "publisher-1", "operator")
	ep := e.registerActive(t, adm, echoFn(t, "orders.on_big.v1~"))["entrypoint_id"].(string)
	epAll := e.registerActive(t, adm, echoFn(t, "orders.on_any.v1~"))["entrypoint_id"].(string)
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "big", "event_type_id": orderType,
		"entrypoint_id": ep, "event_filter_query": "payload.total > 100"})
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "all", "event_type_id": orderType,
		"entrypoint_id": epAll, "execution_context": "event_source"})
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "off", "event_type_id": orderType,
		"entrypoint_id": epAll, "status": "disabled"})

	const traceID = "7bf92f3577b34da6a3ce929d0e0e4739"
	pr := e.send(t, request{method: http.MethodPost, path: eventsPath, token: pub, body: obj{"event_id": "o-1", "event_type_id": orderType,
		"source": "shop", "payload": obj{"order_id": "o-1", "total": 250}}, header: map[string]string{"Traceparent": "00-" + traceID + "-30f067aa0ba902ba-01"}})
	require.Equal(t, http.StatusAccepted, pr.Status, "%s", pr.Raw)
	p := pr.Body
	require.EqualValues(t, 2, p["triggered"])
	publish(t, e, pub, http.StatusAccepted, obj{"event_id": "o-2", "event_type_id": orderType, "payload": obj{"order_id": "o-2", "total": 5}})
	// Another type, and the same type in another tenant, start nothing here.
	publish(t, e, pub, http.StatusAccepted, obj{"event_type_id": paymentType, "payload": obj{"order_id": "o-1"}})
	otherPub := invTenant(t, e, "globex")
	publish(t, e, otherPub, http.StatusAccepted, obj{"event_type_id": orderType, "payload": obj{"total": 1000}})
	// Published again (same event id): nothing new starts.
	again := publish(t, e, pub, http.StatusOK, obj{"event_id": "o-1", "event_type_id": orderType, "payload": obj{"order_id": "o-1", "total": 250}})
	require.Equal(t, "true", again.Header.Get("Idempotency-Replayed"))

	big := awaitInvocations(t, e, adm, ep, 1)
	all := awaitInvocations(t, e, adm, epAll, 2)
	require.Equal(t, "succeeded", big[0]["status"])
	// The params: {"event": <the event as r_wait_event_v1 returns it>}.
	rec := invGet(t, e, adm, invID(big[0]))
	ev := rec["params"].(obj)["event"].(obj)
	require.Equal(t, "o-1", ev["event_id"])
	require.Equal(t, orderType, ev["event_type_id"])
	require.Equal(t, "shop", ev["source"])
	require.EqualValues(t, 250, ev["payload"].(obj)["total"])
	require.NotEmpty(t, ev["received_at"])
	require.Equal(t, traceID, rec["observability"].(obj)["trace_id"], "a triggered invocation continues the publication's trace")
	// Who they run as (not shown by the API: read from the store).
	stored, err := e.srv.Store.Invocation(context.Background(), "acme", invID(big[0]))
	require.NoError(t, err)
	require.Equal(t, "trigger:big", stored.SubjectID, "system context: the trigger's identity")
	for _, r := range all {
		stored, err := e.srv.Store.Invocation(context.Background(), "acme", invID(r))
		require.NoError(t, err)
		require.Equal(t, "publisher-1", stored.SubjectID, "event_source context: the publisher's identity")
	}

	// Metrics: received, filtered out, triggered, succeeded, a latency.
	m := e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/big/metrics?window=1h", adm, nil).Body
	require.Equal(t, "1h", m["period"])
	mm := m["metrics"].(obj)
	require.EqualValues(t, 2, mm["events_received"])
	require.EqualValues(t, 1, mm["events_filtered_out"])
	require.EqualValues(t, 1, mm["executions_triggered"])
	require.EqualValues(t, 1, mm["executions_succeeded"])
	require.EqualValues(t, 0, mm["executions_failed"])
	require.NotNil(t, m["p50_latency_ms"])
	require.NotNil(t, m["p99_latency_ms"])
	off := e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/off/metrics", adm, nil).Body["metrics"].(obj)
	require.EqualValues(t, 0, off["events_received"], "a disabled trigger sees nothing")
	e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodGet, trgPath+"/big/metrics?window=1y", adm, nil)
	e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodGet, trgPath+"/big/metrics?window=91d", adm, nil)
	e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, trgPath+"/big/metrics?nope=1", adm, nil)

	// Changes apply to the next event (the matcher's cache of active triggers is invalidated).
	e.expect(t, http.StatusOK, http.MethodPost, trgPath+"/big:disable", adm, nil)
	p = publish(t, e, pub, http.StatusAccepted, obj{"event_type_id": orderType, "payload": obj{"total": 999}}).Body
	require.EqualValues(t, 1, p["triggered"], "only 'all' now")
	e.expect(t, http.StatusOK, http.MethodPatch, trgPath+"/all", adm, obj{"event_filter_query": "payload.total < 0"})
	e.expect(t, http.StatusOK, http.MethodPost, trgPath+"/big:enable", adm, nil)
	p = publish(t, e, pub, http.StatusAccepted, obj{"event_type_id": orderType, "payload": obj{"total": 999}}).Body
	require.EqualValues(t, 1, p["triggered"], "only 'big' now")
	e.expect(t, http.StatusNoContent, http.MethodDelete, trgPath+"/big", adm, nil)
	p = publish(t, e, pub, http.StatusAccepted, obj{"event_type_id": orderType, "payload": obj{"total": 999}}).Body
	require.EqualValues(t, 0, p["triggered"])
}

// batchEvents lists the event ids of each invocation of ep (oldest first) from its params.
func batchEvents(t testing.TB, e *env, tok, ep string) [][]string {
	t.Helper()
	var out [][]string
	for _, r := range invocationsOf(t, e, tok, ep) {
		rec := invGet(t, e, tok, invID(r))
		var ids []string
		for _, ev := range rec["params"].(obj)["events"].([]any) {
			ids = append(ids, ev.(obj)["event_id"].(string))
		}
		out = append(out, ids)
	}
	return out
}

func TestTriggerBatching(t *testing.T) {
	t.Parallel()
	dir, st := t.TempDir(), testStore(t)
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	start := func() *env {
		srv, err := server.New(context.Background(), server.Config{DataDir: dir, Store: st, AdminToken: operator, Clock: clk, MaxInFlight: 256})
		require.NoError(t, err)
		e := &env{srv: srv, ts: httptest.NewServer(checked(t, srv.Handler()))}
		e.client = e.ts.Client()
		return e
	}
	e := start()
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, echoFn(t, "orders.on_batch.v1~"))["entrypoint_id"].(string)
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "batch", "event_type_id": orderType,
		"entrypoint_id": ep, "event_filter_query": "payload.total > 0", "batch": obj{"enabled": true, "max_size": 3, "max_wait_ms": 1000}})
	pub := func(e *env, i int) {
		publish(t, e, adm, http.StatusAccepted, obj{"event_id": fmt.Sprintf("e%02d", i), "event_type_id": orderType,
			"payload": obj{"order_id": fmt.Sprint(i), "total": 1}})
	}
	flush := func(e *env, want int, msg string) {
		t.Helper()
		n, err := e.srv.Triggers.FlushDue(context.Background())
		require.NoError(t, err)
		require.Equal(t, want, n, msg)
	}
	// Seven events: two full batches at once (in the publishing transactions), one left pending.
	for i := 1; i <= 7; i++ {
		pub(e, i)
	}
	publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": orderType, "payload": obj{"order_id": "x", "total": 0}}) // filtered out
	require.Equal(t, [][]string{{"e01", "e02", "e03"}, {"e04", "e05", "e06"}}, batchEvents(t, e, adm, ep))
	flush(e, 0, "not due yet")
	clk.Advance(999 * time.Millisecond)
	flush(e, 0, "not due yet")
	clk.Advance(time.Millisecond)
	flush(e, 1, "due: max_wait_ms since the oldest pending event")
	require.Equal(t, [][]string{{"e01", "e02", "e03"}, {"e04", "e05", "e06"}, {"e07"}}, batchEvents(t, e, adm, ep))
	flush(e, 0, "flushed once")

	// Pending events survive a restart and are flushed by the new process.
	pub(e, 8)
	pub(e, 9)
	e.ts.Close()
	require.NoError(t, e.srv.Close())
	clk.Advance(2 * time.Second)
	e = start()
	t.Cleanup(func() {
		e.ts.Close()
		require.NoError(t, e.srv.Close())
	})
	flush(e, 1, "the pending batch, after the restart")
	require.Equal(t, [][]string{{"e01", "e02", "e03"}, {"e04", "e05", "e06"}, {"e07"}, {"e08", "e09"}}, batchEvents(t, e, adm, ep))

	// Turning batching off flushes what is pending at once.
	publish(t, e, adm, http.StatusAccepted, obj{"event_id": "e10", "event_type_id": orderType, "payload": obj{"order_id": "10", "total": 1}})
	e.expect(t, http.StatusOK, http.MethodPatch, trgPath+"/batch", adm, obj{"batch": obj{"enabled": false}})
	got := batchEvents(t, e, adm, ep)
	require.Equal(t, []string{"e10"}, got[len(got)-1])
}

func TestTriggerDeadLetters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	viewer := e.token(t, "acme", "v", "viewer")
	ep := e.registerActive(t, adm, failFn(t, "orders.on_fail.v1~"))["entrypoint_id"].(string)
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "failing", "event_type_id": orderType, "entrypoint_id": ep})
	for i := 1; i <= 3; i++ {
		publish(t, e, adm, http.StatusAccepted, obj{"event_id": fmt.Sprintf("f%d", i), "event_type_id": orderType, "payload": obj{"n": i}})
	}
	awaitInvocations(t, e, adm, ep, 3)
	dl := e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/failing/dead-letters", viewer, nil).items()
	require.Len(t, dl, 3)
	// The three ran at once and may have failed in any order: the list is in the order they failed.
	var f1 obj
	for i, d := range dl {
		if i > 0 {
			prev, err := time.Parse(time.RFC3339Nano, dl[i-1]["created_at"].(string))
			require.NoError(t, err)
			at, err := time.Parse(time.RFC3339Nano, d["created_at"].(string))
			require.NoError(t, err)
			require.False(t, at.Before(prev), "oldest first: %v", dl)
		}
		if fmt.Sprint(d["event_ids"]) == "[f1]" {
			f1 = d
		}
	}
	require.NotNil(t, f1, "%v", dl)
	require.Equal(t, []any{"f1"}, f1["event_ids"])
	require.NotEmpty(t, f1["invocation_id"])
	require.Contains(t, fmt.Sprint(f1["error"]), "boom")
	require.EqualValues(t, 1, f1["params"].(obj)["event"].(obj)["payload"].(obj)["n"])
	page := e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/failing/dead-letters?limit=2", adm, nil)
	require.Len(t, page.items(), 2)
	require.Equal(t, true, page.Body["page_info"].(obj)["has_more"])

	m := e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/failing/metrics", adm, nil).Body["metrics"].(obj)
	require.EqualValues(t, 3, m["executions_failed"])
	require.EqualValues(t, 3, m["events_dead_lettered"])

	// Redrive one: a new invocation with the same params; the dead letter leaves the queue (and
	// comes back when the new invocation fails too).
	one := e.expect(t, http.StatusOK, http.MethodPost, trgPath+"/failing/dead-letters/"+f1["dead_letter_id"].(string)+":redrive", adm, nil).Body
	redriven := objects(one["redriven"])
	require.Len(t, redriven, 1)
	newID := redriven[0]["redriven_as"].(string)
	rec := invWait(t, e, adm, newID, wfTerminal...)
	require.Equal(t, "f1", rec["params"].(obj)["event"].(obj)["event_id"])
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, trgPath+"/failing/dead-letters/"+f1["dead_letter_id"].(string)+":redrive", adm, nil)
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, trgPath+"/failing/dead-letters:redrive", viewer, nil)
	awaitInvocations(t, e, adm, ep, 4)
	deadline := time.Now().Add(10 * time.Second)
	for len(e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/failing/dead-letters", adm, nil).items()) != 3 {
		require.True(t, time.Now().Before(deadline), "the redriven invocation's failure was not dead-lettered")
		time.Sleep(10 * time.Millisecond)
	}

	// Redrive all, then purge.
	before := map[any]bool{}
	for _, d := range e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/failing/dead-letters", adm, nil).items() {
		before[d["dead_letter_id"]] = true
	}
	all := e.expect(t, http.StatusOK, http.MethodPost, trgPath+"/failing/dead-letters:redrive", adm, nil).Body
	require.Len(t, objects(all["redriven"]), 3)
	// The redriven dead letters have left the queue (a redriven invocation that fails at once may
	// already be back, under a new id).
	for _, d := range e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/failing/dead-letters", adm, nil).items() {
		require.False(t, before[d["dead_letter_id"]], "dead letter %v was redriven and is still listed", d["dead_letter_id"])
	}
	awaitInvocations(t, e, adm, ep, 7)
	deadline = time.Now().Add(10 * time.Second)
	for len(e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/failing/dead-letters", adm, nil).items()) != 3 {
		require.True(t, time.Now().Before(deadline), "the redriven invocations' failures were not dead-lettered")
		time.Sleep(10 * time.Millisecond)
	}
	purged := e.expect(t, http.StatusOK, http.MethodDelete, trgPath+"/failing/dead-letters", adm, nil).Body
	require.EqualValues(t, 3, purged["purged"])
	require.Len(t, e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/failing/dead-letters", adm, nil).items(), 0)
	other := invTenant(t, e, "globex")
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, trgPath+"/failing/dead-letters", other, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, trgPath+"/failing/dead-letters", other, nil)
	types := auditTypes(t, e, adm)
	require.Contains(t, types, auditBase+"event_trigger_dead_letters_redriven.v1~")
	require.Contains(t, types, auditBase+"event_trigger_dead_letters_purged.v1~")

	// A trigger whose entrypoint can no longer start (disabled) dead-letters the event at once.
	e.status(t, adm, ep, "disable")
	publish(t, e, adm, http.StatusAccepted, obj{"event_id": "f9", "event_type_id": orderType, "payload": obj{}})
	dl = e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/failing/dead-letters", adm, nil).items()
	require.Len(t, dl, 1)
	require.Equal(t, []any{"f9"}, dl[0]["event_ids"])
	require.Empty(t, dl[0]["invocation_id"])
}

// TestTriggerBatchFlood: events published concurrently into a batching trigger reach its
// entrypoint in batches of at most max_size, each event exactly once.
func TestTriggerBatchFlood(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.Clock = clk })
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, echoFn(t, "orders.on_flood.v1~"))["entrypoint_id"].(string)
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "flood", "event_type_id": orderType,
		"entrypoint_id": ep, "batch": obj{"enabled": true, "max_size": 7, "max_wait_ms": 100}})
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				publish(t, e, adm, http.StatusAccepted, obj{"event_id": fmt.Sprintf("w%d-%02d", w, i), "event_type_id": orderType, "payload": obj{}})
			}
		}()
	}
	wg.Wait()
	clk.Advance(100 * time.Millisecond)
	_, err := e.srv.Triggers.FlushDue(context.Background())
	require.NoError(t, err)
	seen := map[string]int{}
	var batches [][]string
	for page, cursor := 0, ""; ; page++ {
		require.Less(t, page, 100)
		q := url.Values{"$filter": {fmt.Sprintf("entrypoint_id eq '%s'", ep)}, "limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+q.Encode(), adm, nil)
		for _, it := range r.items() {
			rec := invGet(t, e, adm, invID(it))
			var ids []string
			for _, ev := range rec["params"].(obj)["events"].([]any) {
				ids = append(ids, ev.(obj)["event_id"].(string))
			}
			batches = append(batches, ids)
		}
		cursor, _ = r.Body["page_info"].(obj)["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	for _, b := range batches {
		require.LessOrEqual(t, len(b), 7)
		require.NotEmpty(t, b)
		for _, id := range b {
			seen[id]++
		}
	}
	require.Len(t, seen, workers*each, "none lost")
	for id, n := range seen {
		require.Equal(t, 1, n, "event %s doubled", id)
	}
	require.GreaterOrEqual(t, len(batches), workers*each/7)
}

// TestTriggerFlusherLoop: the flusher loop (run by lark serve) flushes a batch once its
// max_wait_ms has passed on the injected clock and the loop is woken.
func TestTriggerFlusherLoop(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.Clock = clk })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.srv.Triggers.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, echoFn(t, "orders.on_loop.v1~"))["entrypoint_id"].(string)
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "loop", "event_type_id": orderType,
		"entrypoint_id": ep, "batch": obj{"enabled": true, "max_size": 10, "max_wait_ms": 60000}})
	publish(t, e, adm, http.StatusAccepted, obj{"event_id": "l1", "event_type_id": orderType, "payload": obj{}})
	require.Empty(t, invocationsOf(t, e, adm, ep))
	clk.Advance(time.Minute)
	e.srv.Triggers.Wake()
	deadline := time.Now().Add(10 * time.Second)
	for len(invocationsOf(t, e, adm, ep)) == 0 {
		require.True(t, time.Now().Before(deadline), "the flusher did not flush the due batch")
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, [][]string{{"l1"}}, batchEvents(t, e, adm, ep))
}

// TestEmittedEventsStartTriggersAndAreChecked: an event code emits with r_emit_v1 starts the
// tenant's triggers like a published one (through the events service, in the write that records
// the emitting attempt), and an emit its tenant would refuse (the payload fails the registered
// type's schema) fails at the call, with the path, and publishes nothing.
func TestEmittedEventsStartTriggersAndAreChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	e.expect(t, http.StatusCreated, http.MethodPost, typesPath, adm, obj{"event_type_id": orderType, "schema": orderSchema})
	ep := e.registerActive(t, adm, echoFn(t, "orders.on_emitted.v1~"))["entrypoint_id"].(string)
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "emitted", "event_type_id": orderType,
		"entrypoint_id": ep, "event_filter_query": "payload.total > 100"})
	emitter := e.registerActive(t, adm, invFn(t, "orders.emitter.v1~", fmt.Sprintf(`def main(ctx, input):
    r_emit_v1(%q, {"order_id": input["id"], "total": input["total"]})
    return {"ok": True}
`, orderType)))["entrypoint_id"].(string)

	ok := invSync(t, e, adm, emitter, obj{"id": "o-9", "total": 500}, nil)
	require.Equal(t, "succeeded", ok["status"], "%v", ok)
	started := awaitInvocations(t, e, adm, ep, 1)
	rec := invGet(t, e, adm, invID(started[0]))
	ev := rec["params"].(obj)["event"].(obj)
	require.Equal(t, "o-9", ev["payload"].(obj)["order_id"])
	require.Equal(t, "lark://invocations/"+invID(ok), ev["source"])

	bad := invSync(t, e, adm, emitter, obj{"id": "o-10", "total": -1}, nil)
	require.Contains(t, []string{"failed", "dead_lettered"}, bad["status"], "%v", bad)
	msg := bad["error"].(obj)["message"].(string)
	require.Contains(t, msg, "r_emit_v1")
	require.Contains(t, msg, "$.payload.total")
	events := e.expect(t, http.StatusOK, http.MethodGet, eventsPath+"?limit=200", adm, nil).items()
	require.Len(t, events, 1, "the refused emit published nothing")
}

// TestTriggerMetricsBufferedCounts: the received and filtered-out counts of publishes are written
// in batches (FlushMetrics); a read sees them before and after the write, never twice.
func TestTriggerMetricsBufferedCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, echoFn(t, "orders.counted.v1~"))["entrypoint_id"].(string)
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "counted", "event_type_id": orderType,
		"entrypoint_id": ep, "event_filter_query": "payload.total > 100"})
	for i, total := range []int{5, 500, 7} {
		publish(t, e, adm, http.StatusAccepted, obj{"event_id": fmt.Sprintf("c-%d", i), "event_type_id": orderType, "payload": obj{"total": total}})
	}
	read := func() obj {
		return e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/counted/metrics?window=1h", adm, nil).Body["metrics"].(obj)
	}
	before := read()
	require.EqualValues(t, 3, before["events_received"])
	require.EqualValues(t, 2, before["events_filtered_out"])
	require.EqualValues(t, 1, before["executions_triggered"])
	require.NoError(t, e.srv.Triggers.FlushMetrics(context.Background()))
	require.Equal(t, before, read(), "written once, counted once")
	rows, err := e.srv.Store.TriggerMetrics(context.Background(), "acme", "counted", time.Now().Add(-2*time.Hour))
	require.NoError(t, err)
	var received int64
	for _, r := range rows {
		received += r.Received
	}
	require.EqualValues(t, 3, received, "the counts are in the store after the flush")
}

// TestTriggerRetryPolicyApplies: a trigger's retry_policy replaces its entrypoint's traits.retry for
// the invocations it starts (and their redrives); the event is dead-lettered once those retries
// are spent. A trigger without one leaves the entrypoint's.
func TestTriggerRetryPolicyApplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, failFn(t, "orders.retried.v1~"))["entrypoint_id"].(string) // traits.retry: 1 attempt
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "retried", "event_type_id": orderType,
		"entrypoint_id": ep, "retry_policy": obj{"max_attempts": 3, "backoff_ms": 0}})
	publish(t, e, adm, http.StatusAccepted, obj{"event_id": "r1", "event_type_id": orderType, "payload": obj{}})
	rec := awaitInvocations(t, e, adm, ep, 1)[0]
	require.EqualValues(t, 3, rec["attempt"], "three attempts, the trigger's policy: %v", rec)
	waitUntil(t, func() bool {
		return len(e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/retried/dead-letters", adm, nil).items()) == 1
	}, "the event is dead-lettered after the trigger's retries")

	e.expect(t, http.StatusOK, http.MethodPatch, trgPath+"/retried", adm, obj{"retry_policy": nil})
	publish(t, e, adm, http.StatusAccepted, obj{"event_id": "r2", "event_type_id": orderType, "payload": obj{}})
	list := awaitInvocations(t, e, adm, ep, 2)
	require.EqualValues(t, 1, list[1]["attempt"], "without a retry_policy, the entrypoint's one attempt: %v", list[1])
}
