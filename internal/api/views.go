package api

import (
	"encoding/json"
	"time"

	"github.com/larkrun/lark/internal/invocation"
)

// RecordView is 000's InvocationRecord as the API shows it.
type RecordView struct {
	InvocationID      string            `json:"invocation_id"`
	EntrypointID      string            `json:"entrypoint_id"`
	EntrypointVersion string            `json:"entrypoint_version"`
	TenantID          string            `json:"tenant_id"`
	Status            invocation.Status `json:"status"`
	Mode              invocation.Mode   `json:"mode"`
	Params            json.RawMessage   `json:"params"`
	Result            json.RawMessage   `json:"result"`
	Error             *invocation.Error `json:"error"`
	Timestamps        struct {
		CreatedAt   time.Time  `json:"created_at"`
		StartedAt   *time.Time `json:"started_at"`
		SuspendedAt *time.Time `json:"suspended_at"`
		FinishedAt  *time.Time `json:"finished_at"`
	} `json:"timestamps"`
	Observability struct {
		CorrelationID string             `json:"correlation_id"`
		TraceID       *string            `json:"trace_id"`
		SpanID        *string            `json:"span_id"`
		Metrics       invocation.Metrics `json:"metrics"`
	} `json:"observability"`
	Attempt            int    `json:"attempt"`
	ParentInvocationID string `json:"parent_invocation_id,omitempty"`
	ReplayOf           string `json:"replay_of,omitempty"`
	// Cost is what the invocation has cost so far, in the operator's pricing currency (Lark's
	// addition: the per-invocation price plus the cost of every execution, as recorded in its log).
	Cost float64 `json:"cost"`
	// DAG, on a DAG run only, is its plan's fingerprint, its partition and its tasks' counts
	// (docs/dag.md, Runs).
	DAG *invocation.DAGSummary `json:"dag,omitempty"`
	// Node is the node that took its latest attempt: ran it, or handed it to the remote worker
	// that observability.metrics.worker names (Lark's addition; docs/operations.md, "Several
	// nodes").
	Node string `json:"node,omitempty"`
	// Warnings, present only when there are any, are what the caller should know about the start
	// that did not stop it (Lark's addition): ENTRYPOINT_DEPRECATED, with the entrypoint's
	// deprecation, when it was invoked deprecated (docs/api.md §7, "Deprecated entrypoints").
	Warnings []invocation.Warning `json:"warnings,omitempty"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// View renders a record (000's InvocationRecord).
func View(r invocation.Record) RecordView {
	v := RecordView{InvocationID: r.ID, EntrypointID: r.EntrypointID, EntrypointVersion: r.EntrypointVersion, TenantID: r.TenantID,
		Status: r.Status, Mode: r.Mode, Params: r.Params, Result: r.Result, Error: r.Error, Attempt: r.Attempt,
		ParentInvocationID: r.ParentID, ReplayOf: r.Replay, Cost: r.Cost, DAG: r.DAG, Node: r.Node, Warnings: r.Warnings}
	if len(v.Params) == 0 {
		v.Params = json.RawMessage("{}")
	}
	if len(v.Result) == 0 {
		v.Result = json.RawMessage("null")
	}
	v.Timestamps.CreatedAt, v.Timestamps.StartedAt, v.Timestamps.SuspendedAt, v.Timestamps.FinishedAt = r.CreatedAt, r.StartedAt, r.SuspendedAt, r.FinishedAt
	v.Observability.CorrelationID, v.Observability.TraceID, v.Observability.SpanID = r.CorrelationID, strPtr(r.TraceID), strPtr(r.SpanID)
	v.Observability.Metrics = r.Metrics
	return v
}

// ResultView is 000's InvocationResult.
type ResultView struct {
	Record RecordView `json:"record"`
	DryRun bool       `json:"dry_run"`
	Cached bool       `json:"cached"`
}

// TimelineEvent is 000's InvocationTimelineEvent plus the log sequence number. Event types beyond
// 000's enum (created, requeued, log, http_call, child_invoked, reclaimed, late_result) are Lark's.
type TimelineEvent struct {
	Seq        int64             `json:"seq"`
	At         time.Time         `json:"at"`
	EventType  string            `json:"event_type"`
	Status     invocation.Status `json:"status"`
	StepName   *string           `json:"step_name"`
	DurationMS *int64            `json:"duration_ms"`
	Message    *string           `json:"message"`
	Details    json.RawMessage   `json:"details"`
	Attempt    int               `json:"attempt"`
}

var timelineTypes = map[invocation.EventType]string{invocation.EventRetryScheduled: "step_retried"}

// Timeline renders an event log from its start, with the status after each event (000's
// InvocationTimelineEvent).
func Timeline(events []invocation.Event) []TimelineEvent {
	return timelineAfter("", events)
}

// timelineAfter renders consecutive events of a log that follow a point where the invocation's
// status was status, with the status after each event.
func timelineAfter(status invocation.Status, events []invocation.Event) []TimelineEvent {
	out := make([]TimelineEvent, 0, len(events))
	for _, e := range events {
		if st, ok := invocation.StatusAfter(e.Type); ok {
			status = st
		}
		out = append(out, timelineEvent(status, e))
	}
	return out
}

// timelineEvent renders one event, status being the invocation's status after it: the event type
// as 000 names it, the step it concerns, and the message and duration its details carry.
func timelineEvent(status invocation.Status, e invocation.Event) TimelineEvent {
	t := TimelineEvent{Seq: e.Seq, At: e.At, EventType: string(e.Type), Status: status, Details: e.Data, Attempt: e.LogicalAttempt}
	if m, ok := timelineTypes[e.Type]; ok {
		t.EventType = m
	}
	describeEvent(&t, e)
	if e.Type == invocation.EventCreated {
		t.Details = nil // the created event carries the whole initial record; the record endpoint shows it
	}
	// 000's message and duration_ms, read from whichever details carry them (a Log's message, an
	// HTTPCall's or a StepCompensated's duration; a remote worker's entries as it wrote them).
	var d struct {
		Message    *string `json:"message"`
		DurationMS *int64  `json:"duration_ms"`
	}
	if len(t.Details) > 0 {
		if json.Unmarshal(t.Details, &d) == nil {
			t.Message, t.DurationMS = d.Message, d.DurationMS
		}
	} else {
		t.Details = json.RawMessage("{}")
	}
	return t
}

// describeEvent sets t's event type, step name and details from the data of the event types
// that carry them; other events keep what timelineEvent set.
func describeEvent(t *TimelineEvent, e invocation.Event) {
	switch e.Type {
	case invocation.EventJournal:
		describeJournal(t, e)
	case invocation.EventJournalResolved:
		// An event delivered to r_wait_event_v1 is 000's signal_received.
		if r, err := invocation.DecodeData[invocation.JournalResolved](e); err == nil && r.EventID != "" {
			t.EventType = "signal_received"
		}
	case invocation.EventStepStarted:
		if r, err := invocation.DecodeData[invocation.StepStarted](e); err == nil && r.Step != "" {
			t.StepName = &r.Step
		}
	case invocation.EventStepRetried:
		if r, err := invocation.DecodeData[invocation.StepRetried](e); err == nil && r.Step != "" {
			t.StepName = &r.Step
		}
	case invocation.EventEmitted:
		describeEmitted(t, e)
	case invocation.EventTaskQueued:
		if r, err := invocation.DecodeData[invocation.TaskQueued](e); err == nil {
			t.StepName = &r.TaskID
		}
	case invocation.EventTaskChildEnded:
		if r, err := invocation.DecodeData[invocation.TaskChildEnded](e); err == nil {
			t.StepName = &r.TaskID
		}
	case invocation.EventTaskSucceeded, invocation.EventTaskFailed, invocation.EventTaskSkipped, invocation.EventTaskCancelled:
		if r, err := invocation.DecodeData[invocation.TaskEnded](e); err == nil {
			t.StepName = &r.TaskID
		}
	case invocation.EventStepCompensating:
		t.EventType = "compensation_started"
		if c, err := invocation.DecodeData[invocation.StepCompensating](e); err == nil {
			t.StepName = &c.Step
		}
	case invocation.EventStepCompensated:
		t.EventType = "compensation_failed"
		if c, err := invocation.DecodeData[invocation.StepCompensated](e); err == nil {
			if c.OK {
				t.EventType = "compensation_completed"
			}
			t.StepName = &c.Step
		}
	}
}

// describeJournal renders a journal entry: steps show as 000's step events; other journaled
// calls (timers, clock, snapshots) as journal.
func describeJournal(t *TimelineEvent, e invocation.Event) {
	j, err := invocation.DecodeData[invocation.JournalEntry](e)
	if err != nil {
		return // not an entry this renderer knows: shown as the raw journal entry
	}
	switch j.Helper {
	case "r_run_step_v1", "r_step_v1":
		t.EventType = "step_failed"
		if r, ok := j.Result.(map[string]any); ok && r["ok"] == true { // the step's struct(ok, value | error)
			t.EventType = "step_completed"
		}
		name := j.Key
		t.StepName = &name
	case "r_snapshot_v1":
		t.EventType = "checkpoint_created"
	}
}

// describeEmitted replaces an emitted event's details with the event's id and type, never its
// payload (up to a payload limit; read it with GET /events/{id}).
func describeEmitted(t *TimelineEvent, e invocation.Event) {
	em, err := invocation.DecodeData[invocation.Emitted](e)
	if err != nil {
		t.Details = nil
		return
	}
	d := emittedDetails{EventID: em.EventID, EventTypeID: em.EventTypeID, PayloadBytes: len(em.Payload), Seq: em.Seq, Step: em.Step}
	if em.Step != "" {
		t.StepName = &em.Step
	}
	if b, err := json.Marshal(d); err == nil {
		t.Details = b
	}
}

// emittedDetails are the timeline details of an event_emitted event (describeEmitted).
type emittedDetails struct {
	EventID      string `json:"event_id"`
	EventTypeID  string `json:"event_type_id"`
	PayloadBytes int    `json:"payload_bytes"`
	Seq          *int   `json:"seq,omitempty"`
	Step         string `json:"step,omitempty"`
}
