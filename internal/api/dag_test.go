package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/workerproto"
)

const dagAdapter = "gts.x.core.serverless.adapter.dag.v1~"

// dagBody is a DAG workflow registration: a workflow body whose implementation is the spec.
func dagBody(t testing.TB, name string, spec obj) obj {
	t.Helper()
	return workflow(t, wfPrefix+"vendor.app.etl."+name, func(b obj) {
		b["implementation"] = obj{"adapter": dagAdapter, "kind": "workflow_spec",
			"workflow_spec": obj{"format": "dag", "spec": spec}}
		b["traits"].(obj)["limits"] = obj{"timeout_seconds": 600}
		b["title"] = "Sales ETL"
	})
}

// dagTask is a task object.
func dagTask(id, entrypointID string, members obj) obj {
	out := obj{"id": id, "entrypoint_id": entrypointID}
	for k, v := range members {
		out[k] = v
	}
	return out
}

func TestDAGRegisterAndPlan(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	viewer := e.token(t, "acme", "vic", "viewer")
	src := "def main(ctx, input):\n    return {\"rows\": 3}\n"
	extract := e.registerActive(t, adm, invFn(t, "etl.extract.v1~", src))
	clean := e.registerActive(t, adm, invFn(t, "etl.clean.v1.2~", src))
	draft := e.register(t, adm, invFn(t, "etl.draft.v1~", src))
	wf := e.registerActive(t, adm, wfBody(t, "plain.v1~", "def main(ctx, input):\n    return {}\n"))
	extractMajor := fnPrefix + "vendor.app.etl.extract.v1~"
	cleanID := clean["entrypoint_id"].(string)

	daily := obj{"type": "daily", "start": "2026-01-01", "timezone": "UTC"}
	tasks := func() []any {
		return []any{
			dagTask("clean", cleanID, obj{"depends_on": []any{"extract"}, "params": obj{"rows": "{{tasks.extract.output.rows}}", "day": "{{partition_key}}"},
				"checks":             []any{obj{"name": "has_rows", "type": "row_count", "path": "$.rows", "min": 1, "severity": "CRITICAL"}},
				"quarantine_enabled": true, "retry": obj{"max_attempts": 3}, "asset_key": "sales.clean"}),
			dagTask("extract", extractMajor, obj{"params": obj{"day": "{{partition_key}}", "region": "eu"}}),
		}
	}
	sales := e.register(t, adm, dagBody(t, "sales.v1~", obj{"partitioning": daily, "tasks": tasks()}))
	require.Equal(t, "workflow", sales["kind"])
	impl := sales["implementation"].(obj)
	require.Equal(t, "workflow_spec", impl["kind"])
	require.NotContains(t, impl, "code")

	plan := func(tok, id string, body any) *resp {
		return e.do(t, http.MethodPost, epPath(id)+":plan", tok, body)
	}
	r := plan(adm, idOf(sales), obj{"partition_key": "2026-03-01"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	fp := r.Body["fingerprint"].(string)
	var answer struct {
		Plan json.RawMessage `json:"plan"`
	}
	require.NoError(t, json.Unmarshal(r.Raw, &answer))
	canon, err := workerproto.Canonical(answer.Plan)
	require.NoError(t, err)
	sum := sha256.Sum256(canon)
	require.Equal(t, hex.EncodeToString(sum[:]), fp, "the fingerprint is the SHA-256 of the plan's canonical JSON")
	p := r.Body["plan"].(obj)
	require.Equal(t, "2026-03-01", p["partition_key"])
	planned := objects(p["tasks"])
	require.Len(t, planned, 2)
	require.Equal(t, "extract", planned[0]["id"])
	require.Equal(t, extract["entrypoint_id"], planned[0]["entrypoint_id"], "the major-only id is pinned")
	require.Equal(t, idOf(extract), planned[0]["entrypoint_ref"])
	require.Equal(t, "1.0.0", planned[0]["version"])
	require.Equal(t, obj{"day": "2026-03-01", "region": "eu"}, planned[0]["params"])
	require.Equal(t, "clean", planned[1]["id"])
	require.Equal(t, "1.2.0", planned[1]["version"])
	require.Equal(t, []any{"extract"}, planned[1]["depends_on"])
	require.Equal(t, obj{"day": "2026-03-01", "rows": "{{tasks.extract.output.rows}}"}, planned[1]["params"])
	require.Equal(t, "sales.clean", planned[1]["asset_key"])

	// Same inputs, same fingerprint: again, and for another DAG listing the tasks in another order.
	require.Equal(t, fp, plan(adm, idOf(sales), obj{"partition_key": "2026-03-01"}).Body["fingerprint"])
	rev := tasks()
	rev[0], rev[1] = rev[1], rev[0]
	twin := e.register(t, adm, dagBody(t, "sales_twin.v1~", obj{"partitioning": daily, "tasks": rev}))
	require.Equal(t, fp, plan(adm, idOf(twin), obj{"partition_key": "2026-03-01"}).Body["fingerprint"])
	require.NotEqual(t, fp, plan(adm, idOf(sales), obj{"partition_key": "2026-03-02"}).Body["fingerprint"])
	// An active DAG plans the same; :validate re-runs every check on it.
	e.status(t, adm, idOf(twin), "activate")
	require.Equal(t, fp, plan(adm, idOf(twin), obj{"partition_key": "2026-03-01"}).Body["fingerprint"])
	r = e.expect(t, http.StatusOK, http.MethodPost, epPath(idOf(twin))+":validate", adm, nil)
	require.Equal(t, true, r.Body["valid"], "%s", r)

	// Partition keys.
	r = e.expect(t, http.StatusUnprocessableEntity, http.MethodPost, epPath(idOf(sales))+":plan", adm, obj{})
	require.Equal(t, "$.partition_key", r.errors()[0]["path"])
	require.Equal(t, "MISSING_FIELD", r.errors()[0]["code"])
	r = e.expect(t, http.StatusUnprocessableEntity, http.MethodPost, epPath(idOf(sales))+":plan", adm, obj{"partition_key": "2025-12-31"})
	require.Contains(t, r.errors()[0]["message"], `"2025-12-31" is before the partitioning's start "2026-01-01"`)
	e.expect(t, http.StatusUnprocessableEntity, http.MethodPost, epPath(idOf(sales))+":plan", adm, obj{"partition_key": "March 1st"})
	e.expect(t, http.StatusUnprocessableEntity, http.MethodPost, epPath(idOf(sales))+":plan", adm, obj{"partition_key": "2026-03-01", "run": 1})

	// An unpartitioned DAG plans without a body, and refuses a key.
	flat := e.register(t, adm, dagBody(t, "flat.v1~", obj{"tasks": []any{dagTask("only", cleanID, nil)}}))
	r = plan(adm, idOf(flat), nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	require.NotContains(t, r.Body["plan"].(obj), "partition_key")
	e.expect(t, http.StatusUnprocessableEntity, http.MethodPost, epPath(idOf(flat))+":plan", adm, obj{"partition_key": "2026-03-01"})

	// Who may plan what.
	r = e.expect(t, http.StatusConflict, http.MethodPost, epPath(idOf(extract))+":plan", adm, obj{})
	require.Equal(t, "not_a_dag", r.Body["reason"])
	e.expect(t, http.StatusForbidden, http.MethodPost, epPath(idOf(sales))+":plan", viewer, obj{"partition_key": "2026-03-01"})
	other := e.tenant(t, "globex")
	e.expect(t, http.StatusNotFound, http.MethodPost, epPath(idOf(sales))+":plan", other, obj{"partition_key": "2026-03-01"})

	// A task whose function is disabled after registration: the plan says which.
	e.status(t, adm, idOf(clean), "disable")
	r = e.expect(t, http.StatusConflict, http.MethodPost, epPath(idOf(sales))+":plan", adm, obj{"partition_key": "2026-03-01"})
	require.Equal(t, "task_not_callable", r.Body["reason"])
	require.Contains(t, r.Body["detail"], "task clean: entrypoint "+cleanID+" is disabled")

	// Registration findings, each with its path.
	draftID := draft["entrypoint_id"].(string)
	wfID := wf["entrypoint_id"].(string)
	cases := []struct {
		name, path, code, msg string
		spec                  obj
	}{
		{"cycle", "$.implementation.workflow_spec.spec.tasks[0].depends_on[0]", "CYCLE", "depends_on forms a cycle: a -> b -> c -> a",
			obj{"tasks": []any{dagTask("a", extractMajor, obj{"depends_on": []any{"c"}}), dagTask("b", extractMajor, obj{"depends_on": []any{"a"}}),
				dagTask("c", extractMajor, obj{"depends_on": []any{"b"}})}}},
		{"draft task", "$.implementation.workflow_spec.spec.tasks[1].entrypoint_id", "TASK_ENTRYPOINT", "is draft; a DAG task's function must be active or deprecated",
			obj{"tasks": []any{dagTask("a", extractMajor, nil), dagTask("b", draftID, nil)}}},
		{"workflow task", "$.implementation.workflow_spec.spec.tasks[0].entrypoint_id", "TASK_ENTRYPOINT", "is a workflow; a DAG task runs a function",
			obj{"tasks": []any{dagTask("a", wfID, nil)}}},
		{"unknown task entrypoint", "$.implementation.workflow_spec.spec.tasks[0].entrypoint_id", "TASK_ENTRYPOINT", "does not exist or is not visible to you",
			obj{"tasks": []any{dagTask("a", fnPrefix+"vendor.app.etl.ghost.v1~", nil)}}},
		{"unknown output", "$.implementation.workflow_spec.spec.tasks[1].params.x", "UNKNOWN_TASK", `{{tasks.ghost.output}}: unknown task "ghost"`,
			obj{"tasks": []any{dagTask("a", extractMajor, nil), dagTask("b", extractMajor, obj{"depends_on": []any{"a"}, "params": obj{"x": "{{tasks.ghost.output}}"}})}}},
		{"bad check", "$.implementation.workflow_spec.spec.tasks[0].checks[0].type", "MISSING_FIELD", "type is required",
			obj{"tasks": []any{dagTask("a", extractMajor, obj{"checks": []any{obj{"name": "n"}}})}}},
	}
	for _, c := range cases {
		r := e.expect(t, http.StatusUnprocessableEntity, http.MethodPost, base+"/entrypoints", adm, dagBody(t, "bad.v1~", c.spec))
		found := false
		for _, is := range r.errors() {
			if is["path"] == c.path && is["code"] == c.code {
				require.Contains(t, is["message"], c.msg, c.name)
				found = true
			}
		}
		require.True(t, found, "%s: %s", c.name, r)
	}
	// The DAG adapter is for workflows.
	r = e.expect(t, http.StatusUnprocessableEntity, http.MethodPost, base+"/entrypoints", adm, fnNamed(t, "etl.notdag.v1~", func(b obj) {
		b["implementation"] = obj{"adapter": dagAdapter, "kind": "workflow_spec", "workflow_spec": obj{"format": "dag",
			"spec": obj{"tasks": []any{dagTask("a", extractMajor, nil)}}}}
		b["traits"].(obj)["limits"] = obj{"timeout_seconds": 60}
	}))
	require.Equal(t, "$.implementation.adapter", r.errors()[0]["path"], "%s", r)
	// :validate reports the same without registering.
	r = e.expect(t, http.StatusOK, http.MethodPost, base+"/entrypoints:validate", adm, dagBody(t, "bad.v1~", cases[0].spec))
	require.Equal(t, false, r.Body["valid"])
}

// TestDAGBackfill30Partitions: a backfill of a 3-task daily DAG over 30 days runs one DAG run per
// partition, each planned for its day (partition_key from the instant), all succeeding.
func TestDAGBackfill30Partitions(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	src := s.registerActive(t, s.adm, invFn(t, "etl.bf_extract.v1~", "def main(ctx, input):\n    return {\"day\": input.day, \"rows\": [1, 2]}\n"))
	sum := s.registerActive(t, s.adm, invFn(t, "etl.bf_sum.v1~", "def main(ctx, input):\n    return {\"n\": len(input.rows)}\n"))
	daily := obj{"type": "daily", "start": "2026-01-01", "timezone": "UTC"}
	body := dagBody(t, "bf.v1~", obj{"partitioning": daily, "tasks": []any{
		dagTask("extract", src["entrypoint_id"].(string), obj{"params": obj{"day": "{{partition_key}}"}}),
		dagTask("count", sum["entrypoint_id"].(string), obj{"depends_on": []any{"extract"}, "params": obj{"rows": "{{tasks.extract.output.rows}}"}}),
		dagTask("again", sum["entrypoint_id"].(string), obj{"depends_on": []any{"extract"}, "params": obj{"rows": "{{tasks.extract.output.rows}}"}}),
	}})
	body["schema"] = obj{"params": obj{"type": "object"}}
	dagEP := s.registerActive(t, s.adm, body)
	invDispatcher(t, s.env)
	b := s.expect(t, http.StatusCreated, http.MethodPost, bfPath, s.adm, obj{"backfill_id": "dag30", "entrypoint_id": dagEP["entrypoint_id"],
		"start": "2026-02-01T00:00:00Z", "end": "2026-03-03T00:00:00Z", "step": "P1D", "chunk_size": 10, "max_concurrent_runs": 3}).Body
	require.EqualValues(t, 30, b["progress"].(obj)["total"])
	done := s.drive(t, "dag30", nil, "succeeded", "failed")
	require.Equal(t, "succeeded", done["state"], "%v", done)
	parts := s.partitions(t, "dag30", nil)
	require.Len(t, parts, 30)
	for i, p := range []obj{parts[0], parts[29]} {
		inv := invGet(t, s.env, s.adm, p["invocation_id"].(string))
		day := []string{"2026-02-01", "2026-03-02"}[i]
		require.Equal(t, day, inv["params"].(obj)["partition_key"], "%v", inv)
		require.Equal(t, "succeeded", inv["status"])
	}
	tasks := s.expect(t, http.StatusOK, http.MethodGet, base+"/invocations/"+parts[0]["invocation_id"].(string)+"/tasks", s.adm, nil).Body
	items := tasks["items"].([]any)
	require.Len(t, items, 3)
	for _, it := range items {
		task := it.(obj)
		require.Equal(t, "SUCCEEDED", task["state"], "%v", task)
		require.NotEmpty(t, task["invocation_id"])
	}
	require.Equal(t, "extract", items[0].(obj)["task_id"], "plan order")
	child := items[0].(obj)["invocation_id"].(string)
	p := s.expectProblem(t, http.StatusConflict, "conflict", http.MethodGet, base+"/invocations/"+child+"/tasks", s.adm, nil)
	require.Equal(t, "not_a_dag", p.Body["reason"])
}
