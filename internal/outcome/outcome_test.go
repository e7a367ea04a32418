package outcome_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/sandbox"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func transient() *sandbox.Error {
	return &sandbox.Error{TypeID: sandbox.ErrHTTP, Category: "retryable", Message: "503"}
}

func TestDecideFollowsTheRetryPrecedence(t *testing.T) {
	policy := outcome.RetryPolicy{MaxAttempts: 3, InitialDelayMS: 100, BackoffMultiplier: 2, MaxDelayMS: 150}
	rec := invocation.Record{ID: "inv_1", Attempt: 1}

	o := outcome.Decide(rec, policy, json.RawMessage(`{"ok":true}`), nil, false, now)
	require.Equal(t, outcome.Succeeded, o.Kind)

	o = outcome.Decide(rec, policy, nil, transient(), false, now)
	require.Equal(t, outcome.RetryScheduled, o.Kind)
	require.Equal(t, 100*time.Millisecond, o.Delay)
	require.Equal(t, now.Add(100*time.Millisecond), o.RetryAt)

	rec.Attempt = 2
	o = outcome.Decide(rec, policy, nil, transient(), false, now)
	require.Equal(t, 150*time.Millisecond, o.Delay, "200 ms capped at max_delay_ms")

	rec.Attempt = 3
	require.Equal(t, outcome.Failed, outcome.Decide(rec, policy, nil, transient(), false, now).Kind, "no attempts left")

	rec.Attempt = 1
	require.Equal(t, outcome.Failed, outcome.Decide(rec, policy, nil, transient(), true, now).Kind, "final (r_exit) is never retried")
	require.Equal(t, outcome.Failed, outcome.Decide(rec, policy, nil,
		&sandbox.Error{TypeID: sandbox.ErrValidation, Category: "non_retryable"}, false, now).Kind, "non-retryable category")
	policy.NonRetryableErrors = []string{sandbox.ErrHTTP}
	require.Equal(t, outcome.Failed, outcome.Decide(rec, policy, nil, transient(), false, now).Kind, "listed in non_retryable_errors")
	require.Equal(t, outcome.Failed, outcome.Decide(rec, outcome.RetryPolicy{}, nil, transient(), false, now).Kind,
		"no policy: one attempt")
}

func types(evs []invocation.Event) []invocation.EventType {
	var out []invocation.EventType
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestEventsOfEachKind(t *testing.T) {
	rec := invocation.Record{ID: "inv_1", Attempt: 2, EngineAttempt: 3, LastSeq: 7}
	timeline := []invocation.Event{{Type: invocation.EventLog}}
	five := int64(5)
	metrics := invocation.Metrics{DurationMS: &five}
	until := now.Add(time.Hour)
	for _, c := range []struct {
		o         outcome.Outcome
		want      []invocation.EventType
		available *time.Time
	}{
		{outcome.Outcome{Kind: outcome.Succeeded, Output: json.RawMessage(`1`)}, []invocation.EventType{invocation.EventLog, invocation.EventSucceeded}, nil},
		{outcome.Outcome{Kind: outcome.RetryScheduled, Err: transient(), RetryAt: until, Delay: time.Hour},
			[]invocation.EventType{invocation.EventLog, invocation.EventRetryScheduled}, &until},
		{outcome.Outcome{Kind: outcome.Failed, Err: transient()},
			[]invocation.EventType{invocation.EventLog, invocation.EventFailed, invocation.EventDeadLettered}, nil},
		{outcome.Outcome{Kind: outcome.Failed, Err: transient(), Handler: &outcome.Handler{InvocationID: "inv_h", EntrypointID: "ep"}},
			[]invocation.EventType{invocation.EventLog, invocation.EventFailed, invocation.EventCompensationStarted}, nil},
		{outcome.Outcome{Kind: outcome.Suspended, Until: &until, Reason: "timer"},
			[]invocation.EventType{invocation.EventLog, invocation.EventSuspended}, &until},
	} {
		c.o.Metrics, c.o.Cost = metrics, 0.5
		evs, available, err := c.o.Events(rec, timeline, now)
		require.NoError(t, err, c.o.Kind)
		require.Equal(t, c.want, types(evs), c.o.Kind)
		require.Equal(t, c.available, available, c.o.Kind)
		closing := evs[1]
		require.Equal(t, now, closing.At)
		require.Equal(t, 3, closing.EngineAttempt)
		require.Equal(t, 2, closing.LogicalAttempt)
		step := ""
		if c.o.Kind == outcome.Suspended {
			step = "suspend-7" // a workflow suspends many times in one attempt
		}
		require.Equal(t, invocation.IdempotencyKey("inv_1", step, 2, closing.Type, ""), closing.IdempotencyKey, c.o.Kind)
		require.Contains(t, string(closing.Data), `"cost":0.5`, "the closing event carries the price")
	}
	_, _, err := outcome.Outcome{Kind: outcome.Succeeded, Output: json.RawMessage(`{`)}.Events(rec, nil, now)
	require.Error(t, err, "an output that is not JSON is an error, not an empty event")
	_, _, err = outcome.Outcome{}.Events(rec, nil, now)
	require.Error(t, err, "no kind")
}

// The stored error envelope is bounded whatever the sandbox hands over.
func TestErrorOfIsBounded(t *testing.T) {
	p := outcome.ErrorOf(&sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable",
		Message: strings.Repeat("m", 1<<20), Details: map[string]any{"d": strings.Repeat("d", 1<<20)}})
	require.LessOrEqual(t, len(p.Message), outcome.MaxErrorMessageBytes)
	require.True(t, strings.HasSuffix(p.Message, "…"))
	require.JSONEq(t, `{"truncated":true,"size_bytes":1048584}`, string(p.Details))
	require.Equal(t, "héllo…", outcome.Cut("héllo wörld", 9), "cut on a rune boundary")
}
