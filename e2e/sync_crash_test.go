package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heldCounter counts the POSTs of invocation ids and holds each until released.
type heldCounter struct {
	mu       sync.Mutex
	byID     map[string]int
	release  chan struct{}
	released sync.Once
}

// heldUpstream is a heldCounter behind a test server; both end with the test (the held requests
// released first).
func heldUpstream(t *testing.T) (*heldCounter, *httptest.Server) {
	counter := &heldCounter{byID: map[string]int{}, release: make(chan struct{})}
	upstream := httptest.NewServer(counter)
	t.Cleanup(upstream.Close)
	t.Cleanup(counter.releaseAll) // runs first
	return counter, upstream
}

// releaseAll lets every held request, and every later one, through.
func (c *heldCounter) releaseAll() { c.released.Do(func() { close(c.release) }) }

func (c *heldCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.byID[body.ID]++
	c.mu.Unlock()
	select {
	case <-c.release:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
}

func (c *heldCounter) ids() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.byID))
	for k, v := range c.byID {
		out[k] = v
	}
	return out
}

// TestCrashSyncCalls is the crash semantics of sync function calls (docs/operations.md): the start
// of a call is written while the function runs, so a call that is running is visible (GET) within a
// group commit; a kill -9 then leaves it running, and the restarted server reclaims it and runs it
// again to its end. Calls cut by the crash get no answer.
func TestCrashSyncCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: starts, kills and restarts the server; skipped with -short")
	}
	const calls = 8
	counter, upstream := heldUpstream(t)

	data := t.TempDir()
	flags := []string{"--unsafe-egress-allow-loopback"}
	p := startLark(t, data, flags...)
	fn := p.register(t, p.Token, fnSpec{id: "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.crash.sync_post.v1~",
		src: fmt.Sprintf("def main(ctx, input):\n"+
			"  r_await(r_http_post_v1(%q, {\"id\": ctx.invocation_id}, timeout_ms=60000))\n"+
			"  return {\"ok\": True}\n", upstream.URL+"/effects"),
		limits: map[string]any{"timeout_seconds": 60}})

	// Every call is inside its function (its upstream POST is held)...
	answers := callsHeldUpstream(t, p, fn, calls, counter)
	deadline := time.Now().Add(30 * time.Second)
	// ...and each is visible as running: its start is durable while it runs.
	for id := range counter.ids() {
		for {
			r := p.do(http.MethodGet, apiBase+"/invocations/"+id, p.Token, nil)
			if r.Status == http.StatusOK {
				require.Equal(t, "running", record(t, r, http.StatusOK).Status)
				break
			}
			require.Equal(t, http.StatusNotFound, r.Status, "%s", r)
			require.True(t, time.Now().Before(deadline), "invocation %s not visible while it runs", id)
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The restarted server reclaims the running calls and runs them again to their end.
	crashAndRerun(t, p, data, flags, answers, calls, counter)
}

// TestCrashSyncWorkflows is the crash semantics of plain sync workflow calls (docs/api.md, "Sync
// calls: one write"): the start and the journal are held back while the workflow runs pure steps,
// and written before its first side effect. So a call whose step is inside its HTTP call is visible
// as running, with its first step journaled; a kill -9 then leaves it running, and the restarted
// server reclaims it, replays the journaled step (it does not run again) and runs the rest to the
// end. Calls cut by the crash get no answer.
func TestCrashSyncWorkflows(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: starts, kills and restarts the server; skipped with -short")
	}
	const calls = 4
	counter, upstream := heldUpstream(t)

	data := t.TempDir()
	flags := []string{"--unsafe-egress-allow-loopback"}
	p := startLark(t, data, flags...)
	const wf = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.crash.sync_wf.v1~"
	src := fmt.Sprintf("def pure(ctx, input):\n  return input\n\n"+
		"def post(ctx, input):\n  return r_await(r_http_post_v1(%q, {\"id\": ctx.invocation_id}, timeout_ms=60000)).response.status_code\n\n"+
		"def main(ctx, input):\n  r_run_step_v1(\"a\", pure, 1)\n  r_run_step_v1(\"post\", post, 2)\n  r_run_step_v1(\"b\", pure, 3)\n  return {\"ok\": True}\n",
		upstream.URL+"/effects")
	r := p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, mustJSON(t, map[string]any{
		"entrypoint_id": wf, "title": "sync workflow crash probe", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []any{"sync", "async"}, "default": "sync"},
			"limits":     map[string]any{"timeout_seconds": 60},
			"retry":      map[string]any{"max_attempts": 1},
			"workflow": map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30},
		},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
			"code": map[string]any{"language": "starlark", "source": src}},
	}))
	requireJSON(t, r, http.StatusCreated, nil)
	r = p.do(http.MethodPost, apiBase+"/entrypoints/"+url.PathEscape(wf)+":status", p.Token, []byte(`{"action": "activate"}`))
	requireJSON(t, r, http.StatusOK, nil)

	answers := callsHeldUpstream(t, p, wf, calls, counter)
	// The side effect came after the start and step a were durable: no polling needed.
	for id := range counter.ids() {
		require.Equal(t, "running", record(t, p.do(http.MethodGet, apiBase+"/invocations/"+id, p.Token, nil), http.StatusOK).Status)
		require.Equal(t, []string{"a"}, completedSteps(t, p, id), "invocation %s: step a durable before the call", id)
	}
	q, ids := crashAndRerun(t, p, data, flags, answers, calls, counter)
	for _, id := range ids {
		require.Equal(t, []string{"a", "post", "b"}, completedSteps(t, q, id), "invocation %s: each step journaled once", id)
	}
}

// crashAndRerun kills p while its calls hold their side effects (none is answered), lets the
// upstream answer, restarts the server on data and waits until each call has run again to success:
// its side effect once before the crash and once after. It returns the restarted server and the
// calls' ids.
func crashAndRerun(t *testing.T, p *larkProc, data string, flags []string, answers <-chan error, calls int, counter *heldCounter) (*larkProc, []string) {
	p.Kill()
	for i := 0; i < calls; i++ {
		require.Error(t, <-answers, "a call cut by the crash has no answer")
	}
	counter.releaseAll()
	q := startLark(t, data, flags...)
	var ids []string
	for id, n := range counter.ids() {
		require.Equal(t, 1, n, "invocation %s ran its side effect twice before the crash", id)
		ids = append(ids, id)
	}
	byID := waitAllTerminal[invocationItem](t, q, ids, time.Now(), 60*time.Second, nil)
	for _, id := range ids {
		require.Equal(t, "succeeded", byID[id].Status, "invocation %s", id)
		require.Equal(t, 2, counter.ids()[id], "invocation %s: its side effect before the crash and once more after", id)
	}
	return q, ids
}

// callsHeldUpstream sends calls sync calls of entrypoint id, each of which the server must not answer
// (it is killed first: an answer is an error on the returned channel), and returns once every one
// holds its request to counter's upstream.
func callsHeldUpstream(t *testing.T, p *larkProc, id string, calls int, counter *heldCounter) <-chan error {
	client := poolClient(calls)
	t.Cleanup(client.CloseIdleConnections)
	answers := make(chan error, calls)
	for i := 0; i < calls; i++ {
		go func() {
			body := fmt.Appendf(nil, `{"entrypoint_id":%q,"mode":"sync","params":{}}`, id)
			r, err := p.try(client, http.MethodPost, apiBase+"/invocations", p.Token, body)
			if err == nil {
				err = fmt.Errorf("answered before the crash: %s", r)
			}
			answers <- err
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(counter.ids()) < calls {
		require.True(t, time.Now().Before(deadline), "the %d calls did not all reach the upstream: %v", calls, counter.ids())
		time.Sleep(5 * time.Millisecond)
	}
	return answers
}

// completedSteps lists the step_completed entries of invocation id's timeline, in order.
func completedSteps(t *testing.T, p *larkProc, id string) []string {
	var tl wfTimeline
	requireJSON(t, p.do(http.MethodGet, apiBase+"/invocations/"+id+"/timeline?limit=200", p.Token, nil), http.StatusOK, &tl)
	var steps []string
	for _, ev := range tl.Items {
		if ev.EventType == "step_completed" && ev.StepName != nil {
			steps = append(steps, *ev.StepName)
		}
	}
	return steps
}
