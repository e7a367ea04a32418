// Package asset holds the data of a DAG's assets (004 §14, §16): a materialization, one task
// attempt's output of an asset for a partition, with its state in the output commit protocol and
// its check results; and an asset's health row, which points at its latest promoted
// materialization. Types only: the store persists them, the DAG engine and the assets API move
// them through the states below.
package asset

import (
	"encoding/json"
	"fmt"
	"time"
)

// State is where a materialization is in 004 §16's output commit protocol.
type State string

// Materialization states.
const (
	// StateStaged: the output is written under its attempt-scoped staging path, not yet checked
	// and committed.
	StateStaged State = "staged"
	// StateCommitted: the checks allowed it and its commit marker is written; the control plane
	// has not promoted it yet.
	StateCommitted State = "committed"
	// StatePromoted: it is, or was, the latest of its (asset, partition): readers downstream took
	// it. A later promotion of the same (asset, partition) replaces it as the latest; it stays
	// promoted.
	StatePromoted State = "promoted"
	// StateQuarantined: a CRITICAL check failed on a task with quarantine enabled: the output is
	// kept for review and never becomes the latest unless someone approves it.
	StateQuarantined State = "quarantined"
	// StateRejected: discarded (a quarantined output rejected, a blocked or cancelled one): never
	// promoted.
	StateRejected State = "rejected"
)

// States are every state, in the protocol's order.
var States = []State{StateStaged, StateCommitted, StatePromoted, StateQuarantined, StateRejected}

// Valid reports whether s is one of the states.
func (s State) Valid() bool {
	switch s {
	case StateStaged, StateCommitted, StatePromoted, StateQuarantined, StateRejected:
		return true
	}
	return false
}

// Initial reports whether a materialization may be recorded in state s: staged, committed or
// quarantined (a worker reports its output at any of these steps). It cannot start promoted (only
// a promotion makes it so, with the latest pointer) nor rejected.
func (s State) Initial() bool {
	return s == StateStaged || s == StateCommitted || s == StateQuarantined
}

// transitions are the moves of the protocol: staged → committed | quarantined | rejected,
// committed → promoted | rejected, quarantined → promoted (approve) | rejected (reject). Promoted
// and rejected are final.
var transitions = map[State][]State{
	StateStaged:      {StateCommitted, StateQuarantined, StateRejected},
	StateCommitted:   {StatePromoted, StateRejected},
	StateQuarantined: {StatePromoted, StateRejected},
}

// CanMove reports whether a materialization in state s may move to state to.
func (s State) CanMove(to State) bool {
	for _, t := range transitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

// From are the states a materialization may move to s from.
func (s State) From() []State {
	var out []State
	for _, f := range States {
		if f.CanMove(s) {
			out = append(out, f)
		}
	}
	return out
}

// TransitionError is a state change the protocol forbids (State.CanMove).
type TransitionError struct {
	// ID is the materialization's id.
	ID string
	// From is the state it is in, To the one asked for.
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("materialization %s: cannot move from %s to %s", e.ID, e.From, e.To)
}

// GatingDecision is what the checks of a task's output decided (004 §6's gating matrix).
type GatingDecision string

// Gating decisions.
const (
	// GatingAllow: every check passed, or only INFO/WARNING ones failed.
	GatingAllow GatingDecision = "allow"
	// GatingAllowWithWarning: an ERROR check failed: the output is promoted and the run flagged.
	GatingAllowWithWarning GatingDecision = "allow_with_warning"
	// GatingQuarantine: a CRITICAL check failed and the task has quarantine enabled.
	GatingQuarantine GatingDecision = "quarantine"
	// GatingBlock: a CRITICAL check failed: the task fails and its output is never promoted.
	GatingBlock GatingDecision = "block"
)

// Valid reports whether g is one of the decisions.
func (g GatingDecision) Valid() bool {
	switch g {
	case GatingAllow, GatingAllowWithWarning, GatingQuarantine, GatingBlock:
		return true
	}
	return false
}

// Materialization is one task attempt's output of an asset for a partition. Its id is unique in
// its tenant; recording the same id again changes nothing.
type Materialization struct {
	ID       string `json:"materialization_id"`
	TenantID string `json:"tenant_id"`
	AssetKey string `json:"asset_key"`
	// PartitionKey is the partition the output is for ("" when the DAG is not partitioned).
	PartitionKey string `json:"partition_key"`
	// RunID is the DAG run's invocation id; TaskID the task's id in the DAG; Attempt its attempt
	// (from 1).
	RunID   string `json:"run_id"`
	TaskID  string `json:"task_id"`
	Attempt int    `json:"attempt"`
	State   State  `json:"state"`
	// OutputURI is the blob store key of the output's data.
	OutputURI  string `json:"output_uri"`
	RowCount   int64  `json:"row_count"`
	ByteSize   int64  `json:"byte_size"`
	SchemaHash string `json:"schema_hash,omitempty"`
	// Checks are the check results (a JSON array, as the check framework writes them; nil when
	// no check ran).
	Checks         json.RawMessage `json:"checks,omitempty"`
	ChecksPassed   int             `json:"checks_passed"`
	ChecksFailed   int             `json:"checks_failed"`
	GatingDecision GatingDecision  `json:"gating_decision"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	// PromotedAt is when it was promoted (nil: never).
	PromotedAt *time.Time `json:"promoted_at,omitempty"`
	// DecidedBy, DecidedAt and Reason record who approved or rejected it, when and why.
	DecidedBy string     `json:"decided_by,omitempty"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	Reason    string     `json:"reason,omitempty"`
}

// Asset is an asset's row: its latest promoted materialization (of any partition) and its health.
type Asset struct {
	TenantID string `json:"tenant_id"`
	AssetKey string `json:"asset_key"`
	// LatestMaterializationID is the materialization promoted last ("" before the first),
	// LatestAt when, LatestPartitionKey for which partition.
	LatestMaterializationID string     `json:"latest_materialization_id,omitempty"`
	LatestAt                *time.Time `json:"latest_at,omitempty"`
	LatestPartitionKey      string     `json:"latest_partition_key,omitempty"`
	// ConsecutiveFailures counts the task outcomes that failed since the last success.
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastFailureAt       *time.Time `json:"last_failure_at,omitempty"`
	LastSuccessAt       *time.Time `json:"last_success_at,omitempty"`
	// LastCheckPassed is whether the last checks that ran all passed (nil: none ran yet).
	LastCheckPassed    *bool          `json:"last_check_passed,omitempty"`
	LastGatingDecision GatingDecision `json:"last_gating_decision,omitempty"`
	UpdatedAt          time.Time      `json:"updated_at"`
}
