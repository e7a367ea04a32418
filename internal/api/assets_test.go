package api_test

// HTTP-level tests of the Assets API (docs/dag.md "Assets"): DAG runs materialize an asset through
// the dispatcher, and the API lists the asset and its materializations, serves their data, and
// approves or rejects the quarantined ones.

import (
	"context"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/blob"
)

const (
	assetKey  = "sales.clean"
	assetPath = base + "/assets/" + assetKey
	day       = "2026-03-01"
)

// assetEnv is a tenant whose two DAGs materialize assetKey with one task each, guarded by a
// CRITICAL row_count check with quarantine enabled: "good" outputs two rows, "bad" none.
type assetEnv struct {
	e                 *env
	adm, dev, viewer  string
	good, bad, stolen string // the DAGs' entrypoint ids; stolen is another tenant's admin token
}

// newAssetEnv starts a server with its dispatcher and registers the function and the DAGs.
func newAssetEnv(t *testing.T) *assetEnv {
	t.Helper()
	e := newEnv(t)
	invDispatcher(t, e)
	a := &assetEnv{e: e, adm: e.tenant(t, "acme")}
	a.dev = e.token(t, "acme", "dora", "developer")
	a.viewer = e.token(t, "acme", "vic", "viewer")
	a.stolen = e.tenant(t, "globex")
	src := "def main(ctx, input):\n    return {\"day\": input.day, \"rows\": input.rows}\n"
	clean := e.registerActive(t, a.adm, invFn(t, "etl.clean.v1~", src))
	a.good = a.dag(t, "good", clean["entrypoint_id"].(string), []any{obj{"id": 1}, obj{"id": 2}})
	a.bad = a.dag(t, "bad", clean["entrypoint_id"].(string), []any{})
	return a
}

// dag registers and activates a DAG whose one task outputs rows for assetKey; it returns its id.
func (a *assetEnv) dag(t *testing.T, name, fnID string, rows []any) string {
	t.Helper()
	task := dagTask("clean", fnID, obj{"params": obj{"day": "{{partition_key}}", "rows": rows},
		"checks":             []any{obj{"name": "has_rows", "type": "row_count", "path": "$.rows", "min": 1, "severity": "CRITICAL"}},
		"quarantine_enabled": true, "asset_key": assetKey})
	body := dagBody(t, name+".v1~", obj{"partitioning": obj{"type": "daily", "start": "2026-01-01"}, "tasks": []any{task}})
	body["schema"] = obj{"params": obj{"type": "object"}}
	body["traits"].(obj)["invocation"] = obj{"supported": []any{"async"}, "default": "async"}
	return idOf(a.e.registerActive(t, a.adm, body))
}

// run runs DAG id for partition key, waits for it to succeed and returns the materialization it
// made.
func (a *assetEnv) run(t *testing.T, id, key string) obj {
	t.Helper()
	rec := invAsync(t, a.e, a.adm, id, obj{"partition_key": key}, nil)
	rec = invWait(t, a.e, a.adm, invID(rec), "succeeded", "failed", "canceled", "dead_lettered")
	require.Equal(t, "succeeded", rec["status"], "%v", rec)
	dag, _ := rec["dag"].(map[string]any)
	require.Len(t, dag["fingerprint"], 64, "a DAG run's record carries its dag summary: %v", rec)
	require.Equal(t, key, dag["partition_key"])
	require.Equal(t, []any{1.0, 1.0}, []any{dag["tasks"], dag["succeeded"]})
	items := a.list(t, a.viewer, url.Values{"$filter": {"run_id eq '" + invID(rec) + "'"}})
	require.Len(t, items, 1)
	// GET /invocations/{id}/tasks names the task's state, its child and the materialization.
	tasks := a.e.expect(t, http.StatusOK, http.MethodGet, invPath+"/"+invID(rec)+"/tasks", a.viewer, nil)
	require.Equal(t, invID(rec), tasks.Body["invocation_id"])
	require.Len(t, tasks.items(), 1)
	task := tasks.items()[0]
	require.Equal(t, []any{"clean", "SUCCEEDED", assetKey, items[0]["materialization_id"], items[0]["gating_decision"]},
		[]any{task["task_id"], task["state"], task["asset_key"], task["materialization_id"], task["gating_decision"]})
	require.NotEmpty(t, task["invocation_id"])
	return items[0]
}

// list lists assetKey's materializations with query q.
func (a *assetEnv) list(t *testing.T, tok string, q url.Values) []obj {
	t.Helper()
	return a.e.expect(t, http.StatusOK, http.MethodGet, assetPath+"/materializations?"+q.Encode(), tok, nil).items()
}

// asset reads assetKey.
func (a *assetEnv) asset(t *testing.T) obj {
	t.Helper()
	return a.e.expect(t, http.StatusOK, http.MethodGet, assetPath, a.viewer, nil).Body
}

func matPath(m obj) string {
	return assetPath + "/materializations/" + m["materialization_id"].(string)
}

// TestAssetsQuarantineApproveReject: a run whose output passes its checks is promoted; one whose
// CRITICAL check fails is quarantined while the previous stays latest; approving makes it latest;
// rejecting discards it and its data; roles and tenants are enforced throughout.
func TestAssetsQuarantineApproveReject(t *testing.T) {
	t.Parallel()
	a := newAssetEnv(t)
	good := a.checkPromoted(t)
	quarantined := a.checkQuarantined(t, good)
	a.checkIsolation(t, quarantined)
	a.checkApprove(t, good, quarantined)
	a.checkReject(t, quarantined)
	a.checkAudit(t)
}

// checkPromoted runs the good DAG: its materialization is promoted, the asset's latest, with its
// metadata and data.
func (a *assetEnv) checkPromoted(t *testing.T) obj {
	m := a.run(t, a.good, day)
	require.Equal(t, "promoted", m["state"], "%v", m)
	require.Equal(t, "allow", m["gating_decision"])
	require.Equal(t, day, m["partition_key"])
	require.Equal(t, "clean", m["task_id"])
	require.EqualValues(t, 2, m["row_count"])
	require.Positive(t, m["byte_size"])
	require.Len(t, m["schema_hash"], 64)
	require.EqualValues(t, 1, m["checks_passed"])
	require.Equal(t, "has_rows", objects(m["checks"])[0]["name"])
	got := a.e.expect(t, http.StatusOK, http.MethodGet, matPath(m), a.viewer, nil).Body
	require.Equal(t, m, got)
	data := a.e.expect(t, http.StatusOK, http.MethodGet, matPath(m)+"/data", a.viewer, nil)
	require.JSONEq(t, `{"day": "2026-03-01", "rows": [{"id": 1}, {"id": 2}]}`, string(data.Raw))

	as := a.asset(t)
	require.Equal(t, m["materialization_id"], as["latest_materialization_id"])
	require.Equal(t, day, as["latest_partition_key"])
	require.EqualValues(t, 0, as["consecutive_failures"])
	require.Equal(t, true, as["last_check_passed"])
	list := a.e.expect(t, http.StatusOK, http.MethodGet, base+"/assets", a.viewer, nil).items()
	require.Len(t, list, 1)
	require.Equal(t, assetKey, list[0]["asset_key"])
	return m
}

// checkQuarantined runs the bad DAG for the same partition: its output is quarantined, good stays
// the latest, and the lists filter by state and partition.
func (a *assetEnv) checkQuarantined(t *testing.T, good obj) obj {
	q := a.run(t, a.bad, day)
	require.Equal(t, "quarantined", q["state"], "%v", q)
	require.Equal(t, "quarantine", q["gating_decision"])
	require.EqualValues(t, 1, q["checks_failed"])
	require.EqualValues(t, 0, q["row_count"])
	data := a.e.expect(t, http.StatusOK, http.MethodGet, matPath(q)+"/data", a.viewer, nil)
	require.JSONEq(t, `{"day": "2026-03-01", "rows": []}`, string(data.Raw))

	as := a.asset(t)
	require.Equal(t, good["materialization_id"], as["latest_materialization_id"], "a quarantined output never becomes latest")
	require.Equal(t, "quarantine", as["last_gating_decision"])
	require.Equal(t, false, as["last_check_passed"])

	ids := func(items []obj) []any {
		out := []any{}
		for _, it := range items {
			out = append(out, it["materialization_id"])
		}
		return out
	}
	require.Equal(t, []any{q["materialization_id"]}, ids(a.list(t, a.viewer, url.Values{"state": {"quarantined"}})))
	require.Equal(t, []any{good["materialization_id"]}, ids(a.list(t, a.viewer, url.Values{"$filter": {"state eq 'promoted'"}})))
	require.Equal(t, []any{q["materialization_id"], good["materialization_id"]},
		ids(a.list(t, a.viewer, url.Values{"partition_key": {day}})), "newest first")
	require.Empty(t, a.list(t, a.viewer, url.Values{"partition_key": {"2026-03-02"}}))
	a.e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, assetPath+"/materializations?state=bogus", a.viewer, nil)
	a.e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, assetPath+"/materializations?color=red", a.viewer, nil)
	return q
}

// checkIsolation: another tenant, a wrong asset and a viewer get nowhere.
func (a *assetEnv) checkIsolation(t *testing.T, q obj) {
	e := a.e
	for _, p := range []string{assetPath, assetPath + "/materializations", matPath(q), matPath(q) + "/data"} {
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, p, a.stolen, nil)
	}
	require.Empty(t, e.expect(t, http.StatusOK, http.MethodGet, base+"/assets", a.stolen, nil).items())
	stolen := e.token(t, "globex", "dev", "developer")
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, matPath(q)+":approve", stolen, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, matPath(q)+":reject", stolen, nil)
	other := base + "/assets/sales.raw/materializations/" + q["materialization_id"].(string)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, other, a.viewer, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, other+":approve", a.dev, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, base+"/assets/sales.raw", a.viewer, nil)
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, matPath(q)+":approve", a.viewer, nil)
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, matPath(q)+":reject", a.viewer, obj{"reason": "no"})
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, base+"/assets", operator, nil)
	e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, matPath(q)+":approve", a.dev, obj{"why": "x"})
	require.Equal(t, "quarantined", e.expect(t, http.StatusOK, http.MethodGet, matPath(q), a.viewer, nil).Body["state"])
}

// checkApprove approves the quarantined materialization: it becomes the latest; the previous one
// stays promoted; neither can be approved again.
func (a *assetEnv) checkApprove(t *testing.T, good, q obj) {
	e := a.e
	r := e.expect(t, http.StatusOK, http.MethodPost, matPath(q)+":approve", a.dev, obj{"reason": "an empty day is fine"})
	require.Equal(t, "promoted", r.Body["state"], "%s", r)
	require.Equal(t, "dora", r.Body["decided_by"])
	require.Equal(t, "an empty day is fine", r.Body["reason"])
	require.NotEmpty(t, r.Body["decided_at"])
	// Its data was committed out of quarantine: under materializations/{id}/ with its commit marker
	// naming the approver; the quarantined copy is gone; the data reads as before.
	uri := r.Body["output_uri"].(string)
	require.True(t, strings.HasSuffix(uri, "/materializations/"+q["materialization_id"].(string)+"/data.json"), uri)
	marker, err := blob.ReadAll(context.Background(), e.srv.Blobs, path.Dir(uri)+"/_commit.json", 1<<16)
	require.NoError(t, err)
	require.Contains(t, string(marker), `"approved_by":"dora"`)
	_, err = e.srv.Blobs.Stat(context.Background(), q["output_uri"].(string))
	require.ErrorIs(t, err, blob.ErrNotFound)
	data := e.expect(t, http.StatusOK, http.MethodGet, matPath(q)+"/data", a.viewer, nil)
	require.Equal(t, []any{}, data.Body["rows"], "%s", data)
	require.Equal(t, q["materialization_id"], a.asset(t)["latest_materialization_id"])
	require.Equal(t, "promoted", e.expect(t, http.StatusOK, http.MethodGet, matPath(good), a.viewer, nil).Body["state"])
	for _, m := range []obj{q, good} {
		r := e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, matPath(m)+":approve", a.dev, nil)
		require.Equal(t, "invalid_transition", r.Body["reason"], "%s", r)
		e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, matPath(m)+":reject", a.dev, nil)
	}
}

// checkReject quarantines another bad output and rejects it: rejected, its data gone, the latest
// unchanged; it cannot be decided again.
func (a *assetEnv) checkReject(t *testing.T, latest obj) {
	e := a.e
	q := a.run(t, a.bad, day)
	require.Equal(t, "quarantined", q["state"], "%v", q)
	e.expect(t, http.StatusOK, http.MethodGet, matPath(q)+"/data", a.viewer, nil)
	r := e.expect(t, http.StatusOK, http.MethodPost, matPath(q)+":reject", a.dev, nil)
	require.Equal(t, "rejected", r.Body["state"], "%s", r)
	require.Equal(t, "dora", r.Body["decided_by"])
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, matPath(q)+"/data", a.viewer, nil)
	require.Equal(t, latest["materialization_id"], a.asset(t)["latest_materialization_id"])
	r = e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, matPath(q)+":approve", a.dev, nil)
	require.Equal(t, "invalid_transition", r.Body["reason"])
	require.Len(t, a.list(t, a.viewer, url.Values{"state": {"rejected"}}), 1)
}

// checkAudit: both decisions are audited with who and why.
func (a *assetEnv) checkAudit(t *testing.T) {
	q := url.Values{"$filter": {"resource_type eq 'materialization'"}}
	items := a.e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?"+q.Encode(), a.adm, nil).items()
	require.Len(t, items, 2)
	require.Equal(t, auditBase+"materialization_approved.v1~", items[0]["type"])
	require.Equal(t, auditBase+"materialization_rejected.v1~", items[1]["type"])
	for _, it := range items {
		require.Equal(t, "dora", it["actor_id"])
		require.Equal(t, assetKey, it["details"].(obj)["asset_key"])
	}
	require.Equal(t, "an empty day is fine", items[0]["details"].(obj)["reason"])
}
