package api_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireUnknown requires r to be a 422 whose issues are exactly one UNKNOWN_FIELD per path.
func requireUnknown(t *testing.T, r *resp, paths ...string) {
	t.Helper()
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r)
	var got []string
	for _, is := range r.errors() {
		require.Equal(t, "UNKNOWN_FIELD", is["code"], "%s", r)
		got = append(got, is["path"].(string))
	}
	slices.Sort(got)
	want := slices.Clone(paths)
	slices.Sort(want)
	require.Equal(t, want, got, "every unknown member is reported, once: %s", r)
}

// withMembers returns a copy of body with the members of extra added (replacing any).
func withMembers(body obj, extra obj) obj {
	out := obj{}
	for k, v := range body {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// TestReadOnlyMembersEntrypoints: members an entrypoint renders but no request sets are accepted
// and ignored on register, PUT and :validate; other unknown members are all reported.
func TestReadOnlyMembersEntrypoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	body := withMembers(fn(t, taxV1), obj{"id": "ep_forged", "kind": "workflow", "status": "active", "tenant_id": "globex",
		"created_at": "2020-01-01T00:00:00Z", "updated_at": "2020-01-01T00:00:00Z", "activated_at": "2020-01-01T00:00:00Z",
		"disabled_at": nil, "archived_at": nil, "release_notes": "forged", "deprecation": obj{"reason": "x"}})
	v := e.expect(t, http.StatusOK, http.MethodPost, base+"/entrypoints:validate", adm, body)
	require.Equal(t, true, v.Body["valid"], "%s", v)
	ep := e.expect(t, http.StatusCreated, http.MethodPost, base+"/entrypoints", adm, body).Body
	require.Equal(t, "draft", ep["status"])
	require.Equal(t, "acme", ep["tenant_id"])
	require.Equal(t, "function", ep["kind"])
	require.NotEqual(t, "ep_forged", ep["id"])
	require.NotEqual(t, "2020-01-01T00:00:00Z", ep["created_at"])
	require.Nil(t, ep["activated_at"])
	require.Nil(t, ep["release_notes"])
	require.Nil(t, ep["deprecation"])

	// The GET document, edited, goes back with PUT.
	got := e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep))+"?include_source=true", adm, nil).Body
	got["title"] = "Calculate Tax (edited)"
	got["status"] = "active"
	put := e.expect(t, http.StatusOK, http.MethodPut, epPath(idOf(ep)), adm, got).Body
	require.Equal(t, "Calculate Tax (edited)", put["title"])
	require.Equal(t, "draft", put["status"], "status changes through :status only")

	// Several unknown members, top-level and nested: all reported.
	bad := withMembers(fn(t, fnPrefix+"vendor.app.billing.other.v1~"), obj{"colour": "red", "size": 3})
	at(bad, "traits")["bogus"] = true
	r := e.do(t, http.MethodPost, base+"/entrypoints", adm, bad)
	requireUnknown(t, r, "$.colour", "$.size", "$.traits.bogus")
	r = e.do(t, http.MethodPut, epPath(idOf(ep)), adm, withMembers(got, obj{"colour": "red", "size": 3}))
	requireUnknown(t, r, "$.colour", "$.size")
}

// TestReadOnlyMembersSchedules: POST, PUT and PATCH of a schedule ignore its read-only members
// and report every unknown one.
func TestReadOnlyMembersSchedules(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 50, 0, 0, time.UTC))
	ro := obj{"tenant_id": "globex", "next_run_at": "2020-01-01T00:00:00Z", "last_run_at": nil, "last_invocation_id": "inv_x",
		"pending_catch_up_runs": 7, "created_by": "mallory", "paused_at": nil, "created_at": "2020-01-01T00:00:00Z",
		"updated_at": "2020-01-01T00:00:00Z"}
	body := obj{"schedule_id": "ro", "entrypoint_id": taxV1, "expression": obj{"kind": "cron", "value": "0 * * * *"},
		"input_overrides": taxOverrides(1)}
	sch := s.expect(t, http.StatusCreated, http.MethodPost, schPath, s.adm, withMembers(body, ro)).Body
	require.Equal(t, "acme", sch["tenant_id"])
	require.Equal(t, "2026-11-24T10:00:00Z", sch["next_run_at"])
	require.EqualValues(t, 0, sch["pending_catch_up_runs"])
	require.NotEqual(t, "mallory", sch["created_by"])

	got := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/ro", s.adm, nil).Body
	got["name"] = "edited"
	put := s.expect(t, http.StatusOK, http.MethodPut, schPath+"/ro", s.adm, got).Body
	require.Equal(t, "edited", put["name"])
	patch := s.expect(t, http.StatusOK, http.MethodPatch, schPath+"/ro", s.adm, withMembers(ro, obj{"name": "patched"})).Body
	require.Equal(t, "patched", patch["name"])
	require.Equal(t, "acme", patch["tenant_id"])
	require.Equal(t, "2026-11-24T10:00:00Z", patch["next_run_at"])

	unknown := obj{"colour": "red", "size": 3, "expression": obj{"kind": "cron", "value": "0 * * * *", "jitter": 5}}
	requireUnknown(t, s.do(t, http.MethodPost, schPath, s.adm, withMembers(body, unknown)), "$.colour", "$.size", "$.expression.jitter")
	requireUnknown(t, s.do(t, http.MethodPut, schPath+"/ro", s.adm, withMembers(got, unknown)), "$.colour", "$.size", "$.expression.jitter")
	requireUnknown(t, s.do(t, http.MethodPatch, schPath+"/ro", s.adm, unknown), "$.colour", "$.size", "$.expression.jitter")
}

// TestReadOnlyMembersTenantPolicy: PATCH, :enable and PUT ignore the policy's read-only members;
// unknown members are all reported.
func TestReadOnlyMembersTenantPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.enable(t, "acme", nil)
	got := e.expect(t, http.StatusOK, http.MethodGet, tenantPath("acme"), operator, nil).Body
	got["quotas"].(obj)["max_definitions"] = 7

	// PATCH with the whole GET document (tenant_id, enabled and the timestamps included).
	p := e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, got).Body
	require.EqualValues(t, 7, p["quotas"].(obj)["max_definitions"])
	require.Equal(t, got["created_at"], p["created_at"])
	// enabled is read-only in a PATCH: :disable changes it.
	p = e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator,
		obj{"enabled": false, "tenant_id": "globex", "enabled_at": nil, "disabled_at": "2020-01-01T00:00:00Z", "updated_at": "2020-01-01T00:00:00Z"}).Body
	require.Equal(t, true, p["enabled"])
	require.Equal(t, "acme", p["tenant_id"])
	require.Nil(t, p["disabled_at"])
	// :enable's body likewise.
	p = e.expect(t, http.StatusOK, http.MethodPost, tenantPath("acme")+":enable", operator, got).Body
	require.Equal(t, true, p["enabled"])
	// PUT of the GET document.
	got = e.expect(t, http.StatusOK, http.MethodGet, base+"/tenants/acme/runtime-policy", operator, nil).Body
	got["retention"].(obj)["audit_log_days"] = 30
	p = e.expect(t, http.StatusOK, http.MethodPut, base+"/tenants/acme/runtime-policy", operator, got).Body
	require.EqualValues(t, 30, p["retention"].(obj)["audit_log_days"])

	unknown := obj{"colour": "red", "size": 3, "quotas": obj{"bogus": 1}}
	requireUnknown(t, e.do(t, http.MethodPatch, tenantPath("acme"), operator, unknown), "$.colour", "$.size", "$.quotas.bogus")
	requireUnknown(t, e.do(t, http.MethodPost, tenantPath("acme")+":enable", operator, unknown), "$.colour", "$.size", "$.quotas.bogus")
	requireUnknown(t, e.do(t, http.MethodPut, base+"/tenants/acme/runtime-policy", operator, withMembers(got, unknown)),
		"$.colour", "$.size", "$.quotas.bogus")
}

// TestReadOnlyMembersBackfills: a backfill body ignores the backfill's read-only members and
// reports every unknown one.
func TestReadOnlyMembersBackfills(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 50, 0, 0, time.UTC))
	s.registerActive(t, s.adm, partitionFn(t, "", true))
	body := obj{"backfill_id": "ro", "entrypoint_id": partMajor, "start": "2025-01-01T00:00:00Z", "end": "2025-01-03T00:00:00Z",
		"step": "P1D"}
	ro := obj{"tenant_id": "globex", "state": "succeeded", "progress": obj{"total": 99}, "config": obj{"chunk_size": 9},
		"chunks": obj{"total": 9}, "failure_reason": "forged", "created_by": "mallory", "created_at": "2020-01-01T00:00:00Z",
		"started_at": nil, "completed_at": nil, "updated_at": "2020-01-01T00:00:00Z"}
	b := s.expect(t, http.StatusCreated, http.MethodPost, bfPath, s.adm, withMembers(body, ro)).Body
	require.Equal(t, "running", b["state"])
	require.Equal(t, "acme", b["tenant_id"])
	require.EqualValues(t, 2, b["progress"].(obj)["total"])
	require.NotEqual(t, "mallory", b["created_by"])

	body["backfill_id"] = "ro2"
	requireUnknown(t, s.do(t, http.MethodPost, bfPath, s.adm, withMembers(body, obj{"colour": "red", "size": 3})), "$.colour", "$.size")
}

// TestReadOnlyMembersTokens: a token request ignores the token's read-only members and reports
// every unknown one.
func TestReadOnlyMembersTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.enable(t, "acme", nil)
	body := obj{"tenant_id": "acme", "subject_id": "carol", "roles": []string{"viewer"}}
	tk := e.expect(t, http.StatusCreated, http.MethodPost, base+"/tokens", operator, withMembers(body, obj{"id": "tok_forged",
		"created_at": "2020-01-01T00:00:00Z", "created_by": "mallory", "revoked_at": "2020-01-01T00:00:00Z", "token": "lark_forged"})).Body
	require.NotEqual(t, "tok_forged", tk["id"])
	require.NotEqual(t, "mallory", tk["created_by"])
	require.Nil(t, tk["revoked_at"])
	require.NotEqual(t, "lark_forged", tk["token"])
	e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints", tk["token"].(string), nil) // not revoked

	requireUnknown(t, e.do(t, http.MethodPost, base+"/tokens", operator, withMembers(body, obj{"scopes": []string{"all"}, "colour": "red"})),
		"$.scopes", "$.colour")
}

// TestReadOnlyMembersInvocationsAndEvents: a start request ignores the invocation record's
// read-only members and a publish request the event's; unknown members are all reported.
func TestReadOnlyMembersInvocationsAndEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	e.registerActive(t, adm, fn(t, taxV1))
	start := obj{"entrypoint_id": taxV1, "mode": "sync", "params": obj{"invoice_id": "inv_001", "amount": 100}}
	rec, _ := invCall(t, e, adm, http.StatusOK, withMembers(start, obj{"invocation_id": "inv_forged", "status": "failed",
		"tenant_id": "globex", "result": obj{"tax": 0}, "timestamps": obj{}, "cost": 99}), nil)
	require.NotEqual(t, "inv_forged", invID(rec))
	require.Equal(t, "succeeded", rec["status"])
	require.Equal(t, "acme", rec["tenant_id"])
	requireUnknown(t, e.do(t, http.MethodPost, invPath, adm, withMembers(start, obj{"colour": "red", "size": 3})), "$.colour", "$.size")

	pub := obj{"event_type_id": "gts.x.core.events.type.v1~vendor.app.orders.paid.v1~", "payload": obj{"order_id": "o1"}}
	r := e.do(t, http.MethodPost, base+"/events", adm, withMembers(pub, obj{"tenant_id": "globex", "received_at": "2020-01-01T00:00:00Z"}))
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	require.Equal(t, "acme", r.Body["event"].(obj)["tenant_id"])
	require.NotEqual(t, "2020-01-01T00:00:00Z", r.Body["event"].(obj)["received_at"])
	requireUnknown(t, e.do(t, http.MethodPost, base+"/events", adm, withMembers(pub, obj{"colour": "red", "size": 3})), "$.colour", "$.size")
}
