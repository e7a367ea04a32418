package api_test

// HTTP-level tests of the invocation API: POST/GET /invocations, the timeline, :control, dry-run,
// Idempotency-Key deduplication, response caching, retries, limits, egress rules, roles, tenant
// isolation and version pinning. The server runs in this process (server.New behind httptest); the
// async dispatcher is started explicitly (invDispatcher) only where a test needs queued work to run.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
)

const (
	invPath  = base + "/invocations"
	invErrNS = "gts.x.core.serverless.err.v1~x.core.serverless.err."

	// composeProfile is docs/starlark.md's compose_customer_profile with the two upstream base URLs
	// (and a secret query parameter) templated in.
	composeProfile = `def main(ctx, input):
    profile = r_http_get_v1(%q + "/customers/" + input.customer_id + "?token=s3cret", timeout_ms=2000)
    orders = r_http_get_v1(%q + "/by-customer/" + input.customer_id + "?token=s3cret",
                           timeout_ms=2000, exit_on_http_error=%s)
    p, o = r_await_all([profile, orders])
    return {
        "name": p.response.body["name"],
        "orders": o.response.body.get("orders", []) if o.ok else [],
    }
`
)

// invErr is the GTS error type of a runtime error kind.
func invErr(kind string) string { return invErrNS + kind + ".v1~" }

// invEnvLoopback starts a server whose egress may reach 127.0.0.1 (httptest upstreams).
func invEnvLoopback(t testing.TB) *env {
	return newEnv(t, func(c *server.Config) { c.UnsafeEgressAllowLoopback = true })
}

// invDispatcher runs the async dispatcher until the test ends (it stops before the store closes).
func invDispatcher(t testing.TB, e *env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.srv.RunDispatcher(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// invTenant enables a tenant with an egress allowlist and returns an admin token for it.
func invTenant(t testing.TB, e *env, tenantID string, domains ...string) string {
	t.Helper()
	if domains == nil {
		domains = []string{"*"}
	}
	e.enable(t, tenantID, obj{"governance": obj{"allowed_outbound_domains": domains}})
	return e.token(t, tenantID, "admin", "admin")
}

// invFn is a function registration: calculate_tax's body with source src, an object params
// schema, an object returns schema, sync and async (default sync), no retries.
func invFn(t testing.TB, name, src string, mods ...func(obj)) obj {
	t.Helper()
	return fnNamed(t, name, append([]func(obj){
		source(src),
		set("schema.params", obj{"type": "object"}),
		set("schema.returns", obj{"type": "object"}),
		set("traits.invocation", obj{"supported": []any{"sync", "async"}, "default": "sync"}),
		set("traits.retry", obj{"max_attempts": 1, "initial_delay_ms": 0, "max_delay_ms": 0, "backoff_multiplier": 1.0}),
		set("traits.limits", obj{"timeout_seconds": 10, "memory_mb": 128, "cpu": 1.0, "max_concurrent": 100}),
	}, mods...)...)
}

// invStart posts a start request with optional headers.
func invStart(t testing.TB, e *env, tok string, body any, hdr map[string]string) *resp {
	t.Helper()
	return e.send(t, request{method: http.MethodPost, path: invPath, token: tok, body: body, header: hdr})
}

// invCall posts a start request and requires the status; it returns the InvocationResult's record.
func invCall(t testing.TB, e *env, tok string, status int, body any, hdr map[string]string) (obj, *resp) {
	t.Helper()
	r := invStart(t, e, tok, body, hdr)
	require.Equal(t, status, r.Status, "POST /invocations: %s", r)
	rec, ok := r.Body["record"].(obj)
	require.True(t, ok, "no record: %s", r)
	return rec, r
}

// invSync runs a sync invocation of id with params and returns its record.
func invSync(t testing.TB, e *env, tok, id string, params obj, hdr map[string]string) obj {
	t.Helper()
	rec, r := invCall(t, e, tok, http.StatusOK, obj{"entrypoint_id": id, "mode": "sync", "params": params}, hdr)
	require.Equal(t, false, r.Body["dry_run"], "%s", r)
	return rec
}

// invAsync starts an async invocation of id and returns its (queued) record.
func invAsync(t testing.TB, e *env, tok, id string, params obj, hdr map[string]string) obj {
	t.Helper()
	rec, r := invCall(t, e, tok, http.StatusAccepted, obj{"entrypoint_id": id, "mode": "async", "params": params}, hdr)
	require.Equal(t, base+"/invocations/"+invID(rec), r.Header.Get("Location"), "%s", r)
	require.Equal(t, "queued", rec["status"], "%s", r)
	return rec
}

func invID(rec obj) string { return rec["invocation_id"].(string) }

func invGet(t testing.TB, e *env, tok, id string) obj {
	t.Helper()
	return e.expect(t, http.StatusOK, http.MethodGet, invPath+"/"+id, tok, nil).Body
}

// invWait polls GET /invocations/{id} until its status is one of want.
func invWait(t testing.TB, e *env, tok, id string, want ...string) obj {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec := invGet(t, e, tok, id)
		if slices.Contains(want, rec["status"].(string)) {
			return rec
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "invocation did not reach the status", "want %v, last record %v", want, rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// invTimeline returns the timeline answer (its items and raw JSON).
// invTimeline reads an invocation's whole timeline, following the pages' next cursors.
func invTimeline(t testing.TB, e *env, tok, id string) ([]obj, []byte) {
	t.Helper()
	var items []obj
	var raw []byte
	q := url.Values{"limit": {"200"}}
	for {
		r := e.expect(t, http.StatusOK, http.MethodGet, invPath+"/"+id+"/timeline?"+q.Encode(), tok, nil)
		require.Equal(t, id, r.Body["invocation_id"], "%s", r)
		items, raw = append(items, r.items()...), append(raw, r.Raw...)
		next, _ := r.Body["page_info"].(obj)["next_cursor"].(string)
		if next == "" {
			return items, raw
		}
		q.Set("cursor", next)
	}
}

func invEventTypes(items []obj) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it["event_type"].(string))
	}
	return out
}

// invIndex returns the index of the first timeline item of type typ at or after from (-1: none).
func invIndex(items []obj, typ string, from int) int {
	for i := from; i < len(items); i++ {
		if items[i]["event_type"] == typ {
			return i
		}
	}
	return -1
}

func invControl(t testing.TB, e *env, tok, id, action string) *resp {
	t.Helper()
	return e.do(t, http.MethodPost, invPath+"/"+id+":control", tok, obj{"action": action})
}

// invList lists invocations with the query (one page) and returns the ids.
func invList(t testing.TB, e *env, tok string, q url.Values) []string {
	t.Helper()
	r := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+q.Encode(), tok, nil)
	out := []string{}
	for _, it := range r.items() {
		out = append(out, invID(it))
	}
	return out
}

// invErrorOf returns the record's error object (required to be present).
func invErrorOf(t testing.TB, rec obj) obj {
	t.Helper()
	e, ok := rec["error"].(obj)
	require.True(t, ok, "record has no error: %v", rec)
	return e
}

// invJSON is v in JSON.
func invJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// invUpstream is an httptest upstream counting its hits; status (200 at first) and body are
// switchable.
type invUpstream struct {
	*httptest.Server
	hits   atomic.Int64
	status atomic.Int64
	body   atomic.Value // string
	mu     sync.Mutex
	urls   []string
}

func newInvUpstream(t testing.TB, body string) *invUpstream {
	u := &invUpstream{}
	u.status.Store(http.StatusOK)
	u.body.Store(body)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.urls = append(u.urls, r.URL.String())
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(u.status.Load()))
		_, _ = w.Write([]byte(u.body.Load().(string)))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *invUpstream) set(status int, body string) {
	u.status.Store(int64(status))
	u.body.Store(body)
}

// heapSampler records the peak HeapAlloc and Sys of this process while it runs.
type heapSampler struct {
	stop      chan struct{}
	done      chan struct{}
	peakHeap  atomic.Uint64
	peakSys   atomic.Uint64
	startHeap uint64
	startSys  uint64
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{}), startHeap: ms.HeapAlloc, startSys: ms.Sys}
	h.peakHeap.Store(ms.HeapAlloc)
	h.peakSys.Store(ms.Sys)
	go func() {
		defer close(h.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > h.peakHeap.Load() {
				h.peakHeap.Store(ms.HeapAlloc)
			}
			if ms.Sys > h.peakSys.Load() {
				h.peakSys.Store(ms.Sys)
			}
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// finish stops sampling and returns the growth of the peak heap and of Sys over the start.
func (h *heapSampler) finish() (heapGrowth, sysGrowth int64) {
	close(h.stop)
	<-h.done
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > h.peakHeap.Load() {
		h.peakHeap.Store(ms.HeapAlloc)
	}
	if ms.Sys > h.peakSys.Load() {
		h.peakSys.Store(ms.Sys)
	}
	return int64(h.peakHeap.Load()) - int64(h.startHeap), int64(h.peakSys.Load()) - int64(h.startSys)
}

func TestInvocations(t *testing.T) {
	t.Parallel()
	t.Run("calculate_tax sync and async", func(t *testing.T) {
		e := newEnv(t)
		invDispatcher(t, e)
		adm := invTenant(t, e, "acme")
		op := e.token(t, "acme", "olga", "operator")
		ep := e.registerActive(t, adm, fn(t, taxV1))
		params := obj{"invoice_id": "inv_001", "amount": 100}

		checkTax := func(t *testing.T, rec obj) {
			t.Helper()
			require.Equal(t, "succeeded", rec["status"], "%v", rec)
			res := rec["result"].(obj)
			require.InDelta(t, 10.0, res["tax"], 1e-9, "%v", rec)
			require.InDelta(t, 110.0, res["total"], 1e-9, "%v", rec)
			require.Nil(t, rec["error"])
			require.Equal(t, taxV1, rec["entrypoint_id"])
			require.Equal(t, "1.0.0", rec["entrypoint_version"])
			require.Equal(t, "acme", rec["tenant_id"])
			require.Equal(t, obj{"invoice_id": "inv_001", "amount": 100.0}, rec["params"])
			require.EqualValues(t, 1, rec["attempt"])
			ts := rec["timestamps"].(obj)
			var created, started, finished time.Time
			for k, p := range map[string]*time.Time{"created_at": &created, "started_at": &started, "finished_at": &finished} {
				s, _ := ts[k].(string)
				require.NotEmpty(t, s, "timestamps.%s: %v", k, rec)
				v, err := time.Parse(time.RFC3339Nano, s)
				require.NoError(t, err)
				*p = v
			}
			require.Nil(t, ts["suspended_at"])
			require.False(t, started.Before(created), "%v", ts)
			require.False(t, finished.Before(started), "%v", ts)
			o := rec["observability"].(obj)
			require.NotEmpty(t, o["correlation_id"])
			require.NotEmpty(t, o["trace_id"])
			require.NotEmpty(t, o["span_id"])
			m := o["metrics"].(obj)
			for _, k := range []string{"duration_ms", "billed_duration_ms", "cpu_time_ms", "memory_limit_mb", "max_memory_used_mb", "step_count"} {
				v, ok := m[k].(float64)
				require.True(t, ok, "metrics.%s is not a number: %v", k, m)
				require.GreaterOrEqual(t, v, 0.0, "metrics.%s", k)
			}
			require.EqualValues(t, 128, m["memory_limit_mb"])
			require.Greater(t, m["step_count"].(float64), 0.0)
			require.GreaterOrEqual(t, m["billed_duration_ms"].(float64), 1.0)
			require.GreaterOrEqual(t, m["billed_duration_ms"].(float64), m["duration_ms"].(float64))
		}

		t.Run("sync", func(t *testing.T) {
			rec, r := invCall(t, e, op, http.StatusOK, obj{"entrypoint_id": taxV1, "mode": "sync", "params": params},
				map[string]string{"X-Correlation-Id": "corr-tax-1"})
			require.Equal(t, false, r.Body["dry_run"])
			require.Equal(t, false, r.Body["cached"])
			require.Empty(t, r.Header.Get("Location"), "a sync invocation has no Location")
			checkTax(t, rec)
			require.True(t, strings.HasPrefix(invID(rec), "inv_"), "%v", rec)
			require.Equal(t, "sync", rec["mode"])
			require.Equal(t, "corr-tax-1", rec["observability"].(obj)["correlation_id"])
			require.Equal(t, rec, invGet(t, e, op, invID(rec)), "GET shows the record the sync call returned")
		})

		t.Run("trace context continues a W3C traceparent", func(t *testing.T) {
			const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
			rec := invSync(t, e, op, taxV1, params, map[string]string{"Traceparent": "00-" + trace + "-00f067aa0ba902b7-01"})
			checkTax(t, rec)
			require.Equal(t, trace, rec["observability"].(obj)["trace_id"])
		})

		t.Run("every way of naming the entrypoint", func(t *testing.T) {
			for _, id := range []string{taxV1, idOf(ep)} {
				rec := invSync(t, e, op, id, params, nil)
				checkTax(t, rec)
			}
			// A major-only id that is not registered itself resolves to the latest active minor.
			v20 := fnPrefix + "vendor.app.billing.calculate_tax.v2.0~"
			v21 := fnPrefix + "vendor.app.billing.calculate_tax.v2.1~"
			e.registerActive(t, adm, fn(t, v20))
			rec := invSync(t, e, op, fnPrefix+"vendor.app.billing.calculate_tax.v2~", params, nil)
			require.Equal(t, v20, rec["entrypoint_id"])
			require.Equal(t, "2.0.0", rec["entrypoint_version"])
			e.registerActive(t, adm, fn(t, v21, source("def main(ctx, input):\n  return {\"tax\": 0, \"total\": input.amount}\n")))
			rec = invSync(t, e, op, fnPrefix+"vendor.app.billing.calculate_tax.v2~", params, nil)
			require.Equal(t, v21, rec["entrypoint_id"])
			require.Equal(t, "2.1.0", rec["entrypoint_version"])
			require.InDelta(t, 0.0, rec["result"].(obj)["tax"], 1e-9)
			// An exact id still pins its version.
			rec = invSync(t, e, op, v20, params, nil)
			require.Equal(t, "2.0.0", rec["entrypoint_version"])
			require.InDelta(t, 10.0, rec["result"].(obj)["tax"], 1e-9)
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, invPath, op,
				obj{"entrypoint_id": fnPrefix + "vendor.app.billing.calculate_tax.v3~", "mode": "sync", "params": params})
		})

		t.Run("async", func(t *testing.T) {
			rec, r := invCall(t, e, op, http.StatusAccepted, obj{"entrypoint_id": taxV1, "mode": "async", "params": params},
				map[string]string{"X-Correlation-Id": "corr-tax-async"})
			id := invID(rec)
			require.True(t, strings.HasPrefix(id, "inv_"), "%s", id)
			require.Equal(t, base+"/invocations/"+id, r.Header.Get("Location"))
			require.Equal(t, "queued", rec["status"])
			require.Equal(t, "async", rec["mode"])
			require.Equal(t, false, r.Body["dry_run"])
			require.Equal(t, false, r.Body["cached"])
			require.Nil(t, rec["result"])

			done := invWait(t, e, op, id, "succeeded", "failed", "dead_lettered", "canceled")
			checkTax(t, done)
			require.Equal(t, "corr-tax-async", done["observability"].(obj)["correlation_id"])

			items, _ := invTimeline(t, e, op, id)
			types := invEventTypes(items)
			require.Equal(t, []string{"created", "started", "succeeded"}, types)
			for i, want := range []string{"queued", "running", "succeeded"} {
				require.Equal(t, want, items[i]["status"], "timeline %d: %v", i, items[i])
				require.NotEmpty(t, items[i]["at"])
			}
		})

		t.Run("the default mode is traits.invocation.default", func(t *testing.T) {
			rec, _ := invCall(t, e, op, http.StatusAccepted, obj{"entrypoint_id": taxV1, "params": params}, nil)
			require.Equal(t, "async", rec["mode"])
			invWait(t, e, op, invID(rec), "succeeded")
		})
	})

	t.Run("compose_customer_profile against stub upstreams", func(t *testing.T) {
		e := invEnvLoopback(t)
		adm := invTenant(t, e, "acme")
		profile := newInvUpstream(t, `{"name":"Ada"}`)
		orders := newInvUpstream(t, `{"orders":[1,2]}`)
		register := func(name, exitOnOrders string) string {
			body := invFn(t, name, fmt.Sprintf(composeProfile, profile.URL, orders.URL, exitOnOrders),
				set("schema.params", obj{"type": "object", "properties": obj{"customer_id": obj{"type": "string"}}, "required": []any{"customer_id"}}))
			return e.registerActive(t, adm, body)["entrypoint_id"].(string)
		}
		compose := register("crm.compose_customer_profile.v1~", "False")
		composeStrict := register("crm.compose_customer_profile_strict.v1~", "True")

		// noSecrets asserts neither the query secret nor any path reached the record or timeline.
		noSecrets := func(t *testing.T, rec obj, timeline []byte) {
			t.Helper()
			for _, s := range []string{"s3cret", "token=", "/customers/", "/by-customer/", "cust_Zq9"} {
				require.NotContains(t, string(timeline), s, "timeline leaks %q: %s", s, timeline)
			}
			recJSON := invJSON(t, rec)
			for _, s := range []string{"s3cret", "token=", "/customers/", "/by-customer/"} {
				require.NotContains(t, recJSON, s, "record leaks %q: %s", s, recJSON)
			}
		}

		t.Run("success", func(t *testing.T) {
			rec := invSync(t, e, adm, compose, obj{"customer_id": "cust_Zq9"}, nil)
			require.Equal(t, "succeeded", rec["status"], "%v", rec)
			require.Equal(t, obj{"name": "Ada", "orders": []any{1.0, 2.0}}, rec["result"])
			require.Contains(t, profile.urls, "/customers/cust_Zq9?token=s3cret", "the upstream got the full URL")

			items, raw := invTimeline(t, e, adm, invID(rec))
			var calls []obj
			for _, it := range items {
				if it["event_type"] == "http_call" {
					calls = append(calls, it)
				}
			}
			require.Len(t, calls, 2, "timeline: %s", raw)
			for _, c := range calls {
				d := c["details"].(obj)
				require.Equal(t, "GET", d["method"], "%v", c)
				require.Equal(t, "127.0.0.1", d["host"], "%v", c)
				require.EqualValues(t, 200, d["status"], "%v", c)
				_, ok := d["duration_ms"].(float64)
				require.True(t, ok, "duration_ms: %v", c)
				for _, k := range []string{"path", "url", "query", "headers", "body"} {
					require.NotContains(t, d, k, "%v", c)
				}
			}
			noSecrets(t, rec, raw)
		})

		t.Run("profile upstream 500 fails with the http error", func(t *testing.T) {
			profile.set(http.StatusInternalServerError, `{"error":"boom"}`)
			defer profile.set(http.StatusOK, `{"name":"Ada"}`)
			rec := invSync(t, e, adm, compose, obj{"customer_id": "cust_Zq9"}, nil)
			require.Contains(t, []string{"failed", "dead_lettered"}, rec["status"], "%v", rec)
			require.Nil(t, rec["result"])
			require.Equal(t, invErr("http"), invErrorOf(t, rec)["error_type_id"], "%v", rec)
			_, raw := invTimeline(t, e, adm, invID(rec))
			noSecrets(t, rec, raw)
		})

		t.Run("orders 503 with exit_on_http_error=False still succeeds", func(t *testing.T) {
			orders.set(http.StatusServiceUnavailable, `{"error":"down"}`)
			defer orders.set(http.StatusOK, `{"orders":[1,2]}`)
			rec := invSync(t, e, adm, compose, obj{"customer_id": "cust_Zq9"}, nil)
			require.Equal(t, "succeeded", rec["status"], "%v", rec)
			require.Equal(t, obj{"name": "Ada", "orders": []any{}}, rec["result"])
			items, raw := invTimeline(t, e, adm, invID(rec))
			var statuses []float64
			for _, it := range items {
				if it["event_type"] == "http_call" {
					statuses = append(statuses, it["details"].(obj)["status"].(float64))
				}
			}
			require.ElementsMatch(t, []float64{200, 503}, statuses, "%s", raw)
			noSecrets(t, rec, raw)

			// The same 503 with the default exit_on_http_error fails the invocation.
			rec = invSync(t, e, adm, composeStrict, obj{"customer_id": "cust_Zq9"}, nil)
			require.Equal(t, invErr("http"), invErrorOf(t, rec)["error_type_id"], "%v", rec)
		})
	})

	t.Run("egress refuses private addresses and unlisted domains", func(t *testing.T) {
		e := newEnv(t) // no UnsafeEgressAllowLoopback
		adm := invTenant(t, e, "acme")
		local := newInvUpstream(t, `{}`)
		fetch := e.registerActive(t, adm, invFn(t, "egress.fetch.v1~",
			"def main(ctx, input):\n  r = r_await(r_http_get_v1(input.url, timeout_ms=2000))\n  return {\"status\": r.response.status_code}\n"))["entrypoint_id"].(string)

		check := func(t *testing.T, tok, target, kind string) {
			t.Helper()
			start := time.Now()
			rec := invSync(t, e, tok, fetch, obj{"url": target}, nil)
			require.Less(t, time.Since(start), 5*time.Second, "%s: no connection attempt should be made", target)
			require.Contains(t, []string{"failed", "dead_lettered"}, rec["status"], "%s: %v", target, rec)
			er := invErrorOf(t, rec)
			require.Equal(t, invErr("http_transport"), er["error_type_id"], "%s: %v", target, er)
			d, ok := er["details"].(obj)
			require.True(t, ok, "%s: error has no details: %v", target, er)
			require.Equal(t, kind, d["kind"], "%s: %v", target, er)
		}

		for _, target := range []string{
			local.URL + "/?token=s3cret",
			"http://169.254.169.254/latest/meta-data",
			"http://10.0.0.1/",
			"http://192.168.1.1/",
		} {
			check(t, adm, target, "forbidden_address")
		}
		require.Zero(t, local.hits.Load(), "the loopback upstream must never be reached")

		// A tenant whose allowlist names one host.
		e.enable(t, "narrow", obj{"governance": obj{"allowed_outbound_domains": []string{"api.example.com"}}})
		narrow := e.token(t, "narrow", "admin", "admin")
		narrowFetch := e.registerActive(t, narrow, invFn(t, "egress.fetch.v1~",
			"def main(ctx, input):\n  r = r_await(r_http_get_v1(input.url, timeout_ms=2000))\n  return {\"status\": r.response.status_code}\n"))["entrypoint_id"].(string)
		require.Equal(t, fetch, narrowFetch)
		check(t, narrow, "https://evil.example.org/steal", "forbidden_domain")
		check(t, narrow, "https://example.com/", "forbidden_domain")
		check(t, narrow, local.URL+"/", "forbidden_domain") // an IP literal is allowed only if listed (or "*")
		require.Zero(t, local.hits.Load())

		// A tenant whose allowlist names the loopback address itself: allowed by the list, still
		// refused as a private address.
		e.enable(t, "literal", obj{"governance": obj{"allowed_outbound_domains": []string{"127.0.0.1"}}})
		literal := e.token(t, "literal", "admin", "admin")
		e.registerActive(t, literal, invFn(t, "egress.fetch.v1~",
			"def main(ctx, input):\n  r = r_await(r_http_get_v1(input.url, timeout_ms=2000))\n  return {\"status\": r.response.status_code}\n"))
		check(t, literal, local.URL+"/", "forbidden_address")
		check(t, literal, "https://api.example.com/", "forbidden_domain")
		require.Zero(t, local.hits.Load())
	})

	t.Run("dry run", func(t *testing.T) {
		e := newEnv(t) // dispatcher not running: async work stays queued
		adm := invTenant(t, e, "acme")
		e.registerActive(t, adm, fn(t, taxV1))
		draft := e.register(t, adm, fnNamed(t, "dry.draft.v1~"))["entrypoint_id"].(string)
		disabled := e.registerActive(t, adm, fnNamed(t, "dry.disabled.v1~"))
		e.status(t, adm, idOf(disabled), "disable")
		params := obj{"invoice_id": "inv_001", "amount": 100}
		dry := func(id string, p any) obj {
			return obj{"entrypoint_id": id, "mode": "async", "params": p, "dry_run": true}
		}

		t.Run("synthetic record, nothing persisted", func(t *testing.T) {
			rec, r := invCall(t, e, adm, http.StatusOK, dry(taxV1, params), map[string]string{"X-Correlation-Id": "corr-dry"})
			require.Equal(t, true, r.Body["dry_run"])
			require.Equal(t, false, r.Body["cached"])
			require.Empty(t, r.Header.Get("Location"))
			id := invID(rec)
			require.True(t, strings.HasPrefix(id, "dryrun_"), "%s", id)
			require.Equal(t, "queued", rec["status"])
			require.Equal(t, taxV1, rec["entrypoint_id"])
			require.Equal(t, "1.0.0", rec["entrypoint_version"])
			require.Equal(t, "acme", rec["tenant_id"])
			require.Equal(t, "async", rec["mode"])
			require.Equal(t, obj{"invoice_id": "inv_001", "amount": 100.0}, rec["params"])
			require.Nil(t, rec["result"])
			require.Nil(t, rec["error"])
			ts := rec["timestamps"].(obj)
			require.NotEmpty(t, ts["created_at"])
			require.Nil(t, ts["started_at"])
			require.Nil(t, ts["finished_at"])
			o := rec["observability"].(obj)
			require.Equal(t, "corr-dry", o["correlation_id"])
			require.Nil(t, o["trace_id"])
			require.Nil(t, o["span_id"])

			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+id, adm, nil)
			require.Empty(t, invList(t, e, adm, query("limit", "100")), "a dry run persists nothing")
		})

		t.Run("dry run does not consume an Idempotency-Key", func(t *testing.T) {
			key := map[string]string{"Idempotency-Key": "dry-key-1"}
			_, r := invCall(t, e, adm, http.StatusOK, dry(taxV1, params), key)
			require.Empty(t, r.Header.Get("Idempotency-Replayed"))
			// A real start with the same key and different params is not a key reuse.
			other := obj{"invoice_id": "inv_002", "amount": 5}
			real := invAsync(t, e, adm, taxV1, other, key)
			// And a dry run neither evaluates nor enforces the key afterwards.
			_, r = invCall(t, e, adm, http.StatusOK, dry(taxV1, params), key)
			require.Equal(t, true, r.Body["dry_run"])
			require.Empty(t, r.Header.Get("Idempotency-Replayed"))
			require.Equal(t, []string{invID(real)}, invList(t, e, adm, query("limit", "100")))
			require.Equal(t, http.StatusOK, invControl(t, e, adm, invID(real), "cancel").Status)
		})

		t.Run("checks run in order", func(t *testing.T) {
			// 1. unknown entrypoint
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, invPath, adm, dry(fnPrefix+"vendor.app.dry.nope.v1~", params))
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, invPath, adm, dry("ep_0123456789abcdef0123456789abcdef", params))
			// 2. not callable (draft, disabled) — before the params check
			for _, id := range []string{draft, idOf(disabled), disabled["entrypoint_id"].(string) + ""} {
				e.expectProblem(t, http.StatusConflict, "not_active", http.MethodPost, invPath, adm, dry(id, obj{"bogus": true}))
			}
			// 3. params
			r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, invPath, adm,
				dry(taxV1, obj{"invoice_id": 7}))
			require.NotEmpty(t, r.errors(), "%s", r)
			for _, is := range r.errors() {
				require.True(t, strings.HasPrefix(is["path"].(string), "$.params"), "issue path: %s", r)
			}
			require.NotNil(t, issueAt(r, "$.params.invoice_id"), "%s", r)

			// 4. quota: one running invocation with max_concurrent_executions 1 (the dispatcher is
			// not running: a claim makes the queued invocation run, and its attempt is never run).
			queued := invAsync(t, e, adm, taxV1, params, nil)
			e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"quotas": obj{"max_concurrent_executions": 1}})
			_, r = invCall(t, e, adm, http.StatusOK, dry(taxV1, params), nil)
			require.Equal(t, true, r.Body["dry_run"], "queued work holds no slot")
			claimed, err := e.srv.Claims.Claim(context.Background(), 4)
			require.NoError(t, err)
			require.Len(t, claimed, 1)
			r = e.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, invPath, adm, dry(taxV1, params))
			require.NotEmpty(t, r.Header.Get("Retry-After"), "%s", r)
			// The earlier checks still win over the quota.
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, invPath, adm, dry(fnPrefix+"vendor.app.dry.nope.v1~", params))
			e.expectProblem(t, http.StatusConflict, "not_active", http.MethodPost, invPath, adm, dry(draft, params))
			e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, invPath, adm, dry(taxV1, obj{"invoice_id": 7}))
			// A real start is refused too; a dry run did not take the slot.
			r = e.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, invPath, adm,
				obj{"entrypoint_id": taxV1, "mode": "async", "params": params})
			require.NotEmpty(t, r.Header.Get("Retry-After"))
			// Freeing the slot lets the dry run pass again.
			require.Equal(t, http.StatusOK, invControl(t, e, adm, invID(queued), "cancel").Status)
			_, r = invCall(t, e, adm, http.StatusOK, dry(taxV1, params), nil)
			require.Equal(t, true, r.Body["dry_run"])
		})
	})

	t.Run("Idempotency-Key deduplicates starts", func(t *testing.T) {
		e := newEnv(t) // dispatcher not running
		adm := invTenant(t, e, "acme")
		e.registerActive(t, adm, fn(t, taxV1))
		params := obj{"invoice_id": "inv_001", "amount": 100}

		t.Run("same key, same request: the same invocation", func(t *testing.T) {
			key := map[string]string{"Idempotency-Key": "idem-1"}
			first := invAsync(t, e, adm, taxV1, params, key)
			rec, r := invCall(t, e, adm, http.StatusOK, obj{"entrypoint_id": taxV1, "mode": "async", "params": params}, key)
			require.Equal(t, "true", r.Header.Get("Idempotency-Replayed"), "%s", r)
			require.Equal(t, invID(first), invID(rec))
			require.Equal(t, false, r.Body["cached"])

			// Sync too.
			skey := map[string]string{"Idempotency-Key": "idem-sync"}
			s1 := invSync(t, e, adm, taxV1, params, skey)
			_, r = invCall(t, e, adm, http.StatusOK, obj{"entrypoint_id": taxV1, "mode": "sync", "params": params}, skey)
			require.Equal(t, "true", r.Header.Get("Idempotency-Replayed"), "%s", r)
			require.Equal(t, invID(s1), invID(r.Body["record"].(obj)))
		})

		t.Run("same key, different params: 422", func(t *testing.T) {
			key := map[string]string{"Idempotency-Key": "idem-2"}
			invAsync(t, e, adm, taxV1, params, key)
			r := invStart(t, e, adm, obj{"entrypoint_id": taxV1, "mode": "async", "params": obj{"invoice_id": "inv_001", "amount": 101}}, key)
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r)
			require.Equal(t, "validation", problemKind(r))
		})

		t.Run("100 parallel identical starts make one invocation", func(t *testing.T) {
			e.enable(t, "race", obj{"governance": obj{"allowed_outbound_domains": []string{"*"}}})
			tok := e.token(t, "race", "admin", "admin")
			// Without its rate limit: 100 requests at once would exceed its burst of 20 before the
			// first one is stored (TestRateLimits covers limits; a replay gives its permit back).
			e.registerActive(t, tok, fn(t, taxV1, func(b obj) { delete(b["traits"].(obj), "rate_limit") }))
			const n = 100
			var mu sync.Mutex
			seen := map[string]int{}
			got := parallel(t, n, func(int) *resp {
				rec := &recorder{TB: t}
				r := invStart(rec, e, tok, obj{"entrypoint_id": taxV1, "mode": "async", "params": params},
					map[string]string{"Idempotency-Key": "idem-race"})
				if rb, ok := r.Body["record"].(obj); ok {
					mu.Lock()
					seen[invID(rb)]++
					mu.Unlock()
				}
				return r
			})
			require.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusOK: n - 1}, got)
			require.Len(t, seen, 1, "every answer names the same invocation: %v", seen)
			list := invList(t, e, tok, query("limit", "100"))
			require.Len(t, list, 1, "%v", list)
			for id := range seen {
				require.Equal(t, []string{id}, list)
			}
		})

		t.Run("a too long key is 400", func(t *testing.T) {
			r := invStart(t, e, adm, obj{"entrypoint_id": taxV1, "mode": "async", "params": params},
				map[string]string{"Idempotency-Key": strings.Repeat("k", 256)})
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r)
		})
	})

	t.Run("response caching", func(t *testing.T) {
		e := invEnvLoopback(t)
		invDispatcher(t, e)
		adm := invTenant(t, e, "acme")
		alice := e.token(t, "acme", "alice", "developer")
		bob := e.token(t, "acme", "bob", "operator")
		up := newInvUpstream(t, `{"v":1}`)
		src := fmt.Sprintf("def main(ctx, input):\n  r = r_await(r_http_get_v1(%q, timeout_ms=2000))\n  return {\"v\": r.response.body[\"v\"], \"inv\": ctx.invocation_id}\n", up.URL+"/v")
		cached := func(mods ...func(obj)) []func(obj) {
			return append([]func(obj){set("traits.is_idempotent", true), set("traits.caching", obj{"max_age_seconds": 60})}, mods...)
		}
		tenantFn := e.registerActive(t, adm, invFn(t, "cache.tenant.v1~", src, cached()...))["entrypoint_id"].(string)
		userEp := e.register(t, alice, invFn(t, "cache.user.v1~", src, cached(del("owner"), set("shared", true))...))
		require.Equal(t, "user", userEp["owner"].(obj)["owner_type"])
		e.status(t, alice, idOf(userEp), "activate")
		userFn := userEp["entrypoint_id"].(string)
		notIdem := e.registerActive(t, adm, invFn(t, "cache.not_idempotent.v1~", src,
			set("traits.is_idempotent", false), set("traits.caching", obj{"max_age_seconds": 60})))["entrypoint_id"].(string)

		syncBody := func(id string) obj { return obj{"entrypoint_id": id, "mode": "sync", "params": obj{}} }

		t.Run("a second call with the key returns the original record", func(t *testing.T) {
			hits := up.hits.Load()
			key := map[string]string{"Idempotency-Key": "cache-1"}
			first, r := invCall(t, e, adm, http.StatusOK, syncBody(tenantFn), key)
			require.Equal(t, false, r.Body["cached"])
			require.Equal(t, "succeeded", first["status"])
			second, r := invCall(t, e, adm, http.StatusOK, syncBody(tenantFn), key)
			require.Equal(t, true, r.Body["cached"], "%s", r)
			require.Equal(t, false, r.Body["dry_run"])
			require.Equal(t, first, second, "the original record: same id, timestamps and observability")
			require.Equal(t, hits+1, up.hits.Load(), "a cache hit runs no code")
			// Another subject of the tenant shares a tenant-owned entry.
			third, r := invCall(t, e, bob, http.StatusOK, syncBody(tenantFn), key)
			require.Equal(t, true, r.Body["cached"], "%s", r)
			require.Equal(t, invID(first), invID(third))
			require.Len(t, invList(t, e, adm, query("$filter", "entrypoint_id eq '"+tenantFn+"'")), 1, "no record for a cache hit")
		})

		t.Run("the cache never crosses tenants", func(t *testing.T) {
			other := invTenant(t, e, "globex")
			e.registerActive(t, other, invFn(t, "cache.tenant.v1~", src, cached()...))
			key := map[string]string{"Idempotency-Key": "cache-1"}
			rec, r := invCall(t, e, other, http.StatusOK, syncBody(tenantFn), key)
			require.Equal(t, false, r.Body["cached"], "%s", r)
			require.Equal(t, "globex", rec["tenant_id"])
		})

		t.Run("a user-owned entrypoint's cache is per subject", func(t *testing.T) {
			key := map[string]string{"Idempotency-Key": "cache-user"}
			hits := up.hits.Load()
			a1, r := invCall(t, e, alice, http.StatusOK, syncBody(userFn), key)
			require.Equal(t, false, r.Body["cached"])
			a2, r := invCall(t, e, alice, http.StatusOK, syncBody(userFn), key)
			require.Equal(t, true, r.Body["cached"], "%s", r)
			require.Equal(t, invID(a1), invID(a2))
			b1, r := invCall(t, e, bob, http.StatusOK, syncBody(userFn), key)
			require.Equal(t, false, r.Body["cached"], "bob must not get alice's cached result: %s", r)
			require.Empty(t, r.Header.Get("Idempotency-Replayed"), "bob must not get alice's invocation: %s", r)
			require.NotEqual(t, invID(a1), invID(b1), "bob's call executes anew")
			require.Equal(t, "succeeded", b1["status"])
			require.Equal(t, hits+2, up.hits.Load(), "alice once, bob once")
			b2, r := invCall(t, e, bob, http.StatusOK, syncBody(userFn), key)
			require.Equal(t, true, r.Body["cached"], "%s", r)
			require.Equal(t, invID(b1), invID(b2))
		})

		t.Run("failures are not cached", func(t *testing.T) {
			up.set(http.StatusInternalServerError, `{}`)
			key := map[string]string{"Idempotency-Key": "cache-fail"}
			first, r := invCall(t, e, adm, http.StatusOK, syncBody(tenantFn), key)
			require.Equal(t, false, r.Body["cached"])
			require.Contains(t, []string{"failed", "dead_lettered"}, first["status"], "%v", first)
			up.set(http.StatusOK, `{"v":1}`)
			second, r := invCall(t, e, adm, http.StatusOK, syncBody(tenantFn), key)
			require.Equal(t, false, r.Body["cached"], "a failure is never served from the cache: %s", r)
			// Within the deduplication window the key still names the first (failed) start.
			require.Equal(t, invID(first), invID(second))
			require.Equal(t, "true", r.Header.Get("Idempotency-Replayed"))
			// A fresh key executes and then caches the success.
			k2 := map[string]string{"Idempotency-Key": "cache-after-fail"}
			ok1, r := invCall(t, e, adm, http.StatusOK, syncBody(tenantFn), k2)
			require.Equal(t, false, r.Body["cached"])
			require.Equal(t, "succeeded", ok1["status"])
			_, r = invCall(t, e, adm, http.StatusOK, syncBody(tenantFn), k2)
			require.Equal(t, true, r.Body["cached"])
		})

		t.Run("without the key, or without is_idempotent, nothing is cached", func(t *testing.T) {
			hits := up.hits.Load()
			a, r := invCall(t, e, adm, http.StatusOK, syncBody(tenantFn), nil)
			require.Equal(t, false, r.Body["cached"])
			b, r := invCall(t, e, adm, http.StatusOK, syncBody(tenantFn), nil)
			require.Equal(t, false, r.Body["cached"])
			require.NotEqual(t, invID(a), invID(b))
			key := map[string]string{"Idempotency-Key": "cache-not-idem"}
			c, r := invCall(t, e, adm, http.StatusOK, syncBody(notIdem), key)
			require.Equal(t, false, r.Body["cached"])
			d, r := invCall(t, e, adm, http.StatusOK, syncBody(notIdem), key)
			require.Equal(t, false, r.Body["cached"], "%s", r)
			require.Equal(t, invID(c), invID(d), "deduplicated, not cached")
			require.Equal(t, hits+3, up.hits.Load())
		})

		t.Run("dry run never reads the cache", func(t *testing.T) {
			key := map[string]string{"Idempotency-Key": "cache-1"}
			rec, r := invCall(t, e, adm, http.StatusOK, obj{"entrypoint_id": tenantFn, "mode": "sync", "dry_run": true}, key)
			require.Equal(t, true, r.Body["dry_run"])
			require.Equal(t, false, r.Body["cached"])
			require.True(t, strings.HasPrefix(invID(rec), "dryrun_"))
		})

		t.Run("replay never returns the cached result", func(t *testing.T) {
			key := map[string]string{"Idempotency-Key": "cache-replay"}
			orig := invSync(t, e, adm, tenantFn, obj{}, key)
			_, r := invCall(t, e, adm, http.StatusOK, syncBody(tenantFn), key)
			require.Equal(t, true, r.Body["cached"])
			hits := up.hits.Load()
			r = invControl(t, e, adm, invID(orig), "replay")
			require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
			replayID := invID(r.Body)
			require.NotEqual(t, invID(orig), replayID)
			require.NotContains(t, r.Body, "cached")
			done := invWait(t, e, adm, replayID, "succeeded", "dead_lettered")
			require.Equal(t, "succeeded", done["status"], "%v", done)
			require.Equal(t, replayID, done["result"].(obj)["inv"], "the replay ran its own code")
			require.Equal(t, hits+1, up.hits.Load(), "the replay executed")
			require.Equal(t, invID(orig), done["replay_of"])
		})
	})

	t.Run("retries and control actions", func(t *testing.T) {
		e := newEnv(t)
		adm := invTenant(t, e, "acme")
		viewer := e.token(t, "acme", "vera", "viewer")
		failing := e.registerActive(t, adm, invFn(t, "retry.always_fails.v1~", "def main(ctx, input):\n  fail(\"boom on attempt %d\" % ctx.attempt)\n",
			set("traits.retry", obj{"max_attempts": 2, "initial_delay_ms": 0, "max_delay_ms": 0, "backoff_multiplier": 1.0})))["entrypoint_id"].(string)
		ok := e.registerActive(t, adm, invFn(t, "retry.ok.v1~", "def main(ctx, input):\n  return {\"attempt\": ctx.attempt}\n"))["entrypoint_id"].(string)

		// With the dispatcher stopped, async work stays queued.
		t.Run("cancel a queued invocation", func(t *testing.T) {
			q := invAsync(t, e, adm, ok, obj{}, nil)
			r := invControl(t, e, adm, invID(q), "cancel")
			require.Equal(t, http.StatusOK, r.Status, "%s", r)
			require.Equal(t, "canceled", r.Body["status"])
			require.Equal(t, invID(q), invID(r.Body))
			require.Equal(t, "canceled", invGet(t, e, adm, invID(q))["status"])

			r = invControl(t, e, adm, invID(q), "cancel")
			require.Equal(t, http.StatusConflict, r.Status, "%s", r)
			require.Equal(t, "conflict", problemKind(r))
			require.Equal(t, "invalid_transition", r.Body["reason"], "%s", r)
			require.Equal(t, "canceled", r.Body["current_status"], "%s", r)

			r = invControl(t, e, adm, invID(q), "explode")
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r)
			requireIssue(t, r, "$.action", "")
			r = invControl(t, e, adm, invID(q), "retry")
			require.Equal(t, http.StatusConflict, r.Status, "retry of a canceled invocation: %s", r)
			r = invControl(t, e, adm, invID(q), "replay")
			require.Equal(t, http.StatusConflict, r.Status, "replay of a canceled invocation: %s", r)

			q2 := invAsync(t, e, adm, ok, obj{}, nil)
			for _, a := range []string{"suspend", "resume"} {
				r = invControl(t, e, adm, invID(q2), a)
				require.Equal(t, http.StatusConflict, r.Status, "%s: %s", a, r)
				require.Equal(t, "conflict", problemKind(r))
			}
			r = e.do(t, http.MethodPost, invPath+"/"+invID(q2)+":control", adm, obj{"action": "cancel", "force": true})
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, "unknown control field: %s", r)
			r = e.do(t, http.MethodPost, invPath+"/"+invID(q2)+":control", adm, "{")
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r)
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, invPath+"/inv_nope:control", adm, obj{"action": "cancel"})
			require.Equal(t, http.StatusOK, invControl(t, e, adm, invID(q2), "cancel").Status)
		})

		// From here on the dispatcher runs (until the end of the parent test).
		invDispatcher(t, e)

		t.Run("a failing function is retried, then dead-lettered", func(t *testing.T) {
			rec := invAsync(t, e, adm, failing, obj{}, nil)
			id := invID(rec)
			done := invWait(t, e, adm, id, "dead_lettered", "succeeded", "canceled")
			require.Equal(t, "dead_lettered", done["status"], "%v", done)
			require.EqualValues(t, 2, done["attempt"], "%v", done)
			er := invErrorOf(t, done)
			require.Equal(t, invErr("runtime"), er["error_type_id"], "%v", er)
			require.Equal(t, "retryable", er["category"])
			require.Contains(t, er["message"], "boom on attempt 2")

			items, raw := invTimeline(t, e, adm, id)
			retried := invIndex(items, "step_retried", 0)
			require.GreaterOrEqual(t, retried, 0, "%s", raw)
			require.Equal(t, "queued", items[retried]["status"], "%s", raw)
			failed := invIndex(items, "failed", retried)
			require.Greater(t, failed, retried, "%s", raw)
			require.Equal(t, "failed", items[failed]["status"])
			dead := invIndex(items, "dead_lettered", failed)
			require.Greater(t, dead, failed, "%s", raw)
			require.Equal(t, "dead_lettered", items[dead]["status"])
			require.EqualValues(t, 2, items[failed]["attempt"])

			// A viewer may not redrive it.
			r := invControl(t, e, viewer, id, "retry")
			require.Equal(t, http.StatusForbidden, r.Status, "%s", r)

			// retry redrives it as attempt 3, with the retry policy's whole budget (max_attempts 2)
			// again: attempt 3 fails and is retried, attempt 4 is dead-lettered.
			r = invControl(t, e, adm, id, "retry")
			require.Equal(t, http.StatusOK, r.Status, "%s", r)
			require.Equal(t, "queued", r.Body["status"], "%s", r)
			require.EqualValues(t, 3, r.Body["attempt"], "%s", r)
			again := invWait(t, e, adm, id, "dead_lettered")
			require.EqualValues(t, 4, again["attempt"])
			require.Contains(t, invErrorOf(t, again)["message"], "boom on attempt 4")
			items, _ = invTimeline(t, e, adm, id)
			requeued := invIndex(items, "requeued", dead)
			require.GreaterOrEqual(t, requeued, 0, "%v", invEventTypes(items))
			require.Greater(t, invIndex(items, "step_retried", requeued), requeued, "the retried run is retried by the policy: %v", invEventTypes(items))
		})

		t.Run("replay of a succeeded invocation is a new invocation", func(t *testing.T) {
			orig := invSync(t, e, adm, ok, obj{"x": 1}, map[string]string{"X-Correlation-Id": "corr-replay"})
			require.Equal(t, "succeeded", orig["status"])
			r := invControl(t, e, adm, invID(orig), "replay")
			require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
			nid := invID(r.Body)
			require.NotEqual(t, invID(orig), nid)
			require.True(t, strings.HasPrefix(nid, "inv_"))
			require.Equal(t, base+"/invocations/"+nid, r.Header.Get("Location"))
			require.Equal(t, invID(orig), r.Body["replay_of"])
			require.Equal(t, orig["params"], r.Body["params"])
			require.Equal(t, orig["entrypoint_id"], r.Body["entrypoint_id"])
			done := invWait(t, e, adm, nid, "succeeded", "dead_lettered")
			require.Equal(t, "succeeded", done["status"])
			require.Equal(t, "succeeded", invGet(t, e, adm, invID(orig))["status"], "the original is unchanged")

			// retry applies only to failed invocations
			r = invControl(t, e, adm, invID(orig), "retry")
			require.Equal(t, http.StatusConflict, r.Status, "%s", r)
			require.Equal(t, "succeeded", r.Body["current_status"])
			r = invControl(t, e, adm, invID(orig), "cancel")
			require.Equal(t, http.StatusConflict, r.Status, "%s", r)
		})

		t.Run("replay of a dead-lettered invocation", func(t *testing.T) {
			rec := invSync(t, e, adm, failing, obj{}, nil)
			// A sync call ends with its first attempt; the retry (if any) runs on the dispatcher.
			dl := invWait(t, e, adm, invID(rec), "dead_lettered")
			r := invControl(t, e, adm, invID(dl), "replay")
			require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
			require.NotEqual(t, invID(dl), invID(r.Body))
		})
	})

	t.Run("lists and tenant isolation", func(t *testing.T) {
		e := newEnv(t) // dispatcher not running: async work stays queued
		adm := invTenant(t, e, "acme")
		globex := invTenant(t, e, "globex")
		e.registerActive(t, adm, fn(t, taxV1))
		other := e.registerActive(t, adm, fn(t, fnPrefix+"vendor.app.billing.other_tax.v1~"))["entrypoint_id"].(string)
		params := obj{"invoice_id": "inv_001", "amount": 100}

		var all []obj // in creation order
		for _, c := range []string{"corr-a", "corr-b", "corr-c"} {
			all = append(all, invSync(t, e, adm, taxV1, params, map[string]string{"X-Correlation-Id": c}))
		}
		for range 2 {
			all = append(all, invAsync(t, e, adm, other, params, map[string]string{"X-Correlation-Id": "corr-async"}))
		}
		idsOf := func(list []obj) []string {
			out := make([]string, 0, len(list))
			for _, r := range list {
				out = append(out, invID(r))
			}
			return out
		}
		// Default order: created_at descending.
		want := idsOf(all)
		slices.Reverse(want)
		require.Equal(t, want, invList(t, e, adm, query("limit", "100")))
		ascending := idsOf(all)
		require.Equal(t, ascending, invList(t, e, adm, query("limit", "100", "$orderby", "created_at asc")))

		filters := []struct {
			filter string
			want   []obj
		}{
			{"status eq 'succeeded'", all[:3]},
			{"status eq 'queued'", all[3:]},
			{"mode eq 'async'", all[3:]},
			{"mode eq 'sync'", all[:3]},
			{"correlation_id eq 'corr-b'", all[1:2]},
			{"entrypoint_id eq '" + other + "'", all[3:]},
			{"entrypoint_id eq '" + taxV1 + "'", all[:3]},
			{"created_at ge " + all[2]["timestamps"].(obj)["created_at"].(string), all[2:]},
			{"status eq 'succeeded' and correlation_id eq 'corr-c'", all[2:3]},
		}
		for _, f := range filters {
			got := invList(t, e, adm, query("$filter", f.filter, "limit", "100"))
			require.ElementsMatch(t, idsOf(f.want), got, "$filter=%s", f.filter)
		}

		t.Run("paging", func(t *testing.T) {
			var seen []string
			q := query("limit", "2")
			for page := 0; ; page++ {
				require.Less(t, page, 10)
				r := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+q.Encode(), adm, nil)
				items := r.items()
				require.LessOrEqual(t, len(items), 2)
				for _, it := range items {
					seen = append(seen, invID(it))
				}
				pi := r.Body["page_info"].(obj)
				require.EqualValues(t, 2, pi["limit"])
				next, _ := pi["next_cursor"].(string)
				if next == "" {
					require.Equal(t, false, pi["has_more"], "%s", r)
					break
				}
				require.Equal(t, true, pi["has_more"], "%s", r)
				q = query("limit", "2", "cursor", next)
			}
			require.Equal(t, want, seen)
		})

		t.Run("bad list queries are 400", func(t *testing.T) {
			for _, q := range []url.Values{
				query("$filter", "subject_id eq 'admin'"),
				query("$filter", "params eq 'x'"),
				query("$filter", "status eq 'sleeping'"),
				query("$filter", "status eq"),
				query("limit", "0"),
				query("limit", "abc"),
				query("cursor", "garbage!"),
				query("color", "blue"),
			} {
				e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, invPath+"?"+q.Encode(), adm, nil)
			}
		})

		t.Run("another tenant sees none of it", func(t *testing.T) {
			list := invList(t, e, globex, query("limit", "100"))
			require.Empty(t, list)
			for _, rec := range all {
				id := invID(rec)
				e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+id, globex, nil)
				e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+id+"/timeline", globex, nil)
				for _, a := range []string{"cancel", "retry", "replay"} {
					r := invControl(t, e, globex, id, a)
					require.Equal(t, http.StatusNotFound, r.Status, "%s as globex: %s", a, r)
				}
				require.NotContains(t, invList(t, e, globex, query("$filter", "correlation_id eq '"+rec["observability"].(obj)["correlation_id"].(string)+"'")), id)
			}
			// Nothing changed.
			require.Equal(t, "queued", invGet(t, e, adm, invID(all[3]))["status"])
			// A GET of an unknown id is 404.
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/inv_0123", adm, nil)
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/inv_0123/timeline", adm, nil)
			// The platform operator has no tenant to invoke in.
			r := invStart(t, e, operator, obj{"entrypoint_id": taxV1, "mode": "sync", "params": params}, nil)
			require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, r.Status, "%s", r)
		})
	})

	t.Run("roles and internal entrypoints", func(t *testing.T) {
		e := newEnv(t)
		adm := invTenant(t, e, "acme")
		viewer := e.token(t, "acme", "vera", "viewer")
		op := e.token(t, "acme", "olga", "operator")
		e.registerActive(t, adm, fn(t, taxV1))
		params := obj{"invoice_id": "inv_001", "amount": 100}

		t.Run("viewer reads, operator invokes", func(t *testing.T) {
			rec := invSync(t, e, op, taxV1, params, nil)
			require.Equal(t, "succeeded", rec["status"])
			id := invID(rec)
			require.Equal(t, id, invGet(t, e, viewer, id)["invocation_id"])
			require.Contains(t, invList(t, e, viewer, query("limit", "100")), id)
			invTimeline(t, e, viewer, id)

			e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, invPath, viewer,
				obj{"entrypoint_id": taxV1, "mode": "sync", "params": params})
			e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, invPath, viewer,
				obj{"entrypoint_id": taxV1, "mode": "sync", "params": params, "dry_run": true})
			for _, a := range []string{"cancel", "retry", "replay"} {
				r := invControl(t, e, viewer, id, a)
				require.Equal(t, http.StatusForbidden, r.Status, "%s: %s", a, r)
				require.Equal(t, "forbidden", problemKind(r))
			}
			e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodPost, invPath, "",
				obj{"entrypoint_id": taxV1, "mode": "sync", "params": params})
			e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, invPath, "", nil)
			require.Equal(t, http.StatusAccepted, invControl(t, e, op, id, "replay").Status)
		})

		t.Run("internal entrypoints only through r_invoke_v1", func(t *testing.T) {
			child := e.registerActive(t, adm, invFn(t, "internal.double.v1~", "def main(ctx, input):\n  return {\"doubled\": input.x * 2}\n",
				set("traits.entrypoint", false),
				set("schema.params", obj{"type": "object", "properties": obj{"x": obj{"type": "integer"}}, "required": []any{"x"}})))
			childID := child["entrypoint_id"].(string)
			for _, mode := range []string{"sync", "async"} {
				e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, invPath, op,
					obj{"entrypoint_id": childID, "mode": mode, "params": obj{"x": 2}})
			}
			e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, invPath, op,
				obj{"entrypoint_id": idOf(child), "mode": "sync", "params": obj{"x": 2}})

			parent := e.registerActive(t, adm, invFn(t, "internal.caller.v1~", fmt.Sprintf(
				"def main(ctx, input):\n  r = r_await(r_invoke_v1(%q, {\"x\": input.x}, timeout_ms=5000))\n  return {\"ok\": r.ok, \"value\": r.value}\n", childID)))
			rec := invSync(t, e, op, parent["entrypoint_id"].(string), obj{"x": 21}, map[string]string{"X-Correlation-Id": "corr-parent"})
			require.Equal(t, "succeeded", rec["status"], "%v", rec)
			require.Equal(t, obj{"ok": true, "value": obj{"doubled": 42.0}}, rec["result"])

			// The child is a real invocation, linked to its parent.
			var kids []obj
			r := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+query("$filter", "entrypoint_id eq '"+childID+"'", "limit", "100").Encode(), op, nil)
			kids = r.items()
			require.Len(t, kids, 1, "%s", r)
			kid := kids[0]
			require.Equal(t, invID(rec), kid["parent_invocation_id"], "%v", kid)
			require.Equal(t, "succeeded", kid["status"])
			require.Equal(t, obj{"doubled": 42.0}, kid["result"])
			require.Equal(t, "corr-parent", kid["observability"].(obj)["correlation_id"])
			require.Equal(t, kid, invGet(t, e, viewer, invID(kid)))
			require.NotContains(t, rec, "parent_invocation_id")

			items, raw := invTimeline(t, e, op, invID(rec))
			ci := invIndex(items, "child_invoked", 0)
			require.GreaterOrEqual(t, ci, 0, "%s", raw)
			require.Equal(t, invID(kid), items[ci]["details"].(obj)["child_invocation_id"])
		})
	})

	t.Run("a queued invocation keeps its version", func(t *testing.T) {
		e := newEnv(t) // dispatcher not running yet
		adm := invTenant(t, e, "acme")
		v1 := e.registerActive(t, adm, fn(t, taxV1))
		params := obj{"invoice_id": "inv_001", "amount": 100}
		rec := invAsync(t, e, adm, taxV1, params, nil)
		require.Equal(t, taxV1, rec["entrypoint_id"])
		require.Equal(t, "1.0.0", rec["entrypoint_version"])

		e.registerActive(t, adm, fn(t, taxV11,
			source("def main(ctx, input):\n  return {\"tax\": input.amount * 0.2, \"total\": input.amount * 1.2}\n")))
		e.status(t, adm, idOf(v1), "disable")
		// New starts by the major resolve to v1.1 now.
		newer := invSync(t, e, adm, taxV1, params, nil)
		require.Equal(t, taxV11, newer["entrypoint_id"])
		require.Equal(t, "1.1.0", newer["entrypoint_version"])
		require.InDelta(t, 20.0, newer["result"].(obj)["tax"], 1e-9)

		invDispatcher(t, e)
		done := invWait(t, e, adm, invID(rec), "succeeded", "dead_lettered", "canceled")
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, taxV1, done["entrypoint_id"])
		require.Equal(t, "1.0.0", done["entrypoint_version"])
		require.InDelta(t, 10.0, done["result"].(obj)["tax"], 1e-9, "v1's code ran: %v", done)
		require.InDelta(t, 110.0, done["result"].(obj)["total"], 1e-9)
	})

	t.Run("requests the API refuses", func(t *testing.T) {
		e := newEnv(t)
		adm := invTenant(t, e, "acme")
		e.registerActive(t, adm, fn(t, taxV1))
		asyncOnly := e.registerActive(t, adm, fnNamed(t, "refuse.async_only.v1~",
			set("traits.invocation", obj{"supported": []any{"async"}, "default": "async"})))["entrypoint_id"].(string)
		params := obj{"invoice_id": "inv_001", "amount": 100}

		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, invPath, adm,
			obj{"entrypoint_id": asyncOnly, "mode": "sync", "params": params})
		requireIssue(t, r, "$.mode", "")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, invPath, adm,
			obj{"entrypoint_id": taxV1, "mode": "eventually", "params": params})
		requireIssue(t, r, "$.mode", "")

		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, invPath, adm,
			obj{"entrypoint_id": taxV1, "mode": "sync", "params": params, "priority": "high"})
		requireIssue(t, r, "$.priority", "UNKNOWN_FIELD")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, invPath, adm,
			obj{"entrypoint_id": taxV1, "mode": "sync", "params": []any{1}})
		requireIssue(t, r, "$.params", "")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, invPath, adm,
			obj{"mode": "sync", "params": params})
		requireIssue(t, r, "$.entrypoint_id", "")
		e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, invPath, adm,
			obj{"entrypoint_id": 42, "mode": "sync", "params": params})

		for _, body := range []string{`{"entrypoint_id":`, `not json`, `{"entrypoint_id":"x"} {}`} {
			e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPost, invPath, adm, body)
		}
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPost, invPath+"?mode=sync", adm,
			obj{"entrypoint_id": taxV1, "mode": "sync", "params": params})
		require.Empty(t, invList(t, e, adm, query("limit", "100")), "no refused request created an invocation")
	})
}

// TestInvocationLimits: CPU, time and memory limits end an execution. It stays serial: its memory
// check samples the heap of the whole process, which tests running beside it would grow.
func TestInvocationLimits(t *testing.T) {
	e := newEnv(t)
	adm := invTenant(t, e, "acme")

	t.Run("busy loop ends at the cpu or time limit", func(t *testing.T) {
		id := e.registerActive(t, adm, invFn(t, "limits.spin.v1~", "def main(ctx, input):\n  while True:\n    pass\n",
			set("traits.limits", obj{"timeout_seconds": 2, "memory_mb": 128, "cpu": 0.1, "max_concurrent": 10})))["entrypoint_id"].(string)
		start := time.Now()
		rec := invSync(t, e, adm, id, obj{}, nil)
		took := time.Since(start)
		require.Less(t, took, 4*time.Second, "the 2 s limit plus 2 s slack")
		require.Contains(t, []string{"failed", "dead_lettered"}, rec["status"], "%v", rec)
		er := invErrorOf(t, rec)
		require.Contains(t, []string{invErr("cpu_limit"), invErr("timeout")}, er["error_type_id"], "%v", er)
		require.Contains(t, []string{"resource_limit", "timeout"}, er["category"], "%v", er)
		require.EqualValues(t, 1, rec["attempt"], "limit errors are not retried")
	})

	t.Run("memory hogs end at the memory limit without growing the heap", func(t *testing.T) {
		big := e.registerActive(t, adm, invFn(t, "limits.gigabyte.v1~",
			"def main(ctx, input):\n  s = \"x\" * (1 << 30)\n  return {\"n\": len(s)}\n"))["entrypoint_id"].(string)
		doubling := e.registerActive(t, adm, invFn(t, "limits.doubling.v1~",
			"def main(ctx, input):\n  s = \"x\"\n  while True:\n    s = s + s\n  return {}\n"))["entrypoint_id"].(string)
		listy := e.registerActive(t, adm, invFn(t, "limits.lists.v1~",
			"def main(ctx, input):\n  l = [0]\n  for i in range(100):\n    l = l + l\n  return {\"n\": len(l)}\n"))["entrypoint_id"].(string)

		h := startHeapSampler()
		for _, id := range []string{big, doubling, listy} {
			rec := invSync(t, e, adm, id, obj{}, nil)
			require.Contains(t, []string{"failed", "dead_lettered"}, rec["status"], "%s: %v", id, rec)
			er := invErrorOf(t, rec)
			require.Equal(t, invErr("memory_limit"), er["error_type_id"], "%s: %v", id, er)
			require.Equal(t, "resource_limit", er["category"], "%v", er)
			m := rec["observability"].(obj)["metrics"].(obj)
			require.EqualValues(t, 128, m["memory_limit_mb"])
		}
		heapGrowth, sysGrowth := h.finish()
		t.Logf("peak heap growth %d MiB, Sys growth %d MiB", heapGrowth>>20, sysGrowth>>20)
		require.Less(t, heapGrowth, int64(300<<20), "peak HeapAlloc grew by %d MiB", heapGrowth>>20)
		require.Less(t, sysGrowth, int64(300<<20), "Sys grew by %d MiB", sysGrowth>>20)
	})
}
