package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/workerclient"
	"github.com/larkrun/lark/internal/workerexec"
	"github.com/larkrun/lark/internal/workerhub"
	"github.com/larkrun/lark/internal/workerproto"
)

func workerKeys(t testing.TB) *workerproto.Keyset {
	ks, err := workerproto.ParseKeys([]string{"wk1:worker-secret-0123456789"})
	require.NoError(t, err)
	return ks
}

// workerEnv is a server that sends async functions to remote workers, with its dispatcher running.
func workerEnv(t testing.TB, mod ...func(*server.Config)) (*env, *workerproto.Keyset) {
	ks := workerKeys(t)
	e := newEnv(t, append([]func(*server.Config){func(c *server.Config) {
		c.RemoteWorkers, c.WorkerKeys = true, ks
		c.HeartbeatInterval, c.HeartbeatTimeout = 50*time.Millisecond, 5*time.Second
	}}, mod...)...)
	invDispatcher(t, e)
	return e, ks
}

// workerPost posts body as an envelope signed by ks; the answer's verified body is decoded into out.
func workerPost(t testing.TB, e *env, ks *workerproto.Keyset, path string, body, out any) *resp {
	t.Helper()
	env, err := ks.Sign(body, time.Now(), time.Minute)
	require.NoError(t, err)
	return workerPostRaw(t, e, ks, path, env, out)
}

func workerPostRaw(t testing.TB, e *env, ks *workerproto.Keyset, path string, env any, out any) *resp {
	t.Helper()
	b, err := json.Marshal(env)
	require.NoError(t, err)
	hr, err := e.client.Post(e.ts.URL+base+path, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer hr.Body.Close()
	raw, err := io.ReadAll(hr.Body)
	require.NoError(t, err)
	r := &resp{Status: hr.StatusCode, Header: hr.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	if hr.StatusCode == http.StatusOK && out != nil {
		var renv workerproto.Envelope
		require.NoError(t, json.Unmarshal(raw, &renv))
		require.NoError(t, ks.Verify(renv, time.Now(), nil), "the server's answer is signed")
		require.NoError(t, json.Unmarshal(renv.Body, out))
	}
	return r
}

func TestWorkerEnvelopesRefused(t *testing.T) {
	t.Parallel()
	e, ks := workerEnv(t)
	poll := workerproto.PollRequest{WorkerID: "w1", MaxTasks: 1, Starlark: true}
	// Not an envelope, a forged signature, an unknown key, an expired envelope, a replay: 401 problems.
	r := workerPostRaw(t, e, ks, workerproto.PathPoll, poll, nil)
	require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Raw)
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
	good, err := ks.Sign(poll, time.Now(), time.Minute)
	require.NoError(t, err)
	forged := good
	forged.Body = json.RawMessage(`{"worker_id":"w2","max_tasks":1,"starlark":true}`)
	require.Equal(t, http.StatusUnauthorized, workerPostRaw(t, e, ks, workerproto.PathPoll, forged, nil).Status)
	other, err := workerproto.ParseKeys([]string{"wk9:another-secret-0123456789"})
	require.NoError(t, err)
	r = workerPost(t, e, other, workerproto.PathPoll, poll, nil)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Contains(t, r.Body["detail"], "unknown key id")
	old, err := ks.Sign(poll, time.Now().Add(-time.Hour), time.Minute)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, workerPostRaw(t, e, ks, workerproto.PathPoll, old, nil).Status)
	// An envelope valid for longer than workerproto.MaxLifetime: 401, whatever its signature.
	decade, err := ks.Sign(poll, time.Now(), 10*365*24*time.Hour)
	require.NoError(t, err)
	r = workerPostRaw(t, e, ks, workerproto.PathPoll, decade, nil)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Contains(t, r.Body["detail"], "valid for too long")
	var reply workerproto.PollReply
	require.Equal(t, http.StatusOK, workerPostRaw(t, e, ks, workerproto.PathPoll, good, &reply).Status)
	r = workerPostRaw(t, e, ks, workerproto.PathPoll, good, nil)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Contains(t, r.Body["detail"], "nonce already seen")
	// A valid envelope with an invalid body: 422; an oversized body: 413.
	r = workerPost(t, e, ks, workerproto.PathPoll, workerproto.PollRequest{WorkerID: "w1", MaxTasks: 1000}, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Raw)
	hr, err := e.client.Post(e.ts.URL+base+workerproto.PathPoll, "application/json", strings.NewReader(`"`+strings.Repeat("x", workerproto.MaxBodyBytes)+`"`))
	require.NoError(t, err)
	hr.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, hr.StatusCode)
	// A result for a task the server does not know: 404.
	r = workerPost(t, e, ks, strings.Replace(workerproto.PathResult, "{task_id}", "wt_nope", 1), workerproto.Result{TaskID: "wt_nope", WorkerID: "w1"}, nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Raw)
}

func TestWorkerRoundTrip(t *testing.T) {
	t.Parallel()
	e, ks := workerEnv(t)
	adm := invTenant(t, e, "t-workers")
	ep := e.registerActive(t, adm, invFn(t, "remote.double.v1~", `
def main(ctx, input):
    print("doubling", input["n"])
    return {"doubled": input["n"] * 2}
`))
	id := ep["entrypoint_id"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Server: e.ts.URL, Keys: ks, WorkerID: "w-roundtrip", Starlark: workerexec.New(workerexec.Config{}),
			PollWait: 200 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	var ids []string
	for n := range 5 {
		ids = append(ids, invID(invAsync(t, e, adm, id, obj{"n": n}, nil)))
	}
	for n, inv := range ids {
		rec := invWait(t, e, adm, inv, "succeeded", "failed")
		require.Equal(t, "succeeded", rec["status"], "%v", rec)
		require.EqualValues(t, n*2, rec["result"].(obj)["doubled"])
		items, raw := invTimeline(t, e, adm, inv)
		require.GreaterOrEqual(t, invIndex(items, "log", 0), 0, "the worker's log reaches the timeline: %s", raw)
	}
}

func TestWorkerCancelAndLateResult(t *testing.T) {
	t.Parallel()
	e, ks := workerEnv(t)
	adm := invTenant(t, e, "t-workers")
	ep := e.registerActive(t, adm, invFn(t, "remote.slow.v1~", "def main(ctx, input):\n    return {}\n"))
	inv := invID(invAsync(t, e, adm, ep["entrypoint_id"].(string), obj{}, nil))
	var reply workerproto.PollReply
	for len(reply.Tasks) == 0 {
		r := workerPost(t, e, ks, workerproto.PathPoll, workerproto.PollRequest{WorkerID: "w-manual", MaxTasks: 4, WaitMS: 5000, Starlark: true}, &reply)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	}
	task := reply.Tasks[0]
	require.Equal(t, inv, task.InvocationID)
	require.Equal(t, workerproto.KindStarlark, task.Kind)
	require.Contains(t, task.Source, "def main")

	var hb workerproto.HeartbeatReply
	workerPost(t, e, ks, workerproto.PathHeartbeat, workerproto.Heartbeat{WorkerID: "w-manual", Tasks: []string{task.ID, "wt_gone"}}, &hb)
	require.Empty(t, hb.Cancel)
	require.Equal(t, []string{"wt_gone"}, hb.Unknown)
	// Another worker's heartbeat does not hold this task.
	workerPost(t, e, ks, workerproto.PathHeartbeat, workerproto.Heartbeat{WorkerID: "w-other", Tasks: []string{task.ID}}, &hb)
	require.Equal(t, []string{task.ID}, hb.Unknown)

	require.Equal(t, http.StatusOK, invControl(t, e, adm, inv, "cancel").Status)
	require.Eventually(t, func() bool {
		workerPost(t, e, ks, workerproto.PathHeartbeat, workerproto.Heartbeat{WorkerID: "w-manual", Tasks: []string{task.ID}}, &hb)
		return len(hb.Cancel) == 1 && hb.Cancel[0] == task.ID
	}, 10*time.Second, 20*time.Millisecond, "the cancellation reaches the worker in a heartbeat answer")

	// The result after cancel is recorded as a late result and not applied.
	r := workerPost(t, e, ks, task.ResultPath, workerproto.Result{TaskID: task.ID, WorkerID: "w-manual", LeaseOwner: task.LeaseOwner,
		Output: json.RawMessage(`{"late":true}`)}, &obj{})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	require.Eventually(t, func() bool {
		items, _ := invTimeline(t, e, adm, inv)
		return invIndex(items, "late_result", 0) >= 0
	}, 10*time.Second, 10*time.Millisecond)
	rec := invGet(t, e, adm, inv)
	require.Equal(t, "canceled", rec["status"], "%v", rec)
	require.Nil(t, rec["result"])
}

func TestWorkerHeartbeatsDoNotWrite(t *testing.T) {
	t.Parallel()
	e, ks := workerEnv(t)
	adm := invTenant(t, e, "t-workers")
	ep := e.registerActive(t, adm, invFn(t, "remote.beat.v1~", "def main(ctx, input):\n    return {}\n"))
	const m = 3
	for range m {
		invAsync(t, e, adm, ep["entrypoint_id"].(string), obj{}, nil)
	}
	var tasks []string
	for len(tasks) < m {
		var reply workerproto.PollReply
		workerPost(t, e, ks, workerproto.PathPoll, workerproto.PollRequest{WorkerID: "w-beat", MaxTasks: m, WaitMS: 5000, Starlark: true}, &reply)
		for _, tk := range reply.Tasks {
			tasks = append(tasks, tk.ID)
		}
	}
	before := e.srv.WorkerHub.Stats()
	const n = 50
	for range n {
		var hb workerproto.HeartbeatReply
		workerPost(t, e, ks, workerproto.PathHeartbeat, workerproto.Heartbeat{WorkerID: "w-beat", Tasks: tasks}, &hb)
		require.Empty(t, hb.Unknown)
	}
	after := e.srv.WorkerHub.Stats()
	require.Equal(t, int64(n), after.Heartbeats-before.Heartbeats)
	require.Equal(t, int64(n*m), after.HeartbeatTasks-before.HeartbeatTasks)
	require.Less(t, after.HeartbeatWrites-before.HeartbeatWrites, int64(n*m), "heartbeats are kept in memory")
	require.Zero(t, after.HeartbeatWrites-before.HeartbeatWrites)
	// The counters are exposed on /metrics.
	req, err := http.NewRequest(http.MethodGet, e.ts.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+operator)
	hr, err := e.client.Do(req)
	require.NoError(t, err)
	defer hr.Body.Close()
	raw, err := io.ReadAll(hr.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hr.StatusCode)
	require.Contains(t, string(raw), fmt.Sprintf("lark_worker_heartbeats_total %d", after.Heartbeats))
	require.Contains(t, string(raw), "lark_worker_heartbeat_writes_total 0")
}

func TestWorkerLostIsReclaimed(t *testing.T) {
	t.Parallel()
	e, ks := workerEnv(t, func(c *server.Config) { c.HeartbeatTimeout = 300 * time.Millisecond })
	adm := invTenant(t, e, "t-workers")
	ep := e.registerActive(t, adm, invFn(t, "remote.lost.v1~", "def main(ctx, input):\n    return {\"ok\": True}\n"))
	inv := invID(invAsync(t, e, adm, ep["entrypoint_id"].(string), obj{}, nil))
	var reply workerproto.PollReply
	for len(reply.Tasks) == 0 {
		workerPost(t, e, ks, workerproto.PathPoll, workerproto.PollRequest{WorkerID: "w-dead", MaxTasks: 1, WaitMS: 5000, Starlark: true}, &reply)
	}
	// w-dead never heartbeats nor answers: after the heartbeat timeout its lease is ended, the
	// claim stage reclaims the attempt, and a live worker runs it.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Server: e.ts.URL, Keys: ks, WorkerID: "w-live", Starlark: workerexec.New(workerexec.Config{}),
			PollWait: 200 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	rec := invWait(t, e, adm, inv, "succeeded", "failed")
	require.Equal(t, "succeeded", rec["status"], "%v", rec)
	items, raw := invTimeline(t, e, adm, inv)
	require.GreaterOrEqual(t, invIndex(items, "reclaimed", 0), 0, "%s", raw)
	require.GreaterOrEqual(t, e.srv.WorkerHub.Stats().Lost, int64(1))
	// The dead worker's result, if it ever came, is refused: its task is gone.
	r := workerPost(t, e, ks, reply.Tasks[0].ResultPath, workerproto.Result{TaskID: reply.Tasks[0].ID, WorkerID: "w-dead",
		LeaseOwner: reply.Tasks[0].LeaseOwner, Output: json.RawMessage(`{}`)}, nil)
	require.Equal(t, http.StatusNotFound, r.Status)
}

func TestWorkerShutdownReportsInterrupted(t *testing.T) {
	t.Parallel()
	e, ks := workerEnv(t)
	adm := invTenant(t, e, "t-workers")
	ep := e.registerActive(t, adm, invFn(t, "remote.spin.v1~", "def main(ctx, input):\n    while True:\n        pass\n",
		set("traits.retry", obj{"max_attempts": 2, "initial_delay_ms": 60000, "max_delay_ms": 60000, "backoff_multiplier": 1.0})))
	inv := invID(invAsync(t, e, adm, ep["entrypoint_id"].(string), obj{}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Server: e.ts.URL, Keys: ks, WorkerID: "w-term", Starlark: workerexec.New(workerexec.Config{}),
			PollWait: 200 * time.Millisecond}).Run(ctx)
	}()
	invWait(t, e, adm, inv, "running")
	require.Eventually(t, func() bool { return e.srv.WorkerHub.Stats().Heartbeats > 0 }, 10*time.Second, 10*time.Millisecond)
	cancel() // what SIGTERM does in lark worker
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the worker did not stop")
	}
	require.Eventually(t, func() bool {
		items, _ := invTimeline(t, e, adm, inv)
		return invIndex(items, "step_retried", 0) >= 0
	}, 10*time.Second, 10*time.Millisecond, "the interrupted attempt is eligible for retry: %s", func() string { _, raw := invTimeline(t, e, adm, inv); return string(raw) }())
	items, raw := invTimeline(t, e, adm, inv)
	require.Contains(t, string(raw), "the worker was stopped before the attempt ended", "%v", items)
}

func TestWorkerProvidedImplementation(t *testing.T) {
	t.Parallel()
	e, ks := workerEnv(t)
	adm := invTenant(t, e, "t-workers")
	ep := e.registerActive(t, adm, invFn(t, "remote.provided.v1~", "",
		set("implementation", obj{"adapter": "gts.x.core.serverless.adapter.worker.v1~", "kind": "adapter_ref",
			"adapter_ref": obj{"definition_id": "acme.charge"}})))
	id := ep["entrypoint_id"].(string)
	// Sync: the server cannot wait on a worker here; the attempt fails with a clear error.
	rec := invSync(t, e, adm, id, obj{"n": 1}, nil)
	require.Equal(t, "dead_lettered", rec["status"], "%v", rec)
	require.Contains(t, rec["error"].(obj)["message"], "provided by remote workers")

	inv := invID(invAsync(t, e, adm, id, obj{"n": 2}, nil))
	// A Starlark worker, and a worker serving another definition, get nothing.
	var reply workerproto.PollReply
	workerPost(t, e, ks, workerproto.PathPoll, workerproto.PollRequest{WorkerID: "w-star", MaxTasks: 4, WaitMS: 300, Starlark: true,
		Definitions: []string{"acme.other"}}, &reply)
	require.Empty(t, reply.Tasks)
	for len(reply.Tasks) == 0 {
		workerPost(t, e, ks, workerproto.PathPoll, workerproto.PollRequest{WorkerID: "w-go", MaxTasks: 4, WaitMS: 5000,
			Definitions: []string{"acme.charge"}}, &reply)
	}
	task := reply.Tasks[0]
	require.Equal(t, workerproto.KindAdapterRef, task.Kind)
	require.Equal(t, "acme.charge", task.DefinitionID)
	require.Empty(t, task.Source)
	require.JSONEq(t, `{"n":2}`, string(task.Params))
	// The result is checked like any other: against the returns schema (an object).
	r := workerPost(t, e, ks, task.ResultPath, workerproto.Result{TaskID: task.ID, WorkerID: "w-go", LeaseOwner: task.LeaseOwner,
		Output: json.RawMessage(`{"charged":2}`)}, &obj{})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	got := invWait(t, e, adm, inv, "succeeded", "failed")
	require.Equal(t, "succeeded", got["status"], "%v", got)
	require.EqualValues(t, 2, got["result"].(obj)["charged"])
	// A second result for the same task is refused.
	r = workerPost(t, e, ks, task.ResultPath, workerproto.Result{TaskID: task.ID, WorkerID: "w-go", LeaseOwner: task.LeaseOwner,
		Output: json.RawMessage(`{}`)}, nil)
	require.NotEqual(t, http.StatusOK, r.Status)
}

// TestWorkerClientStopsCanceled: a real worker stops a running program when its invocation is
// canceled (the heartbeat answer), and its result is recorded as a late result.
func TestWorkerClientStopsCanceled(t *testing.T) {
	t.Parallel()
	e, ks := workerEnv(t)
	adm := invTenant(t, e, "t-workers")
	ep := e.registerActive(t, adm, invFn(t, "remote.forever.v1~", "def main(ctx, input):\n    while True:\n        pass\n"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Server: e.ts.URL, Keys: ks, WorkerID: "w-cancel", Starlark: workerexec.New(workerexec.Config{}),
			PollWait: 200 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	inv := invID(invAsync(t, e, adm, ep["entrypoint_id"].(string), obj{}, nil))
	require.Eventually(t, func() bool { return e.srv.WorkerHub.Stats().HeartbeatTasks > 0 }, 10*time.Second, 5*time.Millisecond,
		"the worker runs the task")
	require.Equal(t, http.StatusOK, invControl(t, e, adm, inv, "cancel").Status)
	require.Eventually(t, func() bool {
		items, _ := invTimeline(t, e, adm, inv)
		return invIndex(items, "late_result", 0) >= 0
	}, 5*time.Second, 10*time.Millisecond, "the stopped program's result arrives well before its 10 s timeout, as a late result")
	require.Equal(t, "canceled", invGet(t, e, adm, inv)["status"])
}

// TestWorkerOutboundHTTPAndSecrets: a remote worker's r_http_* calls go through the egress rules
// with the tenant's allowlist (a host outside it is refused), its secret references are resolved by
// the server for the task's worker only (the upstream gets the value; the result, the timeline and
// the response hold the redaction mark, never the value), and the calls are on the timeline and in
// the egress metric.
func TestWorkerOutboundHTTPAndSecrets(t *testing.T) {
	t.Parallel()
	const value = "WORKERCANARY-5c81e0d2a7"
	var got []string
	var mu sync.Mutex
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"auth":%q}`, r.Header.Get("Authorization"))
	}))
	t.Cleanup(upstream.Close)
	e, ks := workerEnv(t, func(c *server.Config) { c.Keyring = testKeyring(t) })
	adm := invTenant(t, e, "t-worker-egress", "127.0.0.1")
	e.expect(t, http.StatusCreated, http.MethodPost, secretsPath, adm, obj{"name": "api_key", "value": value, "allowed_hosts": []any{"127.0.0.1"}})
	id := idOf(e.registerActive(t, adm, invFn(t, "remote.fetch.v1~", `
def main(ctx, input):
    r = r_await(r_http_get_v1(input["url"], headers={"Authorization": "Bearer {{secret:api_key}}"}, timeout_ms=5000))
    return {"status": r.response.status_code, "body": r.response.body}
`)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Server: e.ts.URL, Keys: ks, WorkerID: "w-egress", PollWait: 200 * time.Millisecond,
			Starlark: workerexec.New(workerexec.Config{Egress: egress.New(egress.Options{AllowLoopback: true})})}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	ok := invID(invAsync(t, e, adm, id, obj{"url": upstream.URL + "/x?q=1"}, nil))
	rec := invWait(t, e, adm, ok, "succeeded", "failed")
	require.Equal(t, "succeeded", rec["status"], "%v", rec)
	res := rec["result"].(obj)
	require.EqualValues(t, 200, res["status"])
	require.Equal(t, "Bearer "+egress.Redacted, res["body"].(obj)["auth"], "the echoed value is scrubbed")
	mu.Lock()
	require.Equal(t, []string{"Bearer " + value}, got, "the upstream got the secret")
	mu.Unlock()
	items, raw := invTimeline(t, e, adm, ok)
	i := invIndex(items, "http_call", 0)
	require.GreaterOrEqual(t, i, 0, "the worker's call is on the timeline: %s", raw)
	require.EqualValues(t, 200, items[i]["details"].(obj)["status"])
	require.Equal(t, "127.0.0.1", items[i]["details"].(obj)["host"])
	require.NotContains(t, string(raw), value)
	require.NotContains(t, string(raw), "q=1", "no query on the timeline")
	require.Positive(t, rec["observability"].(obj)["metrics"].(obj)["egress_bytes"], "%v", rec["observability"])

	// A host outside the tenant's allowlist is refused on the worker as on the server.
	denied := invID(invAsync(t, e, adm, id, obj{"url": "http://localhost" + strings.TrimPrefix(upstream.URL, "http://127.0.0.1")}, nil))
	rec = invWait(t, e, adm, denied, "succeeded", "failed", "dead_lettered")
	require.Equal(t, "dead_lettered", rec["status"], "a non-retryable error: %v", rec)
	require.Contains(t, mustJSONString(t, rec["error"]), "allowed_outbound_domains")
	mu.Lock()
	require.Len(t, got, 1, "the refused call never left")
	mu.Unlock()

	// The secret route answers only the worker a running task is assigned to: 404 otherwise.
	r := workerPost(t, e, ks, strings.Replace(workerproto.PathSecret, "{task_id}", "wt_nope", 1),
		workerproto.SecretRequest{TaskID: "wt_nope", WorkerID: "w-egress", LeaseOwner: "x", Name: "api_key"}, nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Raw)
	require.NotContains(t, string(r.Raw), value)
}

func mustJSONString(t *testing.T, v any) string {
	t.Helper()
	return string(mustJSONBytes(t, v))
}

// TestWorkerPollsEveryServer: one worker given several servers (a cluster's nodes) takes the
// attempts each of them claimed, sends each result to the server that handed the task out, and is
// not held up by a server it cannot reach.
func TestWorkerPollsEveryServer(t *testing.T) {
	t.Parallel()
	e1, ks := workerEnv(t)
	e2, _ := workerEnv(t)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // a node that is down: connections are refused
	src := "\ndef main(ctx, input):\n    return {\"n\": input[\"n\"]}\n"
	type node struct {
		e   *env
		adm string
		id  string
	}
	nodes := []node{{e: e1}, {e: e2}}
	for i := range nodes {
		n := &nodes[i]
		n.adm = invTenant(t, n.e, "t-multi")
		n.id = idOf(n.e.registerActive(t, n.adm, invFn(t, "remote.multi.v1~", src)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Servers: []string{down.URL, e1.ts.URL, e2.ts.URL}, Keys: ks, WorkerID: "w-multi",
			Starlark: workerexec.New(workerexec.Config{}), Concurrency: 3, PollWait: 200 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	for i, n := range nodes {
		var ids []string
		for k := range 4 {
			ids = append(ids, invID(invAsync(t, n.e, n.adm, n.id, obj{"n": 10*i + k}, nil)))
		}
		for k, id := range ids {
			rec := invWait(t, n.e, n.adm, id, "succeeded", "failed", "dead_lettered")
			require.Equal(t, "succeeded", rec["status"], "server %d: %v", i+1, rec)
			require.EqualValues(t, 10*i+k, rec["result"].(obj)["n"])
		}
	}
}

// TestWorkerKeyRotation: a new key may reach either side first. The server signs each answer with
// the key its request was signed with, so workers that have only the old key keep working against
// a server that accepts both; a worker that signs with a new key its server does not know yet
// tries its next key. Either way every task runs.
func TestWorkerKeyRotation(t *testing.T) {
	t.Parallel()
	const oldKey, newKey = "wk1:worker-secret-0123456789", "wk2:worker-secret-new-0123456789"
	keys := func(specs ...string) *workerproto.Keyset {
		ks, err := workerproto.ParseKeys(specs)
		require.NoError(t, err)
		return ks
	}
	for name, tc := range map[string]struct{ server, worker *workerproto.Keyset }{
		"server first":  {server: keys(newKey, oldKey), worker: keys(oldKey)},
		"workers first": {server: keys(oldKey), worker: keys(newKey, oldKey)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *server.Config) {
				c.RemoteWorkers, c.WorkerKeys = true, tc.server
				c.HeartbeatInterval, c.HeartbeatTimeout = 50*time.Millisecond, 5*time.Second
			})
			invDispatcher(t, e)
			adm := invTenant(t, e, "t-rotation")
			id := e.registerActive(t, adm, invFn(t, "rotation.double.v1~", "def main(ctx, input):\n    return {\"doubled\": input[\"n\"] * 2}\n"))["entrypoint_id"].(string)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- workerclient.New(workerclient.Config{Server: e.ts.URL, Keys: tc.worker, WorkerID: "w-rotation", Starlark: workerexec.New(workerexec.Config{}),
					PollWait: 200 * time.Millisecond}).Run(ctx)
			}()
			t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
			for n := range 3 {
				rec := invWait(t, e, adm, invID(invAsync(t, e, adm, id, obj{"n": n}, nil)), "succeeded", "failed")
				require.Equal(t, "succeeded", rec["status"], "%v", rec)
				require.EqualValues(t, n*2, rec["result"].(obj)["doubled"])
			}
		})
	}
}

// TestWorkerKeyBoundToTenants: a key bound to tenants (server.Config.WorkerKeyTenants) is handed
// only their tasks; another tenant's task waits for a key that may take it, and the bound key
// cannot report on it.
func TestWorkerKeyBoundToTenants(t *testing.T) {
	t.Parallel()
	bound, err := workerproto.ParseKeys([]string{"wkb:bound-secret-0123456789"})
	require.NoError(t, err)
	all, err := workerproto.ParseKeys([]string{"wka:any-secret-0123456789"})
	require.NoError(t, err)
	both, err := workerproto.ParseKeys([]string{"wka:any-secret-0123456789", "wkb:bound-secret-0123456789"})
	require.NoError(t, err)
	e := newEnv(t, func(c *server.Config) {
		c.RemoteWorkers, c.WorkerKeys = true, both
		c.HeartbeatInterval, c.HeartbeatTimeout = 50*time.Millisecond, 5*time.Second
		c.WorkerKeyTenants = workerhub.Bindings{"wkb": {"t-mine": true}}
	})
	invDispatcher(t, e)
	other := invTenant(t, e, "t-other")
	fn := e.registerActive(t, other, invFn(t, "bound.noop.v1~", "def main(ctx, input):\n    return {}\n"))["entrypoint_id"].(string)
	inv := invID(invAsync(t, e, other, fn, obj{}, nil))
	poll := workerproto.PollRequest{WorkerID: "w-bound", MaxTasks: 4, WaitMS: 300, Starlark: true}
	var reply workerproto.PollReply
	require.Equal(t, http.StatusOK, workerPost(t, e, bound, workerproto.PathPoll, poll, &reply).Status)
	require.Empty(t, reply.Tasks, "the bound key is not handed another tenant's task")
	poll.WorkerID = "w-any"
	require.Equal(t, http.StatusOK, workerPost(t, e, all, workerproto.PathPoll, poll, &reply).Status)
	require.Len(t, reply.Tasks, 1)
	task := reply.Tasks[0]
	require.Equal(t, inv, task.InvocationID)
	// The bound key cannot report on it, even naming the worker that took it.
	res := workerproto.Result{TaskID: task.ID, WorkerID: "w-any", LeaseOwner: task.LeaseOwner, Output: json.RawMessage(`{}`)}
	path := strings.Replace(workerproto.PathResult, "{task_id}", task.ID, 1)
	require.Equal(t, http.StatusNotFound, workerPost(t, e, bound, path, res, nil).Status)
	require.Equal(t, http.StatusOK, workerPost(t, e, all, path, res, nil).Status)
	require.Equal(t, "succeeded", invWait(t, e, other, inv, "succeeded", "failed")["status"])
}

// TestWorkerEnvelopeReplayAfterRestart: a captured poll envelope is refused by the server that
// answered it and, after a restart, by the next one (its nonce is in the store until the envelope
// expires); a heartbeat's nonce is remembered in memory only.
func TestWorkerEnvelopeReplayAfterRestart(t *testing.T) {
	t.Parallel()
	ks := workerKeys(t)
	dir, st := t.TempDir(), testStore(t)
	start := func() *env {
		srv, err := server.New(context.Background(), server.Config{DataDir: dir, Store: st, AdminToken: operator, RemoteWorkers: true,
			WorkerKeys: ks, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 5 * time.Second})
		require.NoError(t, err)
		e := &env{srv: srv, ts: httptest.NewServer(checked(t, srv.Handler()))}
		e.client = e.ts.Client()
		return e
	}
	poll, err := ks.Sign(workerproto.PollRequest{WorkerID: "w1", MaxTasks: 1, Starlark: true}, time.Now(), time.Minute)
	require.NoError(t, err)
	beat, err := ks.Sign(workerproto.Heartbeat{WorkerID: "w1", Tasks: []string{}}, time.Now(), time.Minute)
	require.NoError(t, err)
	e := start()
	var reply workerproto.PollReply
	require.Equal(t, http.StatusOK, workerPostRaw(t, e, ks, workerproto.PathPoll, poll, &reply).Status)
	require.Equal(t, http.StatusOK, workerPostRaw(t, e, ks, workerproto.PathHeartbeat, beat, nil).Status)
	require.Equal(t, http.StatusUnauthorized, workerPostRaw(t, e, ks, workerproto.PathPoll, poll, nil).Status)
	e.ts.Close()
	require.NoError(t, e.srv.Close())

	e = start()
	defer func() {
		e.ts.Close()
		require.NoError(t, e.srv.Close())
	}()
	r := workerPostRaw(t, e, ks, workerproto.PathPoll, poll, nil)
	require.Equal(t, http.StatusUnauthorized, r.Status, "a captured poll replayed after a restart")
	require.Contains(t, r.Body["detail"], "nonce already seen")
	require.Equal(t, http.StatusOK, workerPostRaw(t, e, ks, workerproto.PathHeartbeat, beat, nil).Status,
		"a heartbeat changes nothing: its nonce is not kept across restarts")
}

// TestWorkerList: GET /workers shows the workers that polled, once their node recorded them: the
// operator every one, a tenant's operator those its tasks may go to (unbound keys and keys bound
// to it), with the tasks each holds now; a viewer may not list them; status and node filter.
func TestWorkerList(t *testing.T) {
	t.Parallel()
	both, err := workerproto.ParseKeys([]string{"wka:any-secret-0123456789", "wkb:bound-secret-0123456789"})
	require.NoError(t, err)
	bound, err := workerproto.ParseKeys([]string{"wkb:bound-secret-0123456789"})
	require.NoError(t, err)
	unbound, err := workerproto.ParseKeys([]string{"wka:any-secret-0123456789"})
	require.NoError(t, err)
	e := newEnv(t, func(c *server.Config) {
		c.RemoteWorkers, c.WorkerKeys, c.NodeID = true, both, "node-a"
		c.HeartbeatInterval, c.HeartbeatTimeout = 50*time.Millisecond, 5*time.Second
		c.WorkerKeyTenants = workerhub.Bindings{"wkb": {"t-mine": true}}
	})
	invDispatcher(t, e)
	mine := invTenant(t, e, "t-mine")
	other := invTenant(t, e, "t-other")
	e.expectProblem(t, http.StatusForbidden, "forbidden", "GET", base+"/workers", e.token(t, "t-mine", "v", "viewer"), nil)

	// A worker of the unbound key polls (it runs nothing, so the bound worker takes the task).
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Server: e.ts.URL, Keys: unbound, WorkerID: "w-any", PollWait: 200 * time.Millisecond,
			Concurrency: 3, Version: "any-1.0"}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.Eventually(t, func() bool {
		require.NoError(t, e.srv.WorkerHub.Record(context.Background()))
		items := e.expect(t, http.StatusOK, "GET", base+"/workers", operator, nil).Body["items"].([]any)
		return len(items) == 1
	}, 10*time.Second, 10*time.Millisecond, "the node records the polling worker")
	fn := e.registerActive(t, mine, invFn(t, "listed.noop.v1~", "def main(ctx, input):\n    return {}\n"))["entrypoint_id"].(string)
	inv := invID(invAsync(t, e, mine, fn, obj{}, nil))
	var reply workerproto.PollReply
	poll := workerproto.PollRequest{WorkerID: "w-bound", MaxTasks: 4, WaitMS: 5000, Starlark: true, Concurrency: 4, Version: "1.2.3"}
	require.Equal(t, http.StatusOK, workerPost(t, e, bound, workerproto.PathPoll, poll, &reply).Status)
	require.Len(t, reply.Tasks, 1)
	require.NoError(t, e.srv.WorkerHub.Record(context.Background()))

	list := func(token, query string) []any {
		t.Helper()
		return e.expect(t, http.StatusOK, "GET", base+"/workers"+query, token, nil).Body["items"].([]any)
	}
	all := list(operator, "")
	require.Len(t, all, 2, "%v", all)
	got := all[1].(obj)
	require.Equal(t, "w-bound", got["worker_id"])
	require.Equal(t, "node-a", got["node"])
	require.Equal(t, "wkb", got["key_id"])
	require.Equal(t, []any{"t-mine"}, got["tenants"])
	require.Equal(t, "online", got["status"])
	require.EqualValues(t, 1, got["tasks_held"], "the task it holds now")
	require.EqualValues(t, 4, got["capacity"])
	require.Equal(t, "1.2.3", got["version"])
	require.Equal(t, "w-any", all[0].(obj)["worker_id"])
	require.Equal(t, []any{}, all[0].(obj)["tenants"])
	require.EqualValues(t, 3, all[0].(obj)["capacity"], "the worker client's concurrency")
	require.Equal(t, "any-1.0", all[0].(obj)["version"])
	require.Len(t, list(mine, ""), 2, "t-mine's tasks may go to both")
	others := list(other, "")
	require.Len(t, others, 1, "t-other's only to the unbound key's")
	require.Equal(t, "w-any", others[0].(obj)["worker_id"])
	require.Len(t, list(operator, "?$filter="+url.QueryEscape("status eq 'online' and node eq 'node-a'")), 2)
	require.Empty(t, list(operator, "?$filter="+url.QueryEscape("status eq 'offline'")))
	e.expectProblem(t, http.StatusBadRequest, "bad_request", "GET", base+"/workers?$filter="+url.QueryEscape("tasks_held eq 1"), operator, nil)

	res := workerproto.Result{TaskID: reply.Tasks[0].ID, WorkerID: "w-bound", LeaseOwner: reply.Tasks[0].LeaseOwner, Output: json.RawMessage(`{}`)}
	require.Equal(t, http.StatusOK, workerPost(t, e, bound, strings.Replace(workerproto.PathResult, "{task_id}", res.TaskID, 1), res, nil).Status)
	require.Equal(t, "succeeded", invWait(t, e, mine, inv, "succeeded", "failed")["status"])
	require.EqualValues(t, 0, list(operator, "")[1].(obj)["tasks_held"], "its result given, it holds none")
}

// TestWorkerPollsAnOlderServer: a server older than a poll's concurrency and version refuses
// them (422, unknown field); the worker client then polls it without them and runs its tasks.
func TestWorkerPollsAnOlderServer(t *testing.T) {
	t.Parallel()
	e, ks := workerEnv(t)
	adm := invTenant(t, e, "t-workers")
	ep := e.registerActive(t, adm, invFn(t, "remote.older.v1~", "def main(ctx, input):\n    return {\"ok\": True}\n"))
	var refused atomic.Int64
	real, err := url.Parse(e.ts.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(real)
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, workerproto.PathPoll) {
			b, _ := io.ReadAll(r.Body)
			var env workerproto.Envelope
			var poll map[string]any
			if json.Unmarshal(b, &env) != nil || json.Unmarshal(env.Body, &poll) != nil {
				t.Errorf("a poll that is not a signed envelope: %s", b)
			}
			if _, ok := poll["concurrency"]; ok {
				refused.Add(1)
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = io.WriteString(w, `{"status":422,"detail":"invalid body","errors":[{"path":"$.body","code":"INVALID","message":"Validation failed: unknown field"}]}`)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(older.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Server: older.URL, Keys: ks, WorkerID: "w-older", Starlark: workerexec.New(workerexec.Config{}),
			PollWait: 200 * time.Millisecond, Version: "new-1"}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	inv := invID(invAsync(t, e, adm, ep["entrypoint_id"].(string), obj{}, nil))
	rec := invWait(t, e, adm, inv, "succeeded", "failed")
	require.Equal(t, "succeeded", rec["status"], "%v", rec)
	require.EqualValues(t, 1, refused.Load(), "refused once, then polled without them")
}
