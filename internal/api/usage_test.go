package api_test

// The Quota Usage API (000) with cost attribution (004 §22): GET /tenants/{id}/usage and
// /usage/history over a known set of invocations on an injected clock spanning two hours, priced by
// a pricing configuration with a per-tenant override.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/cost"
	"github.com/larkrun/lark/internal/server"
)

const usagePricing = `{"currency": "EUR",
  "default": {"cpu_per_second": 2, "memory_gb_per_second": 0.5, "per_invocation": 0.25, "egress_per_byte": 0.001},
  "tenant_overrides": {"globex": {"per_invocation": 1}}}`

// usageUpstream answers POST /echo with a fixed body and counts the request body bytes it received;
// GET /block holds the request until release is closed.
type usageUpstream struct {
	*httptest.Server
	received atomic.Int64
	arrived  chan struct{}
	release  chan struct{}
}

const usageReply = `{"ok":true}`

func newUsageUpstream(t *testing.T) *usageUpstream {
	u := &usageUpstream{arrived: make(chan struct{}, 1), release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.received.Add(int64(len(b)))
		if r.URL.Path == "/block" {
			u.arrived <- struct{}{}
			<-u.release
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, usageReply)
	}))
	t.Cleanup(func() {
		select {
		case <-u.release:
		default:
			close(u.release)
		}
		u.Close()
	})
	return u
}

// execCost is the documented price of one execution's metrics at usagePricing's defaults.
func execCost(m obj) float64 {
	n := func(k string) float64 { v, _ := m[k].(float64); return v }
	return n("cpu_time_ms")/1000*2 + n("memory_limit_mb")/1024*n("billed_duration_ms")/1000*0.5 + n("egress_bytes")*0.001
}

// executions returns the metrics and recorded cost of every execution in an invocation's timeline.
func executions(t *testing.T, e *env, tok, id string) (metrics []obj, costs []float64) {
	t.Helper()
	items, raw := invTimeline(t, e, tok, id)
	for _, it := range items {
		d, _ := it["details"].(obj)
		if m, ok := d["metrics"].(obj); ok {
			metrics = append(metrics, m)
			c, ok := d["cost"].(float64)
			require.True(t, ok, "an execution's closing event carries its cost: %s", raw)
			costs = append(costs, c)
		}
	}
	return metrics, costs
}

func TestUsage(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 10, 0, 0, time.UTC)) // a Saturday; its ISO week starts on Monday the 16th
	pricing, err := cost.Parse([]byte(usagePricing))
	require.NoError(t, err)
	e := newEnv(t, func(c *server.Config) { c.Clock = clk; c.Pricing = pricing; c.UnsafeEgressAllowLoopback = true })
	up := newUsageUpstream(t)
	acme := invTenant(t, e, "acme")
	globex := invTenant(t, e, "globex")
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator,
		obj{"quotas": obj{"max_concurrent_executions": 4, "max_definitions": 10}})
	acmeViewer := e.token(t, "acme", "vera", "viewer")

	echoSrc := "def main(ctx, input):\n  r = r_await(r_http_post_v1(input.url, {\"n\": input.n}, timeout_ms=2000))\n  return {\"status\": r.response.status_code}\n"
	echo := invFn(t, "usage.echo.v1~", echoSrc)
	okID := e.registerActive(t, acme, echo)["entrypoint_id"].(string)
	e.registerActive(t, globex, echo)
	failID := e.registerActive(t, acme, invFn(t, "usage.fail.v1~", "def main(ctx, input):\n  fail(\"boom\")\n",
		set("traits.retry", obj{"max_attempts": 2, "initial_delay_ms": 0, "max_delay_ms": 0, "backoff_multiplier": 1.0})))["entrypoint_id"].(string)
	cancelID := e.registerActive(t, acme, invFn(t, "usage.idle.v1~", "def main(ctx, input):\n  return {}\n"))["entrypoint_id"].(string)
	blockID := e.registerActive(t, acme, invFn(t, "usage.block.v1~",
		"def main(ctx, input):\n  r_await(r_http_get_v1(input.url, timeout_ms=9000))\n  return {}\n"))["entrypoint_id"].(string)

	// 09:10 — two invocations that succeed (each with one outbound call), one canceled while queued
	// (the dispatcher is not running yet); globex runs the same function once.
	var okRecs []obj
	for i := range 2 {
		okRecs = append(okRecs, invSync(t, e, acme, okID, obj{"url": up.URL + "/echo", "n": i * 1000}, nil))
	}
	canceled := invAsync(t, e, acme, cancelID, obj{}, nil)
	require.Equal(t, http.StatusOK, invControl(t, e, acme, invID(canceled), "cancel").Status)
	acmeSent := up.received.Load()
	gRec := invSync(t, e, globex, okID, obj{"url": up.URL + "/echo", "n": 1}, nil)

	// 10:20 — an invocation whose first attempt fails and is retried, then fails finally.
	clk.Advance(70 * time.Minute)
	first := invSync(t, e, acme, failID, obj{}, nil)
	require.Equal(t, "queued", first["status"], "the retry is scheduled: %v", first)
	invDispatcher(t, e)
	failed := invWait(t, e, acme, invID(first), "dead_lettered")

	t.Run("each execution's cost is pricing × metrics, recorded in its event; the record sums them", func(t *testing.T) {
		for _, rec := range okRecs {
			m, c := executions(t, e, acme, invID(rec))
			require.Len(t, m, 1)
			require.InDelta(t, execCost(m[0]), c[0], 1e-12)
			require.Positive(t, m[0]["egress_bytes"], "the outbound call's bodies are egress")
			got := invGet(t, e, acme, invID(rec))
			require.InDelta(t, 0.25+c[0], got["cost"], 1e-12, "per-invocation price + the execution")
			require.Equal(t, m[0], got["observability"].(obj)["metrics"])
		}
		m, c := executions(t, e, acme, invID(failed))
		require.Len(t, m, 2, "the retried attempt and the final one")
		for i := range m {
			require.InDelta(t, execCost(m[i]), c[i], 1e-12)
		}
		require.InDelta(t, 0.25+c[0]+c[1], failed["cost"], 1e-12)
		require.Equal(t, 0.25, invGet(t, e, acme, invID(canceled))["cost"], "canceled while queued: the invocation price only")
	})

	t.Run("a per-tenant override changes only that tenant's cost", func(t *testing.T) {
		m, c := executions(t, e, globex, invID(gRec))
		require.Len(t, m, 1)
		require.InDelta(t, execCost(m[0]), c[0], 1e-12, "globex overrides only per_invocation")
		require.InDelta(t, 1+c[0], invGet(t, e, globex, invID(gRec))["cost"], 1e-12)
	})

	// What the history must show, from the records and timelines.
	var okCost, okEgress, okCPU, okBilled, okMem float64
	for _, rec := range okRecs {
		m, c := executions(t, e, acme, invID(rec))
		okCost += 0.25 + c[0]
		okEgress += m[0]["egress_bytes"].(float64)
		okCPU += m[0]["cpu_time_ms"].(float64) / 1000
		okBilled += m[0]["billed_duration_ms"].(float64)
		okMem += m[0]["memory_limit_mb"].(float64) * m[0]["billed_duration_ms"].(float64) / 1024 / 1000
	}
	require.Equal(t, float64(acmeSent)+2*float64(len(usageReply)), okEgress, "egress = request + response bodies")
	failM, _ := executions(t, e, acme, invID(failed))
	failCost := failed["cost"].(float64)
	var failBilled float64
	for _, m := range failM {
		failBilled += m["billed_duration_ms"].(float64)
	}
	history := func(t *testing.T, tok, tenant string, q url.Values) obj {
		t.Helper()
		return e.expect(t, http.StatusOK, http.MethodGet, base+"/tenants/"+tenant+"/usage/history?"+q.Encode(), tok, nil).Body
	}
	byStatus := func(f obj) [3]float64 {
		s := f["by_status"].(obj)
		return [3]float64{s["succeeded"].(float64), s["failed"].(float64), s["canceled"].(float64)}
	}
	entrypoints := func(f obj) map[string]obj {
		out := map[string]obj{}
		for _, ep := range objects(f["entrypoints"]) {
			out[ep["entrypoint_id"].(string)] = ep
		}
		return out
	}
	// checkTotals asserts the figures of the whole two hours (a bucket or the totals).
	checkTotals := func(t *testing.T, f obj) {
		t.Helper()
		require.EqualValues(t, 4, f["invocations"])
		require.EqualValues(t, 4, f["finished"])
		require.Equal(t, [3]float64{2, 1, 1}, byStatus(f))
		require.EqualValues(t, 1, f["dead_lettered"])
		require.EqualValues(t, 4, f["executions"])
		require.Equal(t, okEgress, f["egress_bytes"])
		require.Equal(t, okBilled+failBilled, f["billed_duration_ms"])
		require.InDelta(t, okCost+failCost+0.25, f["cost"], 1e-12)
		eps := entrypoints(f)
		require.Len(t, eps, 3)
		require.InDelta(t, okCost, eps[okID]["cost"], 1e-12)
		require.InDelta(t, failCost, eps[failID]["cost"], 1e-12)
		require.Equal(t, [3]float64{0, 0, 1}, byStatus(eps[cancelID]))
		require.NotContains(t, eps, blockID)
	}

	t.Run("hourly history: two buckets, by status, resources, cost, per entrypoint", func(t *testing.T) {
		h := history(t, acme, "acme", query("granularity", "hourly", "start", "2026-11-21T09:00:00Z", "end", "2026-11-21T11:00:00Z"))
		require.Equal(t, "EUR", h["currency"])
		require.Equal(t, "hourly", h["granularity"])
		buckets := objects(h["buckets"])
		require.Len(t, buckets, 2)
		b9, b10 := buckets[0], buckets[1]
		require.Equal(t, "2026-11-21T09:00:00Z", b9["start"])
		require.Equal(t, "2026-11-21T10:00:00Z", b9["end"])
		require.Equal(t, "2026-11-21T10:00:00Z", b10["start"])

		require.EqualValues(t, 3, b9["invocations"])
		require.EqualValues(t, 3, b9["finished"])
		require.Equal(t, [3]float64{2, 0, 1}, byStatus(b9))
		require.EqualValues(t, 0, b9["dead_lettered"])
		require.EqualValues(t, 2, b9["executions"])
		require.Equal(t, okEgress, b9["egress_bytes"])
		require.InDelta(t, okCPU, b9["cpu_seconds"], 1e-12)
		require.InDelta(t, okMem, b9["memory_gb_seconds"], 1e-12)
		require.InDelta(t, okCost+0.25, b9["cost"], 1e-12)
		eps := entrypoints(b9)
		require.Len(t, eps, 2)
		require.EqualValues(t, 2, eps[okID]["invocations"])
		require.Equal(t, [3]float64{2, 0, 0}, byStatus(eps[okID]))
		require.InDelta(t, okCost, eps[okID]["cost"], 1e-12)
		require.EqualValues(t, 1, eps[cancelID]["invocations"])
		require.EqualValues(t, 0, eps[cancelID]["executions"])
		require.Equal(t, 0.25, eps[cancelID]["cost"])

		require.EqualValues(t, 1, b10["invocations"])
		require.Equal(t, [3]float64{0, 1, 0}, byStatus(b10), "failed then dead_lettered is one failed finish")
		require.EqualValues(t, 1, b10["finished"])
		require.EqualValues(t, 1, b10["dead_lettered"])
		require.EqualValues(t, 2, b10["executions"], "both attempts")
		require.Equal(t, failBilled, b10["billed_duration_ms"])
		require.InDelta(t, failCost, b10["cost"], 1e-12)
		require.Len(t, objects(b10["entrypoints"]), 1)
		require.Equal(t, failID, objects(b10["entrypoints"])[0]["entrypoint_id"])

		checkTotals(t, h["totals"].(obj))
	})

	t.Run("daily and weekly roll-ups sum the hours", func(t *testing.T) {
		d := history(t, acme, "acme", query("granularity", "daily", "start", "2026-11-20T00:00:00Z", "end", "2026-11-22T00:00:00Z"))
		days := objects(d["buckets"])
		require.Len(t, days, 2)
		require.EqualValues(t, 0, days[0]["invocations"], "an empty day is listed with zeros")
		require.Empty(t, days[0]["entrypoints"])
		require.Equal(t, "2026-11-21T00:00:00Z", days[1]["start"])
		checkTotals(t, days[1])
		checkTotals(t, d["totals"].(obj))

		w := history(t, acme, "acme", query("granularity", "weekly", "start", "2026-11-21T09:00:00Z", "end", "2026-11-21T10:30:00Z"))
		require.Equal(t, "2026-11-16T00:00:00Z", w["start"], "weeks start on Monday")
		require.Equal(t, "2026-11-23T00:00:00Z", w["end"])
		weeks := objects(w["buckets"])
		require.Len(t, weeks, 1)
		checkTotals(t, weeks[0])

		def := history(t, acme, "acme", url.Values{})
		require.Equal(t, "daily", def["granularity"])
		require.Len(t, objects(def["buckets"]), 30, "the last 30 days by default")
		checkTotals(t, def["totals"].(obj))
	})

	t.Run("globex's history holds its own invocation only", func(t *testing.T) {
		h := history(t, globex, "globex", query("granularity", "daily", "start", "2026-11-21T00:00:00Z", "end", "2026-11-22T00:00:00Z"))
		tot := h["totals"].(obj)
		require.EqualValues(t, 1, tot["invocations"])
		require.InDelta(t, invGet(t, e, globex, invID(gRec))["cost"], tot["cost"], 1e-12)
	})

	t.Run("current usage against quotas", func(t *testing.T) {
		blocked := invAsync(t, e, acme, blockID, obj{"url": up.URL + "/block"}, nil)
		select {
		case <-up.arrived:
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the blocking invocation never reached the upstream")
		}
		r := e.expect(t, http.StatusOK, http.MethodGet, base+"/tenants/acme/usage", acme, nil).Body
		require.Equal(t, "acme", r["tenant_id"])
		require.Equal(t, clk.Now().Format(time.RFC3339Nano), r["timestamp"])
		require.Equal(t, obj{"concurrent_executions": 1.0, "total_definitions": 4.0, "total_schedules": 0.0, "total_triggers": 0.0,
			"execution_history_mb": 0.0}, r["current"])
		require.Equal(t, obj{"max_concurrent_executions": 4.0, "max_definitions": 10.0}, r["quotas"], "unset quotas are left out")
		require.Equal(t, obj{"concurrent_executions": 25.0, "definitions": 40.0}, r["utilization_percent"])
		close(up.release)
		invWait(t, e, acme, invID(blocked), "succeeded")
		r = e.expect(t, http.StatusOK, http.MethodGet, base+"/tenants/acme/usage", operator, nil).Body
		require.EqualValues(t, 0, r["current"].(obj)["concurrent_executions"], "the platform operator reads any tenant")

		g := e.expect(t, http.StatusOK, http.MethodGet, base+"/tenants/globex/usage", globex, nil).Body
		require.Equal(t, obj{}, g["quotas"])
		require.Equal(t, obj{}, g["utilization_percent"])
		require.EqualValues(t, 1, g["current"].(obj)["total_definitions"])
	})

	t.Run("access: another tenant's usage is 404, a non-admin gets 403", func(t *testing.T) {
		for _, p := range []string{"/usage", "/usage/history"} {
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, base+"/tenants/acme"+p, globex, nil)
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, base+"/tenants/globex"+p, acme, nil)
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, base+"/tenants/nobody"+p, operator, nil)
			e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, base+"/tenants/acme"+p, acmeViewer, nil)
		}
		// Validation does not reveal another tenant either.
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, base+"/tenants/acme/usage/history?granularity=monthly", globex, nil)
	})

	t.Run("bad queries are 422 naming the parameter, unknown ones 400", func(t *testing.T) {
		path := base + "/tenants/acme/usage/history?"
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodGet, path+"granularity=monthly", acme, nil)
		requireIssue(t, r, "$.granularity", "INVALID_VALUE")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodGet, path+"start=yesterday&end=2026-13-01T00:00:00Z", acme, nil)
		requireIssue(t, r, "$.start", "INVALID_VALUE")
		requireIssue(t, r, "$.end", "INVALID_VALUE")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodGet,
			path+query("start", "2026-11-21T10:00:00Z", "end", "2026-11-21T09:00:00Z").Encode(), acme, nil)
		requireIssue(t, r, "$.start", "INVALID_VALUE")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodGet,
			path+query("granularity", "hourly", "start", "2026-01-01T00:00:00Z").Encode(), acme, nil)
		requireIssue(t, r, "$.start", "INVALID_VALUE")
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, path+"tenant=acme", acme, nil)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, base+"/tenants/acme/usage?granularity=daily", acme, nil)
	})

	t.Run("a workflow's activations are executions: the one that parks and the one that finishes", func(t *testing.T) {
		clk.Set(time.Date(2026, 11, 21, 12, 5, 0, 0, time.UTC))
		wf := e.registerActive(t, acme, wfBody(t, "usage_sleeper.v1~", "def main(ctx, input):\n    r_sleep(1800000)\n    return {\"done\": True}\n"))
		wfID := wf["entrypoint_id"].(string)
		id := invID(invAsync(t, e, acme, wfID, obj{}, nil))
		invWait(t, e, acme, id, "suspended")
		clk.Advance(31 * time.Minute)
		e.srv.Wake()
		done := invWait(t, e, acme, id, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		m, c := executions(t, e, acme, id)
		require.Len(t, m, 2, "suspended and succeeded each close an activation")
		for i := range m {
			require.InDelta(t, execCost(m[i]), c[i], 1e-12)
		}
		require.InDelta(t, 0.25+c[0]+c[1], done["cost"], 1e-12)
		h := history(t, acme, "acme", query("granularity", "hourly", "start", "2026-11-21T12:00:00Z", "end", "2026-11-21T13:00:00Z"))
		b := objects(h["buckets"])[0]
		require.EqualValues(t, 1, b["invocations"])
		require.Equal(t, [3]float64{1, 0, 0}, byStatus(b))
		require.EqualValues(t, 2, b["executions"])
		require.InDelta(t, done["cost"], b["cost"], 1e-12)
		require.Equal(t, []string{wfID}, func() []string {
			var out []string
			for _, ep := range objects(b["entrypoints"]) {
				out = append(out, ep["entrypoint_id"].(string))
			}
			return out
		}())
	})
}
