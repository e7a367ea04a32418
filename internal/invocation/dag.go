package invocation

import "encoding/json"

// The events of a DAG run (docs/dag.md): its plan, then its tasks' progress. Each carries the
// task's id; the run's DAG summary (Record.DAG) is projected from them by Apply.
const (
	EventDAGPlanned     EventType = "dag_planned"      // the run's plan was fixed; DAGPlanned
	EventTaskQueued     EventType = "task_queued"      // a task's child invocation was created; TaskQueued
	EventTaskChildEnded EventType = "task_child_ended" // a task's child invocation ended (the run is woken); TaskChildEnded
	EventTaskSucceeded  EventType = "task_succeeded"   // TaskEnded
	EventTaskFailed     EventType = "task_failed"      // TaskEnded
	EventTaskSkipped    EventType = "task_skipped"     // an upstream task did not succeed; TaskEnded
	EventTaskCancelled  EventType = "task_cancelled"   // the run was canceled before the task ended; TaskEnded
)

// DAGSummary is a DAG run's plan fingerprint and task counts.
type DAGSummary struct {
	Fingerprint  string `json:"fingerprint"`
	PartitionKey string `json:"partition_key,omitempty"`
	Tasks        int    `json:"tasks"`
	Succeeded    int    `json:"succeeded"`
	Failed       int    `json:"failed"`
	Skipped      int    `json:"skipped"`
	Cancelled    int    `json:"cancelled"`
	// Warning: a task's output passed with a failed ERROR check (gating allow_with_warning), or was
	// quarantined.
	Warning bool `json:"warning,omitempty"`
}

// DAGPlanned is the data of a dag_planned event: the plan the run follows to its end (the exact
// entrypoint versions and params of its tasks) and its fingerprint.
type DAGPlanned struct {
	Fingerprint  string          `json:"fingerprint"`
	PartitionKey string          `json:"partition_key,omitempty"`
	Plan         json.RawMessage `json:"plan"`
	Tasks        int             `json:"tasks"`
}

// EventTypes implements Payload.
func (DAGPlanned) EventTypes() []EventType { return []EventType{EventDAGPlanned} }

// TaskQueued is the data of a task_queued event.
type TaskQueued struct {
	TaskID            string          `json:"task_id"`
	ChildInvocationID string          `json:"child_invocation_id"`
	EntrypointID      string          `json:"entrypoint_id"`
	Params            json.RawMessage `json:"params,omitempty"`
}

// EventTypes implements Payload.
func (TaskQueued) EventTypes() []EventType { return []EventType{EventTaskQueued} }

// TaskChildEnded is the data of a task_child_ended event, appended by the child's closing write.
type TaskChildEnded struct {
	TaskID            string `json:"task_id"`
	ChildInvocationID string `json:"child_invocation_id"`
	Status            Status `json:"status"`
}

// EventTypes implements Payload.
func (TaskChildEnded) EventTypes() []EventType { return []EventType{EventTaskChildEnded} }

// TaskEnded is the data of a task's terminal event: its child, the checks run on its output and
// the gating decision, the materialization it left, or why it failed, was skipped or cancelled.
type TaskEnded struct {
	TaskID            string          `json:"task_id"`
	ChildInvocationID string          `json:"child_invocation_id,omitempty"`
	Attempts          int             `json:"attempts,omitempty"`
	Checks            json.RawMessage `json:"checks,omitempty"`
	GatingDecision    string          `json:"gating_decision,omitempty"`
	MaterializationID string          `json:"materialization_id,omitempty"`
	Error             *Error          `json:"error,omitempty"`
	Reason            string          `json:"reason,omitempty"`
}

// EventTypes implements Payload.
func (TaskEnded) EventTypes() []EventType {
	return []EventType{EventTaskSucceeded, EventTaskFailed, EventTaskSkipped, EventTaskCancelled}
}

// IsDAGDecision reports whether events of type t are a DAG activation's decisions (its plan,
// queued tasks, tasks' ends): what a late result of an activation that lost its lease must not
// record.
func IsDAGDecision(t EventType) bool {
	return t == EventTaskQueued || changesDAG(t)
}

// changesDAG reports whether events of type t change a DAG run's summary (so its record is
// rewritten, not only advanced).
func changesDAG(t EventType) bool {
	switch t {
	case EventDAGPlanned, EventTaskSucceeded, EventTaskFailed, EventTaskSkipped, EventTaskCancelled:
		return true
	}
	return false
}

// applyDAG projects a DAG run's events onto its summary.
func applyDAG(r Record, e Event) Record {
	switch e.Type {
	case EventDAGPlanned:
		p, err := DecodeData[DAGPlanned](e)
		if err != nil {
			return r
		}
		r.DAG = &DAGSummary{Fingerprint: p.Fingerprint, PartitionKey: p.PartitionKey, Tasks: p.Tasks}
	case EventTaskSucceeded, EventTaskFailed, EventTaskSkipped, EventTaskCancelled:
		if r.DAG == nil {
			return r
		}
		s := *r.DAG
		switch e.Type {
		case EventTaskSucceeded:
			s.Succeeded++
			if t, err := DecodeData[TaskEnded](e); err == nil && (t.GatingDecision == "allow_with_warning" || t.GatingDecision == "quarantine") {
				s.Warning = true
			}
		case EventTaskFailed:
			s.Failed++
		case EventTaskSkipped:
			s.Skipped++
		default:
			s.Cancelled++
		}
		r.DAG = &s
	}
	return r
}
