package e2e

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const e2eWorkerKey = "wk1:e2e-worker-key-0123456789"

// workerProc is one running `lark worker`.
type workerProc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
}

// startWorker starts `lark worker` against server (a cluster's nodes comma-separated); extra
// flags come after the defaults and override them.
func startWorker(t *testing.T, server string, extra ...string) *workerProc {
	t.Helper()
	w := &workerProc{stderr: &lockedBuffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(larkBin, append([]string{"worker", "--server", server, "--token", e2eWorkerKey, "--poll-wait", "1s", "--concurrency", "4"}, extra...)...)
	w.cmd.Env = larkEnv()
	w.cmd.Stderr = w.stderr
	w.cmd.WaitDelay = 5 * time.Second
	require.NoError(t, w.cmd.Start())
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("lark worker stderr:\n%s", w.stderr.String())
		}
	})
	return w
}

// wait waits for the worker to exit and returns its state.
func (w *workerProc) wait(t *testing.T) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(stopTimeout):
		t.Fatalf("lark worker did not exit")
	}
}

// waitTask waits until the worker logs that it started a task of invocation id.
func (w *workerProc) waitTask(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w.stderr.String(), `"invocation_id":"`+id+`"`) {
		require.True(t, time.Now().Before(deadline), "the worker never started %s", id)
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *larkProc) waitStatus(t *testing.T, id string, want ...string) invocationRecord {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rec := record(t, p.do(http.MethodGet, apiBase+"/invocations/"+id, p.Token, nil), http.StatusOK)
		for _, w := range want {
			if rec.Status == w {
				return rec
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("invocation %s is %s, not %v", id, rec.Status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *larkProc) timeline(t *testing.T, id string) string {
	t.Helper()
	r := p.do(http.MethodGet, apiBase+"/invocations/"+id+"/timeline?limit=200", p.Token, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	return string(r.Body)
}

// spinUntil is a function that runs until the RFC 3339 time in params.until (UTC, seconds).
const spinUntil = `
def main(ctx, input):
    n = 0
    for i in range(1000000000):
        if r_now_v1()[:19] >= input["until"]:
            break
        n += 1
    return {"spins": n}
`

// TestRemoteWorkers: lark serve (dev) with --remote-workers and real lark worker processes run
// functions to completion; a worker killed with -9 mid-task has its task reclaimed after the
// heartbeat timeout and run by another worker; a SIGTERM'd worker reports its task interrupted,
// which is retried under the retry policy.
func TestRemoteWorkers(t *testing.T) {
	p := startLark(t, t.TempDir(), "--remote-workers", "--worker-key", e2eWorkerKey,
		"--worker-heartbeat-interval", "100ms", "--worker-heartbeat-timeout", "1s")

	// N functions through one worker.
	w1 := startWorker(t, p.URL)
	fast := p.register(t, p.Token, fnSpec{id: "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~e2e.workers.remote.double.v1~",
		src: "def main(ctx, input):\n    return {\"doubled\": input[\"n\"] * 2}\n"})
	const n = 20
	var ids []string
	for i := range n {
		ids = append(ids, record(t, p.invoke(t, p.Token, fast, "async", map[string]any{"n": i}), http.StatusAccepted).ID)
	}
	for i, id := range ids {
		rec := p.waitStatus(t, id, "succeeded", "failed", "dead_lettered")
		require.Equal(t, "succeeded", rec.Status, "%s", p.timeline(t, id))
		require.JSONEq(t, fmt.Sprintf(`{"doubled":%d}`, i*2), string(rec.Result))
		require.NotEmpty(t, rec.Node, "the record names the node that handed the attempt out")
		require.NotEmpty(t, rec.Observability.Metrics.Worker, "the record names the worker that ran it")
	}

	// kill -9 mid-task: the task is reclaimed after the heartbeat timeout and another worker runs it.
	spin := p.register(t, p.Token, fnSpec{id: "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~e2e.workers.remote.spin.v1~",
		src: spinUntil, retry: 2})
	until := time.Now().UTC().Add(3 * time.Second).Format("2006-01-02T15:04:05")
	id := record(t, p.invoke(t, p.Token, spin, "async", map[string]any{"until": until}), http.StatusAccepted).ID
	w1.waitTask(t, id)
	require.NoError(t, w1.cmd.Process.Kill())
	w1.wait(t)
	w2 := startWorker(t, p.URL)
	rec := p.waitStatus(t, id, "succeeded", "failed", "dead_lettered")
	tl := p.timeline(t, id)
	require.Equal(t, "succeeded", rec.Status, "%s", tl)
	require.Contains(t, tl, `"reclaimed"`, "the killed worker's attempt was reclaimed")

	// SIGTERM: the worker stops, reports its task interrupted, exits 0; the task is retried.
	until = time.Now().UTC().Add(30 * time.Second).Format("2006-01-02T15:04:05")
	id = record(t, p.invoke(t, p.Token, spin, "async", map[string]any{"until": until}), http.StatusAccepted).ID
	w2.waitTask(t, id)
	require.NoError(t, w2.cmd.Process.Signal(syscall.SIGTERM))
	w2.wait(t)
	require.Equal(t, 0, w2.cmd.ProcessState.ExitCode(), "%s", w2.stderr.String())
	deadline := time.Now().Add(30 * time.Second)
	for tl = p.timeline(t, id); !strings.Contains(tl, "the worker was stopped before the attempt ended"); tl = p.timeline(t, id) {
		require.True(t, time.Now().Before(deadline), "no interrupted attempt in %s", tl)
		time.Sleep(20 * time.Millisecond)
	}
	require.Contains(t, tl, `"step_retried"`, "the interrupted attempt is retried: %s", tl)
}
