package api_test

// The Starlark runtime ADR's own workflow, written exactly as the ADR writes it (a step object
// from r_step_v1 passed to r_run_step_v1, a struct step output read by the compensation,
// r_snapshot_v1, a CEL-filtered r_wait_event_v1 with exit_on_error=False, r_exit on its error),
// against a local upstream: the approval, timeout and cancel paths; a transient failure retried to
// success without compensating; a failure retried by the invocation's retry policy compensated
// once, at the end.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/server"
)

const approvedType = "gts.x.core.events.event.v1~vendor.app.orders.approved.v1~"

// inventory is the upstream of the ADR workflow: /reserve hands out reservations, /release takes
// them back, /charge fails the first failCharges calls with 503.
type inventory struct {
	*httptest.Server
	reserved, charged atomic.Int64
	failCharges       atomic.Int64
	mu                sync.Mutex
	released          []string // reservation ids, in order
	// gate, when set, holds /reserve of sku "SKU-GATED" until it is closed; arrived hears it came.
	gate, arrived chan struct{}
}

func newInventory(t *testing.T) *inventory {
	u := &inventory{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/reserve":
			if body["sku"] == "SKU-GATED" && u.gate != nil {
				u.arrived <- struct{}{}
				select {
				case <-u.gate:
				case <-time.After(30 * time.Second):
				}
			}
			n := u.reserved.Add(1)
			fmt.Fprintf(w, `{"reservation_id": "RSV-%d"}`, n)
		case "/release":
			u.mu.Lock()
			u.released = append(u.released, fmt.Sprint(body["reservation_id"]))
			u.mu.Unlock()
			fmt.Fprint(w, `{}`)
		case "/charge":
			if u.charged.Add(1) <= u.failCharges.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"error": "try again"}`)
				return
			}
			fmt.Fprintf(w, `{"payment_id": "PAY-%v"}`, body["order_id"])
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *inventory) releases() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.released...)
}

// adrWorkflow is the ADR's reserve → approve → charge workflow.
func adrWorkflow(upstream string) string {
	return fmt.Sprintf(`
UPSTREAM = %q

def do_reserve(ctx, input):
    resp = r_await(r_http_post_v1(UPSTREAM + "/reserve", {"sku": input.sku}, timeout_ms=5000,
                                  retry={"max_attempts": 3, "backoff_ms": 200}))
    return struct(reservation_id=resp.response.body["reservation_id"])

def release(ctx, step_input, step_output):
    r_await(r_http_post_v1(UPSTREAM + "/release", {"reservation_id": step_output.reservation_id}, timeout_ms=5000))

def charge(ctx, input):
    resp = r_await(r_http_post_v1(UPSTREAM + "/charge", {"order_id": input.order_id}, timeout_ms=5000))
    return resp.response.body

def main(ctx, input):
    reserve = r_step_v1("reserve_inventory", do_reserve, release)
    reserved = r_run_step_v1("reserve_inventory", reserve, input)
    r_snapshot_v1("reserved")
    approval = r_await(r_wait_event_v1(%q,
        event_filter_query="payload.order_id == '" + input.order_id + "'",
        timeout_ms=input.timeout_ms, exit_on_error=False))
    if not approval.ok:
        r_exit(approval.error)
    paid = r_run_step_v1("charge_payment", charge, input)
    return {"reservation_id": reserved.value.reservation_id, "approved_by": approval.value.payload.approver,
            "payment_id": paid.value["payment_id"]}
`, upstream, approvedType)
}

func TestADRWorkflow(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.UnsafeEgressAllowLoopback = true; c.Clock = clk })
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	up := newInventory(t)
	retry3 := set("traits.retry", obj{"max_attempts": 3, "initial_delay_ms": 0, "max_delay_ms": 0, "backoff_multiplier": 1.0})
	body := wfBody(t, "adr_order.v1~", adrWorkflow(up.URL), retry3)
	val := e.expect(t, http.StatusOK, http.MethodPost, base+"/entrypoints:validate", adm, body)
	require.Equal(t, true, val.Body["valid"], "%s", val)
	wfID := e.registerActive(t, adm, body)["entrypoint_id"].(string)
	start := func(order string, timeoutMS int) string {
		return invID(invAsync(t, e, adm, wfID, obj{"sku": "SKU-" + order, "order_id": order, "timeout_ms": timeoutMS}, nil))
	}
	approve := func(order string) {
		publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": approvedType, "payload": obj{"order_id": order, "approver": "alice"}})
	}

	t.Run("approval path", func(t *testing.T) {
		reserved, charged := up.reserved.Load(), up.charged.Load()
		id := start("ORD-A", 3600000)
		invWait(t, e, adm, id, "suspended")
		approve("ORD-OTHER") // filtered out
		require.Equal(t, "suspended", invGet(t, e, adm, id)["status"])
		approve("ORD-A")
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, obj{"reservation_id": fmt.Sprintf("RSV-%d", reserved+1), "approved_by": "alice", "payment_id": "PAY-ORD-A"}, done["result"])
		require.Equal(t, reserved+1, up.reserved.Load(), "reserved once")
		require.Equal(t, charged+1, up.charged.Load(), "charged once")
		require.Empty(t, up.releases(), "nothing compensated on success")
		items, raw := invTimeline(t, e, adm, id)
		i := invIndex(items, "step_completed", 0)
		i = invIndex(items, "checkpoint_created", i)
		i = invIndex(items, "suspended", i)
		i = invIndex(items, "signal_received", i)
		i = invIndex(items, "succeeded", i)
		require.GreaterOrEqual(t, i, 0, "%s", raw)
	})

	t.Run("an approval sent while the workflow is still reserving is not lost", func(t *testing.T) {
		up.gate, up.arrived = make(chan struct{}), make(chan struct{}, 1)
		id := invID(invAsync(t, e, adm, wfID, obj{"sku": "SKU-GATED", "order_id": "ORD-EARLY", "timeout_ms": 3600000}, nil))
		select {
		case <-up.arrived:
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the reserve step did not start")
		}
		approve("ORD-EARLY") // the workflow is inside its reserve step, not yet waiting
		close(up.gate)
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, "alice", done["result"].(obj)["approved_by"])
		require.Empty(t, up.releases())
	})

	t.Run("a transient failure is retried to success without compensation", func(t *testing.T) {
		up.failCharges.Store(up.charged.Load() + 1) // the next charge fails once
		id := start("ORD-T", 3600000)
		invWait(t, e, adm, id, "suspended")
		approve("ORD-T")
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, "PAY-ORD-T", done["result"].(obj)["payment_id"])
		require.Empty(t, up.releases(), "a retried attempt compensates nothing")
		items, raw := invTimeline(t, e, adm, id)
		require.GreaterOrEqual(t, invIndex(items, "step_retried", 0), 0, "%s", raw)
		require.Equal(t, -1, invIndex(items, "compensation_started", 0), "%s", raw)
	})

	t.Run("timeout path compensates once", func(t *testing.T) {
		id := start("ORD-TO", 60000)
		invWait(t, e, adm, id, "suspended")
		rsv := fmt.Sprintf("RSV-%d", up.reserved.Load())
		clk.Advance(61 * time.Second)
		e.srv.Wake()
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Contains(t, []any{"failed", "dead_lettered"}, done["status"], "%v", done)
		require.Equal(t, invErr("timeout"), invErrorOf(t, done)["error_type_id"], "%v", done)
		require.Equal(t, []string{rsv}, up.releases(), "released once, with the struct output of the step")
		require.EqualValues(t, 1, done["attempt"], "r_exit ends the workflow for good: %v", done)
		items, raw := invTimeline(t, e, adm, id)
		i := invIndex(items, "compensation_started", 0)
		require.GreaterOrEqual(t, i, 0, "%s", raw)
		require.Equal(t, "reserve_inventory", items[i]["step_name"], "%s", raw)
		j := invIndex(items, "compensation_completed", i)
		require.Greater(t, j, i, "%s", raw)
		require.Equal(t, "reserve_inventory", items[j]["step_name"], "%s", raw)
	})

	t.Run("cancel path compensates once", func(t *testing.T) {
		before := len(up.releases())
		id := start("ORD-C", 3600000)
		invWait(t, e, adm, id, "suspended")
		rsv := fmt.Sprintf("RSV-%d", up.reserved.Load())
		r := invControl(t, e, adm, id, "cancel")
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		deadline := time.Now().Add(30 * time.Second)
		for len(up.releases()) == before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		require.Equal(t, []string{rsv}, up.releases()[before:], "released once")
		require.Equal(t, "canceled", invGet(t, e, adm, id)["status"])
		// The release answered; the compensation's end (its lease given back) is written after it.
		// Until then the clock must not jump: a lease that expires on a runner still at work is
		// reclaimed and the compensation runs again, as it must after a crash.
		for time.Now().Before(deadline) {
			if items, _ := invTimeline(t, e, adm, id); invIndex(items, "compensation_completed", 0) >= 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		items, raw := invTimeline(t, e, adm, id)
		require.GreaterOrEqual(t, invIndex(items, "compensation_completed", 0), 0, "%s", raw)
		approve("ORD-C")
		clk.Advance(2 * time.Hour)
		e.srv.Wake()
		require.Equal(t, "canceled", invGet(t, e, adm, id)["status"])
		require.Len(t, up.releases(), before+1, "never released again")
	})

	t.Run("a failure retried by the invocation's policy is compensated once, at the end", func(t *testing.T) {
		failing := e.registerActive(t, adm, wfBody(t, "adr_flaky.v1~", strings.Replace(adrWorkflow(up.URL),
			`    r_snapshot_v1("reserved")`, `    r_snapshot_v1("reserved")
    fail("the order service is unavailable")`, 1), retry3))
		before, reserved := len(up.releases()), up.reserved.Load()
		id := invID(invAsync(t, e, adm, failing["entrypoint_id"].(string), obj{"sku": "S", "order_id": "ORD-F", "timeout_ms": 1000}, nil))
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Contains(t, []any{"failed", "dead_lettered"}, done["status"], "%v", done)
		require.EqualValues(t, 3, done["attempt"], "%v", done)
		require.Equal(t, reserved+1, up.reserved.Load(), "the completed step is replayed by later attempts, not run again")
		require.Equal(t, []string{fmt.Sprintf("RSV-%d", reserved+1)}, up.releases()[before:], "compensated once, after the last attempt")
	})
}
