package invoke_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/store"
)

// childrenOf counts the invocations whose parent is id.
func childrenOf(t *testing.T, e *env, id string) int {
	t.Helper()
	admin := auth.SecurityContext{TenantID: "acme", SubjectID: "root", Roles: []auth.Role{auth.RoleAdmin}}
	page, err := e.svc.List(context.Background(), admin, store.ListQuery{Limit: store.MaxLimit})
	require.NoError(t, err)
	n := 0
	for _, r := range page.Items {
		if r.ParentID == id {
			n++
		}
	}
	return n
}

// TestChildInFlightBudget: while one sync child runs, a second r_invoke_v1 call fails at once when
// the process's MaxSyncChildren is 1 (retryable: capacity frees up); with the invocation's
// MaxChildrenInFlight at 1 it waits for the first child to end (TestChildInFlightWaits).
func TestChildInFlightBudget(t *testing.T) {
	t.Parallel()
	testChildInFlight(t, func(c *invoke.Config) { c.MaxSyncChildren = 1 }, "retryable", "runs 1 child invocations already")
}

// TestChildInFlightWaits: with MaxChildrenInFlight 1, three children started at once run one after
// another, and all succeed. Each child's request waits (up to 300 ms) for a second one to arrive at
// the upstream: with two children in flight it would.
func TestChildInFlightWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reconfigure(func(c *invoke.Config) { c.MaxChildrenInFlight = 1 })
	var inFlight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			n := inFlight.Load()
			if n > most.Load() {
				most.Store(n)
			}
			if n > 1 {
				return // another child is in flight too
			}
		}
	}))
	t.Cleanup(srv.Close)
	e.fn("leaf", "def main(ctx, input):\n  r_await(r_http_get_v1(input.url, timeout_ms=5000))\n  return {}\n", nil)
	e.fn("parent", `
def main(ctx, input):
    rs = r_await_all([r_invoke_v1("`+fnPrefix+`leaf.v1~", {"url": input.url}, timeout_ms=15000) for i in range(3)])
    return {"ok": len([r for r in rs if r.ok])}
`, func(b map[string]any) { b["traits"].(map[string]any)["limits"] = map[string]any{"timeout_seconds": 20} })
	params, err := json.Marshal(map[string]any{"url": srv.URL})
	require.NoError(t, err)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "parent.v1~", Params: params}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, st.Record.Status, st.Record.Error)
	require.JSONEq(t, `{"ok": 3}`, string(st.Record.Result))
	require.Equal(t, 3, childrenOf(t, e, st.Record.ID))
	require.EqualValues(t, 1, most.Load(), "one child in flight at a time")
}

func testChildInFlight(t *testing.T, configure func(*invoke.Config), category, message string) {
	e := newEnv(t)
	e.reconfigure(configure)
	arrived, release := make(chan struct{}), make(chan struct{})
	wait := func(ch chan struct{}) int {
		select {
		case <-ch:
			return http.StatusOK
		case <-time.After(10 * time.Second):
			return http.StatusGatewayTimeout
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow": // the first child: holds its in-flight slot until released
			close(arrived)
			w.WriteHeader(wait(release))
		case "/started": // the parent: returns once the first child is running
			w.WriteHeader(wait(arrived))
		case "/release":
			close(release)
		}
	}))
	t.Cleanup(srv.Close)
	e.fn("slow", "def main(ctx, input):\n  r = r_await(r_http_get_v1(input.url + \"/slow\", timeout_ms=15000))\n  return {\"status\": r.response.status_code}\n",
		func(b map[string]any) { b["traits"].(map[string]any)["limits"] = map[string]any{"timeout_seconds": 20} })
	e.fn("leaf", "def main(ctx, input):\n  return {}\n", nil)
	e.fn("parent", `
def main(ctx, input):
    a = r_invoke_v1("`+fnPrefix+`slow.v1~", {"url": input.url}, timeout_ms=15000)
    r_await(r_http_get_v1(input.url + "/started", timeout_ms=15000))
    b = r_await(r_invoke_v1("`+fnPrefix+`leaf.v1~", {}, timeout_ms=15000))
    r_await(r_http_get_v1(input.url + "/release", timeout_ms=15000))
    ra = r_await(a)
    return {"a_ok": ra.ok, "b_ok": b.ok, "b_category": b.error.category if not b.ok else None,
            "b_message": b.error.message if not b.ok else None}
`, func(b map[string]any) { b["traits"].(map[string]any)["limits"] = map[string]any{"timeout_seconds": 20} })
	params, err := json.Marshal(map[string]any{"url": srv.URL})
	require.NoError(t, err)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "parent.v1~", Params: params}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, st.Record.Status, st.Record.Error)
	var out struct {
		AOK      bool   `json:"a_ok"`
		BOK      bool   `json:"b_ok"`
		Category string `json:"b_category"`
		Message  string `json:"b_message"`
	}
	require.NoError(t, json.Unmarshal(st.Record.Result, &out))
	require.True(t, out.AOK, "the child in flight finished normally")
	require.False(t, out.BOK, "the second child was refused")
	require.Equal(t, category, out.Category)
	require.Contains(t, out.Message, message)
	require.Equal(t, 1, childrenOf(t, e, st.Record.ID), "the refused child was never created")
}

// TestWorkflowChildBudget: a workflow's durable children count against MaxChildren over its
// journal: the calls over it resolve to a non-retryable error result, and the workflow goes on.
func TestWorkflowChildBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reconfigure(func(c *invoke.Config) { c.MaxChildren = 3 })
	e.fn("leaf", "def main(ctx, input):\n  return {\"n\": input.n}\n", func(b map[string]any) {
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async", "sync"}, "default": "async"}
	})
	e.workflow("fan", `
def main(ctx, input):
    ok = 0
    msg = None
    for i in range(5):
        r = r_await(r_invoke_v1("`+fnPrefix+`leaf.v1~", {"n": i}))
        if r.ok:
            ok += 1
        elif msg == None:
            msg = r.error.message
    return {"ok": ok, "message": msg}
`)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "fan.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	e.Drain()
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	var out struct {
		OK      int
		Message string
	}
	require.NoError(t, json.Unmarshal(r.Result, &out))
	require.Equal(t, 3, out.OK)
	require.Contains(t, out.Message, "has started 3 child invocations")
	require.Equal(t, 3, childrenOf(t, e, st.Record.ID))
}
