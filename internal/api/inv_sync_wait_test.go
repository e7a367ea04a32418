package api_test

// Sync means wait: a sync invocation of a workflow answers when the workflow ends — across durable
// timers and event waits — or, still unfinished traits.limits.timeout_seconds after the start, 202
// with Location and the current record, like async.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/server"
)

// syncCall starts a sync invocation in the background; the channel receives its answer (nil if the
// request could not be made).
func syncCall(t *testing.T, e *env, tok, id string, params obj) <-chan *resp {
	t.Helper()
	ch := make(chan *resp, 1)
	go func() {
		var r *resp
		defer func() { ch <- r }()
		r = invStart(t, e, tok, obj{"entrypoint_id": id, "mode": "sync", "params": params}, nil)
	}()
	return ch
}

// answer waits (at most 30 s) for the answer of a syncCall.
func answer(t *testing.T, ch <-chan *resp) *resp {
	t.Helper()
	select {
	case r := <-ch:
		require.NotNil(t, r, "the request failed")
		return r
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the sync call did not answer")
		return nil
	}
}

// notAnswered requires that the syncCall is still waiting.
func notAnswered(t *testing.T, ch <-chan *resp) {
	t.Helper()
	select {
	case r := <-ch:
		require.FailNow(t, "the sync call answered before the workflow ended", "%s", r)
	default:
	}
}

// awaitSuspended waits (at most 30 s) until the only invocation of entrypoint epID is suspended
// and returns it.
func awaitSuspended(t *testing.T, e *env, tok, epID string) obj {
	t.Helper()
	const status = "suspended"
	deadline := time.Now().Add(30 * time.Second)
	for {
		items := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+query("$filter", "entrypoint_id eq '"+epID+"'").Encode(), tok, nil).items()
		if len(items) == 1 && items[0]["status"] == status {
			return items[0]
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "no invocation reached the status", "want one %s invocation of %s, have %v", status, epID, items)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSyncWorkflowWaitsForTheEnd(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.Clock = clk })
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	waitEvent := func(name string, timeoutSeconds int) string {
		return e.registerActive(t, adm, wfBody(t, name, fmt.Sprintf(`
def main(ctx, input):
    ev = r_await(r_wait_event_v1(%q, event_filter_query='payload.order_id == "' + input.order_id + '"', timeout_ms=3600000))
    return {"payment": ev.value["payload"]["payment_id"]}
`, paymentType), set("traits.limits", obj{"timeout_seconds": timeoutSeconds, "memory_mb": 128, "cpu": 1.0, "max_concurrent": 100})))["entrypoint_id"].(string)
	}

	t.Run("a durable timer: 200 succeeded once it fires", func(t *testing.T) {
		id := e.registerActive(t, adm, wfBody(t, "sync_nap.v1~", `
def main(ctx, input):
    before = r_now_v1()
    r_sleep(2000)
    return {"before": before, "after": r_now_v1()}
`))["entrypoint_id"].(string)
		call := syncCall(t, e, adm, id, obj{})
		awaitSuspended(t, e, adm, id)
		notAnswered(t, call)
		clk.Advance(2 * time.Second)
		e.srv.Wake()
		r := answer(t, call)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		require.Empty(t, r.Header.Get("Location"), "%s", r)
		rec := r.Body["record"].(obj)
		require.Equal(t, "succeeded", rec["status"], "%s", r)
		require.Equal(t, obj{"before": "2026-11-21T09:00:00.000Z", "after": "2026-11-21T09:00:02.000Z"}, rec["result"])
		require.Equal(t, "sync", rec["mode"])
	})

	t.Run("still waiting at timeout_seconds: 202 with Location and the current record", func(t *testing.T) {
		id := waitEvent("sync_wait_short.v1~", 1)
		start := clk.Now()
		call := syncCall(t, e, adm, id, obj{"order_id": "ORD-SHORT"})
		suspended := awaitSuspended(t, e, adm, id)
		clk.Set(start.Add(time.Second)) // the deadline, on the injected clock
		r := answer(t, call)
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
		invID := invID(suspended)
		require.Equal(t, base+"/invocations/"+invID, r.Header.Get("Location"), "%s", r)
		rec := r.Body["record"].(obj)
		require.Equal(t, invID, rec["invocation_id"], "%s", r)
		require.Equal(t, "suspended", rec["status"], "%s", r)
		require.Nil(t, rec["result"], "%s", r)

		// The workflow goes on after the answer: the event still completes it.
		p := publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": paymentType, "payload": obj{"order_id": "ORD-SHORT", "payment_id": "PAY-LATE"}})
		require.Equal(t, 1.0, p.Body["delivered"], "%s", p)
		done := invWait(t, e, adm, invID, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, obj{"payment": "PAY-LATE"}, done["result"])
	})

	t.Run("an event published while the call waits: 200 succeeded", func(t *testing.T) {
		id := waitEvent("sync_wait_event.v1~", 30)
		call := syncCall(t, e, adm, id, obj{"order_id": "ORD-EV"})
		awaitSuspended(t, e, adm, id)
		notAnswered(t, call)
		p := publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": paymentType, "payload": obj{"order_id": "ORD-EV", "payment_id": "PAY-1"}})
		require.Equal(t, 1.0, p.Body["delivered"], "%s", p)
		r := answer(t, call)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		rec := r.Body["record"].(obj)
		require.Equal(t, "succeeded", rec["status"], "%s", r)
		require.Equal(t, obj{"payment": "PAY-1"}, rec["result"])
	})
}
