package larkclient

import (
	"context"
	"encoding/json"
	"net/http"
)

// DAGPlan is the answer of POST /entrypoints/{id}:plan: what a run of a DAG for one partition
// would do now (docs/dag.md, "The plan of a run").
type DAGPlan struct {
	Raw
	// Fingerprint is the hex SHA-256 of the plan's canonical JSON.
	Fingerprint string `json:"fingerprint"`
	// Plan is the partition and the tasks in run order.
	Plan struct {
		PartitionKey string        `json:"partition_key,omitempty"` // "" for an unpartitioned DAG
		Tasks        []PlannedTask `json:"tasks"`                   // a stable topological order
	} `json:"plan"`
}

// PlannedTask is one task of a DAG plan, pinned to the version of its function it would run.
type PlannedTask struct {
	ID                string            `json:"id"`                 // the task's id in the DAG
	EntrypointID      string            `json:"entrypoint_id"`      // the exact GTS id of the version it runs
	EntrypointRef     string            `json:"entrypoint_ref"`     // that version's ep_ id
	Version           string            `json:"version"`            // that version's MAJOR.MINOR.PATCH
	DependsOn         []string          `json:"depends_on"`         // the tasks it waits for, sorted
	Params            json.RawMessage   `json:"params"`             // {{partition_key}} substituted
	Checks            []json.RawMessage `json:"checks"`             // its quality checks
	QuarantineEnabled bool              `json:"quarantine_enabled"` // quarantine instead of failing on CRITICAL
	Retry             json.RawMessage   `json:"retry,omitempty"`    // its retry policy, when it replaces the function's
	AssetKey          string            `json:"asset_key,omitempty"`
}

// DAGTask is one task of a DAG run, as GET /invocations/{id}/tasks shows it.
type DAGTask struct {
	TaskID       string   `json:"task_id"`       // the task's id in the DAG
	EntrypointID string   `json:"entrypoint_id"` // the exact version it runs
	DependsOn    []string `json:"depends_on"`    // the tasks it waits for
	AssetKey     string   `json:"asset_key,omitempty"`
	// State is PENDING, QUEUED, RUNNING, RETRY_WAIT, SUCCEEDED, FAILED, SKIPPED or CANCELLED.
	State             string           `json:"state"`
	InvocationID      string           `json:"invocation_id,omitempty"` // the task's child invocation
	Attempts          int              `json:"attempts"`                // the child's attempts so far
	Checks            json.RawMessage  `json:"checks,omitempty"`        // the check results
	GatingDecision    string           `json:"gating_decision,omitempty"`
	MaterializationID string           `json:"materialization_id,omitempty"`
	Reason            string           `json:"reason,omitempty"` // why it was skipped, failed or cancelled
	Error             *InvocationError `json:"error,omitempty"`
}

// DAGTasks is the answer of GET /invocations/{id}/tasks.
type DAGTasks struct {
	Raw
	InvocationID string    `json:"invocation_id"` // the run
	Items        []DAGTask `json:"items"`         // its tasks in plan order
}

// PlanDAG plans a run of a DAG entrypoint (POST /entrypoints/{id}:plan) for partitionKey ("" for
// an unpartitioned DAG).
func (c *Client) PlanDAG(ctx context.Context, id, partitionKey string) (*DAGPlan, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	body := map[string]string{}
	if partitionKey != "" {
		body["partition_key"] = partitionKey
	}
	var p DAGPlan
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/entrypoints/" + esc(id) + ":plan", body: body}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DAGRunTasks returns the tasks of a DAG run (GET /invocations/{id}/tasks); 409 not_a_dag for
// another invocation.
func (c *Client) DAGRunTasks(ctx context.Context, id string) (*DAGTasks, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var t DAGTasks
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/invocations/" + esc(id) + "/tasks"}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
