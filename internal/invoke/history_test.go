package invoke_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/store"
)

// timelineCounts counts an invocation's timeline entries by type, and log entries by message.
func (e *env) timelineCounts(id string) map[string]int {
	e.t.Helper()
	_, evs, err := e.svc.Events(context.Background(), dev, id)
	require.NoError(e.t, err)
	counts := map[string]int{}
	for _, ev := range api.Timeline(evs) {
		counts[ev.EventType]++
		if ev.EventType == "log" {
			counts["log:"+*ev.Message]++
		}
	}
	return counts
}

// drainFor runs due work and advances the clock by step, n times.
func (e *env) drainFor(n int, step time.Duration) {
	for i := 0; i < n; i++ {
		e.Drain()
		e.clock.Advance(step)
	}
}

const batchWorkflow = `
def double(ctx, x):
    return x * 2

def key(ctx, x):
    return ctx.idempotency_key

def main(ctx, input):
    ctx.log("main started")
    total = input["total"]
    for i in range(5):
        total += r_run_step_v1("item", double, i).value
    keys = list(input["keys"]) + [r_run_step_v1("key", key, 0).value]
    r_sleep(1000)
    if input["batch"] < 3:
        r_continue_as_new_v1({"batch": input["batch"] + 1, "total": total, "keys": keys})
    return {"batch": input["batch"], "total": total, "keys": keys}
`

// TestWorkflowContinueAsNew: a workflow that processes batches and continues as new after each
// one ends with the state it carried through its inputs; each generation has a journal of its own
// (same step names, distinct idempotency keys), the record counts the generations, and the timeline
// shows each rotation. Live (the new generation starts in the same execution) and replayed alike.
func TestWorkflowContinueAsNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		liveWait time.Duration
		starts   int
	}{{"live", 0, 4}, {"replay", -1, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.liveWait != 0 {
				e.reconfigure(func(c *invoke.Config) { c.LiveWait = tc.liveWait })
			}
			e.workflow("batches", batchWorkflow)
			st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "batches.v1~",
				Params: json.RawMessage(`{"batch": 0, "total": 0, "keys": []}`)}, invoke.StartOptions{})
			require.NoError(t, err)
			e.drainFor(10, time.Second)
			r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
			require.NoError(t, err)
			require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
			var out struct {
				Batch, Total int
				Keys         []string
			}
			require.NoError(t, json.Unmarshal(r.Result, &out))
			require.Equal(t, 3, out.Batch)
			require.Equal(t, 4*20, out.Total)
			require.Len(t, out.Keys, 4)
			distinct := map[string]bool{}
			for _, k := range out.Keys {
				distinct[k] = true
			}
			require.Len(t, distinct, 4, "a step of the same name has a new idempotency key in each generation")
			require.Equal(t, 3, r.Generation)
			require.JSONEq(t, `{"batch": 0, "total": 0, "keys": []}`, string(r.Params), "the invocation's params stay the original input")
			counts := e.timelineCounts(st.Record.ID)
			require.Equal(t, 3, counts["continued_as_new"])
			require.Equal(t, 24, counts["step_completed"])
			require.Equal(t, 4, counts["suspended"])
			require.Equal(t, tc.starts, counts["log:main started"])
		})
	}
}

// TestWorkflowJournalLimits: a journal that would grow beyond the configured number of entries or
// bytes fails the workflow with a non-retryable error saying to continue as new (its completed
// steps compensated); the same work split with r_continue_as_new_v1 completes under the same limit.
func TestWorkflowJournalLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reconfigure(func(c *invoke.Config) { c.MaxJournalEntries, c.MaxJournalBytes = 10, 16<<10 })
	e.workflow("unbounded", `
def id(ctx, x):
    return x

def undo(ctx, input, output):
    pass

def main(ctx, input):
    for i in range(20):
        r_step_v1("s%d" % i, id, undo)(i)
    return {}
`)
	e.workflow("rotating", `
def id(ctx, x):
    return x

def main(ctx, input):
    for i in range(5):
        r_run_step_v1("s%d" % i, id, i)
    if input["round"] < 3:
        r_continue_as_new_v1({"round": input["round"] + 1})
    return {"rounds": input["round"] + 1}
`)
	e.workflow("bulky", `
def blob(ctx, x):
    return "x" * 4096

def main(ctx, input):
    for i in range(8):
        r_run_step_v1("b%d" % i, blob, i)
    return {}
`)
	run := func(name, params string) invocation.Record {
		st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + name + ".v1~", Params: json.RawMessage(params)}, invoke.StartOptions{})
		require.NoError(t, err)
		e.Drain()
		r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
		require.NoError(t, err)
		return r
	}
	r := run("unbounded", `{}`)
	require.Equal(t, invocation.StatusDeadLettered, r.Status)
	require.Equal(t, "non_retryable", r.Error.Category)
	require.Contains(t, r.Error.Message, "journal is full (10 entries)")
	require.Contains(t, r.Error.Message, "r_continue_as_new_v1")
	counts := e.timelineCounts(r.ID)
	require.Equal(t, 10, counts["step_completed"])
	require.Equal(t, 10, counts["compensation_completed"], "the steps completed before the limit are compensated")

	r = run("rotating", `{"round": 0}`)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	require.JSONEq(t, `{"rounds": 4}`, string(r.Result))

	r = run("bulky", `{}`)
	require.Equal(t, invocation.StatusDeadLettered, r.Status)
	require.Contains(t, r.Error.Message, fmt.Sprintf("journal is full (%d bytes)", 16<<10))
	require.Equal(t, 3, e.timelineCounts(r.ID)["step_completed"], "three 4 KiB results fit in 16 KiB, the fourth does not")
}

// TestWorkflowStateSnapshot: an on_failure handler's workflow_state_snapshot is the last
// checkpointed state (000): with checkpointing manual, the steps completed up to the last
// r_snapshot_v1 and its label — not the steps after it; {} when the workflow failed before its
// first checkpoint.
func TestWorkflowStateSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("inspect", `
def main(ctx, input):
    return {"snapshot": input.workflow_state_snapshot, "failed": input.failed_step_id}
`, func(b map[string]any) {
		b["schema"] = map[string]any{"params": map[string]any{"$ref": "gts://gts.x.core.serverless.compensation_context.v1~"}}
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async", "sync"}, "default": "async"}
	})
	register := func(name, src string) {
		e.fn(name, src, func(b map[string]any) {
			b["entrypoint_id"] = wfPrefix + name + ".v1~"
			tr := b["traits"].(map[string]any)
			tr["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
			tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": fnPrefix + "inspect.v1~", "on_cancel": nil},
				"checkpointing": map[string]any{"strategy": "manual"}, "max_suspension_days": 30}
		})
	}
	register("snap", `
def ok(ctx, x):
    return {"id": x}

def broken(ctx, x):
    fail("boom")

def main(ctx, input):
    r_run_step_v1("a", ok, 1)
    r_run_step_v1("b", ok, 2)
    r_snapshot_v1("after-b")
    r_run_step_v1("c", ok, 3)
    r_run_step_v1("d", broken, 4)
    return {}
`)
	register("early", `
def broken(ctx, x):
    fail("boom")

def main(ctx, input):
    r_run_step_v1("a", broken, 1)
    return {}
`)
	handlerOutput := func(name string) string {
		st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + name + ".v1~"}, invoke.StartOptions{})
		require.NoError(t, err)
		e.Drain()
		page, err := e.svc.List(context.Background(), bob, store.ListQuery{})
		require.NoError(t, err)
		for _, rec := range page.Items {
			if rec.CompensationFor == st.Record.ID {
				require.Equal(t, invocation.StatusSucceeded, rec.Status, rec.Error)
				return string(rec.Result)
			}
		}
		t.Fatalf("no handler ran for %s", name)
		return ""
	}
	require.JSONEq(t, `{"failed": "d", "snapshot": {"completed_steps": ["a", "b"], "outputs": {"a": {"id": 1}, "b": {"id": 2}}, "checkpoint": "after-b"}}`,
		handlerOutput("snap"))
	require.JSONEq(t, `{"failed": "a", "snapshot": {}}`, handlerOutput("early"))
}

// TestWorkflowTenThousandSteps: a workflow of 10,000 steps that waits on a timer after every 1,000
// completes without being replayed (its execution stays live across the timers), each step
// journaled once, and the heap it holds stays bounded (sampled while it runs). It stays serial:
// the sample is the heap of the whole process, which tests running beside it would grow.
func TestWorkflowTenThousandSteps(t *testing.T) {
	e := newEnv(t)
	e.workflow("long", `
def inc(ctx, n):
    return n + 1

def main(ctx, input):
    ctx.log("main started")
    n = 0
    for i in range(10000):
        n = r_run_step_v1("s%d" % i, inc, n).value
        if i % 1000 == 999:
            r_sleep(1000)
    return {"n": n}
`, func(b map[string]any) {
		// 1,000 durable steps per activation: generous for a loaded machine running -race (the
		// test is about history and memory, not speed).
		b["traits"].(map[string]any)["limits"] = map[string]any{"timeout_seconds": 300}
	})
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
			}
		}
	}()
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "long.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	id := st.Record.ID
	e.drainFor(12, time.Second)
	close(stop)
	<-sampled
	r, err := e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	require.JSONEq(t, `{"n": 10000}`, string(r.Result))
	counts := e.timelineCounts(id)
	require.Equal(t, 10000, counts["step_completed"])
	require.Equal(t, 10000, counts["step_started"])
	require.Equal(t, 10, counts["suspended"])
	require.Equal(t, 1, counts["log:main started"], "never replayed")
	growth := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("heap: %d MiB before, peak growth %d MiB", base.HeapAlloc>>20, growth>>20)
	require.Less(t, growth, int64(96<<20), "the heap held while running 10,000 steps stays bounded")
}

// TestWorkflowResumeWhileChildRuns: resuming a workflow that waits for its child replays it to the
// same r_invoke_v1, which waits for the child already started rather than starting another; a
// child that ended while the parent was not suspended hands over its outcome when the parent parks
// again. r_await_all takes the mixed promises of a workflow (a timer and a child).
func TestWorkflowResumeWhileChildRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("slow_double", "def main(ctx, input):\n    return {\"n\": input.n * 2}\n", func(b map[string]any) {
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"sync", "async"}, "default": "async"}
	})
	e.workflow("parent", `
def main(ctx, input):
    t, c = r_await_all([r_sleep(10), r_invoke_v1("`+fnPrefix+`slow_double.v1~", {"n": 21})])
    return {"timer": t, "n": c.value["n"], "now": r_now_v1()}
`)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "parent.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	id := st.Record.ID
	// Run the parent alone (the child is queued after it): sleep, then park on the child.
	claimOne := func() {
		claimed, err := e.claimerOf(e.svc).Claim(context.Background(), 1)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		e.svc.Runner().Run(context.Background(), claimed[0])
	}
	claimOne()
	e.clock.Advance(10 * time.Millisecond)
	claimOne()
	get := func(id string) invocation.Record {
		r, err := e.svc.Get(context.Background(), bob, id)
		require.NoError(t, err)
		return r
	}
	require.Equal(t, invocation.StatusSuspended, get(id).Status)
	_, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionResume)
	require.NoError(t, err)
	e.Drain()
	r := get(id)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	require.JSONEq(t, `{"timer": null, "n": 42, "now": "2026-03-01T12:00:00.010Z"}`, string(r.Result))
	page, err := e.svc.List(context.Background(), bob, store.ListQuery{})
	require.NoError(t, err)
	children := 0
	for _, rec := range page.Items {
		if rec.ParentID == id {
			children++
		}
	}
	require.Equal(t, 1, children, "the resumed workflow waits for its child; it does not start another")
}
