package api_test

// HTTP-level tests of durable workflows: 000's process_order with an on_failure handler, the
// suspend/resume/cancel matrix of :control on a parked workflow, and a workflow awaiting a child.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
)

// wfBody is a workflow registration named vendor.app.orders.<name> with source src.
func wfBody(t testing.TB, name, src string, mods ...func(obj)) obj {
	t.Helper()
	return workflow(t, wfPrefix+"vendor.app.orders."+name, append([]func(obj){
		source(src),
		set("schema.params", obj{"type": "object"}),
		set("schema.returns", obj{"type": "object"}),
		set("traits.invocation", obj{"supported": []any{"sync", "async"}, "default": "async"}),
		set("traits.retry", obj{"max_attempts": 1, "initial_delay_ms": 0, "max_delay_ms": 0, "backoff_multiplier": 1.0}),
		set("traits.limits", obj{"timeout_seconds": 10, "memory_mb": 128, "cpu": 1.0, "max_concurrent": 100}),
	}, mods...)...)
}

var wfTerminal = []string{"succeeded", "failed", "dead_lettered", "canceled", "compensated"}

func TestWorkflowsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.UnsafeEgressAllowLoopback = true })
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")

	t.Run("process_order with rollback_order", func(t *testing.T) {
		rb := e.registerActive(t, adm, invFn(t, "orders.rollback_order.v1~", `def main(ctx, input):
    return {"rolled_back": input.workflow_state_snapshot["completed_steps"], "trigger": input.trigger,
            "original": input.original_workflow_invocation_id}
`, set("schema.params", obj{"$ref": compensationRef}), set("traits.invocation", obj{"supported": []any{"sync", "async"}, "default": "async"})))
		rbID := rb["entrypoint_id"].(string)
		wf := e.registerActive(t, adm, wfBody(t, "process_order.v1~", `
def ok(ctx, input):
    return {"id": input}

def broken(ctx, input):
    fail("shipping provider returned 503")

def main(ctx, input):
    r_run_step_v1("reserve_inventory", ok, "RSV-1")
    r_run_step_v1("charge_payment", ok, "TXN-1")
    r_run_step_v1("create_shipping_label", broken, input.order_id)
    return {"status": "completed"}
`, set("traits.workflow.compensation", obj{"on_failure": rbID, "on_cancel": nil})))
		rec := invAsync(t, e, adm, wf["entrypoint_id"].(string), obj{"order_id": "ORD-9182"}, nil)
		id := invID(rec)
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "compensated", done["status"], "%v", done)

		var handler obj
		deadline := time.Now().Add(30 * time.Second)
		for handler == nil || handler["status"] != "succeeded" {
			r := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+query("$filter", "entrypoint_id eq '"+rbID+"'", "limit", "100").Encode(), adm, nil)
			items := r.items()
			require.Len(t, items, 1, "%s", r)
			handler = items[0]
			if time.Now().After(deadline) {
				break
			}
		}
		require.Equal(t, id, handler["parent_invocation_id"], "%v", handler)
		require.Equal(t, "succeeded", handler["status"], "%v", handler)
		require.Equal(t, obj{"rolled_back": []any{"reserve_inventory", "charge_payment"}, "trigger": "failure", "original": id}, handler["result"])

		items, raw := invTimeline(t, e, adm, id)
		types := invEventTypes(items)
		count := map[string]int{}
		for _, ty := range types {
			count[ty]++
		}
		require.Equal(t, 2, count["step_completed"], "%s", raw)
		for _, ty := range []string{"step_failed", "failed", "compensation_started", "compensation_completed"} {
			require.GreaterOrEqual(t, count[ty], 1, "%s in %s", ty, raw)
		}
		i := invIndex(items, "step_failed", 0)
		i = invIndex(items, "failed", i)
		i = invIndex(items, "compensation_started", i)
		i = invIndex(items, "compensation_completed", i)
		require.GreaterOrEqual(t, i, 0, "order step_failed,failed,compensation_started,compensation_completed: %v", types)
	})

	t.Run("suspend resume cancel matrix", func(t *testing.T) {
		wf := e.registerActive(t, adm, wfBody(t, "sleeper.v1~", `
def ok(ctx, input):
    return {"id": input}

def main(ctx, input):
    r_run_step_v1("first", ok, "a")
    r_sleep(3600000)
    return {"done": True}
`))
		id := invID(invAsync(t, e, adm, wf["entrypoint_id"].(string), obj{}, nil))
		invWait(t, e, adm, id, "suspended")

		conflict := func(action, current string) {
			t.Helper()
			r := invControl(t, e, adm, id, action)
			require.Equal(t, http.StatusConflict, r.Status, "%s: %s", action, r)
			require.Equal(t, "conflict", problemKind(r), "%s", r)
			require.Equal(t, current, r.Body["current_status"], "%s: %s", action, r)
		}
		conflict("suspend", "suspended")
		r := invControl(t, e, adm, id, "resume")
		require.Equal(t, http.StatusOK, r.Status, "resume: %s", r)
		invWait(t, e, adm, id, "suspended")
		r = invControl(t, e, adm, id, "cancel")
		require.Equal(t, http.StatusOK, r.Status, "cancel: %s", r)
		require.Equal(t, "canceled", r.Body["status"], "%s", r)
		require.Equal(t, "canceled", invGet(t, e, adm, id)["status"])
		for _, a := range []string{"resume", "suspend", "cancel"} {
			conflict(a, "canceled")
		}

		f := e.registerActive(t, adm, invFn(t, "misc.plain.v1~", "def main(ctx, input):\n  return {}\n"))
		fid := invID(invAsync(t, e, adm, f["entrypoint_id"].(string), obj{}, nil))
		invWait(t, e, adm, fid, wfTerminal...)
		r = invControl(t, e, adm, fid, "suspend")
		require.Equal(t, http.StatusConflict, r.Status, "suspend of a function: %s", r)
		require.Equal(t, "conflict", problemKind(r), "%s", r)
	})

	t.Run("workflow awaits a child", func(t *testing.T) {
		child := e.registerActive(t, adm, invFn(t, "math.double.v1~", "def main(ctx, input):\n  return {\"doubled\": input.n * 2}\n",
			set("traits.invocation", obj{"supported": []any{"sync", "async"}, "default": "async"})))
		childID := child["entrypoint_id"].(string)
		wf := e.registerActive(t, adm, wfBody(t, "parent.v1~", fmt.Sprintf(`
def main(ctx, input):
    r = r_await(r_invoke_v1(%q, {"n": 21}))
    return {"ok": r.ok, "v": r.value["doubled"]}
`, childID)))
		id := invID(invAsync(t, e, adm, wf["entrypoint_id"].(string), obj{}, nil))
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, obj{"ok": true, "v": 42.0}, done["result"])

		r := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+query("$filter", "entrypoint_id eq '"+childID+"'", "limit", "100").Encode(), adm, nil)
		kids := r.items()
		require.Len(t, kids, 1, "%s", r)
		require.Equal(t, id, kids[0]["parent_invocation_id"], "%v", kids[0])
		require.Equal(t, "succeeded", kids[0]["status"])
		require.Equal(t, obj{"doubled": 42.0}, kids[0]["result"])
	})
}
