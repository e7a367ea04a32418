package larktest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/larktest"
)

const fnPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.test."
const wfPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.test."

// fnManifest is a function's manifest (its source in <name>.star).
func fnManifest(name string) string {
	return `entrypoint_id: ` + fnPrefix + name + `.v1~
title: ` + name + `
owner: {owner_type: tenant}
schema: {params: {type: object}}
traits:
  invocation: {supported: [sync, async], default: async}
  limits: {timeout_seconds: 10}
  retry: {max_attempts: 1}
`
}

// wfManifest is a workflow's manifest (its source in <name>.star).
func wfManifest(name string) string {
	return `entrypoint_id: ` + wfPrefix + name + `.v1~
title: ` + name + `
owner: {owner_type: tenant}
schema: {params: {type: object}}
traits:
  invocation: {supported: [async], default: async}
  limits: {timeout_seconds: 10}
  retry: {max_attempts: 1}
  workflow:
    compensation: {on_failure: null, on_cancel: null}
    checkpointing: {strategy: automatic}
    max_suspension_days: 30
`
}

// folder writes files into a new folder.
func folder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// run runs lark test over dir and returns its report.
func run(t *testing.T, dir string, o larktest.Options) (larktest.Result, string, error) {
	t.Helper()
	var out bytes.Buffer
	o.Dir, o.Out = dir, &out
	res, err := larktest.Run(context.Background(), o)
	return res, out.String(), err
}

func TestPassingAndFailingTests(t *testing.T) {
	dir := folder(t, map[string]string{
		"double.yaml": fnManifest("double"),
		"double.star": "def main(ctx, input):\n    return {\"twice\": input.n * 2}\n",
		"double_test.star": `
def test_ok(t):
    run = t.invoke("double", {"n": 21})
    assert_eq(run.status, "succeeded")
    assert_eq(run.result, {"twice": 42})

def test_wrong(t):
    run = t.invoke("double", {"n": 1})
    assert_eq(run.result["twice"], 3, "one doubled")

def test_starlark_error(t):
    x = {}["missing"]
`,
	})
	res, out, err := run(t, dir, larktest.Options{})
	require.ErrorIs(t, err, larktest.ErrFailed)
	require.Equal(t, larktest.Result{Passed: 1, Failed: 2}, res)
	require.Contains(t, out, "--- FAIL: test_wrong (double_test.star:9)")
	require.Contains(t, out, "double_test.star:9: assert_eq: got 2, want 3: one doubled")
	require.Contains(t, out, "--- FAIL: test_starlark_error (double_test.star:12)")
	require.Contains(t, out, `key "missing" not in dict`)
	require.NotContains(t, out, "test_ok", "passing tests are listed with -v only")
	require.Regexp(t, `(?m)^FAIL\t`+regexp.QuoteMeta(dir)+`\t\d+\.\d{3}s$`, out)

	var ec interface{ ExitCode() int }
	require.True(t, errors.As(err, &ec))
	require.Equal(t, larktest.ExitFail, ec.ExitCode())
}

func TestVerboseAndRunFilter(t *testing.T) {
	dir := folder(t, map[string]string{
		"a_test.star": "def test_one(t):\n    assert_true(True)\n\ndef test_two(t):\n    assert_ne(1, 2)\n\ndef helper():\n    pass\n",
	})
	res, out, err := run(t, dir, larktest.Options{Verbose: true, Run: regexp.MustCompile("two")})
	require.NoError(t, err)
	require.Equal(t, larktest.Result{Passed: 1, Skipped: 1}, res)
	require.Contains(t, out, "=== RUN   test_two\n--- PASS: test_two (")
	require.NotContains(t, out, "test_one")
	require.Regexp(t, `(?m)^ok  \t`+regexp.QuoteMeta(dir)+`\t\d+\.\d{3}s$`, out)
}

func TestAssertions(t *testing.T) {
	dir := folder(t, map[string]string{
		"a_test.star": `
def test_contains(t):
    assert_contains("hello world", "world")
    assert_contains([1, 2], 2)
    assert_contains({"k": 1}, "k")

def test_fails_returns_the_message(t):
    msg = assert_fails(lambda: fail("boom 42"), "boom [0-9]+")
    assert_eq(msg, "fail: boom 42")

def test_fails_without_error(t):
    assert_fails(lambda: 1, "x")

def test_contains_missing(t):
    assert_contains([1, 2], 3, "three")

def test_true_false(t):
    assert_true(0)
`,
	})
	res, out, err := run(t, dir, larktest.Options{})
	require.ErrorIs(t, err, larktest.ErrFailed)
	require.Equal(t, 2, res.Passed, out)
	require.Contains(t, out, "a_test.star:12: assert_fails: lambda did not fail")
	require.Contains(t, out, "a_test.star:15: assert_contains: 3 not in [1, 2]: three")
	require.Contains(t, out, "a_test.star:18: assert_true: 0 is false")
}

func TestHTTPStubsAndCalls(t *testing.T) {
	dir := folder(t, map[string]string{
		"fetch.yaml": fnManifest("fetch"),
		"fetch.star": `
def main(ctx, input):
    r = r_await(r_http_post_v1(input.url, {"q": 1}, headers={"X-Trace": "abc"}, timeout_ms=1000, exit_on_http_error=False))
    if not r.ok:
        return {"error": r.error.message}
    return {"status": r.response.status_code, "body": r.response.body, "type": r.response.headers.get("content-type")}
`,
		"fetch_secret.yaml": fnManifest("fetch_secret"),
		"fetch_secret.star": `
def main(ctx, input):
    return r_await(r_http_get_v1(input.url, headers={"Authorization": "Bearer {{secret:api_key}}"}, timeout_ms=1000)).response.body
`,
		"fetch_test.star": `
URL = "https://api.example.com/things?id=1"

def test_json(t):
    t.stub_http("POST", URL, status = 201, json = {"ok": True})
    run = t.invoke("fetch", {"url": URL})
    assert_eq(run.result, {"status": 201, "body": {"ok": True}, "type": "application/json"})
    calls = t.http_calls()
    assert_eq(len(calls), 1)
    assert_eq(calls[0].method, "POST")
    assert_eq(calls[0].url, URL)
    assert_eq(calls[0].body, {"q": 1})
    assert_eq(calls[0].headers["x-trace"], "abc")

def test_times_then_next(t):
    t.stub_http("POST", "https://api.example.com/*", status = 503, times = 1)
    t.stub_http("POST", "https://api.example.com/*", status = 200, text = "fine")
    assert_contains(t.invoke("fetch", {"url": URL}).result["error"], "503")
    assert_eq(t.invoke("fetch", {"url": URL}).result["status"], 200)

def test_timeout(t):
    t.stub_http("POST", URL, error = "timeout")
    assert_contains(t.invoke("fetch", {"url": URL}).result["error"], "timed out")

def test_redirect_is_followed(t):
    t.stub_http("POST", URL, status = 302, headers = {"Location": "https://api.example.com/moved"})
    t.stub_http("GET", "https://api.example.com/moved", json = {"here": True})
    run = t.invoke("fetch", {"url": URL})
    assert_eq(run.result["body"], {"here": True})
    assert_eq([c.method + " " + c.url for c in t.http_calls()], ["POST " + URL, "GET https://api.example.com/moved"])

def test_secret_in_a_header(t):
    t.secret("api_key", "s3cr3t-value", ["api.example.com"])
    t.stub_http("GET", URL, json = {"echo": "s3cr3t-value"})
    run = t.invoke("fetch_secret", {"url": URL})
    assert_eq(t.http_calls()[0].headers["authorization"], "Bearer s3cr3t-value", "the egress layer put the value in")
    assert_eq(run.result, {"echo": "[REDACTED]"}, "the code never sees it")

def test_undeclared(t):
    run = t.invoke("fetch", {"url": "https://elsewhere.example.com/x"})
    assert_contains(run.result["error"], "no stub for POST https://elsewhere.example.com/x")
`,
	})
	res, out, err := run(t, dir, larktest.Options{})
	require.ErrorIs(t, err, larktest.ErrFailed, out)
	require.Equal(t, larktest.Result{Passed: 5, Failed: 1}, res, out)
	// A request no stub answers fails the call with an error naming it, and fails the test too.
	require.Contains(t, out, "--- FAIL: test_undeclared")
	require.Contains(t, out, "the code called POST https://elsewhere.example.com/x, which no t.stub_http declares")
}

func TestWorkflowSleepingDaysRunsInMilliseconds(t *testing.T) {
	dir := folder(t, map[string]string{
		"slow.yaml": wfManifest("slow"),
		"slow.star": `
def main(ctx, input):
    before = r_now_v1()
    r_sleep(3 * 24 * 3600 * 1000)
    return {"before": before, "after": r_now_v1()}
`,
		"slow_test.star": `
def test_three_days(t):
    start = t.now()
    run = t.invoke("slow")
    assert_eq(run.status, "succeeded")
    assert_eq(run.result["before"], start)
    assert_eq(run.result["after"], "2026-01-04T09:00:00.000Z")
    assert_eq(t.now(), "2026-01-04T09:00:00.000Z")
`,
	})
	start := time.Now()
	_, out, err := run(t, dir, larktest.Options{})
	require.NoError(t, err, out)
	limit := time.Second // the runtime's start included; the sleep itself costs a few milliseconds
	if raceEnabled {
		limit = 10 * time.Second
	}
	require.Less(t, time.Since(start), limit, "three days of sleep take well under a second")
}

func TestEventsAndExplicitAdvance(t *testing.T) {
	dir := folder(t, map[string]string{
		"wait.yaml": wfManifest("wait"),
		"wait.star": `
def main(ctx, input):
    e = r_await(r_wait_event_v1("gts.x.core.events.event.v1~vendor.app.test.ping.v1~",
        event_filter_query="payload.n > 1", timeout_ms=3600000, exit_on_error=False))
    if e.ok:
        return {"n": e.value.payload.n}
    return {"timed_out": True}
`,
		"wait_test.star": `
PING = "gts.x.core.events.event.v1~vendor.app.test.ping.v1~"

def test_event_wakes_it(t):
    run = t.invoke("wait")
    assert_eq(run.status, "suspended", "waiting for the event: the clock is not moved past its timeout")
    t.send_event(PING, {"n": 1})
    assert_eq(t.get(run).status, "suspended", "the filter does not match")
    t.send_event(PING, {"n": 5})
    assert_eq(t.get(run).result, {"n": 5})

def test_timeout(t):
    run = t.invoke("wait")
    t.advance("59m")
    assert_eq(t.get(run).status, "suspended")
    t.advance(60 * 1000)
    assert_eq(t.get(run).result, {"timed_out": True})

def test_sync_workflow_is_refused(t):
    assert_fails(lambda: t.invoke("wait", mode = "sync"), "is for functions")

def test_bad_duration(t):
    t.advance("soon")
`,
	})
	res, out, err := run(t, dir, larktest.Options{})
	require.ErrorIs(t, err, larktest.ErrFailed)
	require.Equal(t, larktest.Result{Passed: 3, Failed: 1}, res, out)
	require.Contains(t, out, `wait_test.star:23: t.advance: bad duration "soon"`)
}

func TestCompensation(t *testing.T) {
	dir := folder(t, map[string]string{
		"saga.yaml": wfManifest("saga"),
		"saga.star": `
def do(ctx, input):
    return struct(id = input + "-1")

def undo(ctx, input, output):
    r_await(r_http_post_v1("https://svc.example.com/undo", {"id": output.id}, timeout_ms=1000))

def main(ctx, input):
    r_run_step_v1("a", r_step_v1("a", do, undo), "a")
    r_run_step_v1("b", r_step_v1("b", do, undo), "b")
    if input.get("wait"):
        r_wait_event_v1("gts.x.core.events.event.v1~vendor.app.test.never.v1~")
    r_exit({"message": "changed my mind"})
`,
		"saga_test.star": `
def test_compensates_in_reverse(t):
    t.stub_http("POST", "https://svc.example.com/undo", json = {})
    run = t.invoke("saga")
    assert_eq(run.status, "dead_lettered")
    assert_eq(run.steps, ["a", "b"])
    assert_eq(run.compensations, ["b", "a"])
    assert_eq([c.body["id"] for c in t.http_calls()], ["b-1", "a-1"])
    assert_eq(run.error["message"], "changed my mind")

def test_cancel_compensates(t):
    t.stub_http("POST", "https://svc.example.com/undo", json = {})
    run = t.invoke("saga", {"wait": True})
    assert_eq(run.status, "suspended")
    run = t.cancel(run)
    assert_eq(run.status, "canceled")
    assert_eq(run.compensations, ["b", "a"])
`,
	})
	_, out, err := run(t, dir, larktest.Options{})
	require.NoError(t, err, out)
}

func TestEachTestHasAFreshRuntime(t *testing.T) {
	dir := folder(t, map[string]string{
		"one.yaml": fnManifest("one"),
		"one.star": "def main(ctx, input):\n    return r_await(r_http_get_v1(\"https://x.example.com/\", timeout_ms=1000)).response.body\n",
		"one_test.star": `
def test_first(t):
    t.stub_http("GET", "https://x.example.com/", json = {"v": 1})
    assert_eq(t.invoke("one").result, {"v": 1})
    t.advance("1d")

def test_second(t):
    assert_eq(t.invocations(), [])
    assert_eq(t.http_calls(), [])
    assert_eq(t.now(), "2026-01-01T09:00:00.000Z")
    # the first test's stub is gone too
    assert_eq(t.invoke("one").status, "dead_lettered")
`,
	})
	res, out, err := run(t, dir, larktest.Options{Run: regexp.MustCompile("first|second")})
	// test_second's request has no stub: it fails for that, and only for that.
	require.ErrorIs(t, err, larktest.ErrFailed)
	require.Equal(t, 1, res.Passed, out)
	require.Contains(t, out, "--- FAIL: test_second")
	require.Contains(t, out, "the code called GET https://x.example.com/, which no t.stub_http declares")
	require.Equal(t, 1, strings.Count(out, "--- FAIL"), out)
}

func TestLoadErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"syntax error": {map[string]string{"a_test.star": "def test_x(t):\n    x = = 1\n"}, "a_test.star:2:9"},
		"arity":        {map[string]string{"a_test.star": "def test_x():\n    pass\n"}, "test_x must take one parameter, t"},
		"no tests":     {map[string]string{"README.md": "hi"}, "no *_test.star files"},
		"no source": {map[string]string{"a_test.star": "def test_x(t):\n    pass\n", "gone.yaml": fnManifest("gone")},
			"gone.star does not exist"},
		"bad manifest": {map[string]string{"a_test.star": "def test_x(t):\n    pass\n", "bad.yaml": "kind: cronjob\n"},
			"bad.yaml:1:7: kind must be entrypoint, schedule, trigger or webhook"},
		"refused registration": {map[string]string{"a_test.star": "def test_x(t):\n    pass\n", "f.yaml": fnManifest("f"),
			"f.star": "def main(ctx, input):\n    return r_sleep(1)\n"}, "f.star:2:12: r_sleep may only be used in workflows"},
		"refused member": {map[string]string{"a_test.star": "def test_x(t):\n    pass\n",
			"f.yaml": strings.Replace(fnManifest("f"), "timeout_seconds: 10", "timeout_seconds: -1", 1),
			"f.star": "def main(ctx, input):\n    return 1\n"}, "f.yaml:7:12: $.traits.limits.timeout_seconds: must be >= 1"},
		"load()": {map[string]string{"a_test.star": "load(\"x.star\", \"y\")\n"}, "load() is not available"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := run(t, folder(t, tc.files), larktest.Options{})
			var ue *larktest.UsageError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, larktest.ExitUsage, ue.ExitCode())
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCommand(t *testing.T) {
	dir := folder(t, map[string]string{"a_test.star": "def test_x(t):\n    assert_eq(1, 1)\n"})
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-v", dir}, 0, "--- PASS: test_x"},
		{[]string{"--run", "nothing", dir}, 0, "ok  \t"},
		{[]string{dir, "-run", "test_x", "-v"}, 0, "--- PASS: test_x"},
		{[]string{"-run=nothing", "-v", dir}, 0, "ok  \t"},
		{[]string{"-timeout", "0s", dir}, larktest.ExitUsage, ""},
		{[]string{"-h"}, 0, "-run REGEX"},
		{[]string{}, larktest.ExitUsage, ""},
		{[]string{"--run", "(", dir}, larktest.ExitUsage, ""},
		{[]string{"--no-such-flag", dir}, larktest.ExitUsage, ""},
		{[]string{filepath.Join(dir, "missing")}, larktest.ExitUsage, ""},
	} {
		c := larktest.Command()
		var out bytes.Buffer
		c.SetOut(&out)
		c.SetErr(&out)
		c.SetArgs(tc.args)
		err := c.Execute()
		code := 0
		if err != nil {
			var ec interface{ ExitCode() int }
			require.True(t, errors.As(err, &ec), "%v: %v", tc.args, err)
			code = ec.ExitCode()
		}
		require.Equal(t, tc.code, code, "%v: %v %s", tc.args, err, out.String())
		require.Contains(t, out.String(), tc.out)
	}
}

// TestExamples keeps every example of examples/ green: each folder's tests pass under lark test
// (which registers and activates its entrypoints and creates its schedules, triggers and webhook
// triggers through the real API first).
func TestExamples(t *testing.T) {
	ents, err := os.ReadDir("../../examples")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			res, out, err := run(t, filepath.Join("../../examples", e.Name()), larktest.Options{})
			require.NoError(t, err, out)
			require.Positive(t, res.Passed)
		})
	}
	require.GreaterOrEqual(t, n, 6)
}

func TestEventTriggerManifest(t *testing.T) {
	dir := folder(t, map[string]string{
		"on_paid.yaml": fnManifest("on_paid"),
		"on_paid.star": "def main(ctx, input):\n    return {\"got\": input}\n",
		"on_paid_trigger.yaml": `kind: trigger
trigger_id: paid
event_type_id: gts.x.core.events.event.v1~vendor.app.test.paid.v1~
entrypoint_id: ` + fnPrefix + `on_paid.v1~
event_filter_query: "payload.amount >= 100"
`,
		"settle.yaml": wfManifest("settle"),
		"settle.star": "def main(ctx, input):\n    r_sleep(3600000)\n    return {}\n",
		"settle_trigger.yaml": `kind: trigger
trigger_id: settle
event_type_id: gts.x.core.events.event.v1~vendor.app.test.paid.v1~
entrypoint_id: ` + wfPrefix + `settle.v1~
event_filter_query: "payload.amount >= 500"
`,
		"on_paid_test.star": `
PAID = "gts.x.core.events.event.v1~vendor.app.test.paid.v1~"

def test_trigger_started_workflow_runs_through_its_sleep(t):
    t.send_event(PAID, {"amount": 500})
    runs = t.invocations("settle")
    assert_eq(len(runs), 1)
    assert_eq(runs[0].status, "succeeded", "the clock crossed its hour of sleep")
    assert_eq(t.now(), "2026-01-01T10:00:00.000Z")

def test_trigger_starts_the_function(t):
    t.send_event(PAID, {"amount": 5})
    assert_eq(t.invocations("on_paid"), [], "the filter does not match")
    t.send_event(PAID, {"amount": 150})
    runs = t.invocations("on_paid")
    assert_eq(len(runs), 1)
    assert_eq(runs[0].status, "succeeded")
`,
	})
	_, out, err := run(t, dir, larktest.Options{})
	require.NoError(t, err, out)
}

func TestHTTPRetryBackoffUsesTheFakeClock(t *testing.T) {
	dir := folder(t, map[string]string{
		"poll.yaml": fnManifest("poll"),
		"poll.star": `
def main(ctx, input):
    r = r_await(r_http_get_v1("https://slow.example.com/", timeout_ms=1000, retry={"max_attempts": 3, "backoff_ms": 4000}))
    return {"at": r_now_v1(), "body": r.response.body}
`,
		"poll_test.star": `
def test_two_busy_answers_then_ok(t):
    t.stub_http("GET", "https://slow.example.com/", status = 503, times = 2)
    t.stub_http("GET", "https://slow.example.com/", json = {"ok": True})
    run = t.invoke("poll")
    assert_eq(run.result["body"], {"ok": True})
    assert_eq(len(t.http_calls()), 3)
    assert_eq(t.now(), "2026-01-01T09:00:08.000Z", "two backoffs of 4 s on the fake clock")
`,
	})
	start := time.Now()
	_, out, err := run(t, dir, larktest.Options{})
	require.NoError(t, err, out)
	limit := 3 * time.Second // the backoffs alone would take 8 s of real time
	if raceEnabled {
		limit = 7 * time.Second
	}
	require.Less(t, time.Since(start), limit)
}
