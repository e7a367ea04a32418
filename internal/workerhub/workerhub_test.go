package workerhub

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/execution"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/workerproto"
)

func remoteAttempt(id, definition string, expires time.Time) execution.RemoteAttempt {
	rec := invocation.Record{ID: id, TenantID: "t1", EntrypointID: "ep", Attempt: 1, EngineAttempt: 1, Params: json.RawMessage(`{}`)}
	return execution.RemoteAttempt{Attempt: attempt.Attempt{Kind: attempt.KindRun, Invocation: rec, Lease: attempt.Lease{Owner: "node/1/1", ExpiresAt: expires}},
		Run: run.Job{Record: rec, Source: "def main(ctx, input):\n    return {}\n", Limits: sandbox.Limits{Timeout: time.Second},
			Retry: outcome.RetryPolicy{MaxAttempts: 3}}, DefinitionID: definition}
}

func newService() *Service {
	return New(Config{Functions: true, HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: time.Hour,
		Runner: &run.Runner{Clock: clock.Real{}}})
}

// start runs ra through s in the background; the result arrives on the returned channel.
func start(s *Service, ra execution.RemoteAttempt) <-chan run.Result {
	out := make(chan run.Result, 1)
	go func() {
		res, ok := s.Run(context.Background(), ra)
		if ok {
			out <- res
		}
		close(out)
	}()
	return out
}

func poll(t *testing.T, s *Service, req workerproto.PollRequest) []workerproto.Task {
	t.Helper()
	if req.MaxTasks == 0 {
		req.MaxTasks = 8
	}
	reply, err := s.Poll(context.Background(), req)
	require.NoError(t, err)
	return reply.Tasks
}

func TestTakes(t *testing.T) {
	s := newService()
	require.True(t, s.Takes(entrypoint.Entrypoint{Kind: entrypoint.KindFunction}))
	require.False(t, s.Takes(entrypoint.Entrypoint{Kind: entrypoint.KindWorkflow}))
	require.False(t, New(Config{}).Takes(entrypoint.Entrypoint{Kind: entrypoint.KindFunction}), "without Functions, none")
}

func TestPollRouting(t *testing.T) {
	s := newService()
	later := time.Now().Add(time.Hour)
	star := start(s, remoteAttempt("inv_star", "", later))
	ref := start(s, remoteAttempt("inv_ref", "billing.charge", later))
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.queue) == 2 }, 5*time.Second, time.Millisecond)

	// Serves neither: nothing after the wait.
	require.Empty(t, poll(t, s, workerproto.PollRequest{WorkerID: "w0", WaitMS: 20, Definitions: []string{"other"}}))
	// A Go worker serving the definition gets only its task.
	got := poll(t, s, workerproto.PollRequest{WorkerID: "w1", Definitions: []string{"billing.charge"}})
	require.Len(t, got, 1)
	require.Equal(t, "inv_ref", got[0].InvocationID)
	require.Equal(t, workerproto.KindAdapterRef, got[0].Kind)
	require.Empty(t, got[0].Source)
	// A Starlark worker gets the Starlark one.
	star1 := poll(t, s, workerproto.PollRequest{WorkerID: "w2", Starlark: true})
	require.Len(t, star1, 1)
	require.Equal(t, "inv_star", star1[0].InvocationID)
	require.Contains(t, star1[0].Source, "def main")

	// Results: the server decides the outcome.
	require.NoError(t, s.Result(context.Background(), got[0].ID, workerproto.Result{TaskID: got[0].ID, WorkerID: "w1", LeaseOwner: "node/1/1", Output: json.RawMessage(`{"x":1}`)}))
	res := <-ref
	require.Equal(t, outcome.Succeeded, res.Outcome.Kind)
	require.JSONEq(t, `{"x":1}`, string(res.Outcome.Output))
	require.NoError(t, s.Result(context.Background(), star1[0].ID, workerproto.Result{TaskID: star1[0].ID, WorkerID: "w2", LeaseOwner: "node/1/1",
		Error: &workerproto.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "boom"}}))
	res = <-star
	require.Equal(t, outcome.RetryScheduled, res.Outcome.Kind, "a retryable error under max_attempts 3 is retried")
}

func TestBounds(t *testing.T) {
	s := newService()
	var pe *problem.Error
	_, err := s.Poll(context.Background(), workerproto.PollRequest{WorkerID: "", MaxTasks: 1})
	require.True(t, errors.As(err, &pe) && pe.Status == 422)
	_, err = s.Poll(context.Background(), workerproto.PollRequest{WorkerID: "w", MaxTasks: workerproto.MaxTasksPerPoll + 1})
	require.Error(t, err)
	_, err = s.Poll(context.Background(), workerproto.PollRequest{WorkerID: "w", MaxTasks: 1, WaitMS: workerproto.MaxWaitMS + 1})
	require.Error(t, err)
	_, err = s.Poll(context.Background(), workerproto.PollRequest{WorkerID: "w", MaxTasks: 1, Definitions: make([]string, workerproto.MaxDefinitions+1)})
	require.Error(t, err)
	_, err = s.Heartbeat(context.Background(), workerproto.Heartbeat{WorkerID: "w", Tasks: make([]string, workerproto.MaxTasksPerHeartbeat+1)})
	require.Error(t, err)

	ch := start(s, remoteAttempt("inv_b", "", time.Now().Add(time.Hour)))
	tasks := poll(t, s, workerproto.PollRequest{WorkerID: "w", Starlark: true, WaitMS: 5000})
	require.Len(t, tasks, 1)
	id := tasks[0].ID
	ok := workerproto.Result{TaskID: id, WorkerID: "w", LeaseOwner: "node/1/1"}
	// Wrong worker, wrong lease, unknown task: 404.
	for _, r := range []workerproto.Result{{TaskID: id, WorkerID: "x", LeaseOwner: "node/1/1"}, {TaskID: id, WorkerID: "w", LeaseOwner: "other"}} {
		require.True(t, errors.As(s.Result(context.Background(), id, r), &pe) && pe.Status == 404)
	}
	// An error without a type, a timeline over the bound, output that is not JSON: 422.
	bad := ok
	bad.Error = &workerproto.Error{Message: "x"}
	require.True(t, errors.As(s.Result(context.Background(), id, bad), &pe) && pe.Status == 422)
	big := make([]map[string]any, MaxTimelineEntries+1)
	for i := range big {
		big[i] = map[string]any{"type": "log"}
	}
	bad = ok
	bad.Timeline, err = json.Marshal(big)
	require.NoError(t, err)
	require.True(t, errors.As(s.Result(context.Background(), id, bad), &pe) && pe.Status == 422)
	bad = ok
	bad.Output = json.RawMessage(`{`)
	require.True(t, errors.As(s.Result(context.Background(), id, bad), &pe) && pe.Status == 422)
	// Interrupted: a retryable runtime error.
	in := ok
	in.Interrupted = true
	in.Timeline = json.RawMessage(`[{"type":"log","data":{"message":"hi"}},{"type":"journal_entry","data":{}}]`)
	require.NoError(t, s.Result(context.Background(), id, in))
	res := <-ch
	require.Equal(t, outcome.RetryScheduled, res.Outcome.Kind)
	require.Equal(t, "retryable", res.Outcome.Err.Category)
	require.Len(t, res.Timeline, 1, "only log entries are taken from a worker")
	require.Equal(t, invocation.EventLog, res.Timeline[0].Type)
}

func TestLostWorker(t *testing.T) {
	s := New(Config{Functions: true, HeartbeatInterval: 5 * time.Millisecond, HeartbeatTimeout: 50 * time.Millisecond,
		Runner: &run.Runner{Clock: clock.Real{}}})
	done := make(chan bool, 1)
	go func() {
		_, ok := s.Run(context.Background(), remoteAttempt("inv_lost", "", time.Now().Add(time.Hour)))
		done <- ok
	}()
	tasks := poll(t, s, workerproto.PollRequest{WorkerID: "w", Starlark: true, WaitMS: 5000})
	require.Len(t, tasks, 1)
	select {
	case ok := <-done:
		require.False(t, ok, "no result will come: given up")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the task was never given up")
	}
	require.Equal(t, int64(1), s.Stats().Lost)
	hb, err := s.Heartbeat(context.Background(), workerproto.Heartbeat{WorkerID: "w", Tasks: []string{tasks[0].ID}})
	require.NoError(t, err)
	require.Equal(t, []string{tasks[0].ID}, hb.Unknown)
}

func TestNoWorkerInTime(t *testing.T) {
	s := newService()
	// The lease no longer covers the timeout: no worker may start it any more.
	_, ok := s.Run(context.Background(), remoteAttempt("inv_late", "", time.Now().Add(500*time.Millisecond)))
	require.False(t, ok)
	require.Empty(t, poll(t, s, workerproto.PollRequest{WorkerID: "w", Starlark: true, WaitMS: 10}))
}

func TestCloseEndsLongPolls(t *testing.T) {
	s := newService()
	got := make(chan []workerproto.Task, 1)
	go func() {
		reply, _ := s.Poll(context.Background(), workerproto.PollRequest{WorkerID: "w", MaxTasks: 1, WaitMS: workerproto.MaxWaitMS, Starlark: true})
		got <- reply.Tasks
	}()
	s.Close()
	select {
	case tasks := <-got:
		require.Empty(t, tasks)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the long poll outlived Close")
	}
	s.Close() // idempotent
}

// TestStopLeavesAttemptsToTheirLease: when the node stops (Close), an attempt no worker took is
// given up at once, and one a worker runs after StopGrace, so the drain does not wait for results
// that could no longer reach the node.
func TestStopLeavesAttemptsToTheirLease(t *testing.T) {
	s := newService()
	taken := make(chan bool, 1)
	go func() {
		_, ok := s.Run(context.Background(), remoteAttempt("inv_taken", "", time.Now().Add(time.Hour)))
		taken <- ok
	}()
	require.Len(t, poll(t, s, workerproto.PollRequest{WorkerID: "w", Starlark: true, WaitMS: 5000}), 1)
	queued := make(chan bool, 1)
	go func() {
		_, ok := s.Run(context.Background(), remoteAttempt("inv_queued", "", time.Now().Add(time.Hour)))
		queued <- ok
	}()
	deadline := time.Now().Add(10 * time.Second)
	for queuedTasks(s) == 0 {
		require.True(t, time.Now().Before(deadline), "the second attempt was never queued")
		time.Sleep(time.Millisecond)
	}
	stopped := time.Now()
	s.Close()
	select {
	case ok := <-queued:
		require.False(t, ok)
		require.Less(t, time.Since(stopped), StopGrace, "an attempt no worker took is given up at once")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the queued attempt was never given up")
	}
	select {
	case ok := <-taken:
		require.False(t, ok)
		require.GreaterOrEqual(t, time.Since(stopped), StopGrace, "a running attempt gets the grace")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the running attempt was never given up")
	}
}

// queuedTasks is how many tasks wait for a worker.
func queuedTasks(s *Service) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// TestParseBindings: "kid=t1,t2" binds a key to tenants; a key given twice adds; a bad form is refused.
func TestParseBindings(t *testing.T) {
	t.Parallel()
	b, err := ParseBindings([]string{"wk1=acme, globex", "wk1=initech", "wk2=umbrella"})
	require.NoError(t, err)
	require.True(t, b.Allows("wk1", "globex"))
	require.True(t, b.Allows("wk1", "initech"))
	require.False(t, b.Allows("wk1", "umbrella"))
	require.True(t, b.Allows("wk3", "umbrella"), "a key not named takes every tenant's tasks")
	for _, bad := range []string{"wk1", "=acme", "wk1="} {
		_, err := ParseBindings([]string{bad})
		require.Error(t, err, bad)
	}
}
