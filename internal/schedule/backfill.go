package schedule

import (
	"encoding/json"
	"time"
)

// BackfillState is a backfill's lifecycle state (004 §7).
type BackfillState string

// Backfill states: running backfills start chunks; paused ones start none (chunks in flight
// finish); succeeded, failed and canceled ones are over (a failed one can be retried).
const (
	BackfillRunning   BackfillState = "running"
	BackfillPaused    BackfillState = "paused"
	BackfillSucceeded BackfillState = "succeeded"
	BackfillFailed    BackfillState = "failed"
	BackfillCanceled  BackfillState = "canceled"
)

// Limits of backfills.
const (
	MaxBackfillPartitions = 100_000
	DefaultChunkSize      = 100
	MaxChunkSize          = 1000
	DefaultBackfillRuns   = 3
	MaxBackfillRunsLimit  = 50
)

// Step is how a backfill's instants are spaced: a schedule expression in a time zone (an interval
// is anchored at the backfill's start).
type Step struct {
	Expression
	Timezone string `json:"timezone"`
}

// Threshold fails a backfill once this many partitions failed (Count) or this share of all of them
// (Percent); 004's "100 partitions" or "10%".
type Threshold struct {
	Count   int     `json:"count,omitempty"`
	Percent float64 `json:"percent,omitempty"`
}

// Progress counts a backfill's partitions by state (004 BackfillProgress, plus running).
type Progress struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	Pending   int `json:"pending"`
	Running   int `json:"running"`
}

// Chunks counts a backfill's chunks: in flight (some partition running) and completed (every
// partition done).
type Chunks struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	InFlight  int `json:"in_flight"`
}

// BackfillConfig is 004's BackfillConfig.
type BackfillConfig struct {
	ChunkSize         int        `json:"chunk_size"`
	MaxConcurrentRuns int        `json:"max_concurrent_runs"`
	StopOnFailure     bool       `json:"stop_on_failure"`
	FailureThreshold  *Threshold `json:"failure_threshold,omitempty"`
}

// Backfill runs an entrypoint once per instant of a range (004 §7): each instant is a partition,
// partitions are grouped into chunks, and at most MaxConcurrentRuns chunks are in flight.
type Backfill struct {
	ID            string          `json:"backfill_id"`
	TenantID      string          `json:"tenant_id"`
	EntrypointID  string          `json:"entrypoint_id"`
	ScheduleID    string          `json:"schedule_id,omitempty"`
	Start         time.Time       `json:"start"`
	End           time.Time       `json:"end"`
	Step          Step            `json:"step"`
	Params        json.RawMessage `json:"params"`
	State         BackfillState   `json:"state"`
	Progress      Progress        `json:"progress"`
	Config        BackfillConfig  `json:"config"`
	Chunks        Chunks          `json:"chunks"`
	FailureReason string          `json:"failure_reason,omitempty"`
	CreatedBy     string          `json:"created_by"`
	CreatedAt     time.Time       `json:"created_at"`
	StartedAt     *time.Time      `json:"started_at"`
	CompletedAt   *time.Time      `json:"completed_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	Revision      int64           `json:"-"`
}

// PartitionState is a partition's state.
type PartitionState string

// Partition states.
const (
	PartitionPending   PartitionState = "pending"
	PartitionRunning   PartitionState = "running"
	PartitionCompleted PartitionState = "completed"
	PartitionFailed    PartitionState = "failed"
	PartitionSkipped   PartitionState = "skipped"
)

// Partition is one instant of a backfill.
type Partition struct {
	ID           string         `json:"partition_id"`
	Seq          int            `json:"seq"`
	ScheduledAt  time.Time      `json:"scheduled_at"`
	Chunk        int            `json:"chunk"`
	State        PartitionState `json:"status"`
	InvocationID string         `json:"invocation_id,omitempty"`
	// Attempts counts the invocations started for it (a retry starts another).
	Attempts int `json:"attempts"`
}
