package api_test

// HTTP-level tests of POST /events and of workflows waiting for events (r_wait_event_v1): a
// reserve-inventory workflow completes when its payment event arrives, and times out into its
// step's compensation when none does (injected clock); a durable sleep survives a restart.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/server"
)

const (
	eventsPath  = base + "/events"
	paymentType = "gts.x.core.events.event.v1~vendor.app.payments.confirmed.v1~"
)

// publish posts an event and requires the status.
func publish(t testing.TB, e *env, tok string, status int, body obj) *resp {
	t.Helper()
	return e.expect(t, status, http.MethodPost, eventsPath, tok, body)
}

// reserveInventory is the workflow of the events test: it reserves stock in a step whose
// compensation releases it (through the upstream), then waits for the order's payment.
func reserveInventory(upstream string) string {
	return fmt.Sprintf(`
def reserve(ctx, sku):
    return {"reservation_id": "RSV-" + sku}

def release(ctx, sku, out):
    r_http_post_v1(%q, {"reservation_id": out["reservation_id"]}, timeout_ms=5000)

def main(ctx, input):
    reserve_inventory = r_step_v1("reserve_inventory", reserve, compensate_fn=release)
    rsv = reserve_inventory(input.sku)
    paid = r_await(r_wait_event_v1(%q,
        event_filter_query='payload.order_id == "' + input.order_id + '" && payload.amount >= 100',
        timeout_ms=input.timeout_ms))
    return {"reservation": rsv.value["reservation_id"], "payment": paid.value["payload"]["payment_id"],
            "event_id": paid.value["event_id"]}
`, upstream+"/release", paymentType)
}

func TestEventsAPI(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.UnsafeEgressAllowLoopback = true; c.Clock = clk })
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	other := invTenant(t, e, "globex")
	released := newInvUpstream(t, `{}`)
	wf := e.registerActive(t, adm, wfBody(t, "reserve_inventory.v1~", reserveInventory(released.URL)))
	wfID := wf["entrypoint_id"].(string)

	t.Run("publish validation and access", func(t *testing.T) {
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, eventsPath, adm,
			obj{"event_type_id": "not a gts id", "event_id": "has spaces", "source": strings.Repeat("s", 300)})
		requireIssue(t, r, "$.event_type_id", "INVALID_VALUE")
		requireIssue(t, r, "$.event_id", "INVALID_VALUE")
		requireIssue(t, r, "$.source", "INVALID_VALUE")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, eventsPath, adm,
			obj{"event_type_id": "gts.x.core.events.event.v1~vendor.app.payments.confirmed.v1"})
		requireIssue(t, r, "$.event_type_id", "INVALID_VALUE")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, eventsPath, adm, obj{"event_type_id": paymentType, "nope": 1})
		requireIssue(t, r, "$.nope", "UNKNOWN_FIELD")
		viewer := e.token(t, "acme", "v", "viewer")
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, eventsPath, viewer, obj{"event_type_id": paymentType})
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, eventsPath, operator, obj{"event_type_id": paymentType})

		p := publish(t, e, adm, http.StatusAccepted, obj{"event_id": "evt-plain-1", "event_type_id": paymentType, "payload": obj{"x": 1}, "source": "billing"})
		require.Equal(t, base+"/events/evt-plain-1", p.Header.Get("Location"))
		require.Equal(t, 0.0, p.Body["delivered"])
		ev := p.Body["event"].(obj)
		require.Equal(t, "acme", ev["tenant_id"])
		require.Equal(t, obj{"x": 1.0}, ev["payload"])
		got := e.expect(t, http.StatusOK, http.MethodGet, eventsPath+"/evt-plain-1", viewer, nil).Body
		require.Equal(t, ev, got)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, eventsPath+"/evt-plain-1", other, nil)
		again := publish(t, e, adm, http.StatusOK, obj{"event_id": "evt-plain-1", "event_type_id": paymentType, "payload": obj{"x": 2}})
		require.Equal(t, "true", again.Header.Get("Idempotency-Replayed"))
		require.Equal(t, obj{"x": 1.0}, again.Body["event"].(obj)["payload"], "the original event is kept")
		assigned := publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": paymentType})
		require.True(t, strings.HasPrefix(assigned.Body["event"].(obj)["event_id"].(string), "evt"), "%s", assigned)
		list := e.expect(t, http.StatusOK, http.MethodGet, eventsPath+"?"+query("$filter", "source eq 'billing'").Encode(), adm, nil)
		require.Len(t, list.items(), 1, "%s", list)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, eventsPath+"?"+query("$filter", "nope eq 1").Encode(), adm, nil)
	})

	t.Run("event arrives and the workflow completes", func(t *testing.T) {
		id := invID(invAsync(t, e, adm, wfID, obj{"sku": "SKU-1", "order_id": "ORD-1", "timeout_ms": 3600000}, nil))
		invWait(t, e, adm, id, "suspended")
		// Not for this workflow: another order, too small an amount, another type, another tenant.
		for _, p := range []struct {
			tok string
			ev  obj
		}{
			{adm, obj{"event_type_id": paymentType, "payload": obj{"order_id": "ORD-2", "amount": 500}}},
			{adm, obj{"event_type_id": paymentType, "payload": obj{"order_id": "ORD-1", "amount": 5}}},
			{adm, obj{"event_type_id": paymentType, "payload": obj{"no_order": true}}},
			{adm, obj{"event_type_id": "gts.x.core.events.event.v1~vendor.app.payments.refunded.v1~", "payload": obj{"order_id": "ORD-1", "amount": 500}}},
			{other, obj{"event_type_id": paymentType, "payload": obj{"order_id": "ORD-1", "amount": 500}}},
		} {
			r := publish(t, e, p.tok, http.StatusAccepted, p.ev)
			require.Equal(t, 0.0, r.Body["delivered"], "%v: %s", p.ev, r)
		}
		require.Equal(t, "suspended", invGet(t, e, adm, id)["status"])
		r := publish(t, e, adm, http.StatusAccepted, obj{"event_id": "pay-ORD-1", "event_type_id": paymentType,
			"payload": obj{"order_id": "ORD-1", "amount": 120.5, "payment_id": "PAY-77"}})
		require.Equal(t, 1.0, r.Body["delivered"], "%s", r)
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, obj{"reservation": "RSV-SKU-1", "payment": "PAY-77", "event_id": "pay-ORD-1"}, done["result"])
		r = publish(t, e, adm, http.StatusOK, obj{"event_id": "pay-ORD-1", "event_type_id": paymentType,
			"payload": obj{"order_id": "ORD-1", "amount": 120.5, "payment_id": "PAY-77"}})
		require.Equal(t, 0.0, r.Body["delivered"], "a repeated event is not delivered again")

		items, raw := invTimeline(t, e, adm, id)
		i := invIndex(items, "step_completed", 0)
		i = invIndex(items, "suspended", i)
		i = invIndex(items, "signal_received", i)
		i = invIndex(items, "resumed", i)
		i = invIndex(items, "succeeded", i)
		require.GreaterOrEqual(t, i, 0, "step_completed, suspended, signal_received, resumed, succeeded in order: %s", raw)
		require.Zero(t, released.hits.Load(), "no compensation on success")
	})

	t.Run("an event published before the invocation was created is not delivered", func(t *testing.T) {
		publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": paymentType, "payload": obj{"order_id": "ORD-EARLY", "amount": 100, "payment_id": "P"}})
		clk.Advance(time.Millisecond)
		id := invID(invAsync(t, e, adm, wfID, obj{"sku": "SKU-E", "order_id": "ORD-EARLY", "timeout_ms": 3600000}, nil))
		invWait(t, e, adm, id, "suspended")
		// The wait was registered, and the stored events scanned, in the suspending transaction.
		require.Equal(t, "suspended", invGet(t, e, adm, id)["status"])
		r := publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": paymentType, "payload": obj{"order_id": "ORD-EARLY", "amount": 100, "payment_id": "P2"}})
		require.Equal(t, 1.0, r.Body["delivered"], "%s", r)
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "P2", done["result"].(obj)["payment"], "%v", done)
	})

	t.Run("timeout runs the step compensation", func(t *testing.T) {
		before := released.hits.Load()
		id := invID(invAsync(t, e, adm, wfID, obj{"sku": "SKU-3", "order_id": "ORD-3", "timeout_ms": 60000}, nil))
		rec := invWait(t, e, adm, id, "suspended")
		require.Equal(t, "suspended", rec["status"])
		clk.Advance(59 * time.Second)
		e.srv.Wake()
		require.Equal(t, "suspended", invGet(t, e, adm, id)["status"], "not yet due")
		clk.Advance(2 * time.Second)
		e.srv.Wake()
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Contains(t, []any{"failed", "dead_lettered"}, done["status"], "%v", done)
		errObj := invErrorOf(t, done)
		require.Equal(t, invErr("timeout"), errObj["error_type_id"], "%v", errObj)
		require.Equal(t, before+1, released.hits.Load(), "the reservation was released once")
		released.mu.Lock()
		require.Contains(t, released.urls[len(released.urls)-1], "/release")
		released.mu.Unlock()
		items, raw := invTimeline(t, e, adm, id)
		i := invIndex(items, "suspended", 0)
		i = invIndex(items, "compensation_completed", i)
		require.GreaterOrEqual(t, i, 0, "%s", raw)
		require.Equal(t, "reserve_inventory", items[i]["step_name"], "%s", raw)
		r := publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": paymentType, "payload": obj{"order_id": "ORD-3", "amount": 100, "payment_id": "late"}})
		require.Equal(t, 0.0, r.Body["delivered"], "a finished workflow's wait is gone: %s", r)
	})

	t.Run("an invalid literal filter is refused at registration, a computed one fails at its line", func(t *testing.T) {
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm, wfBody(t, "bad_filter.v1~", fmt.Sprintf(`
def main(ctx, input):
    r_await(r_wait_event_v1(%q, event_filter_query="payload.amount >", timeout_ms=1000))
    return {}
`, paymentType)))
		issue := requireIssue(t, r, "$.implementation.code.source", "INVALID_EVENT_FILTER")
		require.Equal(t, 3.0, issue["line"], "%s", r)
		line := fmt.Sprintf(`    r_await(r_wait_event_v1(%q, event_filter_query="payload.amount >", timeout_ms=1000))`, paymentType)
		literal := strings.Index(line, `"payload.amount >"`) + 1 // 1-based column of the opening quote
		require.Equal(t, float64(literal+17), issue["column"], "CEL's column 17, inside the literal: %s", r)
		bad := e.registerActive(t, adm, wfBody(t, "bad_filter.v1~", fmt.Sprintf(`
def main(ctx, input):
    r_await(r_wait_event_v1(%q, event_filter_query="payload.amount " + ">", timeout_ms=1000))
    return {}
`, paymentType)))
		id := invID(invAsync(t, e, adm, bad["entrypoint_id"].(string), obj{}, nil))
		done := invWait(t, e, adm, id, wfTerminal...)
		errObj := invErrorOf(t, done)
		require.Contains(t, errObj["message"], "event_filter_query", "%v", errObj)
		require.Equal(t, invErr("validation"), errObj["error_type_id"], "a programming mistake: %v", errObj)
		require.Equal(t, "non_retryable", errObj["category"], "%v", errObj)
		require.Equal(t, 3.0, errObj["details"].(obj)["line"], "%v", errObj)
	})

	t.Run("cancel while waiting", func(t *testing.T) {
		id := invID(invAsync(t, e, adm, wfID, obj{"sku": "SKU-4", "order_id": "ORD-4", "timeout_ms": 3600000}, nil))
		invWait(t, e, adm, id, "suspended")
		r := invControl(t, e, adm, id, "cancel")
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		p := publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": paymentType, "payload": obj{"order_id": "ORD-4", "amount": 100, "payment_id": "x"}})
		require.Equal(t, 0.0, p.Body["delivered"], "%s", p)
		require.Equal(t, "canceled", invGet(t, e, adm, id)["status"])
	})
}

// approvalType is the event type of TestEventsBeforeTheWait.
const approvalType = "gts.x.core.events.event.v1~vendor.app.orders.approved.v1~"

// twoApprovals sleeps (its first step, durable), then waits twice for an approval of its order.
var twoApprovals = fmt.Sprintf(`
def main(ctx, input):
    r_sleep(input.sleep_ms)
    f = 'payload.order_id == "' + input.order_id + '"'
    first = r_await(r_wait_event_v1(%[1]q, event_filter_query=f, timeout_ms=3600000))
    second = r_await(r_wait_event_v1(%[1]q, event_filter_query=f, timeout_ms=3600000))
    return {"first": first.value["event_id"], "second": second.value["event_id"]}
`, approvalType)

// TestEventsBeforeTheWait: r_wait_event_v1 takes the earliest matching event published since its
// invocation was created, even before the workflow reached the wait, and never one an earlier wait
// of the same invocation took.
func TestEventsBeforeTheWait(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.UnsafeEgressAllowLoopback = true; c.Clock = clk })
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	wf := e.registerActive(t, adm, wfBody(t, "two_approvals.v1~", twoApprovals))
	wfID := wf["entrypoint_id"].(string)
	approve := func(id, order string) {
		t.Helper()
		r := publish(t, e, adm, http.StatusAccepted, obj{"event_id": id, "event_type_id": approvalType, "payload": obj{"order_id": order}})
		require.Equal(t, 0.0, r.Body["delivered"], "nothing waits for events yet: %s", r)
		clk.Advance(time.Millisecond)
	}

	t.Run("events published during the first step satisfy the later waits in order", func(t *testing.T) {
		approve("appr-old", "ORD-A") // before both invocations were created
		a := invID(invAsync(t, e, adm, wfID, obj{"order_id": "ORD-A", "sleep_ms": 60000}, nil))
		b := invID(invAsync(t, e, adm, wfID, obj{"order_id": "ORD-A", "sleep_ms": 60000}, nil))
		invWait(t, e, adm, a, "suspended")
		invWait(t, e, adm, b, "suspended")
		clk.Advance(time.Millisecond)
		approve("appr-other", "ORD-OTHER") // the filter does not match
		approve("appr-1", "ORD-A")
		approve("appr-2", "ORD-A")
		approve("appr-3", "ORD-A")
		clk.Advance(time.Minute)
		e.srv.Wake()
		for _, id := range []string{a, b} {
			done := invWait(t, e, adm, id, wfTerminal...)
			require.Equal(t, "succeeded", done["status"], "%v", done)
			require.Equal(t, obj{"first": "appr-1", "second": "appr-2"}, done["result"],
				"each wait takes the earliest matching event its invocation has not consumed; one event serves every invocation")
			items, raw := invTimeline(t, e, adm, id)
			var got []any
			for _, it := range items {
				if it["event_type"] == "signal_received" {
					got = append(got, it["details"].(obj)["event_id"])
				}
			}
			require.Equal(t, []any{"appr-1", "appr-2"}, got, "%s", raw)
		}
	})

	t.Run("an approval sent while the first step runs satisfies the wait", func(t *testing.T) {
		// The reservation service approves at once: it publishes the approval before answering the
		// step's request, while the workflow is running (not yet waiting).
		var mu sync.Mutex
		var published []string // the answers to the approver's POST /events (a step may run again: at least once)
		record := func(s string) {
			mu.Lock()
			published = append(published, s)
			mu.Unlock()
		}
		approver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := `{"event_id":"appr-in-step","event_type_id":"` + approvalType + `","payload":{"order_id":"ORD-S"}}`
			req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, e.ts.URL+eventsPath, strings.NewReader(body))
			if err == nil {
				req.Header.Set("Authorization", "Bearer "+adm)
				req.Header.Set("Content-Type", "application/json")
				var res *http.Response
				if res, err = e.client.Do(req); err == nil {
					b, _ := io.ReadAll(res.Body)
					_ = res.Body.Close()
					record(fmt.Sprintf("%d %s", res.StatusCode, b))
				}
			}
			if err != nil {
				record(err.Error())
			}
			clk.Advance(time.Millisecond) // the workflow reaches its wait after the approval was received
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{}`))
		}))
		defer approver.Close()
		reserveThenWait := e.registerActive(t, adm, wfBody(t, "reserve_then_wait.v1~", fmt.Sprintf(`
def reserve(ctx, order_id):
    r_await(r_http_post_v1(%q, {"order_id": order_id}, timeout_ms=5000))
    return {"reserved": order_id}

def main(ctx, input):
    r_run_step_v1("reserve", reserve, input.order_id)
    ok = r_await(r_wait_event_v1(%q, event_filter_query='payload.order_id == "' + input.order_id + '"', timeout_ms=3600000))
    return {"approval": ok.value["event_id"]}
`, approver.URL, approvalType)))
		id := invID(invAsync(t, e, adm, reserveThenWait["entrypoint_id"].(string), obj{"order_id": "ORD-S"}, nil))
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, obj{"approval": "appr-in-step"}, done["result"])
		mu.Lock()
		got := slices.Clone(published)
		mu.Unlock()
		require.NotEmpty(t, got)
		require.Regexp(t, `^202 .*"delivered":0`, got[0], "published while the workflow ran, so delivered to no suspended wait: %q", got)
		for _, g := range got[1:] {
			require.Regexp(t, `^200 `, g, "a repeated step publishes the same event id: a replay: %q", got)
		}
		items, raw := invTimeline(t, e, adm, id)
		i := invIndex(items, "step_completed", 0)
		i = invIndex(items, "suspended", i)
		i = invIndex(items, "signal_received", i)
		i = invIndex(items, "resumed", i)
		require.GreaterOrEqual(t, i, 0, "the wait is resolved as the workflow suspends on it: %s", raw)
		require.Equal(t, "event", items[i]["details"].(obj)["reason"], "%s", raw)
	})

	t.Run("an event delivered to one wait is not taken by the next", func(t *testing.T) {
		id := invID(invAsync(t, e, adm, wfID, obj{"order_id": "ORD-B", "sleep_ms": 0}, nil))
		invWait(t, e, adm, id, "suspended")
		clk.Advance(time.Millisecond)
		r := publish(t, e, adm, http.StatusAccepted, obj{"event_id": "appr-b1", "event_type_id": approvalType, "payload": obj{"order_id": "ORD-B"}})
		require.Equal(t, 1.0, r.Body["delivered"], "%s", r)
		require.Eventually(t, func() bool {
			items, _ := invTimeline(t, e, adm, id)
			return invIndex(items, "resumed", 0) >= 0 && invGet(t, e, adm, id)["status"] == "suspended"
		}, 30*time.Second, 10*time.Millisecond, "the workflow resumes and parks on its second wait")
		require.Equal(t, "suspended", invGet(t, e, adm, id)["status"], "appr-b1 satisfied the first wait only")
		clk.Advance(time.Millisecond)
		r = publish(t, e, adm, http.StatusAccepted, obj{"event_id": "appr-b2", "event_type_id": approvalType, "payload": obj{"order_id": "ORD-B"}})
		require.Equal(t, 1.0, r.Body["delivered"], "%s", r)
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, obj{"first": "appr-b1", "second": "appr-b2"}, done["result"], "%v", done)
	})
}

// TestSleepSurvivesRestart: a workflow sleeping an hour is suspended when the server stops; a new
// server on the same data directory wakes it when the (injected) clock reaches the due time, not
// before.
func TestSleepSurvivesRestart(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	dir, st := t.TempDir(), testStore(t)
	start := func() (*env, func()) {
		srv, err := server.New(context.Background(), server.Config{DataDir: dir, Store: st, AdminToken: operator, Clock: clk})
		require.NoError(t, err)
		e := &env{srv: srv, ts: httptest.NewServer(checked(t, srv.Handler()))}
		e.client = e.ts.Client()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); srv.RunDispatcher(ctx) }()
		return e, func() {
			cancel()
			<-done
			e.ts.Close()
			require.NoError(t, srv.Close())
		}
	}
	e, stop := start()
	adm := invTenant(t, e, "acme")
	wf := e.registerActive(t, adm, wfBody(t, "nap.v1~", `
def main(ctx, input):
    before = r_now_v1()
    r_sleep(3600000)
    return {"before": before, "after": r_now_v1()}
`))
	id := invID(invAsync(t, e, adm, wf["entrypoint_id"].(string), obj{}, nil))
	invWait(t, e, adm, id, "suspended")
	stop()

	clk.Advance(30 * time.Minute)
	e, stop = start()
	defer stop()
	e.srv.Wake()
	require.Equal(t, "suspended", invGet(t, e, adm, id)["status"], "half an hour in, still asleep")
	clk.Advance(30 * time.Minute)
	e.srv.Wake()
	done := invWait(t, e, adm, id, wfTerminal...)
	require.Equal(t, "succeeded", done["status"], "%v", done)
	res := done["result"].(obj)
	require.Equal(t, "2026-11-21T09:00:00.000Z", res["before"])
	require.Equal(t, "2026-11-21T10:00:00.000Z", res["after"], "woke exactly when due on the injected clock")
}
