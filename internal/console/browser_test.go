package console_test

// The console in a real browser: a headless Chromium (chromedp) against an in-process Lark server
// seeded through the public API. Each test saves a PNG screenshot of the page it checks, to
// LARK_TEST_SCREENSHOTS when set, else to its temporary directory (the path is logged).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/console"
)

// TestConsoleInvocationTimeline: log in (the header shows the tenant and subject GET /whoami
// answered), find the compensated checkout in the invocation list, open it, and read its Gantt
// chart: the reserve step, then the failed charge step (retried once), then the compensation of
// reserve, in that order; the step's input and output open from the steps list.
func TestConsoleInvocationTimeline(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	b.login(t, l)
	who, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.ID("whoami")))
	require.NoError(t, err)
	require.Contains(t, who, "alice")
	require.Contains(t, who, "tenant acme")
	require.Equal(t, "alice", eval[string](t, b, `sessionStorage.length > 0 && JSON.parse(sessionStorage.getItem('lark.console.whoami')).subject_id`))

	link := chromedp.CSS(`#invocation-list a[href="/console/invocations/` + l.invocation + `"]`)
	// The status filter: the invocation is listed under dead_lettered, not under succeeded.
	for status, listed := range map[string]bool{"dead_lettered": true, "succeeded": false} {
		b.do(t, "filter by "+status,
			chromedp.Navigate(l.url+"/console/invocations"),
			chromedp.WaitVisible(link),
			chromedp.SetValue(chromedp.CSS(`form.filters select[name="status"]`), status),
			chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#invocation-list[aria-busy="false"]`)))
		require.Equal(t, "status="+status, eval[string](t, b, `location.search.slice(1)`))
		require.Equal(t, listed, eval[bool](t, b, `!!document.querySelector('#invocation-list a[href="/console/invocations/`+l.invocation+`"]')`), status)
	}

	b.do(t, "find the invocation in the list",
		chromedp.Click(chromedp.CSS(`#nav a[href="/console/invocations"]`)),
		chromedp.WaitVisible(link))
	require.Contains(t, eval[[]string](t, b, `[...document.querySelectorAll('#invocation-list th')].map(e => e.textContent)`), "Wall time")
	b.do(t, "open the invocation",
		chromedp.Click(link),
		chromedp.WaitVisible(chromedp.CSS(`svg.gantt [data-row="comp:reserve"]`)))
	require.Equal(t, "/console/invocations/"+l.invocation, eval[string](t, b, `location.pathname`))

	rows := eval[[]string](t, b, `[...document.querySelectorAll('svg.gantt [data-row]')].map(e => e.dataset.row)`)
	order := func(row string) int {
		i := slices.Index(rows, row)
		require.GreaterOrEqual(t, i, 0, "no %s row in %v", row, rows)
		return i
	}
	require.Less(t, order("step:reserve"), order("step:charge"), "rows: %v", rows)
	require.Less(t, order("step:charge"), order("comp:reserve"), "rows: %v", rows)
	require.Equal(t, "invocation", rows[0])
	// The charge step failed after two attempts: a retried bar, then a failed one.
	bars := eval[[]string](t, b, `[...document.querySelectorAll('[data-row="step:charge"] .bar')].map(e => e.getAttribute('class'))`)
	require.Equal(t, []string{"bar bar-retry", "bar bar-fail"}, bars)
	require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll('[data-row="comp:reserve"] .bar-comp').length`), "the compensation completed")
	require.Contains(t, eval[string](t, b, `document.querySelector('#inv-head h1').textContent`), "dead_lettered")
	// The record labels its times and counts precisely; the error is shown whole (wrapped, not clipped).
	terms := eval[[]string](t, b, `[...document.querySelectorAll('#main dl.props dt')].map(e => e.textContent)`)
	require.Subset(t, terms, []string{"Wall time (start to end)", "Execution time (last attempt)", "Interpreter steps (last attempt)"})
	require.NotContains(t, terms, "Duration")
	require.NotContains(t, terms, "Steps")
	require.Contains(t, eval[string](t, b, `document.querySelector('.error-box .msg').textContent`), "card declined for o-42")
	require.True(t, eval[bool](t, b, `[...document.querySelectorAll('.error-box pre, .error-box .msg')].every(e => e.scrollWidth <= e.clientWidth)`),
		"the error is wrapped, not clipped")
	// The charge step's retry says when and after what it ran again.
	retried := eval[string](t, b, `[...document.querySelectorAll('#entries tbody tr')].map(r => r.textContent).find(t => t.includes('step_retried')) || ''`)
	require.Regexp(t, `retrying at .+ after \d+ ms \(attempt 1 failed: fail: card declined for o-42\)`, retried)

	// The reserve step's input and output, opened with the keyboard-reachable button of the steps list.
	b.do(t, "open the reserve step",
		chromedp.Click(chromedp.CSS(`#steps li[data-step="step:reserve"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#entry-detail pre[aria-label="Step output"]`)))
	out := eval[string](t, b, `[...document.querySelectorAll('#entry-detail pre[aria-label="Step output"]')].map(e => e.textContent).join('\n')`)
	require.Contains(t, out, "rsv-o-42")
	in := eval[string](t, b, `[...document.querySelectorAll('#entry-detail pre[aria-label="Step input"]')].map(e => e.textContent).join('\n')`)
	require.Contains(t, in, "o-42")
	// Control actions follow the status: a dead-lettered invocation can be retried or replayed, not canceled.
	require.Equal(t, []bool{true, false, false},
		eval[[]bool](t, b, `['cancel','retry','replay'].map(a => document.querySelector('[data-action="'+a+'"]').disabled)`))
	// The chart works from the keyboard: Enter on the failed charge attempt opens its entries.
	b.do(t, "open the failed charge attempt with the keyboard",
		chromedp.SendKeys(chromedp.CSS(`[data-row="step:charge"] .bar-fail`), kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#entry-detail article[data-seq]`)))
	require.Equal(t, "charge: failed", eval[string](t, b, `document.querySelector('#entry-detail h3').textContent`))
	require.Contains(t, eval[string](t, b, `document.getElementById('entry-detail').textContent`), "card declined for o-42")
	b.screenshot(t, "invocation")
	// The panel has the focus; closing it gives the focus back to the bar.
	require.Equal(t, "entry-detail", eval[string](t, b, `document.activeElement.id`))
	b.do(t, "close the panel with the keyboard",
		chromedp.SendKeys(chromedp.CSS(`#entry-detail > button`), kb.Enter),
		chromedp.WaitNotVisible(chromedp.ID("entry-detail")))
	require.Equal(t, "bar bar-fail", eval[string](t, b, `document.activeElement.getAttribute('class')`))

	// Replay starts a new invocation of the same version and opens it.
	b.do(t, "replay",
		chromedp.Click(chromedp.CSS(`button[data-action="replay"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#main a[href="/console/invocations/`+l.invocation+`"]`)))
	replay := strings.TrimPrefix(eval[string](t, b, `location.pathname`), "/console/invocations/")
	require.NotEqual(t, l.invocation, replay)
	require.Equal(t, l.invocation, call(t, l.url, l.token, "GET", "/invocations/"+replay, nil, 200)["replay_of"])
}

// TestConsoleLive: the invocation list shows an invocation started after the page was loaded, and
// the invocation page follows a workflow while it runs (a step, a durable timer, a step) to its
// end, without a reload.
func TestConsoleLive(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	b.login(t, l)
	b.do(t, "the invocation list", chromedp.Navigate(l.url+"/console/invocations"),
		chromedp.WaitVisible(chromedp.CSS(`#invocation-list[aria-busy="false"]`)))
	res := call(t, l.url, l.token, "POST", "/invocations", map[string]any{"entrypoint_id": fnID}, 202)
	id := res["record"].(map[string]any)["invocation_id"].(string)
	b.do(t, "the new invocation appears", chromedp.WaitVisible(chromedp.CSS(`#invocation-list a[href="/console/invocations/`+id+`"]`)))

	res = call(t, l.url, l.token, "POST", "/invocations", map[string]any{"entrypoint_id": napID, "params": map[string]any{"ms": 2000}}, 202)
	id = res["record"].(map[string]any)["invocation_id"].(string)
	b.do(t, "open the napping workflow", chromedp.Navigate(l.url+"/console/invocations/"+id), chromedp.WaitVisible(chromedp.CSS(`#inv-head h1`)))
	require.NotContains(t, eval[string](t, b, `document.querySelector('#inv-head h1').textContent`), "succeeded", "the workflow sleeps 2 s")
	b.do(t, "the page follows the workflow to its end",
		chromedp.WaitVisible(chromedp.CSS(`svg.gantt [data-row="step:after"] .bar-ok`)))
	require.Contains(t, eval[string](t, b, `document.querySelector('#inv-head h1').textContent`), "succeeded")
	rows := eval[[]string](t, b, `[...document.querySelectorAll('svg.gantt [data-row]')].map(e => e.dataset.row)`)
	require.Equal(t, []string{"invocation", "step:before", "suspended", "step:after"}, rows)
	b.screenshot(t, "live")
}

// TestConsolePauseSchedule: pausing a schedule in the console pauses it (read back through the API).
func TestConsolePauseSchedule(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	b.login(t, l)
	link := chromedp.CSS(`a[href="/console/schedules/nightly"]`)
	b.do(t, "pause the schedule",
		chromedp.Click(chromedp.CSS(`#nav a[href="/console/schedules"]`)),
		chromedp.WaitVisible(link),
		chromedp.Click(link),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="pause"]`)),
		chromedp.Click(chromedp.CSS(`button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="resume"]`)))
	require.Equal(t, "paused", call(t, l.url, l.token, "GET", "/schedules/nightly", nil, 200)["status"])
	require.Contains(t, eval[string](t, b, `document.getElementById('schedule-status').textContent`), "paused")
	b.screenshot(t, "schedule-paused")
}

// TestConsolePageWeight: every page, loaded from scratch with the browser cache off, transfers
// under 200 KB: the document, scripts, styles and the page's API answers (the Resource Timing
// transfer sizes, headers included).
func TestConsolePageWeight(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	b.login(t, l)
	epID := call(t, l.url, l.token, "GET", "/entrypoints/"+wfID, nil, 200)["id"].(string)
	run := sharedDAGRun(t, l)
	pages := []struct{ path, ready string }{
		{"/console/login", "#token"},
		{"/console/entrypoints", "table"},
		{"/console/entrypoints/" + epID, "pre.code .tok-helper"},
		{"/console/invocations", "#invocation-list table"},
		{"/console/invocations/" + l.invocation, `svg.gantt [data-row="comp:reserve"]`},
		{"/console/schedules", "table"},
		{"/console/schedules/nightly", "#history"},
		{"/console/backfills", "#backfill-list table"},
		{"/console/backfills/nightly-2025", "#backfill progress"},
		{"/console/triggers", "table"},
		{"/console/triggers/on-order", "#dead-letters"},
		{"/console/webhooks", "#webhook-list"},
		{"/console/events", "#event-list table"},
		{"/console/event-types", "#main h1"},
		{"/console/secrets", "#secret-list"},
		{"/console/tokens", "#token-list table"},
		{"/console/audit", "#audit-list table"},
		{"/console/workers", "#worker-list"},
		{"/console/usage", "svg.chart"},
		{"/console/invocations/" + run, `svg.dag [data-task="report"]`},
		{"/console/assets", "#asset-list table"},
		{"/console/assets?asset=" + etlAsset, "#materializations table"},
	}
	for _, p := range pages {
		b.do(t, "load "+p.path, chromedp.Navigate(l.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		// Resource Timing entries are complete once the page's requests have ended.
		weight := eval[float64](t, b, `(() => {
			const all = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')];
			return all.reduce((n, e) => n + e.transferSize, 0);
		})()`)
		t.Logf("%s: %.1f KB transferred", p.path, weight/1024)
		require.Less(t, weight, 200.0*1024, "%s transfers %.0f bytes", p.path, weight)
		require.Greater(t, weight, 1000.0, "%s: no transfer measured", p.path)
		b.screenshot(t, "page-"+strings.NewReplacer("/console/", "", "/", "-", "?", "-", "=", "-").Replace(p.path))
	}
	// The source of the entrypoint is highlighted: the runtime helpers and keywords have their classes.
	b.do(t, "entrypoint page", chromedp.Navigate(l.url+"/console/entrypoints/"+epID), chromedp.WaitVisible(chromedp.CSS("pre.code")))
	helpers := eval[[]string](t, b, `[...document.querySelectorAll('pre.code .tok-helper')].map(e => e.textContent)`)
	require.Contains(t, helpers, "r_run_step_v1")
	require.Contains(t, eval[[]string](t, b, `[...document.querySelectorAll('pre.code .tok-keyword')].map(e => e.textContent)`), "def")
	b.do(t, "validate", chromedp.Click(chromedp.ID("validate")), chromedp.WaitVisible(chromedp.CSS("#validation .report")))
	require.Contains(t, eval[string](t, b, `document.querySelector('#validation .report h2').textContent`), "Valid")
	b.screenshot(t, "entrypoint")
}

// TestConsoleModules runs the console's own modules in the browser on made-up data: the Gantt
// model of a workflow still in flight and of a retried function, the DAG layout, and the Starlark
// tokenizer.
func TestConsoleModules(t *testing.T) {
	b := newBrowser(t)
	load := moduleLoader(t, b)
	type row struct {
		Key   string   `json:"key"`
		Bars  []string `json:"bars"`
		Marks []string `json:"marks"`
	}
	rowsOf := func(items string) []row {
		t.Helper()
		var rows []row
		require.NoError(t, json.Unmarshal([]byte(load("gantt.js", `m.model(`+items+`).rows.map(r => ({key: r.key,
			bars: r.bars.map(b => b.cls + (b.open ? '*' : '')), marks: r.marks.map(k => k.cls)}))`)), &rows))
		return rows
	}
	at := func(i int) string { return fmt.Sprintf("2026-11-25T10:00:%02dZ", i) }
	entry := func(i int, typ, status, step string, details string) string {
		s := "null"
		if step != "" {
			s = `"` + step + `"`
		}
		return fmt.Sprintf(`{"seq":%d,"at":"%s","event_type":"%s","status":"%s","step_name":%s,"details":%s}`, i, at(i), typ, status, s, details)
	}
	inFlight := "[" + strings.Join([]string{
		entry(1, "created", "queued", "", "{}"), entry(2, "started", "running", "", "{}"),
		entry(3, "step_started", "running", "a", `{"attempt":1}`), entry(4, "step_completed", "running", "a", `{"input":{},"result":{"ok":true}}`),
		entry(5, "journal", "running", "", "{}"), entry(6, "suspended", "suspended", "", "{}"),
		entry(7, "resumed", "running", "", `{"reason":"timer"}`), entry(8, "signal_received", "running", "", `{"event_id":"e1"}`),
		entry(9, "step_started", "running", "b", `{"attempt":1}`), entry(10, "http_call", "running", "", `{"method":"GET","host":"x"}`),
	}, ",") + "]"
	require.Equal(t, []row{
		{Key: "invocation", Bars: []string{"run*"}, Marks: []string{"info", "info"}},
		{Key: "step:a", Bars: []string{"ok"}, Marks: []string{}},
		{Key: "suspended", Bars: []string{"susp"}, Marks: []string{}},
		{Key: "events", Bars: []string{}, Marks: []string{"signal"}},
		{Key: "step:b", Bars: []string{"step*"}, Marks: []string{"http"}},
	}, rowsOf(inFlight))

	retried := "[" + strings.Join([]string{
		entry(1, "created", "queued", "", "{}"), entry(2, "started", "running", "", "{}"),
		entry(3, "step_retried", "queued", "", `{"error":{"message":"boom"}}`), entry(4, "started", "running", "", "{}"),
		entry(5, "succeeded", "succeeded", "", "{}"),
	}, ",") + "]"
	require.Equal(t, []row{{Key: "invocation", Bars: []string{"run-ok"}, Marks: []string{"info", "retry", "info", "ok"}}}, rowsOf(retried))

	// The DAG layout: layers by depends_on (a diamond and a lone task), a layer ordered towards its upstream rows.
	var layers [][]string
	require.NoError(t, json.Unmarshal([]byte(load("dag.js", `m.layout([{task_id: 'a'}, {task_id: 'z'}, {task_id: 'c', depends_on: ['z']},
		{task_id: 'b', depends_on: ['a']}, {task_id: 'd', depends_on: ['b', 'c']}]).layers.map(l => l.map(t => t.task_id))`)), &layers))
	require.Equal(t, [][]string{{"a", "z"}, {"b", "c"}, {"d"}}, layers)

	var toks [][2]string
	require.NoError(t, json.Unmarshal([]byte(load("highlight.js",
		`m.tokens('def main(ctx, input):\n  # hi\n  return r_now_v1() + "a\\"b" + len(x) + 1.5 + None').filter(([k]) => k !== 'space')`)), &toks))
	require.Equal(t, [][2]string{{"keyword", "def"}, {"def", "main"}, {"op", "("}, {"name", "ctx"}, {"op", ","}, {"name", "input"},
		{"op", ")"}, {"op", ":"}, {"comment", "# hi"}, {"keyword", "return"}, {"helper", "r_now_v1"}, {"op", "("}, {"op", ")"}, {"op", "+"},
		{"string", `"a\"b"`}, {"op", "+"}, {"builtin", "len"}, {"op", "("}, {"name", "x"}, {"op", ")"}, {"op", "+"},
		{"number", "1.5"}, {"op", "+"}, {"constant", "None"}}, toks)
	b.screenshot(t, "login")
}

// TestConsoleViewer: a viewer's token logs in and reads, but what it may not do fails with the
// API's answer shown in the page: the usage page (admin only) and pausing a schedule (developer).
func TestConsoleViewer(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	viewer := call(t, l.url, opToken, "POST", "/tokens", map[string]any{"tenant_id": tenantID, "subject_id": "vic", "roles": []string{"viewer"}}, 201)
	l.token = viewer["token"].(string)
	b.allow("the server responded with a status of 403")
	b.login(t, l)
	require.Contains(t, eval[string](t, b, `document.getElementById('whoami').textContent`), "vic · tenant acme · viewer")

	b.do(t, "usage", chromedp.Navigate(l.url+"/console/usage"), chromedp.WaitVisible(chromedp.CSS(`#main .page-error`)))
	require.Contains(t, eval[string](t, b, `document.getElementById('flash').textContent`), "403")
	require.Contains(t, eval[string](t, b, `document.querySelector(".page-error").textContent`), "needs the admin role")

	b.do(t, "pause as a viewer",
		chromedp.Navigate(l.url+"/console/schedules/hourly"),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="pause"]`)),
		chromedp.Click(chromedp.CSS(`button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash .msg.error`)))
	require.Contains(t, eval[string](t, b, `document.getElementById('flash').textContent`), "developer role")
	require.Equal(t, "active", call(t, l.url, l.token, "GET", "/schedules/hourly", nil, 200)["status"])
	b.screenshot(t, "viewer-pause-refused")

	// A revoked token ends the session: the next call's 401 sends the user back to the log-in page.
	call(t, l.url, opToken, "DELETE", "/tokens/"+viewer["id"].(string), nil, 204)
	b.allow("the server responded with a status of 401")
	b.do(t, "the token is revoked",
		chromedp.Navigate(l.url+"/console/entrypoints"),
		chromedp.WaitVisible(chromedp.ID("token")))
	require.Contains(t, eval[string](t, b, `document.getElementById('flash').textContent`), "session ended")
	require.Equal(t, 0, eval[int](t, b, `sessionStorage.length`))
	require.Equal(t, "/console/login", eval[string](t, b, `location.pathname`))
}

// moduleLoader serves the console alone, opens it in b, and answers a function that imports one of
// its modules (as m) in the page and returns the JSON of expr.
func moduleLoader(t *testing.T, b *browser) func(module, expr string) string {
	t.Helper()
	h, err := console.Wrap(http.NotFoundHandler())
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	b.do(t, "load the console", chromedp.Navigate(ts.URL+"/console/login"), chromedp.WaitVisible(chromedp.ID("token")))
	return func(module, expr string) string {
		t.Helper()
		js := `(async () => {
			const base = document.querySelector('script[type=module]').src.replace(/main\.js$/, '');
			const m = await import(base + '` + module + `');
			return JSON.stringify(` + expr + `);
		})()`
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		return v
	}
}
