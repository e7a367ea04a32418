package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// leafSrc is a child that returns its n.
const leafSrc = "def main(ctx, input):\n  return {\"n\": input.get(\"n\")}\n"

// countOf counts the invocations of an entrypoint (as the tenant admin sees them).
func countOf(t *testing.T, e *env, adm, entrypointID string) int {
	t.Helper()
	r := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+query("$filter", "entrypoint_id eq '"+entrypointID+"'", "limit", "200").Encode(), adm, nil)
	require.Equal(t, false, r.Body["page_info"].(obj)["has_more"], "%s", r)
	return len(r.items())
}

// TestChildBudget: a function that tries to start 1,000 children gets the child budget (100 per
// execution) started, and a clear non-retryable error result for every other call; the parent
// itself ends normally (it is not failed or hung by the refusals).
func TestChildBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	leaf := e.registerActive(t, adm, invFn(t, "fanout.leaf.v1~", leafSrc, del("traits.rate_limit")))
	leafID := leaf["entrypoint_id"].(string)

	t.Run("1000 promises at once", func(t *testing.T) {
		parent := e.registerActive(t, adm, invFn(t, "fanout.burst.v1~", fmt.Sprintf(`
def main(ctx, input):
    rs = r_await_all([r_invoke_v1(%q, {"n": i}, timeout_ms=5000) for i in range(1000)])
    ok = [r for r in rs if r.ok]
    refused = [r for r in rs if not r.ok]
    return {"ok": len(ok), "refused": len(refused), "type": refused[0].error.id if refused else None,
            "category": refused[0].error.category if refused else None,
            "message": refused[0].error.message if refused else None}
`, leafID), set("traits.limits", obj{"timeout_seconds": 30, "memory_mb": 128, "cpu": 1.0, "max_concurrent": 100})))
		rec := invSync(t, e, adm, parent["entrypoint_id"].(string), obj{}, nil)
		require.Equal(t, "succeeded", rec["status"], "%v", rec)
		res := rec["result"].(obj)
		require.Equal(t, 100.0, res["ok"], "%v", res)
		require.Equal(t, 900.0, res["refused"], "%v", res)
		require.Equal(t, invErr("quota_exceeded"), res["type"], "%v", res)
		require.Equal(t, "non_retryable", res["category"], "%v", res)
		require.Contains(t, res["message"], "has started 100 child invocations", "%v", res)
		require.Equal(t, 100, countOf(t, e, adm, leafID), "only the budget was started")
	})

	t.Run("a loop of awaited calls", func(t *testing.T) {
		loop := e.registerActive(t, adm, invFn(t, "fanout.loop.v1~", fmt.Sprintf(`
def main(ctx, input):
    ok = 0
    refused = 0
    for i in range(150):
        r = r_await(r_invoke_v1(%q, {"n": i}, timeout_ms=5000))
        if r.ok:
            ok += 1
        else:
            refused += 1
    return {"ok": ok, "refused": refused}
`, leafID), set("traits.limits", obj{"timeout_seconds": 30, "memory_mb": 128, "cpu": 1.0, "max_concurrent": 100})))
		before := countOf(t, e, adm, leafID)
		rec := invSync(t, e, adm, loop["entrypoint_id"].(string), obj{}, nil)
		require.Equal(t, "succeeded", rec["status"], "%v", rec)
		require.Equal(t, obj{"ok": 100.0, "refused": 50.0}, rec["result"])
		require.Equal(t, before+100, countOf(t, e, adm, leafID))
	})
}

// TestChildrenCountAgainstConcurrency: a sync child is one more running execution of the tenant,
// so a tenant at max_concurrent_executions cannot exceed it through children: the call fails with
// a quota_exceeded error result and no child is started.
func TestChildrenCountAgainstConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	leaf := e.registerActive(t, adm, invFn(t, "quota.leaf.v1~", leafSrc, del("traits.rate_limit")))
	leafID := leaf["entrypoint_id"].(string)
	parent := e.registerActive(t, adm, invFn(t, "quota.parent.v1~", fmt.Sprintf(`
def main(ctx, input):
    r = r_await(r_invoke_v1(%q, {"n": 1}, timeout_ms=5000))
    if r.ok:
        return {"ok": True}
    return {"ok": False, "type": r.error.id, "message": r.error.message}
`, leafID)))
	parentID := parent["entrypoint_id"].(string)

	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"quotas": obj{"max_concurrent_executions": 1}})
	rec := invSync(t, e, adm, parentID, obj{}, nil)
	require.Equal(t, "succeeded", rec["status"], "the refusal is the call's result, not the parent's failure: %v", rec)
	res := rec["result"].(obj)
	require.Equal(t, false, res["ok"], "%v", res)
	require.Equal(t, invErr("quota_exceeded"), res["type"], "%v", res)
	require.Contains(t, res["message"], "max_concurrent_executions", "%v", res)
	require.Equal(t, 0, countOf(t, e, adm, leafID), "no child was started")

	// With room for the parent and one child, the child runs.
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"quotas": obj{"max_concurrent_executions": 2}})
	rec = invSync(t, e, adm, parentID, obj{}, nil)
	require.Equal(t, obj{"ok": true}, rec["result"], "%v", rec)
	require.Equal(t, 1, countOf(t, e, adm, leafID))
}

// TestChildRateLimit: a child's entrypoint rate limit applies to r_invoke_v1 as to the API.
func TestChildRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	leaf := e.registerActive(t, adm, invFn(t, "rl.leaf.v1~", leafSrc,
		set("traits.rate_limit", obj{"strategy": "gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.token_bucket.v1~",
			"config": obj{"max_requests_per_second": 1, "burst_size": 2}})))
	leafID := leaf["entrypoint_id"].(string)
	parent := e.registerActive(t, adm, invFn(t, "rl.parent.v1~", fmt.Sprintf(`
def main(ctx, input):
    rs = [r_await(r_invoke_v1(%q, {"n": i}, timeout_ms=5000)) for i in range(5)]
    refused = [r for r in rs if not r.ok]
    return {"ok": len(rs) - len(refused), "type": refused[0].error.id if refused else None}
`, leafID)))
	rec := invSync(t, e, adm, parent["entrypoint_id"].(string), obj{}, nil)
	require.Equal(t, "succeeded", rec["status"], "%v", rec)
	res := rec["result"].(obj)
	require.Equal(t, invErr("rate_limited"), res["type"], "%v", res)
	require.Less(t, res["ok"].(float64), 5.0, "%v", res)
	require.Equal(t, int(res["ok"].(float64)), countOf(t, e, adm, leafID))
}

// TestChildNesting: r_invoke_v1 nesting stops at 8 levels below the invocation started through the
// API, for function children and for workflow children alike.
func TestChildNesting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	invDispatcher(t, e)

	t.Run("functions", func(t *testing.T) {
		self := fnPrefix + "vendor.app.nest.fn.v1~"
		body := invFn(t, "nest.fn.v1~", fmt.Sprintf(`
def main(ctx, input):
    d = input.get("d", 0)
    r = r_await(r_invoke_v1(%q, {"d": d + 1}, timeout_ms=20000))
    if r.ok:
        return r.value
    return {"deepest": d, "message": r.error.message}
`, self), set("traits.limits", obj{"timeout_seconds": 30, "memory_mb": 128, "cpu": 1.0, "max_concurrent": 100}))
		e.registerActive(t, adm, body)
		rec := invSync(t, e, adm, self, obj{}, nil)
		require.Equal(t, "succeeded", rec["status"], "%v", rec)
		require.Equal(t, 8.0, rec["result"].(obj)["deepest"], "%v", rec)
		require.Contains(t, rec["result"].(obj)["message"], "nesting deeper than 8")
		require.Equal(t, 9, countOf(t, e, adm, self), "the root and 8 levels of children")
	})

	t.Run("workflows", func(t *testing.T) {
		self := wfPrefix + "vendor.app.orders.nest.v1~"
		e.registerActive(t, adm, wfBody(t, "nest.v1~", fmt.Sprintf(`
def main(ctx, input):
    d = input.get("d", 0)
    r = r_await(r_invoke_v1(%q, {"d": d + 1}))
    if r.ok:
        return r.value
    return {"deepest": d, "message": r.error.message}
`, self)))
		id := invID(invAsync(t, e, adm, self, obj{}, nil))
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, 8.0, done["result"].(obj)["deepest"], "%v", done)
		require.Contains(t, done["result"].(obj)["message"], "nesting deeper than 8")
		require.Equal(t, 9, countOf(t, e, adm, self))
	})
}
