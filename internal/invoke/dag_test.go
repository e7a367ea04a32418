package invoke_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/dagrun"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
)

// dagDef registers and activates DAG name over tasks (the spec's tasks array).
func (e *env) dagDef(name string, spec map[string]any) {
	e.t.Helper()
	e.fn(name, "", func(b map[string]any) {
		b["entrypoint_id"] = wfPrefix + name + ".v1~"
		tr := b["traits"].(map[string]any)
		tr["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
		tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
			"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30}
		b["implementation"] = map[string]any{"adapter": schema.DAGAdapter, "kind": "workflow_spec",
			"workflow_spec": map[string]any{"format": "dag", "spec": spec}}
	})
}

// runDAG starts a run of DAG name with params and drains the queue until nothing is left.
func (e *env) runDAG(name string, params string) invocation.Record {
	e.t.Helper()
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + name + ".v1~", Mode: "async", Params: json.RawMessage(params)}, invoke.StartOptions{})
	require.NoError(e.t, err)
	e.Drain()
	rec, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(e.t, err)
	return rec
}

// tasksOf is the run's tasks by id.
func (e *env) tasksOf(id string) map[string]dagrun.TaskView {
	e.t.Helper()
	views, err := e.svc.Tasks(context.Background(), bob, id)
	require.NoError(e.t, err)
	out := map[string]dagrun.TaskView{}
	for _, v := range views {
		out[v.TaskID] = v
	}
	return out
}

// TestDAGDiamondWithAFailure: a → (b, c) → d with b failing: b fails, d is skipped, a and c
// succeed, and the run fails with the counts on its record; c read a's output through a template.
func TestDAGDiamondWithAFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("dag_a", "def main(ctx, input):\n  return {\"rows\": [1, 2, 3], \"day\": input.day}\n", nil)
	e.fn("dag_b", "def main(ctx, input):\n  fail(\"boom\")\n", nil)
	e.fn("dag_c", "def main(ctx, input):\n  return {\"n\": len(input.rows)}\n", nil)
	e.fn("dag_d", "def main(ctx, input):\n  return {}\n", nil)
	task := func(id, fn string, deps []any, params map[string]any) map[string]any {
		t := map[string]any{"id": id, "entrypoint_id": fnPrefix + fn + ".v1~", "params": params}
		if deps != nil {
			t["depends_on"] = deps
		}
		return t
	}
	e.dagDef("diamond", map[string]any{
		"partitioning": map[string]any{"type": "daily", "start": "2026-01-01", "timezone": "UTC"},
		"tasks": []any{
			task("a", "dag_a", nil, map[string]any{"day": "{{partition_key}}"}),
			task("b", "dag_b", []any{"a"}, map[string]any{}),
			task("c", "dag_c", []any{"a"}, map[string]any{"rows": "{{tasks.a.output.rows}}"}),
			task("d", "dag_d", []any{"b", "c"}, map[string]any{}),
		}})
	rec := e.runDAG("diamond", `{"partition_key": "2026-02-03"}`)
	require.Equal(t, invocation.StatusFailed, rec.Status, "%+v", rec)
	require.NotNil(t, rec.DAG)
	require.Equal(t, 4, rec.DAG.Tasks)
	require.Equal(t, [3]int{2, 1, 1}, [3]int{rec.DAG.Succeeded, rec.DAG.Failed, rec.DAG.Skipped})
	require.Len(t, rec.DAG.Fingerprint, 64)
	tasks := e.tasksOf(rec.ID)
	require.Equal(t, "SUCCEEDED", tasks["a"].State)
	require.Equal(t, "FAILED", tasks["b"].State)
	require.Equal(t, "SUCCEEDED", tasks["c"].State)
	require.Equal(t, "SKIPPED", tasks["d"].State)
	require.Contains(t, tasks["d"].Reason, "upstream task b failed")
	c, err := e.svc.Get(context.Background(), bob, tasks["c"].InvocationID)
	require.NoError(t, err)
	require.JSONEq(t, `{"n": 3}`, string(c.Result))
	a, err := e.svc.Get(context.Background(), bob, tasks["a"].InvocationID)
	require.NoError(t, err)
	require.JSONEq(t, `{"rows": [1, 2, 3], "day": "2026-02-03"}`, string(a.Result))
	require.Equal(t, rec.ID, a.ParentID)
	require.Equal(t, "a", a.DAGTask)
}

// TestDAGSucceedsWhenEveryTaskDoes: independent tasks are queued at once; the run succeeds with
// its summary as its result.
func TestDAGSucceedsWhenEveryTaskDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("dag_ok", "def main(ctx, input):\n  return {\"ok\": True}\n", nil)
	e.dagDef("wide", map[string]any{"tasks": []any{
		map[string]any{"id": "x", "entrypoint_id": fnPrefix + "dag_ok.v1~"},
		map[string]any{"id": "y", "entrypoint_id": fnPrefix + "dag_ok.v1~"},
		map[string]any{"id": "z", "entrypoint_id": fnPrefix + "dag_ok.v1~", "depends_on": []any{"x", "y"}},
	}})
	rec := e.runDAG("wide", `{}`)
	require.Equal(t, invocation.StatusSucceeded, rec.Status, "%+v", rec)
	var sum invocation.DAGSummary
	require.NoError(t, json.Unmarshal(rec.Result, &sum))
	require.Equal(t, 3, sum.Succeeded)
	require.Equal(t, rec.DAG.Fingerprint, sum.Fingerprint)
	types := e.timelineTypes(rec.ID)
	require.Contains(t, types, "dag_planned")
	require.Contains(t, types, "task_queued")
	require.Contains(t, types, "task_succeeded")
}

// assetDAG registers source function versions and a DAG whose task "src" (an asset with a
// CRITICAL row count check, quarantined when quarantine is true) feeds task "use".
func (e *env) assetDAG(name string, quarantine bool) {
	e.t.Helper()
	e.fn(name+"_use", "def main(ctx, input):\n  return {\"n\": len(input.rows)}\n", nil)
	e.dagDef(name, map[string]any{"tasks": []any{
		map[string]any{"id": "src", "entrypoint_id": fnPrefix + name + "_src.v1~", "asset_key": "sales." + name,
			"quarantine_enabled": quarantine,
			"checks":             []any{map[string]any{"name": "has_rows", "type": "row_count", "path": "$.rows", "min": 1, "severity": "CRITICAL"}}},
		map[string]any{"id": "use", "entrypoint_id": fnPrefix + name + "_use.v1~", "depends_on": []any{"src"},
			"params": map[string]any{"rows": "{{tasks.src.output.rows}}"}},
	}})
}

// srcVersion registers and activates minor version minor of name's source function returning rows.
func (e *env) srcVersion(name string, minor int, rows string) {
	e.t.Helper()
	e.fn(name+"_src", "def main(ctx, input):\n  return {\"rows\": "+rows+"}\n", func(b map[string]any) {
		b["entrypoint_id"] = fnPrefix + name + "_src.v1." + string(rune('0'+minor)) + "~"
	})
}

// TestDAGQuarantineKeepsThePreviousOutput: a CRITICAL check with quarantine_enabled quarantines a
// bad output: the task succeeds, the run carries the warning flag, the quarantined
// materialization never becomes latest, and the dependent task reads the previous good one.
func TestDAGQuarantineKeepsThePreviousOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.srcVersion("q", 0, "[1, 2]")
	e.assetDAG("q", true)
	first := e.runDAG("q", `{}`)
	require.Equal(t, invocation.StatusSucceeded, first.Status, "%+v", first)
	require.False(t, first.DAG.Warning)
	good, err := e.store.LatestMaterialization(context.Background(), "acme", "sales.q", "")
	require.NoError(t, err)
	require.Equal(t, asset.StatePromoted, good.State)
	require.EqualValues(t, 2, good.RowCount)
	require.Equal(t, first.ID, good.RunID)

	e.srcVersion("q", 1, "[]") // the latest minor now returns no rows
	second := e.runDAG("q", `{}`)
	require.Equal(t, invocation.StatusSucceeded, second.Status, "%+v", second)
	require.True(t, second.DAG.Warning)
	tasks := e.tasksOf(second.ID)
	require.Equal(t, "quarantine", tasks["src"].GatingDecision)
	require.Contains(t, string(tasks["src"].Checks), `"passed":false`)
	latest, err := e.store.LatestMaterialization(context.Background(), "acme", "sales.q", "")
	require.NoError(t, err)
	require.Equal(t, good.ID, latest.ID, "a quarantined output never becomes latest")
	bad, err := e.store.Materialization(context.Background(), "acme", tasks["src"].MaterializationID)
	require.NoError(t, err)
	require.Equal(t, asset.StateQuarantined, bad.State)
	use, err := e.svc.Get(context.Background(), bob, tasks["use"].InvocationID)
	require.NoError(t, err)
	require.JSONEq(t, `{"n": 2}`, string(use.Result), "the dependent read the previous good output")
}

// TestDAGCriticalCheckBlocks: without quarantine a failed CRITICAL check fails the task and skips
// its dependents; nothing is materialized.
func TestDAGCriticalCheckBlocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.srcVersion("b", 0, "[]")
	e.assetDAG("b", false)
	rec := e.runDAG("b", `{}`)
	require.Equal(t, invocation.StatusFailed, rec.Status)
	tasks := e.tasksOf(rec.ID)
	require.Equal(t, "FAILED", tasks["src"].State)
	require.Equal(t, "block", tasks["src"].GatingDecision)
	require.Equal(t, "SKIPPED", tasks["use"].State)
	_, err := e.store.LatestMaterialization(context.Background(), "acme", "sales.b", "")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestDAGCancel: canceling a run cancels its queued tasks and their children at once; a child's
// late end changes nothing.
func TestDAGCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("dag_slow", "def main(ctx, input):\n  return {}\n", nil)
	e.dagDef("cancel", map[string]any{"tasks": []any{
		map[string]any{"id": "one", "entrypoint_id": fnPrefix + "dag_slow.v1~"},
		map[string]any{"id": "two", "entrypoint_id": fnPrefix + "dag_slow.v1~", "depends_on": []any{"one"}},
	}})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "cancel.v1~", Mode: "async"}, invoke.StartOptions{})
	require.NoError(t, err)
	// One activation: the run plans and queues task one, then suspends.
	claimed := e.claim(1)
	require.Len(t, claimed, 1)
	e.svc.Runner().Run(context.Background(), claimed[0])
	one := e.tasksOf(st.Record.ID)["one"]
	require.Equal(t, "QUEUED", one.State)
	rec, _, err := e.svc.Control(context.Background(), bob, st.Record.ID, invoke.ActionCancel)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, rec.Status)
	tasks := e.tasksOf(st.Record.ID)
	require.Equal(t, "CANCELLED", tasks["one"].State)
	require.Equal(t, "CANCELLED", tasks["two"].State)
	child, err := e.svc.Get(context.Background(), bob, one.InvocationID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, child.Status)
	e.Drain()
	after, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, after.Status)
	require.Equal(t, 2, after.DAG.Cancelled, "%+v %v", after.DAG, e.timelineTypes(after.ID))
}

// TestDAGAssetHealth: a blocked asset task counts as a failure of its asset.
func TestDAGAssetHealth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.srcVersion("h", 0, "[]")
	e.assetDAG("h", false)
	e.runDAG("h", `{}`)
	e.runDAG("h", `{}`)
	a, err := e.store.Asset(context.Background(), "acme", "sales.h")
	require.NoError(t, err)
	require.Equal(t, 2, a.ConsecutiveFailures)
	require.Equal(t, asset.GatingDecision("block"), a.LastGatingDecision)
}

// TestDAGErrorCheckWarns: a failed ERROR check lets the task succeed and promote its output, with
// the run's warning flag.
func TestDAGErrorCheckWarns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("warn_src", "def main(ctx, input):\n  return {\"rows\": [1]}\n", nil)
	e.dagDef("warn", map[string]any{"tasks": []any{
		map[string]any{"id": "src", "entrypoint_id": fnPrefix + "warn_src.v1~", "asset_key": "sales.warn",
			"checks": []any{map[string]any{"name": "many", "type": "row_count", "path": "$.rows", "min": 10, "severity": "ERROR"}}},
	}})
	rec := e.runDAG("warn", `{}`)
	require.Equal(t, invocation.StatusSucceeded, rec.Status)
	require.True(t, rec.DAG.Warning)
	tasks := e.tasksOf(rec.ID)
	require.Equal(t, "allow_with_warning", tasks["src"].GatingDecision)
	m, err := e.store.LatestMaterialization(context.Background(), "acme", "sales.warn", "")
	require.NoError(t, err)
	require.Equal(t, tasks["src"].MaterializationID, m.ID)
}

// TestDAGChildEndsDecideTheirTasks: in a chain of tasks without checks or assets, each task's end
// and the next task's queueing are written in the closing transaction of the task's child, so the
// run is activated only to plan and to end (no task_child_ended for its activation to decide); a
// task with checks is decided by the run's activation.
func TestDAGChildEndsDecideTheirTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("dag_step", "def main(ctx, input):\n  return {\"rows\": [1, 2]}\n", nil)
	task := func(id string, deps ...any) map[string]any {
		t := map[string]any{"id": id, "entrypoint_id": fnPrefix + "dag_step.v1~"}
		if len(deps) > 0 {
			t["depends_on"] = deps
		}
		return t
	}
	checked := task("d", "c")
	checked["checks"] = []any{map[string]any{"name": "rows", "type": "row_count", "path": "$.rows", "min": 5, "severity": "ERROR"}}
	e.dagDef("chain", map[string]any{"tasks": []any{task("a"), task("b", "a"), task("c", "b")}})
	e.dagDef("chain_checked", map[string]any{"tasks": []any{task("a"), task("b", "a"), task("c", "b"), checked}})

	count := func(types []string, typ string) int {
		n := 0
		for _, ty := range types {
			if ty == typ {
				n++
			}
		}
		return n
	}
	rec := e.runDAG("chain", `{}`)
	require.Equal(t, invocation.StatusSucceeded, rec.Status, "%+v", rec)
	types := e.timelineTypes(rec.ID)
	require.Equal(t, 3, count(types, "task_succeeded"), "%v", types)
	require.Zero(t, count(types, "task_child_ended"), "%v", types)
	require.Equal(t, 2, count(types, "started")+count(types, "resumed"), "activations: %v", types)

	rec = e.runDAG("chain_checked", `{}`)
	require.Equal(t, invocation.StatusSucceeded, rec.Status, "%+v", rec)
	types = e.timelineTypes(rec.ID)
	require.Equal(t, 4, count(types, "task_succeeded"), "%v", types)
	require.Equal(t, 1, count(types, "task_child_ended"), "the checked task's end: %v", types)
	require.Equal(t, "allow_with_warning", e.tasksOf(rec.ID)["d"].GatingDecision)
}
