package store

import (
	"context"
	"time"

	"github.com/larkrun/lark/internal/schedule"
)

// ScheduleReader holds the reads of schedules and their runs.
type ScheduleReader interface {
	// Schedule reads one schedule of a tenant.
	Schedule(ctx context.Context, tenantID, id string) (schedule.Schedule, error)
	// ListSchedules lists a tenant's schedules. Filters: entrypoint_id, status, name, schedule_id
	// (eq, startswith), created_at, next_run_at; order: any of them (a NULL next_run_at first).
	ListSchedules(ctx context.Context, tenantID string, q ListQuery) (Page[schedule.Schedule], error)
	// ScheduleRuns lists a schedule's runs, newest instant first by default, each with its
	// invocation's status (InvocationStatus). Filters: status (the invocation's status for a started
	// run, else the run's state: pending or skipped), kind, scheduled_at; order: any of them.
	ScheduleRuns(ctx context.Context, tenantID, scheduleID string, q ListQuery) (Page[schedule.Run], error)
	// DueSchedules lists up to limit schedules, of any tenant, whose DueAt is at or before now,
	// earliest first, through the due-time index.
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]schedule.Schedule, error)
	// NextScheduleDue is the earliest DueAt of any schedule; nil when none will fire.
	NextScheduleDue(ctx context.Context) (*time.Time, error)
	// CountTenantSchedules counts a tenant's schedules (the max_schedules quota).
	CountTenantSchedules(ctx context.Context, tenantID string) (int64, error)
}

// ScheduleTx holds the writes of schedules and their runs.
type ScheduleTx interface {
	// InsertSchedule stores a new schedule with Revision 1; ErrConflict when the tenant has one with
	// the same id.
	InsertSchedule(s *schedule.Schedule) error
	// Schedule is Reader.Schedule inside the transaction (for read-modify-write).
	Schedule(tenantID, id string) (schedule.Schedule, error)
	// UpdateSchedule replaces the schedule whose Revision equals s.Revision and bumps it; ErrStale
	// when it changed since, ErrNotFound when it is gone.
	UpdateSchedule(s *schedule.Schedule) error
	// DeleteSchedule deletes a schedule and its runs.
	DeleteSchedule(tenantID, id string) error
	// CountTenantSchedules is Reader.CountTenantSchedules inside the transaction.
	CountTenantSchedules(tenantID string) (int64, error)
	// InsertScheduleRun records a run; ErrConflict when the schedule already has a run (other than
	// a manual one) at the same instant: each instant is recorded once.
	InsertScheduleRun(r schedule.Run) error
	// UpdateScheduleRun replaces a recorded run (a pending run that starts or is skipped).
	UpdateScheduleRun(r schedule.Run) error
	// PendingRuns lists up to limit of a schedule's pending runs, oldest instant first.
	PendingRuns(tenantID, scheduleID string, limit int) ([]schedule.Run, error)
	// WithdrawRuns deletes a schedule's scheduled runs that started ahead of their instant (scheduled
	// after `after`) and returns them.
	WithdrawRuns(tenantID, scheduleID string, after time.Time) ([]schedule.Run, error)
	// StartedRuns lists up to limit of a schedule's started runs, newest instant first.
	StartedRuns(tenantID, scheduleID string, limit int) ([]schedule.Run, error)
}

// BackfillReader holds the reads of backfills.
type BackfillReader interface {
	// Backfill reads one backfill of a tenant.
	Backfill(ctx context.Context, tenantID, id string) (schedule.Backfill, error)
	// ListBackfills lists a tenant's backfills. Filters: state, entrypoint_id, schedule_id,
	// created_at; order: any of them.
	ListBackfills(ctx context.Context, tenantID string, q ListQuery) (Page[schedule.Backfill], error)
	// BackfillPartitions lists a backfill's partitions. Filters: status, chunk, scheduled_at;
	// order: any of them (default scheduled_at).
	BackfillPartitions(ctx context.Context, tenantID, backfillID string, q ListQuery) (Page[schedule.Partition], error)
	// ActiveBackfills lists up to limit running or paused backfills of any tenant (tenant id,
	// backfill id).
	ActiveBackfills(ctx context.Context, limit int) ([][2]string, error)
	// PendingChunks lists up to limit of a backfill's chunks that have pending partitions and none
	// running, lowest first, with those partitions.
	PendingChunks(ctx context.Context, tenantID, backfillID string, limit int) (map[int][]schedule.Partition, error)
}

// BackfillTx holds the writes of backfills.
type BackfillTx interface {
	// InsertBackfill stores a new backfill (Revision 1) and its partitions; ErrConflict when the
	// tenant has one with the same id.
	InsertBackfill(b *schedule.Backfill, parts []schedule.Partition) error
	// Backfill is Reader.Backfill inside the transaction (for read-modify-write).
	Backfill(tenantID, id string) (schedule.Backfill, error)
	// UpdateBackfill replaces the backfill whose Revision equals b.Revision and bumps it; ErrStale
	// otherwise.
	UpdateBackfill(b *schedule.Backfill) error
	// SettleBackfill moves the backfill's running partitions whose invocation has finished to
	// completed (succeeded) or failed (any other end), and returns the progress and chunk counts.
	SettleBackfill(tenantID, id string) (schedule.Progress, schedule.Chunks, error)
	// StartPartitions marks partitions running (pending ones only) with their invocation ids and
	// one more attempt; it returns how many it marked.
	StartPartitions(tenantID, backfillID string, parts []schedule.Partition) (int, error)
	// SetPartitions moves every partition of the backfill in state m.From to state m.To (and
	// returns the invocation ids of those that were running).
	SetPartitions(m PartitionMove) ([]string, error)
}

// PartitionMove moves a backfill's partitions from one state to another (Tx.SetPartitions).
type PartitionMove struct {
	TenantID   string
	BackfillID string
	From, To   schedule.PartitionState
}
