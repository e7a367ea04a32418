// Package schedule defines schedules (000's Schedule with 002's policies) and their runs: pure types,
// no I/O. Package scheduler manages and fires them; package cron computes their instants.
package schedule

import (
	"encoding/json"
	"time"
)

// Status is a schedule's lifecycle state (000).
type Status string

// Schedule statuses: only active schedules fire; paused ones wait for :resume; disabled ones are
// switched off (by PUT/PATCH) and fire again only when set active or resumed.
const (
	StatusActive   Status = "active"
	StatusPaused   Status = "paused"
	StatusDisabled Status = "disabled"
)

// MissedPolicy says what happens to instants that passed while the server was down or the schedule
// paused (000 missed_policy).
type MissedPolicy string

// Missed policies.
const (
	MissedSkip     MissedPolicy = "skip"     // record them as skipped; run the next instant on time
	MissedCatchUp  MissedPolicy = "catch_up" // run the latest max_catch_up_runs of them, one after another
	MissedBackfill MissedPolicy = "backfill" // run each of them (up to MaxBackfillRuns), one after another
)

// ConcurrencyPolicy says what happens when an instant is due while the schedule's previous run is
// still in flight (002).
type ConcurrencyPolicy string

// Concurrency policies.
const (
	ConcurrencyAllow   ConcurrencyPolicy = "allow"   // start the new run anyway
	ConcurrencyForbid  ConcurrencyPolicy = "forbid"  // skip the new run (skip_reason concurrency_policy_forbid)
	ConcurrencyReplace ConcurrencyPolicy = "replace" // cancel the previous run, start the new one
)

// Execution contexts (002): whose identity a scheduled run has.
const (
	ContextSystem    = "system"     // the tenant's scheduler principal ("schedule:<id>")
	ContextAPIClient = "api_client" // the subject that created (or last replaced) the schedule
	ContextUser      = "user"       // the same: the subject that created (or last replaced) it
)

// Limits of the missed policies.
const (
	// MaxCatchUpRuns is the highest max_catch_up_runs (002).
	MaxCatchUpRuns = 100
	// MaxBackfillRuns bounds the missed instants the backfill policy runs after one outage; older
	// ones are recorded as skipped (missed).
	MaxBackfillRuns = 10_000
	// MaxSkippedRecorded bounds the skipped runs recorded for one outage; the rest are counted in the
	// log only.
	MaxSkippedRecorded = 100
)

// Expression is 000's schedule expression: a cron expression or an ISO 8601 interval.
type Expression struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// Schedule is 000's Schedule resource with 002's additions.
type Schedule struct {
	ID                string            `json:"schedule_id"`
	TenantID          string            `json:"tenant_id"`
	EntrypointID      string            `json:"entrypoint_id"`
	Name              string            `json:"name"`
	Timezone          string            `json:"timezone"`
	Expression        Expression        `json:"expression"`
	InputOverrides    json.RawMessage   `json:"input_overrides"`
	MissedPolicy      MissedPolicy      `json:"missed_policy"`
	MaxCatchUpRuns    int               `json:"max_catch_up_runs"`
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrency_policy"`
	ExecutionContext  string            `json:"execution_context"`
	Status            Status            `json:"status"`
	// NextRunAt is the first instant not yet handled (fired, skipped or queued for catch-up); while
	// paused, the first instant missed since the pause.
	NextRunAt *time.Time `json:"next_run_at"`
	// LastRunAt is the latest instant that started a run.
	LastRunAt *time.Time `json:"last_run_at"`
	// LastInvocationID is the invocation the schedule started last (scheduled, caught up or
	// triggered); the concurrency policy looks at it.
	LastInvocationID string `json:"last_invocation_id,omitempty"`
	// PendingCatchUpRuns counts the missed instants queued to run one after another.
	PendingCatchUpRuns int `json:"pending_catch_up_runs"`
	// CreatedBy is the subject that created (or last replaced) the schedule.
	CreatedBy string     `json:"created_by"`
	PausedAt  *time.Time `json:"paused_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	// Revision increases with every write (optimistic concurrency between the API and the firer).
	Revision int64 `json:"-"`
	// DueAt is when the firer looks at the schedule next: NextRunAt, or sooner while catch-up runs
	// are pending; nil when it does not fire (paused, disabled).
	DueAt *time.Time `json:"-"`
}

// RunKind says what made a run.
type RunKind string

// Run kinds.
const (
	KindScheduled RunKind = "scheduled" // an instant, on time
	KindCatchUp   RunKind = "catch_up"  // a missed instant run later (catch_up or backfill policy)
	KindManual    RunKind = "manual"    // POST /schedules/{id}:trigger
)

// RunState is a run's stored state; the API shows a started run with its invocation's status.
type RunState string

// Run states.
const (
	RunPending RunState = "pending" // a missed instant queued for catch-up, not started yet
	RunStarted RunState = "started" // its invocation was created
	RunSkipped RunState = "skipped" // not run; SkipReason says why
)

// Skip reasons.
const (
	SkipForbid         = "concurrency_policy_forbid"
	SkipMissed         = "missed"
	SkipTenantDisabled = "tenant_disabled"
	SkipUnavailable    = "entrypoint_unavailable"
)

// Run is one instant of a schedule and what became of it (002's run history).
type Run struct {
	ID           string    `json:"run_id"`
	TenantID     string    `json:"-"`
	ScheduleID   string    `json:"schedule_id"`
	ScheduledAt  time.Time `json:"scheduled_at"`
	Kind         RunKind   `json:"kind"`
	State        RunState  `json:"-"`
	SkipReason   string    `json:"skip_reason,omitempty"`
	InvocationID string    `json:"invocation_id,omitempty"`
	// PreviousInvocationID is the run still in flight that made this one skip (forbid) or that it
	// replaced (replace).
	PreviousInvocationID string `json:"previous_invocation_id,omitempty"`
	// Message explains a skip that has more to say than its reason (e.g. why the entrypoint was
	// unavailable).
	Message    string    `json:"message,omitempty"`
	RecordedAt time.Time `json:"recorded_at"`
	// InvocationStatus is the status of the run's invocation (filled by the store's join).
	InvocationStatus string `json:"-"`
}
