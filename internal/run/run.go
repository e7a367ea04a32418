// Package run is the engine's middle stage: it turns one claimed attempt of a function into a
// typed outcome (outcome.Outcome) and the timeline entries the attempt collected. It runs the
// program in the sandbox within the attempt's limits, checks the result (size, returns schema),
// measures the execution and decides what it came to under the retry policy. It writes nothing and
// never imports the store: the claim stage hands it data, the complete stage writes what it returns,
// and a remote worker can link it.
package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/larkrun/lark/internal/admission"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
)

// Job is the run stage's input: what it needs of one claimed attempt of a function, data only
// (the claim's whole hand-over, with its lease, is attempt.Attempt).
type Job struct {
	// Record is the invocation as the claim (or the sync start) left it.
	Record invocation.Record
	// Input is Record.Params decoded, when the caller has it (nil: decoded here).
	Input any
	// ProgramKey names the pinned entrypoint version in the compile cache; Source is its main.star.
	ProgramKey, Source string
	// Limits are the version's timeout, CPU and memory limits and the payload bound.
	Limits sandbox.Limits
	// Retry is the version's retry policy.
	Retry outcome.RetryPolicy
	// Returns is the version's compiled returns schema (nil: none). ReturnsErr, when set, is why
	// the stored schema does not compile: a result is then refused with it.
	Returns    *jsonschema.Schema
	ReturnsErr error
	// Due is when the attempt became runnable (its creation, retry time or resumption); zero: when
	// Function is called. Its queue wait runs from there to the execution's start.
	Due time.Time
	// AdmitWithin bounds the execution's wait for admission (sandbox.Request.AdmitWithin; 0: none).
	AdmitWithin time.Duration
}

// Host is the sandbox's window on the world for one attempt, as the caller builds it (egress with
// the tenant's allowlist, children, logs), and what it collected: the timeline entries and the
// bytes that left through egress.
type Host interface {
	sandbox.Host
	// Drain returns the timeline entries collected so far and forgets them.
	Drain() []invocation.Event
	// TakeEgress returns the egress bytes counted so far and resets the count.
	TakeEgress() int64
}

// Result is what one attempt produced.
type Result struct {
	// Outcome is what it came to (Succeeded, RetryScheduled or Failed), with its metrics.
	Outcome outcome.Outcome
	// Timeline is the attempt's timeline entries (logs, HTTP calls, children), in order.
	Timeline []invocation.Event
}

// Runner runs attempts. Its fields are shared by every attempt.
type Runner struct {
	// Programs compiles each version's source once.
	Programs *sandbox.Cache
	// CPU shares the CPU between tenants' executions (nil: unscheduled).
	CPU sandbox.CPUScheduler
	// Gate admits executions when they can run well (nil: at once); an attempt's timeout starts
	// once it is admitted.
	Gate *admission.Gate
	// Schemas validates results against returns schemas.
	Schemas *schema.Registry
	// Clock decides when a retry is due.
	Clock clock.Clock
}

// Function runs one attempt of a function. It never fails: what went wrong is the outcome.
func (r *Runner) Function(ctx context.Context, a Job, h Host) Result {
	rec := a.Record
	start, begin := time.Now(), r.Clock.Now()
	input := a.Input
	if input == nil {
		if err := invocation.DecodeJSON(rec.Params, &input); err != nil { // validated at the start: not expected
			rerr := &sandbox.Error{TypeID: sandbox.ErrValidation, Category: "non_retryable", Message: "params: " + err.Error()}
			return r.result(a, h, nil, rerr, Metrics(0, sandbox.Result{}, a.Limits.MemoryMB, 0), nil)
		}
	}
	var res sandbox.Result
	rerr := &sandbox.Error{}
	prog, cerr := r.Programs.Get(a.ProgramKey, "main.star", a.Source)
	if cerr != nil {
		// A stored definition passed the static checks, so this is rare; keep the executor's typed
		// error (validation, with line and column) when there is one.
		if !errors.As(cerr, &rerr) {
			rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "compile: " + cerr.Error()}
		}
	} else {
		res, rerr = sandbox.Run(ctx, sandbox.Request{Program: prog, Input: input, Host: h, CPU: r.CPU, Gate: r.Gate, AdmitWithin: a.AdmitWithin,
			Info: sandbox.Info{InvocationID: rec.ID, TenantID: rec.TenantID, EntrypointID: rec.EntrypointID,
				CorrelationID: rec.CorrelationID, Attempt: rec.Attempt},
			Limits: a.Limits})
	}
	metrics := Metrics(time.Since(start)-res.Waited, res, a.Limits.MemoryMB, h.TakeEgress())
	metrics.QueueWaitMS = i64(QueueWait(a.Due, begin, res.Waited).Milliseconds())
	var output json.RawMessage
	if rerr == nil {
		output, rerr = r.CheckOutput(a, res.Output)
	}
	return r.result(a, h, output, rerr, metrics, res.Emits)
}

// result decides the attempt's outcome. The events the program emitted (r_emit_v1) join the
// timeline, as event_emitted entries that the completing write publishes, only when the attempt
// succeeded: a failed attempt's events are dropped (a retry emits them again).
func (r *Runner) result(a Job, h Host, output json.RawMessage, rerr *sandbox.Error, metrics invocation.Metrics, emits []sandbox.Emit) Result {
	now := r.Clock.Now()
	o := outcome.Decide(a.Record, a.Retry, output, rerr, false, now)
	o.Metrics = metrics
	timeline := h.Drain()
	if o.Kind == outcome.Succeeded && len(emits) > 0 {
		evs, err := invocation.EmittedEvents(a.Record, "", now, emitted(emits))
		if err != nil { // payloads are JSON the sandbox encoded: not expected
			o = outcome.Decide(a.Record, a.Retry, nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable",
				Message: "emitted events: " + err.Error()}, false, now)
			o.Metrics = metrics
			return Result{Outcome: o, Timeline: timeline}
		}
		timeline = append(timeline, evs...)
	}
	return Result{Outcome: o, Timeline: timeline}
}

// emitted is the data of the event_emitted entries of a function's emits.
func emitted(emits []sandbox.Emit) []invocation.Emitted {
	out := make([]invocation.Emitted, len(emits))
	for i, e := range emits {
		out[i] = invocation.Emitted{EventTypeID: e.TypeID, Payload: e.Payload}
	}
	return out
}

// CheckOutput encodes a program's result and checks it against the payload bound and the returns
// schema of a.
func (r *Runner) CheckOutput(a Job, out any) (json.RawMessage, *sandbox.Error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "result is not JSON: " + err.Error()}
	}
	if limit := a.Limits.MaxPayloadBytes; limit > 0 && int64(len(b)) > limit {
		// The sandbox bounds the result's size without its strings' escapes; this is the exact check.
		return nil, &sandbox.Error{TypeID: sandbox.ErrPayloadTooLarge, Category: "non_retryable",
			Message: fmt.Sprintf("the result is larger than the limit of %d bytes once encoded as JSON", limit),
			Details: map[string]any{"limit_bytes": limit, "size_bytes": len(b)}}
	}
	if a.ReturnsErr != nil {
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "returns schema: " + a.ReturnsErr.Error()}
	}
	if a.Returns == nil {
		return b, nil
	}
	var v any
	if err := invocation.DecodeJSON(b, &v); err != nil {
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "result is not JSON: " + err.Error()}
	}
	if issues := r.Schemas.ValidateValue(a.Returns, "$.result", v); len(issues) > 0 {
		return nil, &sandbox.Error{TypeID: sandbox.ErrValidation, Category: "non_retryable",
			Message: "the result does not match the entrypoint's returns schema", Details: map[string]any{"issues": issues}}
	}
	return b, nil
}

// Metrics are 000's execution metrics of a run that took elapsed, did what res says under a
// memory limit of memoryMB and sent egress bytes out.
func Metrics(elapsed time.Duration, res sandbox.Result, memoryMB int, egress int64) invocation.Metrics {
	return invocation.Metrics{DurationMS: i64(elapsed.Milliseconds()),
		BilledDurationMS: i64(max(1, int64(math.Ceil(float64(elapsed)/float64(time.Millisecond))))),
		CPUTimeMS:        i64(res.CPUTime.Milliseconds()), MemoryLimitMB: i64(int64(memoryMB)),
		MaxMemoryUsedMB: i64(int64(math.Ceil(float64(res.MaxMemoryBytes) / float64(1<<20)))), StepCount: i64(int64(res.Steps)),
		EgressBytes: i64(egress)}
}

func i64(v int64) *int64 { return &v }

// QueueWait is an attempt's wait from due (zero: none) to the start of its execution: until it was
// handed to the run stage at begin, and then for admission.
func QueueWait(due, begin time.Time, admission time.Duration) time.Duration {
	if due.IsZero() || begin.Before(due) {
		return admission
	}
	return begin.Sub(due) + admission
}
