package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	dagCrashFn  = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.etl.crash_src.v1~"
	dagCrashUse = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.etl.crash_use.v1~"
	dagCrashID  = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.etl.crash_dag.v1~"
	dagAsset    = "sales.crash"
)

// registerCrashDAG registers the DAG of the crash test: task src (an asset with a row count check)
// feeding task use, daily partitions.
func registerCrashDAG(t *testing.T, p *larkProc) {
	t.Helper()
	p.register(t, p.Token, fnSpec{id: dagCrashFn, src: "def main(ctx, input):\n  return {\"rows\": [1, 2, 3], \"day\": input.day}\n"})
	p.register(t, p.Token, fnSpec{id: dagCrashUse, src: "def main(ctx, input):\n  return {\"n\": len(input.rows)}\n"})
	body := map[string]any{
		"entrypoint_id": dagCrashID, "title": "crash dag", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []any{"async"}, "default": "async"},
			"limits": map[string]any{"timeout_seconds": 10}, "retry": map[string]any{"max_attempts": 1},
			"workflow": map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30}},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.dag.v1~", "kind": "workflow_spec",
			"workflow_spec": map[string]any{"format": "dag", "spec": map[string]any{
				"partitioning": map[string]any{"type": "daily", "start": "2026-01-01", "timezone": "UTC"},
				"tasks": []any{
					map[string]any{"id": "src", "entrypoint_id": dagCrashFn, "asset_key": dagAsset, "params": map[string]any{"day": "{{partition_key}}"},
						"checks": []any{map[string]any{"name": "has_rows", "type": "row_count", "path": "$.rows", "min": 1, "severity": "CRITICAL"}}},
					map[string]any{"id": "use", "entrypoint_id": dagCrashUse, "depends_on": []any{"src"},
						"params": map[string]any{"rows": "{{tasks.src.output.rows}}"}},
				}}}},
	}
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, mustJSON(t, body)), http.StatusCreated, nil)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints/"+url.PathEscape(dagCrashID)+":status", p.Token,
		[]byte(`{"action": "activate"}`)), http.StatusOK, nil)
}

// TestDAGCrashBetweenCommitAndPromotion kills the server (SIGKILL, from inside, at an exact step)
// after a task's output was committed to the blob store but before its end and promotion were
// recorded, and again right after they were; each time the restarted server finishes the run and
// the (asset, partition) has exactly one promoted materialization, the latest.
func TestDAGCrashBetweenCommitAndPromotion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	boot := startLark(t, dir)
	registerCrashDAG(t, boot)
	boot.Stop()
	for _, c := range []struct{ point, partition string }{
		{"dag-before-promote", "2026-02-01"},
		{"dag-after-promote", "2026-02-02"},
	} {
		p := startLarkEnv(t, dir, []string{"LARK_FAILPOINT=" + c.point})
		id := record(t, p.invoke(t, p.Token, dagCrashID, "async", map[string]any{"partition_key": c.partition}), http.StatusAccepted).ID
		select {
		case <-p.done:
			require.ErrorContains(t, p.waitErr, "killed", "%s: the server died of its failpoint", c.point)
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: the server was not killed at its failpoint", c.point)
		}
		p = startLark(t, dir) // the same data: the killed run's lease is reclaimed at start
		deadline := time.Now().Add(60 * time.Second)
		var rec invocationRecord
		for {
			rec = record(t, p.do(http.MethodGet, apiBase+"/invocations/"+id, p.Token, nil), http.StatusOK)
			if rec.Status == "succeeded" || rec.Status == "failed" {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s: run %s is %s", c.point, id, rec.Status)
			time.Sleep(20 * time.Millisecond)
		}
		require.Equal(t, "succeeded", rec.Status, "%s", c.point)
		var mats struct {
			Items []struct {
				ID    string `json:"materialization_id"`
				State string `json:"state"`
			} `json:"items"`
		}
		requireJSON(t, p.do(http.MethodGet, apiBase+"/assets/"+dagAsset+"/materializations?partition_key="+c.partition, p.Token, nil), http.StatusOK, &mats)
		require.Len(t, mats.Items, 1, "%s: one materialization of the partition", c.point)
		require.Equal(t, "promoted", mats.Items[0].State)
		var a map[string]any
		requireJSON(t, p.do(http.MethodGet, apiBase+"/assets/"+dagAsset, p.Token, nil), http.StatusOK, &a)
		latest, err := json.Marshal(a)
		require.NoError(t, err)
		require.Contains(t, string(latest), mats.Items[0].ID)
		p.Stop()
	}
}
