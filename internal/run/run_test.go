package run_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
)

// logHost collects logs as timeline entries and refuses the network and children.
type logHost struct {
	mu       sync.Mutex
	timeline []invocation.Event
}

func (h *logHost) HTTP(context.Context, sandbox.HTTPRequest) (sandbox.HTTPResponse, error) {
	return sandbox.HTTPResponse{}, errors.New("no network here")
}

func (h *logHost) Invoke(context.Context, sandbox.InvokeRequest) (sandbox.InvokeResult, error) {
	return sandbox.InvokeResult{}, errors.New("no children here")
}

func (h *logHost) Log(_ context.Context, msg string, _ map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, err := json.Marshal(map[string]any{"message": msg})
	if err != nil {
		panic(err) // a Log has no error to return, and a string always encodes
	}
	h.timeline = append(h.timeline, invocation.Event{Type: invocation.EventLog, Data: b})
}

func (h *logHost) Now() time.Time { return time.Now() }

func (h *logHost) Drain() []invocation.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.timeline
	h.timeline = nil
	return out
}

func (h *logHost) TakeEgress() int64 { return 0 }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func runner(t *testing.T) *run.Runner {
	t.Helper()
	schemas, err := schema.New()
	require.NoError(t, err)
	return &run.Runner{Programs: sandbox.NewCache(16), Schemas: schemas, Clock: clock.NewFake(t0)}
}

func attempt(key, src string) run.Job {
	return run.Job{Record: invocation.Record{ID: "inv_" + key, TenantID: "acme", Attempt: 1, Params: json.RawMessage(`{"a": 2}`)},
		ProgramKey: key, Source: src, Limits: sandbox.Limits{Timeout: 5 * time.Second, MemoryMB: 16, MaxPayloadBytes: 1 << 10},
		Retry: outcome.RetryPolicy{MaxAttempts: 2, InitialDelayMS: 1000}}
}

func TestFunctionSucceeds(t *testing.T) {
	r := runner(t)
	h := &logHost{}
	res := r.Function(context.Background(), attempt("ok", "def main(ctx, input):\n  ctx.log(\"hi\")\n  return {\"twice\": input.a * 2}\n"), h)
	require.Equal(t, outcome.Succeeded, res.Outcome.Kind, "%+v", res.Outcome.Err)
	require.JSONEq(t, `{"twice": 4}`, string(res.Outcome.Output))
	require.Len(t, res.Timeline, 1, "the attempt's log entry")
	require.Equal(t, int64(16), *res.Outcome.Metrics.MemoryLimitMB)
	require.Positive(t, *res.Outcome.Metrics.StepCount)
}

func TestFunctionFailureFollowsTheRetryPolicy(t *testing.T) {
	r := runner(t)
	a := attempt("boom", "def main(ctx, input):\n  fail(\"try later\")\n")
	res := r.Function(context.Background(), a, &logHost{})
	require.Equal(t, outcome.RetryScheduled, res.Outcome.Kind, "%+v", res.Outcome.Err)
	require.Equal(t, t0.Add(time.Second), res.Outcome.RetryAt, "decided on the runner's clock")

	a.Record.Attempt = 2
	res = r.Function(context.Background(), a, &logHost{})
	require.Equal(t, outcome.Failed, res.Outcome.Kind, "the last attempt")
}

func TestFunctionResultIsChecked(t *testing.T) {
	r := runner(t)
	big := attempt("big", "def main(ctx, input):\n  return \"x\" * 2000\n")
	res := r.Function(context.Background(), big, &logHost{})
	require.Equal(t, outcome.Failed, res.Outcome.Kind)
	require.Equal(t, sandbox.ErrPayloadTooLarge, res.Outcome.Err.TypeID)

	typed := attempt("typed", "def main(ctx, input):\n  return {\"n\": \"not a number\"}\n")
	compiled, issues := r.Schemas.CompileUserSchema("$.schema.returns",
		map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}})
	require.Empty(t, issues)
	typed.Returns = compiled
	res = r.Function(context.Background(), typed, &logHost{})
	require.Equal(t, outcome.Failed, res.Outcome.Kind)
	require.Equal(t, sandbox.ErrValidation, res.Outcome.Err.TypeID, "non-retryable, whatever the policy")

	typed.Returns, typed.ReturnsErr = nil, errors.New("stored schema does not compile")
	res = r.Function(context.Background(), typed, &logHost{})
	require.Equal(t, outcome.Failed, res.Outcome.Kind)
	require.Contains(t, res.Outcome.Err.Message, "returns schema: stored schema does not compile")
}

func TestFunctionThatDoesNotCompile(t *testing.T) {
	r := runner(t)
	res := r.Function(context.Background(), attempt("bad", "def main(ctx, input):\n  return (\n"), &logHost{})
	require.Equal(t, outcome.Failed, res.Outcome.Kind)
	require.Equal(t, "non_retryable", res.Outcome.Err.Category)
}
