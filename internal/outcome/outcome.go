// Package outcome is the last stage's input: what one attempt came to, as a typed value, and the
// events that record it in the invocation's log. The run stage decides an Outcome from what the
// sandbox returned and the entrypoint's retry policy (000's retry precedence); the complete stage
// writes Outcome.Events with the lease check. Pure: no store, no clock of its own.
package outcome

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/sandbox"
)

// Kind is what an attempt came to.
type Kind uint8

// The kinds of outcome.
const (
	// Succeeded: the attempt returned Output; the invocation ends.
	Succeeded Kind = iota + 1
	// RetryScheduled: the attempt failed with Err and another attempt runs at RetryAt.
	RetryScheduled
	// Failed: the attempt failed with Err for good; the invocation is dead-lettered, or, when
	// Handler is set (a workflow's on_failure), compensating while the handler runs.
	Failed
	// Suspended: a workflow parked (Reason); it is runnable again at Until, or when what it waits
	// for (a child, an event) arrives.
	Suspended
)

// String is the kind as the closing event names it.
func (k Kind) String() string {
	switch k {
	case Succeeded:
		return "succeeded"
	case RetryScheduled:
		return "retry_scheduled"
	case Failed:
		return "failed"
	case Suspended:
		return "suspended"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Handler is the compensation invocation started for a failed workflow (traits.workflow.compensation.on_failure).
type Handler struct {
	InvocationID string
	EntrypointID string
}

// Outcome is what one attempt came to.
type Outcome struct {
	Kind Kind
	// Output is the result, as JSON (Succeeded).
	Output json.RawMessage
	// Err is the attempt's error (RetryScheduled, Failed).
	Err *sandbox.Error
	// RetryAt and Delay are when the next attempt runs and the backoff that led there
	// (RetryScheduled).
	RetryAt time.Time
	Delay   time.Duration
	// Until is when a suspended workflow runs again at the latest (nil: only when what it waits for
	// arrives), and Reason what it waits for (Suspended).
	Until  *time.Time
	Reason string
	// Handler, on Failed, is the on_failure compensation the invocation waits for.
	Handler *Handler
	// Final, on a failed outcome without a handler, ends the invocation failed rather than
	// dead-lettered: a DAG run, whose failed tasks each ended on their own terms.
	Final bool
	// Metrics and Cost are the execution's, carried by the event that closes it.
	Metrics invocation.Metrics
	Cost    float64
}

// Decide is the outcome of an attempt of rec that ended at now, not parked: Succeeded with output
// when rerr is nil; otherwise RetryScheduled when policy allows another attempt and final is false
// (a workflow's r_exit is final whatever the policy), or Failed. Attempts count within the
// current retry budget (invocation.Record.BudgetAttempt): a requeued invocation has the policy's
// max_attempts again.
func Decide(rec invocation.Record, policy RetryPolicy, output json.RawMessage, rerr *sandbox.Error, final bool, now time.Time) Outcome {
	switch {
	case rerr == nil:
		return Outcome{Kind: Succeeded, Output: output}
	case !final && policy.ShouldRetry(rec.BudgetAttempt(), rerr):
		delay := policy.Delay(rec.BudgetAttempt())
		return Outcome{Kind: RetryScheduled, Err: rerr, Delay: delay, RetryAt: now.Add(delay)}
	default:
		return Outcome{Kind: Failed, Err: rerr}
	}
}

// Events are the events that close the attempt of rec at now, after its timeline entries, and
// when the invocation is runnable again (nil: not by the queue's clock): suspended (until Until),
// succeeded, retry_scheduled (at RetryAt), or failed followed by dead_lettered, or by
// compensation_started when Handler is set. The closing event carries the metrics and cost.
func (o Outcome) Events(rec invocation.Record, timeline []invocation.Event, now time.Time) ([]invocation.Event, *time.Time, error) {
	var err error
	ev := func(t invocation.EventType, step string, data invocation.Payload) invocation.Event {
		e, derr := invocation.Event{Type: t, At: now, EngineAttempt: rec.EngineAttempt, LogicalAttempt: rec.Attempt,
			IdempotencyKey: invocation.IdempotencyKey(rec.ID, step, rec.Attempt, t, "")}.WithData(data) // an Outcome's result copied, not re-scanned
		if derr != nil && err == nil {
			err = derr
		}
		return e
	}
	metrics := o.Metrics
	events := timeline
	var available *time.Time
	switch o.Kind {
	case Suspended:
		available = o.Until
		events = append(events, ev(invocation.EventSuspended, fmt.Sprintf("suspend-%d", rec.LastSeq),
			invocation.Suspended{Cost: o.Cost, Metrics: &metrics, Reason: o.Reason, Until: o.Until}))
	case Succeeded:
		events = append(events, ev(invocation.EventSucceeded, "", invocation.Outcome{Result: o.Output, Metrics: &metrics, Cost: o.Cost}))
	case RetryScheduled:
		at := o.RetryAt
		available = &at
		events = append(events, ev(invocation.EventRetryScheduled, "", invocation.RetryScheduled{AvailableAt: at, Cost: o.Cost,
			DelayMS: o.Delay.Milliseconds(), Error: ErrorOf(o.Err), Metrics: &metrics, NextAttempt: rec.Attempt + 1}))
	case Failed:
		failed := ev(invocation.EventFailed, "", invocation.Outcome{Error: ErrorOf(o.Err), Metrics: &metrics, Cost: o.Cost})
		if o.Handler != nil {
			events = append(events, failed, ev(invocation.EventCompensationStarted, "", invocation.CompensationStarted{
				Handler: o.Handler.EntrypointID, HandlerInvocationID: o.Handler.InvocationID, Trigger: "failure"}))
		} else if o.Final {
			events = append(events, failed)
		} else {
			events = append(events, failed, ev(invocation.EventDeadLettered, "", invocation.DeadLettered{Reason: "no compensation configured"}))
		}
	default:
		return nil, nil, fmt.Errorf("outcome of kind %v", o.Kind)
	}
	return events, available, err
}

// RetryPolicy is an entrypoint's traits.retry.
type RetryPolicy struct {
	MaxAttempts        int      `json:"max_attempts"`
	InitialDelayMS     int64    `json:"initial_delay_ms"`
	MaxDelayMS         int64    `json:"max_delay_ms"`
	BackoffMultiplier  float64  `json:"backoff_multiplier"`
	NonRetryableErrors []string `json:"non_retryable_errors"`
}

// Delay is the backoff before logical attempt n+1 (exponential, capped at max_delay_ms).
func (p RetryPolicy) Delay(attempt int) time.Duration {
	mult := p.BackoffMultiplier
	if mult < 1 {
		mult = 1
	}
	ms := float64(p.InitialDelayMS) * math.Pow(mult, float64(attempt-1))
	if p.MaxDelayMS > 0 && ms > float64(p.MaxDelayMS) {
		ms = float64(p.MaxDelayMS)
	}
	return time.Duration(ms) * time.Millisecond
}

// ShouldRetry applies 000's retry precedence after attempt failed with e: attempts remain, the
// category is retryable, and the type is not listed in non_retryable_errors.
func (p RetryPolicy) ShouldRetry(attempt int, e *sandbox.Error) bool {
	return attempt < max(p.MaxAttempts, 1) && e.Category == "retryable" && !slices.Contains(p.NonRetryableErrors, e.TypeID)
}

// Bounds of a stored error envelope: details, encoded, beyond MaxErrorDetailsBytes are replaced by
// {"truncated": true, "size_bytes": n}; a message beyond MaxErrorMessageBytes is cut (the sandbox
// keeps both within these limits; this is the store's guard).
const (
	MaxErrorDetailsBytes = sandbox.MaxErrorBytes
	MaxErrorMessageBytes = 4 << 10
)

// ErrorOf is the stored form of an attempt's error, bounded.
func ErrorOf(e *sandbox.Error) *invocation.Error {
	p := &invocation.Error{TypeID: e.TypeID, Message: Cut(e.Message, MaxErrorMessageBytes), Category: e.Category}
	if len(e.Details) > 0 {
		b, err := json.Marshal(e.Details)
		if err != nil || len(b) > MaxErrorDetailsBytes {
			b = fmt.Appendf(nil, `{"truncated":true,"size_bytes":%d}`, len(b))
		}
		p.Details = b
	}
	return p
}

// Cut cuts s to at most n bytes on a rune boundary, marking the cut.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	i := n - len(mark)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + mark
}
