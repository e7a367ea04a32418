package invoke_test

// r_emit_v1 through the outbox: an emitted event is published by the write that commits what
// emitted it (a function attempt's successful outcome, a workflow's journal entry), exactly once,
// and reaches waiting workflows like a published one.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/store"
)

const shippedType = "gts.x.core.events.event.v1~vendor.app.orders.shipped.v1~"

// publishedEvents lists the tenant's events, oldest first.
func (e *env) publishedEvents() []events.Event {
	e.t.Helper()
	page, err := e.store.ListEvents(context.Background(), bob.TenantID, store.ListQuery{Limit: 1000})
	require.NoError(e.t, err)
	out := page.Items
	slices.SortFunc(out, func(a, b events.Event) int { return int(a.Seq - b.Seq) })
	return out
}

// timelineOf renders an invocation's timeline.
func (e *env) timelineOf(id string) []api.TimelineEvent {
	e.t.Helper()
	_, evs, err := e.svc.Events(context.Background(), dev, id)
	require.NoError(e.t, err)
	return api.Timeline(evs)
}

func TestEmitFunctionPublishesWithItsOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("ship", `
def main(ctx, input):
    r_emit_v1("`+shippedType+`", {"order_id": input.order_id, "lines": [1, 2]})
    r_emit_v1("`+shippedType+`", None)
    return {"ok": True}
`, nil)
	ctx := obs.WithCorrelationID(context.Background(), "corr-42")
	st, err := e.svc.Start(ctx, bob, invoke.StartRequest{EntrypointID: fnPrefix + "ship.v1~", Params: json.RawMessage(`{"order_id":"o-1"}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, st.Record.Status)
	id := st.Record.ID

	evs := e.publishedEvents()
	require.Len(t, evs, 2)
	require.Equal(t, id+".a1.e0", evs[0].ID, "the id is derived from the invocation, attempt and index")
	require.Equal(t, id+".a1.e1", evs[1].ID)
	require.Equal(t, shippedType, evs[0].TypeID)
	require.JSONEq(t, `{"order_id":"o-1","lines":[1,2]}`, string(evs[0].Payload))
	require.JSONEq(t, `{}`, string(evs[1].Payload))
	require.Equal(t, "lark://invocations/"+id, evs[0].Source)
	require.Equal(t, "bob", evs[0].PublishedBy, "published on behalf of the invocation's starter")
	require.Equal(t, "corr-42", evs[0].CorrelationID)

	// The timeline records each event, by id and type, not its payload.
	var emitted []api.TimelineEvent
	for _, ev := range e.timelineOf(id) {
		if ev.EventType == "event_emitted" {
			emitted = append(emitted, ev)
		}
	}
	require.Len(t, emitted, 2)
	require.JSONEq(t, fmt.Sprintf(`{"event_id":%q,"event_type_id":%q,"payload_bytes":%d}`, evs[0].ID, shippedType, len(evs[0].Payload)), string(emitted[0].Details))
	require.Equal(t, []string{"created", "started", "event_emitted", "event_emitted", "succeeded"}, e.timelineTypes(id))
}

func TestEmitFailedAttemptPublishesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	retryingFn(e, "flaky_ship", `
def main(ctx, input):
    r_emit_v1("`+shippedType+`", {"attempt": ctx.attempt})
    if ctx.attempt == 1:
        fail("not yet")
    return 1
`, map[string]any{"max_attempts": 2, "initial_delay_ms": 1000})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "flaky_ship.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, e.Drain())
	require.Empty(t, e.publishedEvents(), "the failed attempt's event is dropped")
	require.NotContains(t, e.timelineTypes(st.Record.ID), "event_emitted")
	e.clock.Advance(time.Second)
	require.Equal(t, 1, e.Drain())
	evs := e.publishedEvents()
	require.Len(t, evs, 1)
	require.Equal(t, st.Record.ID+".a2.e0", evs[0].ID)
	require.JSONEq(t, `{"attempt":2}`, string(evs[0].Payload))
}

// TestEmitLateResultPublishesNothing: a runner that lost its lease finishes late: its outcome is
// recorded as late_result and its events are not published; the runner that holds the lease
// publishes them, once.
func TestEmitLateResultPublishesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("late_ship", `
def main(ctx, input):
    r_emit_v1("`+shippedType+`", {"n": 1})
    return 1
`, func(b map[string]any) {
		b["traits"].(map[string]any)["limits"] = map[string]any{"timeout_seconds": 2}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "late_ship.v1~", Mode: "async"}, invoke.StartOptions{})
	require.NoError(t, err)
	claimed, err := e.claimerOf(e.svc).Claim(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	cfgB := e.cfg
	cfgB.Node = "node-b"
	b := invoke.NewService(cfgB)
	t.Cleanup(b.Close)
	e.clock.Advance(32 * time.Second)
	claimedB, err := e.claimerOf(b).Claim(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, claimedB, 1)
	e.svc.Runner().Run(context.Background(), claimed[0]) // the old runner finishes late, before the new one
	require.Empty(t, e.publishedEvents(), "an outcome that is not applied publishes nothing")
	b.Runner().Run(context.Background(), claimedB[0])
	require.Equal(t, []string{"created", "started", "reclaimed", "late_result", "event_emitted", "succeeded"}, e.timelineTypes(st.Record.ID))
	evs := e.publishedEvents()
	require.Len(t, evs, 1)
	require.Equal(t, st.Record.ID+".a1.e0", evs[0].ID)
}

// waiter is a workflow that waits for an order's shipment and returns the event's payload.
const waiter = `
def main(ctx, input):
    ev = r_await(r_wait_event_v1("` + shippedType + `", event_filter_query='payload.order_id == "' + input.order_id + '"', timeout_ms=3600000))
    return {"got": ev.value["payload"], "event_id": ev.value["event_id"]}
`

func TestEmittedEventsReachWaitingWorkflows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workflow("await_shipment", waiter)
	e.fn("ship_now", `
def main(ctx, input):
    r_emit_v1("`+shippedType+`", {"order_id": input.order_id, "by": "function"})
    return 1
`, nil)
	e.workflow("ship_flow", `
def ship(ctx, order_id):
    r_emit_v1("`+shippedType+`", {"order_id": order_id, "by": "step"})
    return order_id

def main(ctx, input):
    r_run_step_v1("ship", ship, input.order_id)
    r_emit_v1("`+shippedType+`", {"order_id": input.order_id + "-b", "by": "workflow"})
    return 1
`)
	start := func(ep, order string) string {
		st, err := e.start(bob, invoke.StartRequest{EntrypointID: ep, Mode: "async", Params: json.RawMessage(`{"order_id":"` + order + `"}`)}, invoke.StartOptions{})
		require.NoError(t, err)
		return st.Record.ID
	}
	a := start(wfPrefix+"await_shipment.v1~", "o-1")
	b := start(wfPrefix+"await_shipment.v1~", "o-2")
	c := start(wfPrefix+"await_shipment.v1~", "o-2-b")
	require.Equal(t, 3, e.Drain())
	for _, id := range []string{a, b, c} {
		r, err := e.svc.Get(context.Background(), bob, id)
		require.NoError(t, err)
		require.Equal(t, invocation.StatusSuspended, r.Status)
	}

	// A function emits: the workflow waiting for o-1 completes with that event.
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "ship_now.v1~", Params: json.RawMessage(`{"order_id":"o-1"}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, st.Record.Status)
	require.Equal(t, 1, e.Drain())
	r, err := e.svc.Get(context.Background(), bob, a)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	require.JSONEq(t, `{"got":{"order_id":"o-1","by":"function"},"event_id":"`+st.Record.ID+`.a1.e0"}`, string(r.Result))

	// A workflow emits from a step and from its own code: both waiting workflows complete.
	start(wfPrefix+"ship_flow.v1~", "o-2")
	e.Drain()
	for id, by := range map[string]string{b: "step", c: "workflow"} {
		r, err := e.svc.Get(context.Background(), bob, id)
		require.NoError(t, err)
		require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
		var out struct{ Got map[string]any }
		require.NoError(t, json.Unmarshal(r.Result, &out))
		require.Equal(t, by, out.Got["by"])
	}
	require.Len(t, e.publishedEvents(), 3)
}

// TestEmitWorkflowReplayPublishesOnce: a workflow that emits, suspends and resumes replays its
// journal without publishing again; each emit is one row of the events table.
func TestEmitWorkflowReplayPublishesOnce(t *testing.T) {
	t.Parallel()
	for _, strategy := range []string{"automatic", "disabled"} {
		t.Run(strategy, func(t *testing.T) {
			e := newEnv(t)
			e.workflow("emit_sleep", `
def pack(ctx, x):
    r_emit_v1("`+shippedType+`", {"where": "step", "x": x})
    return x

def main(ctx, input):
    r_emit_v1("`+shippedType+`", {"where": "before"})
    r_run_step_v1("pack", pack, 1)
    r_sleep(60000)
    r_emit_v1("`+shippedType+`", {"where": "after"})
    return "done"
`, func(b map[string]any) {
				b["traits"].(map[string]any)["workflow"].(map[string]any)["checkpointing"] = map[string]any{"strategy": strategy}
			})
			st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "emit_sleep.v1~", Mode: "async"}, invoke.StartOptions{})
			require.NoError(t, err)
			id := st.Record.ID
			require.Equal(t, 1, e.Drain())
			r, err := e.svc.Get(context.Background(), bob, id)
			require.NoError(t, err)
			require.Equal(t, invocation.StatusSuspended, r.Status)
			evs := e.publishedEvents()
			require.Len(t, evs, 2, "published with the journal writes before the park")
			require.Equal(t, id+".a1.journal-0.e0", evs[0].ID)
			require.Equal(t, id+".a1.journal-1.e0", evs[1].ID)

			e.clock.Advance(time.Minute)
			require.Equal(t, 1, e.Drain())
			r, err = e.svc.Get(context.Background(), bob, id)
			require.NoError(t, err)
			require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
			evs = e.publishedEvents()
			require.Len(t, evs, 3, "the replay published nothing again")
			var wheres []string
			for _, ev := range evs {
				var p struct{ Where string }
				require.NoError(t, json.Unmarshal(ev.Payload, &p))
				wheres = append(wheres, p.Where)
			}
			require.Equal(t, []string{"before", "step", "after"}, wheres)
			types := e.timelineTypes(id)
			n := 0
			for _, ty := range types {
				if ty == "event_emitted" {
					n++
				}
			}
			require.Equal(t, 3, n, "one timeline entry per event: %v", types)
		})
	}
}

// spyPublisher records what is published through the seam, storing events without delivering them.
type spyPublisher struct{ ids []string }

func (p *spyPublisher) PublishTx(tx store.Tx, ev events.Event, now time.Time) (events.Event, bool, error) {
	p.ids = append(p.ids, ev.ID)
	return tx.InsertEvent(ev)
}

func TestEmitGoesThroughConfiguredPublisher(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spy := &spyPublisher{}
	e.reconfigure(func(c *invoke.Config) { c.Publisher = spy })
	e.fn("ship_spy", `
def main(ctx, input):
    r_emit_v1("`+shippedType+`", {})
    return 1
`, nil)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "ship_spy.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{st.Record.ID + ".a1.e0"}, spy.ids)
	require.Len(t, e.publishedEvents(), 1)
}

// TestEmitWorkflowRetryReplaysWithoutPublishing: a workflow attempt that fails after a step emitted
// is retried; the next attempt replays the step from the journal and publishes nothing again.
func TestEmitWorkflowRetryReplaysWithoutPublishing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workflow("emit_retry", `
def pack(ctx, x):
    r_emit_v1("`+shippedType+`", {"packed": x})
    return x

def main(ctx, input):
    r_run_step_v1("pack", pack, 1)
    if ctx.attempt == 1:
        fail("the workflow's code broke after the step")
    return ctx.attempt
`, func(b map[string]any) {
		b["traits"].(map[string]any)["retry"] = map[string]any{"max_attempts": 2, "initial_delay_ms": 1000}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "emit_retry.v1~", Mode: "async"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, e.Drain())
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusQueued, r.Status, "retry scheduled")
	require.Len(t, e.publishedEvents(), 1, "the step's entry was recorded, and its event published with it")
	e.clock.Advance(time.Second)
	require.Equal(t, 1, e.Drain())
	r, err = e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	require.JSONEq(t, `2`, string(r.Result))
	evs := e.publishedEvents()
	require.Len(t, evs, 1, "the replayed step published nothing again")
	require.Equal(t, st.Record.ID+".a1.journal-0.e0", evs[0].ID)
}

// TestEmitAcrossContinueAsNew: each generation's positions give emits ids of their own.
func TestEmitAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.workflow("emit_generations", `
def main(ctx, input):
    r_emit_v1("`+shippedType+`", {"round": input.get("round", 0)})
    if input.get("round", 0) < 1:
        r_continue_as_new_v1({"round": 1})
    return "done"
`)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "emit_generations.v1~", Mode: "async"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, e.Drain())
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	evs := e.publishedEvents()
	require.Len(t, evs, 2)
	require.Equal(t, st.Record.ID+".a1.journal-0.e0", evs[0].ID)
	require.Equal(t, st.Record.ID+".a1.journal-1-0.e0", evs[1].ID)
	require.JSONEq(t, `{"round":1}`, string(evs[1].Payload))
}
