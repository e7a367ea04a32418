package invocation

import (
	"encoding/json"
	"time"
)

// Execution is what one execution consumed and cost, as its closing event records it.
//
// An execution is one run of user code for an invocation: a function attempt, or one activation of
// a workflow (from its claim until it ends or parks). The event that closes it records what it
// consumed and what that cost, so that usage and cost are projections of the log like the record:
//
//   - succeeded, failed: the Outcome (metrics, cost);
//   - retry_scheduled: an attempt that will be retried;
//   - suspended: a workflow activation that parked (a suspend control action carries none);
//   - late_result: a run that finished after losing its lease (canceled, or its lease expired). Its
//     outcome is not applied, but what it consumed is counted.
//
// Events written before executions carried metrics, and closing events without metrics (a control
// action), are not executions.
type Execution struct {
	Metrics Metrics
	Cost    float64
}

// closesExecution lists the event types whose Data may carry an execution's metrics and cost.
func closesExecution(t EventType) bool {
	switch t {
	case EventSucceeded, EventFailed, EventRetryScheduled, EventSuspended, EventLateResult:
		return true
	}
	return false
}

// ExecutionOf returns the execution e closes, if e records one (see Execution).
func ExecutionOf(e Event) (Execution, bool) {
	if !closesExecution(e.Type) || len(e.Data) == 0 {
		return Execution{}, false
	}
	if o := e.Outcome; o != nil {
		if o.Metrics == nil {
			return Execution{}, false
		}
		return Execution{Metrics: *o.Metrics, Cost: o.Cost}, true
	}
	var x struct {
		Metrics *Metrics `json:"metrics"`
		Cost    float64  `json:"cost"`
	}
	if json.Unmarshal(e.Data, &x) != nil || x.Metrics == nil {
		return Execution{}, false
	}
	return Execution{Metrics: *x.Metrics, Cost: x.Cost}, true
}

// Usage is a tenant's usage aggregate for one entrypoint version and one period: what the events
// appended in that period add up to. UsageOf defines what one event adds.
type Usage struct {
	// Invocations counts invocations created (created events).
	Invocations int64
	// Succeeded, Failed and Canceled count runs that finished: entries into succeeded, failed or
	// canceled from queued, running or suspended. Each finished run counts once, under the status it
	// finished with; an invocation redriven after it finished (retry action) counts again when it
	// finishes again.
	Succeeded int64
	Failed    int64
	Canceled  int64
	// DeadLettered and Compensated count entries into those statuses. They follow a finish (failed
	// → dead_lettered; failed or canceled → compensating → compensated or dead_lettered), so they
	// are not part of the finished counts.
	DeadLettered int64
	Compensated  int64
	// Executions counts executions; the resource totals below sum their metrics.
	Executions       int64
	DurationMS       int64
	BilledDurationMS int64
	CPUTimeMS        int64
	// MemoryMBMS sums memory_limit_mb × billed_duration_ms (MB·ms; GB-seconds = MemoryMBMS / 1,024,000).
	MemoryMBMS  int64
	EgressBytes int64
	// Cost sums the per-invocation prices of created events and the costs of executions.
	Cost float64
}

// IsZero reports whether u adds nothing.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.Invocations += o.Invocations
	u.Succeeded += o.Succeeded
	u.Failed += o.Failed
	u.Canceled += o.Canceled
	u.DeadLettered += o.DeadLettered
	u.Compensated += o.Compensated
	u.Executions += o.Executions
	u.DurationMS += o.DurationMS
	u.BilledDurationMS += o.BilledDurationMS
	u.CPUTimeMS += o.CPUTimeMS
	u.MemoryMBMS += o.MemoryMBMS
	u.EgressBytes += o.EgressBytes
	u.Cost += o.Cost
}

// Finished is the number of finished runs (succeeded + failed + canceled).
func (u Usage) Finished() int64 { return u.Succeeded + u.Failed + u.Canceled }

// CPUSeconds is the CPU time in seconds.
func (u Usage) CPUSeconds() float64 { return float64(u.CPUTimeMS) / 1000 }

// MemoryGBSeconds is the memory reserved over the billed durations, in GB-seconds.
func (u Usage) MemoryGBSeconds() float64 { return float64(u.MemoryMBMS) / (1024 * 1000) }

// UsageOf is what appending e (which moved the record from before to after) adds to the usage
// aggregates. It decodes e's Data only for the few event types that close an execution, so the
// informational events of a workflow's hot path cost nothing here. Callers apply it to events
// actually appended: an event whose idempotency key was already in the log adds nothing.
func UsageOf(before Record, e Event, after Record) Usage {
	var u Usage
	if e.Type == EventCreated {
		u.Invocations, u.Cost = 1, after.Cost
		return u
	}
	if before.Status != after.Status {
		switch {
		case after.Status == StatusDeadLettered:
			u.DeadLettered = 1
		case after.Status == StatusCompensated:
			u.Compensated = 1
		case before.Status == StatusQueued || before.Status == StatusRunning || before.Status == StatusSuspended:
			switch after.Status {
			case StatusSucceeded:
				u.Succeeded = 1
			case StatusFailed:
				u.Failed = 1
			case StatusCanceled:
				u.Canceled = 1
			}
		}
	}
	if x, ok := ExecutionOf(e); ok {
		m := x.Metrics
		u.Executions = 1
		u.DurationMS = val(m.DurationMS)
		u.BilledDurationMS = val(m.BilledDurationMS)
		u.CPUTimeMS = val(m.CPUTimeMS)
		u.MemoryMBMS = val(m.MemoryLimitMB) * val(m.BilledDurationMS)
		u.EgressBytes = val(m.EgressBytes)
		u.Cost = x.Cost
	}
	return u
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// UsageHour is the hour bucket (UTC) usage of an event at t is aggregated in.
func UsageHour(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }
