package dagrun

import (
	"context"
	"encoding/json"

	"github.com/larkrun/lark/internal/invocation"
)

// TaskView is a task of a run as GET /invocations/{id}/tasks shows it.
type TaskView struct {
	TaskID       string   `json:"task_id"`
	EntrypointID string   `json:"entrypoint_id"`
	DependsOn    []string `json:"depends_on"`
	AssetKey     string   `json:"asset_key,omitempty"`
	// State is PENDING, QUEUED, RUNNING, RETRY_WAIT (the child waits for its next attempt),
	// SUCCEEDED, FAILED, SKIPPED or CANCELLED. READY is never seen: a task whose upstream tasks
	// succeeded is queued in the same write.
	State             string            `json:"state"`
	InvocationID      string            `json:"invocation_id,omitempty"`
	Attempts          int               `json:"attempts"`
	Checks            json.RawMessage   `json:"checks,omitempty"`
	GatingDecision    string            `json:"gating_decision,omitempty"`
	MaterializationID string            `json:"materialization_id,omitempty"`
	Reason            string            `json:"reason,omitempty"`
	Error             *invocation.Error `json:"error,omitempty"`
}

// Views are run's tasks in plan order, a queued task's state refined by its child's record
// (child reads it).
func (r *Run) Views(ctx context.Context, child func(ctx context.Context, id string) (invocation.Record, error)) []TaskView {
	out := make([]TaskView, 0, len(r.Tasks))
	for _, t := range r.Tasks {
		v := TaskView{TaskID: t.Planned.ID, EntrypointID: t.Planned.EntrypointID, DependsOn: t.Planned.DependsOn,
			AssetKey: t.Planned.AssetKey, State: t.State, InvocationID: t.Child}
		if v.DependsOn == nil {
			v.DependsOn = []string{}
		}
		if e := t.End; e != nil {
			v.InvocationID, v.Attempts, v.Checks, v.GatingDecision = e.ChildInvocationID, e.Attempts, e.Checks, e.GatingDecision
			v.MaterializationID, v.Reason, v.Error = e.MaterializationID, e.Reason, e.Error
		}
		if t.State == StateQueued && t.Child != "" {
			if c, err := child(ctx, t.Child); err == nil {
				v.State, v.Attempts = queuedState(c), c.Attempt
			}
		}
		out = append(out, v)
	}
	return out
}

// queuedState is a queued task's state from its child's status.
func queuedState(c invocation.Record) string {
	switch {
	case c.Status == invocation.StatusRunning:
		return "RUNNING"
	case c.Status == invocation.StatusQueued && c.Attempt > 1:
		return "RETRY_WAIT"
	}
	return StateQueued
}
