package api_test

// 002's member names on schedules and event triggers (docs/api.md §1, "The specs' own member
// names"): cron, params, enabled and missed_schedule_policy on schedules; filter and enabled on
// event triggers. Each is Lark's member under another name; with both, they must agree.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSchedule002MemberNames(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 1, 27, 10, 0, 0, 0, time.UTC))
	body := obj{"schedule_id": "daily-tax-report", "entrypoint_id": taxV1, "cron": "0 2 * * *", "timezone": "America/Los_Angeles",
		"params": obj{"invoice_id": "inv_1", "amount": 7}, "execution_context": "system", "enabled": true, "missed_schedule_policy": "catch_up",
		"max_catch_up_runs": 3, "concurrency_policy": "forbid"}
	got := s.expect(t, http.StatusCreated, http.MethodPost, schPath, s.adm, body).Body
	require.Equal(t, obj{"kind": "cron", "value": "0 2 * * *"}, got["expression"], "%v", got)
	require.Equal(t, obj{"invoice_id": "inv_1", "amount": float64(7)}, got["input_overrides"])
	require.Equal(t, "active", got["status"])
	require.Equal(t, "catch_up", got["missed_policy"])
	require.Equal(t, "2026-01-28T10:00:00Z", got["next_run_at"], "02:00 in Los Angeles")

	// PATCH: params merges into input_overrides, cron replaces the expression, enabled is status.
	got = s.expect(t, http.StatusOK, http.MethodPatch, schPath+"/daily-tax-report", s.adm,
		obj{"cron": "0 3 * * *", "params": obj{"amount": 9}, "enabled": false}).Body
	require.Equal(t, obj{"kind": "cron", "value": "0 3 * * *"}, got["expression"], "%v", got)
	require.Equal(t, obj{"invoice_id": "inv_1", "amount": float64(9)}, got["input_overrides"])
	require.Equal(t, "paused", got["status"])
	got = s.expect(t, http.StatusOK, http.MethodPatch, schPath+"/daily-tax-report", s.adm, obj{"enabled": true}).Body
	require.Equal(t, "active", got["status"])

	for name, c := range map[string]struct {
		mod  func(obj)
		path string
	}{
		"cron and another expression": {func(b obj) { b["expression"] = obj{"kind": "cron", "value": "0 4 * * *"} }, "$.cron"},
		"params and other overrides":  {func(b obj) { b["input_overrides"] = obj{"invoice_id": "inv_1", "amount": 8} }, "$.params"},
		"enabled and another status":  {func(b obj) { b["status"] = "paused" }, "$.enabled"},
		"two missed policies":         {func(b obj) { b["missed_policy"] = "skip" }, "$.missed_schedule_policy"},
	} {
		b := obj{}
		for k, v := range body {
			b[k] = v
		}
		b["schedule_id"] = "other"
		c.mod(b)
		r := s.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, schPath, s.adm, b)
		require.NotNil(t, issueAt(r, c.path), "%s: %s", name, r)
	}
	// Agreeing members are fine.
	body["schedule_id"], body["expression"], body["status"] = "agreeing", obj{"kind": "cron", "value": "0 2 * * *"}, "active"
	s.expect(t, http.StatusCreated, http.MethodPost, schPath, s.adm, body)
}

func TestTrigger002MemberNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, echoFn(t, "orders.process_order.v1~"))["entrypoint_id"].(string)
	e.expect(t, http.StatusCreated, http.MethodPost, typesPath, adm, obj{"event_type_id": orderType, "schema": orderSchema})
	body := obj{"trigger_id": "order-placed-handler", "entrypoint_id": ep, "event_type_id": orderType, "filter": "payload.total > 100",
		"execution_context": "system", "enabled": false, "retry_policy": obj{"max_attempts": 3, "backoff_ms": 1000}}
	got := e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, body).Body
	require.Equal(t, "payload.total > 100", got["event_filter_query"], "%v", got)
	require.Equal(t, "disabled", got["status"])

	got = e.expect(t, http.StatusOK, http.MethodPatch, trgPath+"/order-placed-handler", adm, obj{"enabled": true, "filter": "payload.total > 5"}).Body
	require.Equal(t, "active", got["status"], "%v", got)
	require.Equal(t, "payload.total > 5", got["event_filter_query"])

	body["trigger_id"], body["event_filter_query"] = "other", "payload.total > 1"
	r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, trgPath, adm, body)
	require.NotNil(t, issueAt(r, "$.filter"), "%s", r)
	delete(body, "event_filter_query")
	body["status"] = "active"
	r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, trgPath, adm, body)
	require.NotNil(t, issueAt(r, "$.enabled"), "%s", r)
}
