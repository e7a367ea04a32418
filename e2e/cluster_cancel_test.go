package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// cancelProbeSource posts its invocation id to url a thousand times, one call after another: it
// runs until it is stopped (the upstream answers in clusterUpstreamMS).
func cancelProbeSource(url string) string {
	return fmt.Sprintf("def calls(ctx):\n"+
		"  for i in range(1000):\n"+
		"    r_await(r_http_post_v1(%q, {\"id\": ctx.invocation_id}, timeout_ms=2000))\n"+
		"  return 1000\n\n", url)
}

// cancelProbes registers the probes: a function (run by the remote workers) and a workflow whose
// one step makes the calls (run on the nodes).
func cancelProbes(t *testing.T, p *larkProc, url string) (fn, wf string) {
	t.Helper()
	fn = p.register(t, p.Token, fnSpec{id: fnPrefix + "vendor.app.cancel.calls.v1~", limits: map[string]any{"timeout_seconds": 60},
		src: cancelProbeSource(url) + "def main(ctx, input):\n  return {\"n\": calls(ctx)}\n"})
	wf = wfPrefix + "vendor.app.cancel.steps.v1~"
	src := cancelProbeSource(url) + "def step(ctx, input):\n  return calls(ctx)\n\n" +
		"def main(ctx, input):\n  return {\"n\": r_run_step_v1(\"calls\", step, None)}\n"
	body := mustJSON(t, map[string]any{"entrypoint_id": wf, "title": "Cancel probe", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []any{"async"}, "default": "async"},
			"limits": map[string]any{"timeout_seconds": 60}, "retry": map[string]any{"max_attempts": 1},
			"workflow": map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30}},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
			"code": map[string]any{"language": "starlark", "source": src}}})
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, body), http.StatusCreated, nil)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints/"+wf+":status", p.Token, []byte(`{"action":"activate"}`)), http.StatusOK, nil)
	return fn, wf
}

// TestClusterCancel: three nodes on one PostgreSQL schema and two remote workers. For a function
// (run by a worker) and a workflow step (run on a node), started through each node in turn, a cancel
// sent through a node other than the one that took the attempt (the record names it) ends the
// invocation canceled, and the upstream hears no call later than 2 s after the cancel was answered.
func TestClusterCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: three nodes and two workers; skipped with -short")
	}
	url := pgtest.Schema(t) // skips, saying so, without LARK_TEST_POSTGRES_URL
	counter := &callLog{last: map[string]time.Time{}, n: map[string]int{}}
	upstream := httptest.NewServer(counter)
	t.Cleanup(upstream.Close)
	data := t.TempDir()
	nodes := make([]*larkProc, clusterNodes)
	urls := make([]string, clusterNodes)
	for i := range nodes {
		nodes[i] = startLark(t, data, "--store", url, "--unsafe-egress-allow-loopback", "--node-id", fmt.Sprintf("n%d", i+1),
			"--remote-workers", "--worker-key", e2eWorkerKey, "--worker-heartbeat-interval", clusterHBInterval,
			"--worker-heartbeat-timeout", clusterHBTimeout)
		urls[i] = nodes[i].URL
	}
	for range 2 {
		startWorker(t, strings.Join(urls, ","), "--unsafe-egress-allow-loopback")
	}
	fn, wf := cancelProbes(t, nodes[0], upstream.URL)
	for i, via := range nodes {
		for _, id := range []string{fn, wf} {
			inv := record(t, via.invoke(t, via.Token, id, "async", map[string]any{}), http.StatusAccepted).ID
			counter.waitCalls(t, inv, 3)
			took := nodeOf(t, via, inv)
			other := nodes[(i+1)%clusterNodes]
			for j, n := range nodes {
				if fmt.Sprintf("n%d", j+1) != took && n != via {
					other = n
				}
			}
			r := other.do(http.MethodPost, apiBase+"/invocations/"+inv+":control", other.Token, []byte(`{"action":"cancel"}`))
			require.Equal(t, http.StatusOK, r.Status, "%s", r)
			canceled := time.Now()
			counter.waitQuiet(t, inv, time.Second, 10*time.Second)
			last := counter.lastCall(inv)
			require.True(t, last.Sub(canceled) <= 2*time.Second,
				"%s (started through %s, taken by %s, canceled through %s): the last upstream call came %s after the cancel",
				inv, via.URL, took, other.URL, last.Sub(canceled))
			rec := other.waitStatus(t, inv, "canceled")
			require.Equal(t, "canceled", rec.Status)
		}
	}
}

// nodeOf waits until invocation id's record names the node that took its attempt, and returns it.
func nodeOf(t *testing.T, p *larkProc, id string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var rec struct {
			Node string `json:"node"`
		}
		r := p.do(http.MethodGet, apiBase+"/invocations/"+id, p.Token, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		require.NoError(t, json.Unmarshal(r.Body, &rec))
		if rec.Node != "" {
			return rec.Node
		}
		require.True(t, time.Now().Before(deadline), "the record of %s never named its node: %s", id, r.Body)
		time.Sleep(20 * time.Millisecond)
	}
}

// callLog is the cancel probes' upstream: it counts the calls by invocation id and remembers when
// the last one came.
type callLog struct {
	mu   sync.Mutex
	n    map[string]int
	last map[string]time.Time
}

func (c *callLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err == nil && body.ID != "" {
		c.mu.Lock()
		c.n[body.ID]++
		c.last[body.ID] = time.Now()
		c.mu.Unlock()
	}
	time.Sleep(clusterUpstreamMS * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
}

func (c *callLog) lastCall(id string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[id]
}

// waitCalls waits until id made at least n calls.
func (c *callLog) waitCalls(t *testing.T, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		got := c.n[id]
		c.mu.Unlock()
		if got >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s made %d calls, not %d", id, got, n)
		time.Sleep(10 * time.Millisecond)
	}
}

// waitQuiet waits until id has made no call for quiet, failing after within.
func (c *callLog) waitQuiet(t *testing.T, id string, quiet, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Since(c.lastCall(id)) < quiet {
		require.True(t, time.Now().Before(deadline), "%s still calls its upstream %s after it was canceled", id, within)
		time.Sleep(20 * time.Millisecond)
	}
}
