package invoke_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

const wfPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.orders."

// counter is an upstream that counts POSTs per "step" key.
type counter struct {
	mu   sync.Mutex
	hits map[string]int
}

func newCounter(t *testing.T) (*counter, string) {
	c := &counter{hits: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Step string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		c.mu.Lock()
		c.hits[body.Step]++
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.hits {
		out[k] = v
	}
	return out
}

func (e *env) workflow(name, source string, mutate ...func(map[string]any)) {
	e.t.Helper()
	e.fn(name, source, func(b map[string]any) {
		b["entrypoint_id"] = wfPrefix + name + ".v1~"
		tr := b["traits"].(map[string]any)
		tr["invocation"] = map[string]any{"supported": []any{"async", "sync"}, "default": "async"}
		tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
			"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30}
		for _, m := range mutate {
			m(b)
		}
	})
}

// TestWorkflowStepsAndDurableSleep: completed steps are journaled and never re-run on replay; a
// sleep suspends the workflow (no goroutine held) and the queue wakes it on time.
func TestWorkflowStepsAndDurableSleep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, url := newCounter(t)
	src := `
def effect(ctx, input):
    return r_await(r_http_post_v1("` + url + `", {"step": input}, timeout_ms=2000)).response.body

def main(ctx, input):
    a = r_run_step_v1("reserve", effect, "reserve")
    b = r_run_step_v1("charge", effect, "charge")
    r_sleep(60000)
    c = r_run_step_v1("ship", effect, "ship")
    return {"steps": [a.ok, b.ok, c.ok], "at": r_now_v1()}
`
	e.workflow("process", src)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "process.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	id := st.Record.ID
	require.Equal(t, 1, e.Drain())
	r, err := e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSuspended, r.Status, "parked on the timer")
	require.Equal(t, map[string]int{"reserve": 1, "charge": 1}, c.snapshot())
	require.Zero(t, e.Drain(), "not before its time")
	due, err := e.store.NextDue(context.Background(), time.Time{})
	require.NoError(t, err)
	require.Equal(t, e.clock.Now().Add(time.Minute), *due)

	e.clock.Advance(time.Minute)
	require.Equal(t, 1, e.Drain(), "woken on time")
	r, err = e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	require.Equal(t, map[string]int{"reserve": 1, "charge": 1, "ship": 1}, c.snapshot(), "replay did not repeat completed steps")
	var out struct {
		Steps []bool
		At    string
	}
	require.NoError(t, json.Unmarshal(r.Result, &out))
	require.Equal(t, []bool{true, true, true}, out.Steps)
	types := strings.Join(e.timelineTypes(id), ",")
	require.Contains(t, types, "started,step_started,http_call,step_completed,step_started,http_call,step_completed,journal,suspended,resumed")
	require.Contains(t, types, "http_call,step_completed,journal,succeeded")
}

// TestWorkflowCompensation: when a step fails, the compensations of completed steps run in reverse
// completion order, each on the timeline, and the invocation fails.
func TestWorkflowCompensation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, url := newCounter(t)
	src := `
def do(ctx, input):
    return r_await(r_http_post_v1("` + url + `", {"step": input}, timeout_ms=2000)).response.body

def undo(ctx, input, output):
    r_await(r_http_post_v1("` + url + `", {"step": "undo-" + input}, timeout_ms=2000))

def broken(ctx, input):
    fail("shipping provider down")

reserve = r_step_v1("reserve", do, undo)
charge = r_step_v1("charge", do, undo)
ship = r_step_v1("ship", broken)

def main(ctx, input):
    reserve("reserve")
    charge("charge")
    ship("ship")
    return {"done": True}
`
	e.workflow("saga", src)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "saga.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	e.Drain()
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusDeadLettered, r.Status)
	require.Contains(t, r.Error.Message, "shipping provider down")
	require.Equal(t, map[string]int{"reserve": 1, "charge": 1, "undo-charge": 1, "undo-reserve": 1}, c.snapshot())
	_, evs, err := e.svc.Events(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	var order []string
	for _, te := range api.Timeline(evs) {
		if te.EventType == "compensation_completed" {
			order = append(order, *te.StepName)
		}
	}
	require.Equal(t, []string{"charge", "reserve"}, order, "reverse completion order")
}

// TestWorkflowSuspendResume: suspend stops a running workflow (its in-flight outcome is recorded,
// not applied); resume replays it, repeating only the step that was in flight; other states answer 409.
func TestWorkflowSuspendResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	hits := map[string]int{}
	entered := make(chan string, 10)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Step string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		hits[body.Step]++
		n := hits[body.Step]
		mu.Unlock()
		if body.Step == "slow" && n == 1 {
			entered <- body.Step
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	src := `
def effect(ctx, input):
    return r_await(r_http_post_v1("` + srv.URL + `", {"step": input}, timeout_ms=15000)).response.status_code

def main(ctx, input):
    r_run_step_v1("fast", effect, "fast")
    r_run_step_v1("slow", effect, "slow")
    return {"done": True}
`
	e.workflow("pausable", src)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "pausable.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	id := st.Record.ID
	_, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionResume)
	require.Equal(t, 409, problem.From(err).Status, "resume from queued")
	_, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionSuspend)
	require.Equal(t, 409, problem.From(err).Status, "suspend from queued")

	done := make(chan struct{})
	go func() { e.Drain(); close(done) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow step never started")
	}
	r, _, err := e.svc.Control(context.Background(), bob, id, invoke.ActionSuspend)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSuspended, r.Status)
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the suspended run did not end")
	}
	r, err = e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSuspended, r.Status, "the late outcome was not applied")
	_, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionSuspend)
	require.Equal(t, 409, problem.From(err).Status, "suspend from suspended")

	_, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionResume)
	require.NoError(t, err)
	e.Drain()
	r, err = e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	mu.Lock()
	require.Equal(t, map[string]int{"fast": 1, "slow": 2}, hits, "only the step in flight ran again")
	mu.Unlock()
	types := strings.Join(e.timelineTypes(id), ",")
	require.Contains(t, types, "suspended")
	require.Contains(t, types, "late_result")
	require.Contains(t, types, "signal_received")
	require.Contains(t, types, "resumed")

	// Cancel from suspended (parked on a timer): it never wakes.
	e.workflow("sleeper", "def main(ctx, input):\n    r_sleep(60000)\n    return {}\n")
	st2, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "sleeper.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	e.Drain()
	r, err = e.svc.Get(context.Background(), bob, st2.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSuspended, r.Status)
	r, _, err = e.svc.Control(context.Background(), bob, st2.Record.ID, invoke.ActionCancel)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, r.Status)
	require.Equal(t, 1, e.Drain(), "the cancel queues one compensation run (nothing to compensate here)")
	e.clock.Advance(2 * time.Minute)
	require.Zero(t, e.Drain(), "a canceled workflow's timer does not wake it")
	r, err = e.svc.Get(context.Background(), bob, st2.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, r.Status)
}

// TestWorkflowAwaitsChild: r_invoke_v1 outside a step suspends the parent until the child (a real,
// linked async invocation) ends; its outcome resumes the parent. A call that cannot start resolves as
// an error result instead of failing the workflow.
func TestWorkflowAwaitsChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("double", "def main(ctx, input):\n  return {\"doubled\": input.n * 2}\n", func(b map[string]any) {
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async", "sync"}, "default": "async"}
	})
	e.workflow("parent", `
def main(ctx, input):
    r = r_await(r_invoke_v1("`+fnPrefix+`double.v1~", {"n": 21}))
    bad = r_await(r_invoke_v1("`+fnPrefix+`missing.v1~", {}))
    return {"v": r.value["doubled"], "ok": r.ok, "bad_ok": bad.ok, "bad": bad.error.message}
`)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "parent.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	claimed, err := e.claimerOf(e.svc).Claim(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	e.svc.Runner().Run(context.Background(), claimed[0])
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSuspended, r.Status, "waiting for its child")
	e.Drain()
	r, err = e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	var out struct {
		V     int
		OK    bool
		BadOK bool   `json:"bad_ok"`
		Bad   string `json:"bad"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &out))
	require.Equal(t, 42, out.V)
	require.True(t, out.OK)
	require.False(t, out.BadOK)
	require.Contains(t, out.Bad, "not found")
	page, err := e.svc.List(context.Background(), bob, store.ListQuery{})
	require.NoError(t, err)
	var children int
	for _, rec := range page.Items {
		if rec.ParentID == st.Record.ID {
			children++
			require.Equal(t, invocation.StatusSucceeded, rec.Status)
		}
	}
	require.Equal(t, 1, children, "the child is a real, linked invocation")
}

// TestWorkflowOnFailureCompensation: 000's process_order with rollback_order — a workflow that
// fails finally goes failed → compensating, its on_failure handler runs with a CompensationContext
// (validated against the built-in schema by the handler's params), then compensated.
func TestWorkflowOnFailureCompensation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("rollback_order", `
def main(ctx, input):
    ctx.log("rolling back", step=input.failed_step_id)
    return {"rolled_back": input.workflow_state_snapshot["completed_steps"], "trigger": input.trigger,
            "original": input.original_workflow_invocation_id, "order": input.invocation_metadata.original_input["order_id"]}
`, func(b map[string]any) {
		b["schema"] = map[string]any{"params": map[string]any{"$ref": "gts://gts.x.core.serverless.compensation_context.v1~"}}
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async", "sync"}, "default": "async"}
	})
	src := `
def ok(ctx, input):
    return {"id": input}

def broken(ctx, input):
    fail("shipping provider returned 503")

def main(ctx, input):
    r_run_step_v1("reserve_inventory", ok, "RSV-1")
    r_run_step_v1("charge_payment", ok, "TXN-1")
    r_run_step_v1("create_shipping_label", broken, input.order_id)
    return {"status": "completed"}
`
	e.fn("process_order", src, func(b map[string]any) {
		b["entrypoint_id"] = wfPrefix + "process_order.v1~"
		tr := b["traits"].(map[string]any)
		tr["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
		tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": fnPrefix + "rollback_order.v1~", "on_cancel": nil},
			"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "process_order.v1~", Params: json.RawMessage(`{"order_id": "ORD-9182"}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	claimed, err := e.claimerOf(e.svc).Claim(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	e.svc.Runner().Run(context.Background(), claimed[0])
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCompensating, r.Status)
	e.Drain()
	r, err = e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCompensated, r.Status)
	types := strings.Join(e.timelineTypes(st.Record.ID), ",")
	require.Contains(t, types, "step_failed,failed,compensation_started,compensation_completed")

	page, err := e.svc.List(context.Background(), bob, store.ListQuery{})
	require.NoError(t, err)
	var handler invocation.Record
	for _, rec := range page.Items {
		if rec.CompensationFor == st.Record.ID {
			handler = rec
		}
	}
	require.Equal(t, invocation.StatusSucceeded, handler.Status, handler.Error)
	var out struct {
		RolledBack []string `json:"rolled_back"`
		Trigger    string
		Original   string
		Order      string
	}
	require.NoError(t, json.Unmarshal(handler.Result, &out))
	require.Equal(t, []string{"reserve_inventory", "charge_payment"}, out.RolledBack)
	require.Equal(t, "failure", out.Trigger)
	require.Equal(t, st.Record.ID, out.Original)
	require.Equal(t, "ORD-9182", out.Order)
	var ctxIn map[string]any
	require.NoError(t, json.Unmarshal(handler.Params, &ctxIn))
	require.Equal(t, "create_shipping_label", ctxIn["failed_step_id"])

	// A plain sync call holds its start and journal until it ends (hold.go): the handler still gets
	// the steps that automatic checkpointing made durable, written with the failure.
	e.fn("process_order_sync", src, func(b map[string]any) {
		b["entrypoint_id"] = wfPrefix + "process_order_sync.v1~"
		tr := b["traits"].(map[string]any)
		tr["invocation"] = map[string]any{"supported": []any{"sync"}, "default": "sync"}
		tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": fnPrefix + "rollback_order.v1~", "on_cancel": nil},
			"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30}
	})
	done := make(chan invoke.Started, 1)
	go func() {
		st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "process_order_sync.v1~", Params: json.RawMessage(`{"order_id": "ORD-2"}`)}, invoke.StartOptions{})
		assert.NoError(t, err)
		done <- st
	}()
	var syncSt invoke.Started
	for waiting := true; waiting; {
		e.Drain()
		select {
		case syncSt = <-done:
			waiting = false
		case <-time.After(10 * time.Millisecond):
		}
	}
	require.Equal(t, invocation.StatusCompensated, syncSt.Record.Status, syncSt.Record.Error)
	page, err = e.svc.List(context.Background(), bob, store.ListQuery{})
	require.NoError(t, err)
	for _, rec := range page.Items {
		if rec.CompensationFor == syncSt.Record.ID {
			require.NoError(t, json.Unmarshal(rec.Result, &out))
			require.Equal(t, []string{"reserve_inventory", "charge_payment"}, out.RolledBack)
			return
		}
	}
	t.Fatal("no compensation handler for the sync call")
}

// TestWorkflowOnCancelCompensation: canceling a workflow with on_cancel moves it to compensating in
// the same transaction; the handler gets trigger "cancellation" and the completed steps.
func TestWorkflowOnCancelCompensation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("undo_order", `
def main(ctx, input):
    return {"trigger": input.trigger, "steps": input.workflow_state_snapshot["completed_steps"]}
`, func(b map[string]any) {
		b["schema"] = map[string]any{"params": map[string]any{"$ref": "gts://gts.x.core.serverless.compensation_context.v1~"}}
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async", "sync"}, "default": "async"}
	})
	e.fn("waiting_order", `
def ok(ctx, input):
    return input

def main(ctx, input):
    r_run_step_v1("reserve", ok, "R-1")
    r_sleep(3600000)
    return {}
`, func(b map[string]any) {
		b["entrypoint_id"] = wfPrefix + "waiting_order.v1~"
		tr := b["traits"].(map[string]any)
		tr["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
		tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": fnPrefix + "undo_order.v1~"},
			"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "waiting_order.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	e.Drain()
	r, _, err := e.svc.Control(context.Background(), bob, st.Record.ID, invoke.ActionCancel)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCompensating, r.Status, "canceled and compensating in one step")
	e.Drain()
	r, err = e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCompensated, r.Status)
	page, err := e.svc.List(context.Background(), bob, store.ListQuery{})
	require.NoError(t, err)
	found := false
	for _, rec := range page.Items {
		if rec.CompensationFor == st.Record.ID {
			found = true
			require.JSONEq(t, `{"trigger":"cancellation","steps":["reserve"]}`, string(rec.Result))
		}
	}
	require.True(t, found)
	require.Contains(t, strings.Join(e.timelineTypes(st.Record.ID), ","), "canceled,compensation_started,compensation_completed")
}

// TestWorkflowMaxSuspension: a workflow suspended longer than max_suspension_days fails with the
// timeout error (000: suspended → failed on suspension timeout).
func TestWorkflowMaxSuspension(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("long_wait", "def main(ctx, input):\n    r_sleep(2 * 24 * 3600 * 1000)\n    return {}\n", func(b map[string]any) {
		b["entrypoint_id"] = wfPrefix + "long_wait.v1~"
		tr := b["traits"].(map[string]any)
		tr["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
		tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
			"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 1}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "long_wait.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	e.Drain()
	due, err := e.store.NextDue(context.Background(), time.Time{})
	require.NoError(t, err)
	require.Equal(t, e.clock.Now().Add(24*time.Hour), *due, "woken at the suspension deadline, before the 2-day timer")
	e.clock.Advance(24 * time.Hour)
	e.Drain()
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusDeadLettered, r.Status)
	require.Equal(t, "gts.x.core.serverless.err.v1~x.core.serverless.err.timeout.v1~", r.Error.TypeID)
	require.Contains(t, r.Error.Message, "max_suspension_days")
}

// TestWorkflowStepRetries: a failing step is retried with the entrypoint's retry policy; each
// retry's backoff is a durable timer (the workflow is suspended meanwhile, and a replay resumes at
// the same attempt), each retry a step_retried timeline entry; the step sees its attempt and a
// stable 003 idempotency key. Live (the execution waits in memory) and replayed alike.
func TestWorkflowStepRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		liveWait time.Duration
	}{{"live", 0}, {"replay", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.liveWait != 0 {
				e.reconfigure(func(c *invoke.Config) { c.LiveWait = tc.liveWait })
			}
			var mu sync.Mutex
			calls := 0
			keys := map[string]bool{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body struct{ Key string }
				_ = json.NewDecoder(r.Body).Decode(&body)
				mu.Lock()
				calls++
				n := calls
				keys[body.Key] = true
				mu.Unlock()
				if n < 3 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.Write([]byte(`{"ok":true}`))
			}))
			t.Cleanup(srv.Close)
			callCount := func() int { mu.Lock(); defer mu.Unlock(); return calls }
			e.fn("flaky_wf", `
def call(ctx, input):
    r = r_await(r_http_post_v1("`+srv.URL+`", {"key": ctx.idempotency_key}, timeout_ms=2000, exit_on_http_error=False))
    if not r.ok or r.response.status_code != 200:
        fail("upstream unavailable")
    return {"attempt": ctx.step_attempt, "step": ctx.step_name}

def main(ctx, input):
    ctx.log("main started")
    return r_run_step_v1("call", call, 1).value
`, func(b map[string]any) {
				b["entrypoint_id"] = wfPrefix + "flaky_wf.v1~"
				tr := b["traits"].(map[string]any)
				tr["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
				tr["retry"] = map[string]any{"max_attempts": 3, "initial_delay_ms": 1000, "max_delay_ms": 60000, "backoff_multiplier": 2.0}
				tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
					"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30}
			})
			st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "flaky_wf.v1~"}, invoke.StartOptions{})
			require.NoError(t, err)
			id := st.Record.ID
			status := func() invocation.Record {
				r, err := e.svc.Get(context.Background(), bob, id)
				require.NoError(t, err)
				return r
			}
			due := func() time.Duration {
				d, err := e.store.NextDue(context.Background(), time.Time{})
				require.NoError(t, err)
				require.NotNil(t, d)
				return d.Sub(e.clock.Now())
			}
			e.Drain()
			require.Equal(t, invocation.StatusSuspended, status().Status, "waiting out the first backoff, durably")
			require.Equal(t, 1, callCount())
			require.Equal(t, time.Second, due(), "the first retry is due after initial_delay_ms")
			e.clock.Advance(999 * time.Millisecond)
			e.Drain()
			require.Equal(t, 1, callCount(), "not before the backoff has passed")
			e.clock.Advance(time.Millisecond)
			e.Drain()
			require.Equal(t, 2, callCount())
			require.Equal(t, invocation.StatusSuspended, status().Status)
			require.Equal(t, 2*time.Second, due(), "the second backoff doubles")
			e.clock.Advance(2 * time.Second)
			e.Drain()
			r := status()
			require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
			require.JSONEq(t, `{"attempt": 3, "step": "call"}`, string(r.Result), "the attempt count survives the parks")
			require.Equal(t, 3, callCount())
			require.Len(t, keys, 1, "the step's idempotency key is the same on every attempt")
			require.Equal(t, 1, r.Attempt, "step retries do not consume the invocation's attempts")
			types := strings.Join(e.timelineTypes(id), ",")
			require.Contains(t, strings.ReplaceAll(types, "log,", ""), "step_started,http_call,step_retried,journal,suspended,resumed,journal_resolved,"+
				"step_started,http_call,step_retried,journal,suspended,resumed,journal_resolved,step_started,http_call,step_completed,succeeded")
			starts := strings.Count(types, "log")
			if tc.liveWait < 0 {
				require.Equal(t, 3, starts, "each activation replays")
			} else {
				require.Equal(t, 1, starts, "the execution stays live across the backoffs")
			}
		})
	}
}

// TestWorkflowCheckpointing: which completed steps survive a run cut short (here by suspend, which
// takes the lease away like a crash) depends on checkpointing.strategy: automatic — all of them;
// manual — those before the last r_snapshot_v1; disabled — none (the run starts over).
func TestWorkflowCheckpointing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		strategy string
		want     map[string]int
	}{
		{"automatic", map[string]int{"s1": 1, "s2": 1, "s3": 2, "s4": 1}},
		{"manual", map[string]int{"s1": 1, "s2": 1, "s3": 2, "s4": 1}},
		{"disabled", map[string]int{"s1": 2, "s2": 2, "s3": 2, "s4": 1}},
	} {
		t.Run(c.strategy, func(t *testing.T) {
			e := newEnv(t)
			var mu sync.Mutex
			hits := map[string]int{}
			entered := make(chan struct{}, 4)
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body struct{ Step string }
				_ = json.NewDecoder(r.Body).Decode(&body)
				mu.Lock()
				hits[body.Step]++
				n := hits[body.Step]
				mu.Unlock()
				if body.Step == "s3" && n == 1 {
					entered <- struct{}{}
					select {
					case <-release:
					case <-time.After(10 * time.Second):
					}
				}
				w.Write([]byte(`{"ok":true}`))
			}))
			t.Cleanup(srv.Close)
			name := "cp_" + c.strategy
			e.fn(name, `
def effect(ctx, input):
    return r_await(r_http_post_v1("`+srv.URL+`", {"step": input}, timeout_ms=15000)).response.status_code

def main(ctx, input):
    r_run_step_v1("s1", effect, "s1")
    r_run_step_v1("s2", effect, "s2")
    r_snapshot_v1("after-s2")
    r_run_step_v1("s3", effect, "s3")
    r_run_step_v1("s4", effect, "s4")
    return {"done": True}
`, func(b map[string]any) {
				b["entrypoint_id"] = wfPrefix + name + ".v1~"
				tr := b["traits"].(map[string]any)
				tr["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
				tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
					"checkpointing": map[string]any{"strategy": c.strategy}, "max_suspension_days": 30}
			})
			st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + name + ".v1~"}, invoke.StartOptions{})
			require.NoError(t, err)
			done := make(chan struct{})
			go func() { e.Drain(); close(done) }()
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("s3 never started")
			}
			_, _, err = e.svc.Control(context.Background(), bob, st.Record.ID, invoke.ActionSuspend)
			require.NoError(t, err)
			close(release)
			<-done
			_, _, err = e.svc.Control(context.Background(), bob, st.Record.ID, invoke.ActionResume)
			require.NoError(t, err)
			e.Drain()
			r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
			require.NoError(t, err)
			require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, c.want, hits)
		})
	}
}

// TestWorkflowCancelCompensates: cancel runs the compensate_fn of every completed r_step_v1 step,
// in reverse completion order, exactly once — from suspended (a replay that stops at the pending
// timer) and from running (the canceled run does not compensate; the compensation run does, and it
// never re-runs a step). Suspending a running workflow compensates nothing.
func TestWorkflowCancelCompensates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	var calls []string
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Step string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		calls = append(calls, body.Step)
		mu.Unlock()
		if body.Step == "block" {
			entered <- struct{}{}
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
	src := `
def post(step):
    r_await(r_http_post_v1("` + srv.URL + `", {"step": step}, timeout_ms=15000))

def do(ctx, input):
    post(input)
    return {"id": input}

def undo(ctx, input, output):
    post("undo-" + output["id"])

def main(ctx, input):
    a = r_step_v1("a", do, compensate_fn=undo)
    b = r_step_v1("b", do, compensate_fn=undo)
    a("a")
    b("b")
    if input.block:
        r_run_step_v1("blocking", do, "block")
    r_sleep(60000)
    return {}
`
	e.workflow("cancellable", src)
	start := func(block bool) string {
		st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "cancellable.v1~", Params: json.RawMessage(`{"block": ` + map[bool]string{true: "true", false: "false"}[block] + `}`)}, invoke.StartOptions{})
		require.NoError(t, err)
		return st.Record.ID
	}

	// From suspended.
	id := start(false)
	e.Drain()
	r, err := e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSuspended, r.Status)
	require.Equal(t, []string{"a", "b"}, got())
	r, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionCancel)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, r.Status)
	require.Equal(t, 1, e.Drain())
	require.Equal(t, []string{"a", "b", "undo-b", "undo-a"}, got(), "reverse completion order, no step repeated")
	r, err = e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, r.Status)
	types := strings.Join(e.timelineTypes(id), ",")
	require.Contains(t, types, "canceled,compensation_started,http_call,compensation_completed,compensation_started,http_call,compensation_completed")
	e.clock.Advance(2 * time.Minute)
	require.Zero(t, e.Drain(), "nothing more runs")

	// Suspend while running compensates nothing; cancel while running compensates once.
	mu.Lock()
	calls = nil
	mu.Unlock()
	id = start(true)
	done := make(chan struct{})
	go func() { e.Drain(); close(done) }()
	<-entered
	_, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionSuspend)
	require.NoError(t, err)
	release <- struct{}{}
	<-done
	require.Equal(t, []string{"a", "b", "block"}, got(), "suspend does not compensate")
	_, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionResume)
	require.NoError(t, err)
	done = make(chan struct{})
	go func() { e.Drain(); close(done) }()
	<-entered
	r, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionCancel)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, r.Status)
	release <- struct{}{}
	<-done
	e.Drain()
	require.Equal(t, []string{"a", "b", "block", "block", "undo-b", "undo-a"}, got(),
		"the canceled run's in-flight step is not journaled, so it is not compensated; completed steps are, once")
	r, err = e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, r.Status)
}

// TestWorkflowStaysLive: while the invocation stays on this process, a workflow that suspends on a
// short timer and on a child continues in memory when it is claimed again: main's code before the
// waits runs once (one "main started" log). With live waits off, each activation replays (three).
// Either way the suspensions are durable and the result is the same.
func TestWorkflowStaysLive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		liveWait time.Duration
		starts   int
	}{{"live", 0, 1}, {"replay", -1, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.liveWait != 0 {
				e.reconfigure(func(c *invoke.Config) { c.LiveWait = tc.liveWait })
			}
			e.fn("double", "def main(ctx, input):\n    return {\"n\": input.n * 2}\n", func(b map[string]any) {
				b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"sync", "async"}, "default": "async"}
			})
			e.workflow("live", `
def main(ctx, input):
    ctx.log("main started")
    r_sleep(1000)
    c = r_await(r_invoke_v1("`+fnPrefix+`double.v1~", {"n": 21}))
    return {"n": c.value["n"], "at": r_now_v1()}
`)
			st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "live.v1~"}, invoke.StartOptions{})
			require.NoError(t, err)
			id := st.Record.ID
			e.Drain()
			r, err := e.svc.Get(context.Background(), bob, id)
			require.NoError(t, err)
			require.Equal(t, invocation.StatusSuspended, r.Status)
			e.clock.Advance(time.Second)
			e.Drain() // the timer: resumed, then suspended on the child; the child runs; the parent ends
			r, err = e.svc.Get(context.Background(), bob, id)
			require.NoError(t, err)
			require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
			require.JSONEq(t, `{"n": 42, "at": "2026-03-01T12:00:01.000Z"}`, string(r.Result))
			_, evs, err := e.svc.Events(context.Background(), dev, id)
			require.NoError(t, err)
			starts := 0
			for _, ev := range api.Timeline(evs) {
				if ev.EventType == "log" && ev.Message != nil && *ev.Message == "main started" {
					starts++
				}
			}
			require.Equal(t, tc.starts, starts)
			if tc.starts == 1 {
				require.Equal(t, "created,started,log,journal,suspended,resumed,journal_resolved,journal,child_invoked,suspended,journal_resolved,resumed,journal,succeeded",
					strings.Join(e.timelineTypes(id), ","))
			}
		})
	}
}

// TestWorkflowCancelCompensatesBeforeHandler: a workflow with a slow step compensation and an
// on_cancel handler, canceled while suspended, stays compensating while the step compensation runs
// (the handler is held, not runnable), records the step compensation's outcome, then runs the
// handler and only then is compensated.
func TestWorkflowCancelCompensatesBeforeHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	var calls []string
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Step string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		calls = append(calls, body.Step)
		mu.Unlock()
		if body.Step == "undo-a" {
			entered <- struct{}{}
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
	e.fn("undo_slow", `
def main(ctx, input):
    r_await(r_http_post_v1("`+srv.URL+`", {"step": "handler"}, timeout_ms=15000))
    return {"trigger": input.trigger}
`, func(b map[string]any) {
		b["schema"] = map[string]any{"params": map[string]any{"$ref": "gts://gts.x.core.serverless.compensation_context.v1~"}}
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async", "sync"}, "default": "async"}
	})
	e.workflow("slow_undo", `
def post(step):
    r_await(r_http_post_v1("`+srv.URL+`", {"step": step}, timeout_ms=15000))

def do(ctx, input):
    post(input)
    return {"id": input}

def undo(ctx, input, output):
    post("undo-" + output["id"])

def main(ctx, input):
    r_step_v1("a", do, compensate_fn=undo)("a")
    r_sleep(3600000)
    return {}
`, func(b map[string]any) {
		b["traits"].(map[string]any)["workflow"].(map[string]any)["compensation"] = map[string]any{"on_failure": nil, "on_cancel": fnPrefix + "undo_slow.v1~"}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "slow_undo.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	e.Drain()
	id := st.Record.ID
	r, _, err := e.svc.Control(context.Background(), bob, id, invoke.ActionCancel)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCompensating, r.Status)

	claimed, err := e.claimerOf(e.svc).Claim(context.Background(), 16)
	require.NoError(t, err)
	require.Equal(t, 1, len(claimed), "only the step compensations are runnable: the handler waits for them")
	require.Equal(t, attempt.KindCompensate, claimed[0].Kind)
	done := make(chan struct{})
	go func() { e.svc.Runner().Run(context.Background(), claimed[0]); close(done) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the step compensation did not start")
	}
	more, err := e.claimerOf(e.svc).Claim(context.Background(), 16)
	require.NoError(t, err)
	require.Zero(t, len(more), "the handler is not runnable while a step compensation runs")
	r, err = e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCompensating, r.Status)
	close(release)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the compensation run did not end")
	}
	r, err = e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCompensating, r.Status, "the handler has not run yet")
	require.Equal(t, 1, e.Drain(), "the handler, released by the compensation run")
	r, err = e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCompensated, r.Status)
	require.Equal(t, []string{"a", "undo-a", "handler"}, got())
	types := strings.Join(e.timelineTypes(id), ",")
	require.Contains(t, types, "canceled,compensation_started,compensation_started,http_call,compensation_completed,compensation_completed",
		"the handler's start, the step compensation's start, its call and outcome, then the handler's outcome")
	_, evs, err := e.svc.Events(context.Background(), dev, id)
	require.NoError(t, err)
	var step invocation.StepCompensated
	for _, ev := range evs {
		if ev.Type == invocation.EventStepCompensated {
			require.NoError(t, json.Unmarshal(ev.Data, &step))
		}
	}
	require.Equal(t, "a", step.Step)
	require.True(t, step.OK)
}

// TestWorkflowHeldHandlerCanceled: an operator cancels the on_cancel handler while it is held for
// the step compensations; the workflow stays compensating until their run has recorded every
// outcome, and that run then ends it (compensation_failed: the handler did not succeed) instead of
// the handler's end clearing the lease the outcomes need.
func TestWorkflowHeldHandlerCanceled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"ok":true}`)) }))
	t.Cleanup(srv.Close)
	e.fn("undo_held", "def main(ctx, input):\n    return {}\n", func(b map[string]any) {
		b["schema"] = map[string]any{"params": map[string]any{"$ref": "gts://gts.x.core.serverless.compensation_context.v1~"}}
	})
	e.workflow("held_undo", `
def do(ctx, input):
    r_await(r_http_post_v1("`+srv.URL+`", {"step": input}, timeout_ms=5000))
    return {"id": input}

def undo(ctx, input, output):
    r_await(r_http_post_v1("`+srv.URL+`", {"step": "undo"}, timeout_ms=5000))

def main(ctx, input):
    r_step_v1("a", do, compensate_fn=undo)("a")
    r_sleep(3600000)
    return {}
`, func(b map[string]any) {
		b["traits"].(map[string]any)["workflow"].(map[string]any)["compensation"] = map[string]any{"on_failure": nil, "on_cancel": fnPrefix + "undo_held.v1~"}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "held_undo.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	e.Drain()
	id := st.Record.ID
	_, _, err = e.svc.Control(context.Background(), bob, id, invoke.ActionCancel)
	require.NoError(t, err)
	_, evs, err := e.svc.Events(context.Background(), dev, id)
	require.NoError(t, err)
	var handler string
	for _, ev := range evs {
		var cs invocation.CompensationStarted
		if ev.Type == invocation.EventCompensationStarted && json.Unmarshal(ev.Data, &cs) == nil && cs.HandlerInvocationID != "" {
			handler = cs.HandlerInvocationID
		}
	}
	require.NotEmpty(t, handler)
	_, _, err = e.svc.Control(context.Background(), bob, handler, invoke.ActionCancel)
	require.NoError(t, err)
	r, err := e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCompensating, r.Status, "the step compensations are still to run")

	e.Drain()
	r, err = e.svc.Get(context.Background(), bob, id)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusDeadLettered, r.Status, "ended by the step compensations' run: its handler was canceled")
	_, evs, err = e.svc.Events(context.Background(), dev, id)
	require.NoError(t, err)
	var step invocation.StepCompensated
	for _, ev := range evs {
		if ev.Type == invocation.EventStepCompensated {
			require.NoError(t, json.Unmarshal(ev.Data, &step))
		}
	}
	require.Equal(t, "a", step.Step, "the step compensation's outcome is recorded")
	require.True(t, step.OK)
}
