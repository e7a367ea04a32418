package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func compileWF(t *testing.T, src string) *Program {
	t.Helper()
	p, err := CompileWorkflow("wf.star", src)
	require.NoError(t, err)
	return p
}

func runWF(t *testing.T, prog *Program, host Host, journal []JournalEntry, now time.Time) (WorkflowResult, *Error) {
	t.Helper()
	return RunWorkflow(context.Background(), WorkflowRequest{
		Request: Request{Program: prog, Input: map[string]any{}, Info: Info{InvocationID: "inv-1"}, Host: host},
		Journal: journal,
		Now:     now,
	})
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

const threeSteps = `
def charge(ctx, x):
    r_await(r_http_get_v1("https://api.example.com/charge/%d" % x))
    return x * 2

def main(ctx, input):
    a = r_run_step_v1("a", charge, 1)
    b = r_run_step_v1("b", charge, a.value)
    c = r_run_step_v1("c", charge, b.value)
    return {"result": c.value}
`

func TestWorkflowThreeStepsAndReplay(t *testing.T) {
	prog := compileWF(t, threeSteps)
	host := &fakeHost{}
	res, err := runWF(t, prog, host, nil, time.Time{})
	require.Nil(t, err)
	require.Nil(t, res.Park)
	require.JSONEq(t, `{"result":8}`, jsonOf(t, res.Output))
	require.Len(t, res.New, 3)
	for i, e := range res.New {
		require.Equal(t, i, e.Seq)
		require.True(t, e.Done)
		require.Equal(t, "r_run_step_v1", e.Helper)
		require.NotEmpty(t, e.ArgsHash)
	}
	require.Equal(t, []string{"a", "b", "c"}, []string{res.New[0].Key, res.New[1].Key, res.New[2].Key})
	require.Len(t, host.requests(), 3)
	require.Len(t, res.Completed, 3)

	// Replay: no step function runs again, same output, nothing new.
	journal := res.New
	res2, err := runWF(t, prog, host, journal, time.Time{})
	require.Nil(t, err)
	require.Len(t, host.requests(), 3)
	require.Empty(t, res2.New)
	require.Equal(t, jsonOf(t, res.Output), jsonOf(t, res2.Output))

	// A journal that went through JSON (as persisted) replays the same.
	var decoded []JournalEntry
	require.NoError(t, json.Unmarshal([]byte(jsonOf(t, journal)), &decoded))
	res3, err := runWF(t, prog, host, decoded, time.Time{})
	require.Nil(t, err)
	require.Len(t, host.requests(), 3)
	require.JSONEq(t, `{"result":8}`, jsonOf(t, res3.Output))
}

func TestWorkflowSleepParksThenContinues(t *testing.T) {
	prog := compileWF(t, `
def main(ctx, input):
    a = r_run_step_v1("a", lambda ctx, x: x + 1, 1)
    r_await(r_sleep(60000))
    r_sleep_v1(0)
    return a.value
`)
	host := &fakeHost{}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := runWF(t, prog, host, nil, now)
	require.Nil(t, err)
	require.NotNil(t, res.Park)
	require.Equal(t, "timer", res.Park.Kind)
	require.Equal(t, now.Add(time.Minute), res.Park.Until)
	require.Equal(t, 1, res.Park.Seq)
	require.Nil(t, res.Output)
	require.Len(t, res.New, 2)
	require.False(t, res.New[1].Done)
	journal := res.New

	// Not yet due: parks again, nothing new.
	res, err = runWF(t, prog, host, journal, now.Add(time.Second))
	require.Nil(t, err)
	require.NotNil(t, res.Park)
	require.Equal(t, now.Add(time.Minute), res.Park.Until)
	require.Empty(t, res.New)

	journal[1].Done = true
	res, err = runWF(t, prog, host, journal, now.Add(time.Minute))
	require.Nil(t, err)
	require.Nil(t, res.Park)
	require.JSONEq(t, `2`, jsonOf(t, res.Output))
	require.Len(t, res.New, 1) // the zero sleep, recorded Done
	require.True(t, res.New[0].Done)
}

func TestWorkflowDivergence(t *testing.T) {
	host := &fakeHost{}
	progA := compileWF(t, `
def main(ctx, input):
    return r_run_step_v1("a", lambda ctx, x: x, 1).value
`)
	res, err := runWF(t, progA, host, nil, time.Time{})
	require.Nil(t, err)
	progB := compileWF(t, `
def main(ctx, input):
    x = 1
    return r_run_step_v1("b", lambda ctx, x: x, 1).value
`)
	_, err = runWF(t, progB, host, res.New, time.Time{})
	require.NotNil(t, err)
	require.Equal(t, ErrRuntime, err.TypeID)
	require.Equal(t, CategoryNonRetryable, err.Category)
	require.Contains(t, err.Message, "non-deterministic workflow: at line 4")
	require.Contains(t, err.Message, `the journal has r_run_step_v1("a") but the program called r_run_step_v1("b")`)
	require.Equal(t, 4, err.Details["line"])

	// Same step, different input.
	progC := compileWF(t, `
def main(ctx, input):
    return r_run_step_v1("a", lambda ctx, x: x, 2).value
`)
	_, err = runWF(t, progC, host, res.New, time.Time{})
	require.NotNil(t, err)
	require.Contains(t, err.Message, "with different arguments")

	// Different helper.
	progD := compileWF(t, `
def main(ctx, input):
    return r_now_v1()
`)
	_, err = runWF(t, progD, host, res.New, time.Time{})
	require.NotNil(t, err)
	require.Contains(t, err.Message, `at line 3 the journal has r_run_step_v1("a") but the program called r_now_v1`)
}

func TestWorkflowNowAndRandReplay(t *testing.T) {
	prog := compileWF(t, `
def main(ctx, input):
    return [r_now_v1(), r_rand_v1("x"), r_rand_v1()]
`)
	host := &fakeHost{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	res, err := runWF(t, prog, host, nil, time.Time{})
	require.Nil(t, err)
	require.Len(t, res.New, 3)
	first := jsonOf(t, res.Output)
	require.Contains(t, first, "2026-01-01T00:00:00.000Z")

	host.now = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	// Recorded values win, even if they could not be recomputed.
	journal := append([]JournalEntry(nil), res.New...)
	journal[1].Result = "recorded-rand"
	res2, err := runWF(t, prog, host, journal, time.Time{})
	require.Nil(t, err)
	require.Empty(t, res2.New)
	out := res2.Output.([]any)
	require.Equal(t, "2026-01-01T00:00:00.000Z", out[0])
	require.Equal(t, "recorded-rand", out[1])
	require.Equal(t, res.Output.([]any)[2], out[2])
}

func TestWorkflowWaitEvent(t *testing.T) {
	prog := compileWF(t, `
def main(ctx, input):
    r = r_await(r_wait_event_v1("gts.x.test.evt.v1~", "payload.id == 1", timeout_ms=5000))
    if not r.ok:
        return "timeout"
    return r.value.order
`)
	host := &fakeHost{}
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	res, err := runWF(t, prog, host, nil, now)
	require.Nil(t, err)
	require.NotNil(t, res.Park)
	require.Equal(t, "event", res.Park.Kind)
	require.Equal(t, "gts.x.test.evt.v1~", res.Park.EventTypeID)
	require.Equal(t, "payload.id == 1", res.Park.Filter)
	require.NotNil(t, res.Park.TimeoutAt)
	require.Equal(t, now.Add(5*time.Second), *res.Park.TimeoutAt)
	journal := res.New
	require.Len(t, journal, 1)

	// Still pending: parks again with the same timeout.
	res, err = runWF(t, prog, host, journal, now.Add(time.Second))
	require.Nil(t, err)
	require.Equal(t, now.Add(5*time.Second), *res.Park.TimeoutAt)

	ok := append([]JournalEntry(nil), journal...)
	ok[0].Done, ok[0].Result = true, OKResult(map[string]any{"order": "o-42"})
	res, err = runWF(t, prog, host, ok, now)
	require.Nil(t, err)
	require.Nil(t, res.Park)
	require.Equal(t, "o-42", res.Output)

	to := append([]JournalEntry(nil), journal...)
	to[0].Done, to[0].Result = true, ErrorResult(newError(ErrTimeout, CategoryTimeout, "no event"))
	// exit_on_error defaults to True: a timeout ends the workflow.
	_, err = runWF(t, prog, host, to, now)
	require.NotNil(t, err)
	require.Equal(t, ErrTimeout, err.TypeID)
}

func TestWorkflowChildAndSnapshot(t *testing.T) {
	prog := compileWF(t, `
def main(ctx, input):
    r_snapshot_v1("start")
    r = r_await(r_invoke_v1("child-ep", {"n": 1}))
    return r.value if r.ok else r.error.message
`)
	host := &fakeHost{}
	res, err := runWF(t, prog, host, nil, time.Time{})
	require.Nil(t, err)
	require.NotNil(t, res.Park)
	require.Equal(t, "child", res.Park.Kind)
	require.Equal(t, "child-ep", res.Park.ChildEntrypointID)
	require.JSONEq(t, `{"n":1}`, jsonOf(t, res.Park.ChildParams))
	require.Len(t, res.New, 2)
	require.Equal(t, "start", res.New[0].Result)
	journal := res.New
	journal[1].Done, journal[1].Result = true, ErrorResult(newError(ErrRuntime, CategoryRetryable, "child failed"))
	res, err = runWF(t, prog, host, journal, time.Time{})
	require.Nil(t, err)
	require.Equal(t, "child failed", res.Output)
}

func TestWorkflowCompensation(t *testing.T) {
	prog := compileWF(t, `
def do(ctx, x):
    return {"id": x}

def undo_ok(ctx, x, out):
    r_await(r_http_post_v1("https://api.example.com/undo", {"step": x, "id": out.id}))

def undo_fail(ctx, x, out):
    r_await(r_http_post_v1("https://api.example.com/undo", {"step": x, "id": out.id}))
    fail("cannot undo %s" % x)

def boom(ctx, x):
    fail("step c broke")

s1 = r_step_v1("reserve", do, undo_ok)
s2 = r_step_v1("charge", do, undo_fail)
s3 = r_step_v1("ship", boom)

def main(ctx, input):
    s1("a")
    s2("b")
    r_sleep(10)
    s3("c")
    return "done"
`)
	host := &fakeHost{}
	res, err := runWF(t, prog, host, nil, time.Time{})
	require.Nil(t, err)
	require.NotNil(t, res.Park)
	require.Empty(t, host.requests())
	journal := res.New
	journal[2].Done = true

	res, err = runWF(t, prog, host, journal, time.Time{})
	require.NotNil(t, err)
	require.Contains(t, err.Message, "step c broke")
	require.Len(t, res.New, 1)
	require.False(t, res.New[0].Result.(map[string]any)["ok"].(bool))
	require.Len(t, res.Completed, 2)
	require.Equal(t, "undo_ok", res.Completed[0].Compensate)
	require.Len(t, res.Compensations, 2)
	require.Equal(t, "charge", res.Compensations[0].Step)
	require.False(t, res.Compensations[0].OK)
	require.Contains(t, res.Compensations[0].Error.Message, "cannot undo b")
	require.Equal(t, "reserve", res.Compensations[1].Step)
	require.True(t, res.Compensations[1].OK)
	reqs := host.requests()
	require.Len(t, reqs, 2)
	require.JSONEq(t, `{"step":"b","id":"b"}`, string(reqs[0].Body))
	require.JSONEq(t, `{"step":"a","id":"a"}`, string(reqs[1].Body))
}

func TestWorkflowExitCompensatesAndRestrictions(t *testing.T) {
	prog := compileWF(t, `
def undo(ctx, x, out):
    print("undo", x)

s = r_step_v1("a", lambda ctx, x: x, undo)

def main(ctx, input):
    s(1)
    r_exit({"message": "stop", "category": "non_retryable"})
`)
	host := &fakeHost{}
	res, err := runWF(t, prog, host, nil, time.Time{})
	require.NotNil(t, err)
	require.Equal(t, "stop", err.Message)
	require.Len(t, res.Compensations, 1)
	require.True(t, res.Compensations[0].OK)

	for src, want := range map[string]string{
		`def main(ctx, input):
    return r_run_step_v1("a", lambda ctx, x: r_sleep(1), 1)`: "r_sleep: cannot be called inside a step",
		`def main(ctx, input):
    return r_await(r_http_get_v1("https://x.example.com"))`: "inside a step",
	} {
		_, err := runWF(t, compileWF(t, src), host, nil, time.Time{})
		require.NotNil(t, err, src)
		require.Contains(t, err.Message, want)
	}
	// A step failing inside is recorded, not fatal, with exit_on_error=False.
	res, err = runWF(t, compileWF(t, `
def main(ctx, input):
    r = r_run_step_v1("a", lambda ctx, x: r_sleep(1), 1, exit_on_error=False)
    return r.error.message
`), host, nil, time.Time{})
	require.Nil(t, err)
	require.Contains(t, res.Output, "cannot be called inside a step")
}

func TestWorkflowLongReplayIsLinear(t *testing.T) {
	const n = 10000
	prog := compileWF(t, fmt.Sprintf(`
def inc(ctx, x):
    return x + 1

def main(ctx, input):
    v = 0
    for i in range(%d):
        v = r_run_step_v1("s%%d" %% i, inc, v).value
    return v
`, n))
	host := &fakeHost{}
	res, err := runWF(t, prog, host, nil, time.Time{})
	require.Nil(t, err)
	require.Len(t, res.New, n)
	require.JSONEq(t, fmt.Sprint(n), jsonOf(t, res.Output))

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	res2, err := runWF(t, prog, host, res.New, time.Time{})
	elapsed := time.Since(start)
	require.Nil(t, err)
	require.Empty(t, res2.New)
	require.JSONEq(t, fmt.Sprint(n), jsonOf(t, res2.Output))
	require.Less(t, elapsed, 5*time.Second)
	// Accounted allocations stay well within the default budget (a few
	// hundred bytes per replayed step), and the Go heap does not grow
	// out of proportion.
	require.Less(t, res2.MaxMemoryBytes, int64(32<<20))
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	require.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(64<<20))
	t.Logf("replay of %d steps: %v, accounted %d bytes", n, elapsed, res2.MaxMemoryBytes)
}

// TestWorkflowLiveWait: with Wait, a workflow waits live on a timer, an event and a child and goes
// on without a replay (main runs once); each activation gets a fresh timeout. Without a resolution
// the run parks as usual.
func TestWorkflowLiveWait(t *testing.T) {
	prog := compileWF(t, `
calls = []

def main(ctx, input):
    calls.append(1)
    before = r_now_v1()
    r_sleep(1000)
    after = r_now_v1()
    ev = r_await(r_wait_event_v1("gts.x.core.events.event.v1~acme.shop.orders.paid.v1~", timeout_ms=5000))
    child = r_await(r_invoke_v1("gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.app.misc.child.v1~", {"n": 1}))
    return {"before": before, "after": after, "event": ev.value, "child": child.value, "runs": len(calls)}
`)
	t0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	var parks []string
	host := &fakeHost{now: t0}
	res, err := RunWorkflow(context.Background(), WorkflowRequest{
		Request: Request{Program: prog, Input: map[string]any{}, Info: Info{InvocationID: "inv-1"}, Host: host,
			Limits: Limits{Timeout: 200 * time.Millisecond}},
		Now: t0,
		Wait: func(p *Park) (Resolution, bool) {
			parks = append(parks, p.Kind)
			time.Sleep(250 * time.Millisecond) // longer than the timeout: the deadline is paused while waiting
			switch p.Kind {
			case "timer":
				host.mu.Lock()
				host.now = p.Until
				host.mu.Unlock()
				return Resolution{Now: p.Until}, true
			case "event":
				return Resolution{Result: OKResult(map[string]any{"x": 1})}, true
			}
			return Resolution{Result: OKResult("kid")}, true
		},
	})
	require.Nil(t, err)
	require.Nil(t, res.Park)
	require.Equal(t, []string{"timer", "event", "child"}, parks)
	require.JSONEq(t, `{"before":"2026-11-21T09:00:00.000Z","after":"2026-11-21T09:00:01.000Z","event":{"x":1},"child":"kid","runs":1}`,
		jsonOf(t, res.Output))
	require.Len(t, res.New, 5)

	// Declining the wait parks as before.
	res, err = RunWorkflow(context.Background(), WorkflowRequest{
		Request: Request{Program: prog, Input: map[string]any{}, Info: Info{InvocationID: "inv-1"}, Host: &fakeHost{now: t0}},
		Now:     t0,
		Wait:    func(*Park) (Resolution, bool) { return Resolution{}, false },
	})
	require.Nil(t, err)
	require.NotNil(t, res.Park)
	require.Equal(t, "timer", res.Park.Kind)
}

// TestWorkflowContinueAsNew: r_continue_as_new_v1 ends the journal without output, error or
// compensation and hands back the next input; its argument is checked; it is workflow-only; a
// CancelAtEnd run stops there, canceled; the step idempotency key depends on the generation.
func TestWorkflowContinueAsNew(t *testing.T) {
	prog := compileWF(t, `
def undo(ctx, input, output):
    r_await(r_http_get_v1("https://api.example.com/undo"))

def key(ctx, input):
    return ctx.idempotency_key

def main(ctx, input):
    k = r_step_v1("k", key, undo)(1).value
    r_continue_as_new_v1({"next": input["n"] + 1, "key": k})
    return {"unreachable": True}
`)
	host := &fakeHost{}
	run := func(gen int, journal []JournalEntry, cancel bool) (WorkflowResult, *Error) {
		return RunWorkflow(context.Background(), WorkflowRequest{Journal: journal, CancelAtEnd: cancel,
			Request: Request{Program: prog, Input: map[string]any{"n": 1}, Info: Info{InvocationID: "inv-1", Generation: gen}, Host: host}})
	}
	res, err := run(0, nil, false)
	require.Nil(t, err)
	require.Nil(t, res.Output)
	require.Empty(t, res.Compensations, "continuing is not a failure")
	require.NotNil(t, res.ContinueAsNew)
	in := res.ContinueAsNew.Input.(map[string]any)
	require.Equal(t, "2", fmt.Sprint(in["next"]))
	res1, err := run(1, nil, false)
	require.Nil(t, err)
	require.NotEqual(t, in["key"], res1.ContinueAsNew.Input.(map[string]any)["key"], "a later generation's step has its own key")

	// A cancel-compensation replay stops at the call: the completed step is compensated.
	res, err = run(0, res.New, true)
	require.NotNil(t, err)
	require.Equal(t, ErrCanceled, err.TypeID)
	require.Nil(t, res.ContinueAsNew)
	require.Len(t, res.Compensations, 1)

	for _, src := range []string{
		"def main(ctx, input):\n    r_continue_as_new_v1([1])\n",
		"def s(ctx, input):\n    r_continue_as_new_v1({})\n\ndef main(ctx, input):\n    return r_run_step_v1(\"s\", s, 1, exit_on_error=False).error\n",
	} {
		res, err := runWF(t, compileWF(t, src), host, nil, time.Time{})
		if err == nil {
			require.Contains(t, jsonOf(t, res.Output), "cannot be called inside a step")
			continue
		}
		require.Contains(t, err.Message, "input must be a dict")
	}
}

// TestWorkflowRecordError: an *Error from Record ends the run with that error (a journal limit),
// the entry is not kept, and the completed steps are compensated.
func TestWorkflowRecordError(t *testing.T) {
	prog := compileWF(t, `
def undo(ctx, input, output):
    r_await(r_http_get_v1("https://api.example.com/undo/%d" % input))

def id(ctx, input):
    return input

def main(ctx, input):
    for i in range(10):
        r_step_v1("s%d" % i, id, undo)(i)
    return {}
`)
	host := &fakeHost{}
	limit := &Error{TypeID: ErrRuntime, Category: CategoryNonRetryable, Message: "the workflow's journal is full"}
	res, err := RunWorkflow(context.Background(), WorkflowRequest{
		Record: func(j JournalEntry, _ []StepRetryRecord) error {
			if j.Seq >= 3 {
				return limit
			}
			return nil
		},
		Request: Request{Program: prog, Input: map[string]any{}, Info: Info{InvocationID: "inv-1"}, Host: host}})
	require.NotNil(t, err)
	require.Equal(t, limit.Message, err.Message)
	require.Equal(t, CategoryNonRetryable, err.Category)
	require.Len(t, res.New, 3, "the refused entry is not part of the journal")
	require.Len(t, res.Compensations, 3)
	var urls []string
	for _, r := range host.requests() {
		urls = append(urls, r.URL)
	}
	require.Equal(t, []string{"https://api.example.com/undo/2", "https://api.example.com/undo/1", "https://api.example.com/undo/0"}, urls)
}
