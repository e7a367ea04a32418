package sandbox

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The ADR's own calling convention: the step object returned by r_step_v1 is the fn of
// r_run_step_v1, its output is a struct, and that call is what registers the compensation.
const adrSteps = `
def do_reserve(ctx, input):
    return struct(reservation_id="RSV-" + input.sku)

def release(ctx, step_input, step_output):
    r_await(r_http_post_v1("https://inventory.example.com/release", {"reservation_id": step_output.reservation_id}))

def main(ctx, input):
    reserve = r_step_v1("reserve_inventory", do_reserve, release)
    reserved = r_run_step_v1("reserve_inventory", reserve, input)
    r_snapshot_v1("reserved")
    r_exit({"message": "declined", "category": "non_retryable"})
`

func TestWorkflowADRStepObject(t *testing.T) {
	host := &fakeHost{}
	res, err := RunWorkflow(context.Background(), WorkflowRequest{
		Request: Request{Program: compileWF(t, adrSteps), Input: map[string]any{"sku": "A1"}, Info: Info{InvocationID: "inv-1"}, Host: host},
	})
	require.NotNil(t, err)
	require.Equal(t, "declined", err.Message)
	require.True(t, res.Exited, "r_exit in main ends the workflow for good")
	require.Len(t, res.New, 2)
	require.Equal(t, "r_run_step_v1", res.New[0].Helper)
	require.JSONEq(t, `{"ok":true,"value":{"reservation_id":"RSV-A1"}}`, jsonOf(t, res.New[0].Result))
	require.Len(t, res.Completed, 1)
	require.Equal(t, "release", res.Completed[0].Compensate)
	require.Len(t, res.Compensations, 1)
	require.True(t, res.Compensations[0].OK, "%v", res.Compensations[0].Error)
	require.False(t, res.Compensations[0].StartedAt.IsZero())
	reqs := host.requests()
	require.Len(t, reqs, 1)
	require.JSONEq(t, `{"reservation_id":"RSV-A1"}`, string(reqs[0].Body))
}

func TestWorkflowPlainFunctionStepCompensation(t *testing.T) {
	// A plain fn is compensated only when a step of that name was registered with a compensate_fn.
	for src, want := range map[string]int{
		`
def do(ctx, x):
    return x
def undo(ctx, x, out):
    print("undo")
def main(ctx, input):
    r_step_v1("a", do, undo)
    r_run_step_v1("a", do, 1)
    r_run_step_v1("b", do, 2)
    fail("boom")
`: 1,
		`
def do(ctx, x):
    return x
def main(ctx, input):
    r_run_step_v1("a", do, 1)
    fail("boom")
`: 0,
	} {
		res, err := runWF(t, compileWF(t, src), &fakeHost{}, nil, time.Time{})
		require.NotNil(t, err)
		require.False(t, res.Exited, "fail() is not r_exit")
		require.Len(t, res.Compensations, want, src)
	}
}

func TestWorkflowCompensateDecision(t *testing.T) {
	// The caller decides; a run it says no to compensates nothing, whatever ended it.
	var asked []bool
	res, err := RunWorkflow(context.Background(), WorkflowRequest{
		Request:    Request{Program: compileWF(t, adrSteps), Input: map[string]any{"sku": "A1"}, Info: Info{InvocationID: "inv-1"}, Host: &fakeHost{}},
		Compensate: func(e *Error, exited bool) bool { asked = append(asked, exited); return false },
	})
	require.NotNil(t, err)
	require.Equal(t, []bool{true}, asked)
	require.Empty(t, res.Compensations)
}

func TestWorkflowExitInsideStepFailsTheAttempt(t *testing.T) {
	// An HTTP failure with exit_on_http_error (r_exit inside the step) fails that attempt: the step's
	// retry policy retries it, and a later success continues the workflow with nothing compensated.
	prog := compileWF(t, `
def do_reserve(ctx, input):
    return struct(reservation_id="RSV-1")

def release(ctx, step_input, step_output):
    r_await(r_http_post_v1("https://inventory.example.com/release", {}))

def charge(ctx, input):
    resp = r_await(r_http_post_v1("https://pay.example.com/charge", {"amount": 10}))
    return resp.response.body

def main(ctx, input):
    r_run_step_v1("reserve_inventory", r_step_v1("reserve_inventory", do_reserve, release), input)
    paid = r_run_step_v1("charge", charge, input)
    return {"paid": paid.value["id"]}
`)
	var calls, failing atomic.Int32
	failing.Store(1)
	host := &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		if strings.Contains(req.URL, "charge") {
			if calls.Add(1) <= failing.Load() {
				return HTTPResponse{StatusCode: 503, Body: []byte(`{}`)}, nil
			}
			return HTTPResponse{StatusCode: 200, Body: []byte(`{"id": "PAY-1"}`)}, nil
		}
		return HTTPResponse{StatusCode: 200, Body: []byte(`{}`)}, nil
	}}
	var retried []int
	res, err := RunWorkflow(context.Background(), WorkflowRequest{
		Request: Request{Program: prog, Input: map[string]any{}, Info: Info{InvocationID: "inv-1"}, Host: host},
		StepRetry: func(attempt int, e *Error) (time.Duration, bool) {
			retried = append(retried, attempt)
			require.Equal(t, ErrHTTP, e.TypeID)
			require.Equal(t, CategoryRetryable, e.Category)
			return 0, attempt < 3
		},
	})
	require.Nil(t, err)
	require.JSONEq(t, `{"paid":"PAY-1"}`, jsonOf(t, res.Output))
	require.Equal(t, []int{1}, retried)
	require.Empty(t, res.Compensations)
	for _, r := range host.requests() {
		require.NotContains(t, r.URL, "release")
	}

	// Out of retries, the step's error ends the workflow (exit_on_error) for good, compensating.
	calls.Store(0)
	failing.Store(100)
	host.reqs = nil
	res, err = RunWorkflow(context.Background(), WorkflowRequest{
		Request:   Request{Program: prog, Input: map[string]any{}, Info: Info{InvocationID: "inv-2"}, Host: host},
		StepRetry: func(attempt int, e *Error) (time.Duration, bool) { return 0, attempt < 2 },
	})
	require.NotNil(t, err)
	require.Equal(t, ErrHTTP, err.TypeID)
	require.True(t, res.Exited)
	require.Len(t, res.Compensations, 1)
	require.Equal(t, "reserve_inventory", res.Compensations[0].Step)
}
