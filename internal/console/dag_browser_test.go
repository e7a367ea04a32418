package console_test

// The DAG run's task graph and the Assets page in a real browser, over a DAG registered and run
// through the API on the shared server (its own entrypoints and asset, so that it changes nothing
// the other tests read).

import (
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

const (
	etlPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.etl."
	passID    = etlPrefix + "pass.v1~"
	flakyID   = etlPrefix + "flaky.v1~"
	etlDAGID  = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.etl.sales.v1~"
	etlAsset  = "sales.clean"
	etlDay    = "2026-03-01"
)

// etlRun is the shared server's DAG run (dagRun), made once for the tests that read it.
var etlRun struct {
	once sync.Once
	id   string
}

// sharedDAGRun answers the id of the shared server's DAG run, making it on first use.
func sharedDAGRun(t *testing.T, l *lark) string {
	t.Helper()
	etlRun.once.Do(func() { etlRun.id = dagRun(t, l) })
	if etlRun.id == "" {
		t.Fatal("the DAG run failed (see the first test that made it)")
	}
	return etlRun.id
}

// dagRun registers two functions and a DAG — extract → (clean, flaky) → report, where clean
// materializes etlAsset under a CRITICAL row_count check with quarantine enabled and flaky always
// fails — runs it for etlDay and waits for its end. extract outputs no rows, so clean's output is
// quarantined (the task succeeds), flaky fails and report is skipped. It answers the run's id.
func dagRun(t *testing.T, l *lark) string {
	t.Helper()
	fn := func(id, src string) map[string]any {
		return map[string]any{"entrypoint_id": id, "title": "ETL step", "owner": map[string]any{"owner_type": "tenant"},
			"schema": map[string]any{"params": map[string]any{"type": "object"}},
			"traits": map[string]any{"invocation": map[string]any{"supported": []string{"sync", "async"}, "default": "async"},
				"retry": map[string]any{"max_attempts": 1}},
			"implementation": starlark(src)}
	}
	register(t, l, fn(passID, "def main(ctx, input):\n    return {\"day\": input.day, \"rows\": input.rows}\n"))
	register(t, l, fn(flakyID, "def main(ctx, input):\n    fail(\"the source is unavailable\")\n"))
	task := func(id, ep string, deps []string, members map[string]any) map[string]any {
		out := map[string]any{"id": id, "entrypoint_id": ep, "depends_on": deps,
			"params": map[string]any{"day": "{{partition_key}}", "rows": []any{}}}
		for k, v := range members {
			out[k] = v
		}
		return out
	}
	spec := map[string]any{"partitioning": map[string]any{"type": "daily", "start": "2026-01-01"}, "tasks": []any{
		task("extract", passID, []string{}, nil),
		task("clean", passID, []string{"extract"}, map[string]any{
			"params":             map[string]any{"day": "{{partition_key}}", "rows": "{{tasks.extract.output.rows}}"},
			"checks":             []any{map[string]any{"name": "has_rows", "type": "row_count", "path": "$.rows", "min": 1, "severity": "CRITICAL"}},
			"quarantine_enabled": true, "asset_key": etlAsset}),
		task("flaky", flakyID, []string{"extract"}, nil),
		task("report", passID, []string{"clean", "flaky"}, nil),
	}}
	register(t, l, map[string]any{
		"entrypoint_id": etlDAGID, "title": "Sales ETL", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []string{"async"}, "default": "async"},
			"retry":      map[string]any{"max_attempts": 1},
			"limits":     map[string]any{"timeout_seconds": 600},
			"workflow": map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 1},
		},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.dag.v1~", "kind": "workflow_spec",
			"workflow_spec": map[string]any{"format": "dag", "spec": spec}},
	})
	res := call(t, l.url, l.token, "POST", "/invocations", map[string]any{"entrypoint_id": etlDAGID,
		"params": map[string]any{"partition_key": etlDay}}, 202)
	id := res["record"].(map[string]any)["invocation_id"].(string)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec := call(t, l.url, l.token, "GET", "/invocations/"+id, nil, 200)
		if rec["status"] == "failed" {
			return id
		}
		require.True(t, time.Now().Before(deadline), "the DAG run did not fail within 30 s: %v", rec)
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsoleDAGAndAssets: a DAG run's page draws its graph in layers with each task's state, its
// counts and fingerprint, each node linking to the task's child invocation; on the Assets page,
// approving the run's quarantined materialization with a reason makes it promoted (read back
// through the API).
func TestConsoleDAGAndAssets(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	run := sharedDAGRun(t, l)
	b.login(t, l)

	b.do(t, "open the run", chromedp.Navigate(l.url+"/console/invocations/"+run),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag [data-task="report"]`)))
	states := eval[map[string]string](t, b, `Object.fromEntries([...document.querySelectorAll('svg.dag [data-task]')].map(e => [e.dataset.task, e.dataset.state]))`)
	require.Equal(t, map[string]string{"extract": "SUCCEEDED", "clean": "SUCCEEDED", "flaky": "FAILED", "report": "SKIPPED"}, states)
	require.Equal(t, []string{"dag-node ds-succeeded", "dag-node ds-succeeded dag-quarantine", "dag-node ds-failed", "dag-node ds-skipped"},
		eval[[]string](t, b, `['extract','clean','flaky','report'].map(k => document.querySelector('svg.dag [data-task="'+k+'"]').getAttribute('class'))`))
	// Layers by depends_on: extract, then clean and flaky side by side, then report.
	xs := eval[map[string]float64](t, b, `Object.fromEntries([...document.querySelectorAll('svg.dag [data-task]')].map(e => [e.dataset.task, +e.querySelector('rect').getAttribute('x')]))`)
	require.Less(t, xs["extract"], xs["clean"])
	require.Equal(t, xs["clean"], xs["flaky"])
	require.Less(t, xs["flaky"], xs["report"])
	require.Equal(t, 4, eval[int](t, b, `document.querySelectorAll('svg.dag .dag-edge').length`))
	require.Contains(t, eval[string](t, b, `document.querySelector('svg.dag [data-task="clean"]').textContent`), "quarantine")
	counts := eval[string](t, b, `document.getElementById('dag-counts').textContent`)
	require.Equal(t, "4 tasks: 2 succeeded, 1 failed, 1 skipped, 0 cancelled", counts)
	rec := call(t, l.url, l.token, "GET", "/invocations/"+run, nil, 200)
	require.Equal(t, rec["dag"].(map[string]any)["fingerprint"], eval[string](t, b, `document.getElementById('dag-fingerprint').textContent`))
	require.False(t, eval[bool](t, b, `!!document.querySelector('svg.dag a[data-task="report"]')`), "a skipped task has no invocation to link to")
	b.screenshot(t, "dag-run")

	// A node is a link to the task's child invocation, followed inside the console.
	b.do(t, "open the flaky task", chromedp.Click(chromedp.CSS(`svg.dag a[data-task="flaky"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#main a[href="/console/invocations/`+run+`"]`)))
	child := call(t, l.url, l.token, "GET", "/invocations/"+run+"/tasks", nil, 200)["items"].([]any)[2].(map[string]any)
	require.Equal(t, "flaky", child["task_id"])
	require.Equal(t, "/console/invocations/"+child["invocation_id"].(string), eval[string](t, b, `location.pathname`))
	require.Contains(t, eval[string](t, b, `document.querySelector("#inv-head h1").textContent`), "dead_lettered", "the flaky function failed for good")
	require.True(t, eval[bool](t, b, `document.getElementById('dag').hidden`), "a task's child is no DAG run")

	approveQuarantined(t, b, l, run)
}

// approveQuarantined opens the Assets page, finds the run's quarantined materialization of
// etlAsset and approves it with a reason: it becomes promoted, and the asset's latest.
func approveQuarantined(t *testing.T, b *browser, l *lark, run string) {
	t.Helper()
	mats := call(t, l.url, l.token, "GET", "/assets/"+etlAsset+"/materializations?"+url.Values{"$filter": {"run_id eq '" + run + "'"}}.Encode(), nil, 200)["items"].([]any)
	require.Len(t, mats, 1)
	mat := mats[0].(map[string]any)
	require.Equal(t, "quarantined", mat["state"])
	id := mat["materialization_id"].(string)
	approve := chromedp.CSS(`button[data-action="approve"][data-mat="` + id + `"]`)

	b.do(t, "the assets page", chromedp.Click(chromedp.CSS(`#nav a[href="/console/assets"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#asset-list a[data-asset="`+etlAsset+`"]`)))
	require.Contains(t, eval[string](t, b, `document.querySelector('#asset-list tbody tr').textContent`), "quarantine")
	b.screenshot(t, "assets")
	b.do(t, "the asset's quarantined materializations",
		chromedp.Click(chromedp.CSS(`#asset-list a[data-asset="`+etlAsset+`"][href*="state=quarantined"]`)),
		chromedp.WaitVisible(approve))
	require.Equal(t, "?asset=sales.clean&state=quarantined", eval[string](t, b, `location.search`))
	require.Contains(t, eval[string](t, b, `document.getElementById('materializations').textContent`), "1 failed (has_rows)")

	b.do(t, "approve it with a reason",
		chromedp.Click(approve),
		chromedp.WaitVisible(chromedp.ID("decision-reason")),
		chromedp.SendKeys(chromedp.ID("decision-reason"), "an empty day is fine"),
		chromedp.Click(chromedp.CSS(`#decision-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#decision-result .st-promoted`)))
	require.Contains(t, eval[string](t, b, `document.getElementById('decision-result').textContent`), "an empty day is fine")
	require.Contains(t, eval[string](t, b, `document.getElementById('flash').textContent`), "Approved "+id)
	b.screenshot(t, "asset-approved")

	got := call(t, l.url, l.token, "GET", "/assets/"+etlAsset+"/materializations/"+id, nil, 200)
	require.Equal(t, "promoted", got["state"])
	require.Equal(t, "an empty day is fine", got["reason"])
	require.Equal(t, id, call(t, l.url, l.token, "GET", "/assets/"+etlAsset, nil, 200)["latest_materialization_id"])
	// The list, filtered on quarantined, no longer shows it; unfiltered it shows it promoted.
	b.do(t, "all materializations", chromedp.Navigate(l.url+"/console/assets?asset="+etlAsset),
		chromedp.WaitVisible(chromedp.CSS(`span[data-mat="`+id+`"]`)))
	require.Contains(t, eval[string](t, b, `document.querySelector('[data-mat="`+id+`"]').closest('tr').querySelector('.mat-state').textContent`), "promoted")
	require.False(t, eval[bool](t, b, `!!document.querySelector('#materializations button[data-action="approve"]')`))
}
