package store

import (
	"context"
	"time"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/trigger"
)

// EventTypeReader holds the reads of registered event types.
type EventTypeReader interface {
	// EventType reads one event type of a scope (a tenant id, or events.PlatformScope).
	EventType(ctx context.Context, scope, id string) (events.Type, error)
	// ListEventTypes lists the event types a tenant sees: its own and the platform's (tenantID
	// events.PlatformScope: the platform's only). Filters: event_type_id (eq, startswith), scope,
	// created_at; order: any of them (default event_type_id).
	ListEventTypes(ctx context.Context, tenantID string, q ListQuery) (Page[events.Type], error)
}

// EventTypeTx holds the writes of registered event types.
type EventTypeTx interface {
	// InsertEventType registers t in its scope (t.TenantID); ErrConflict when the scope has one
	// with the same id.
	InsertEventType(t events.Type) error
	// DeleteEventType removes an event type of a scope; ErrNotFound when there is none.
	DeleteEventType(scope, id string) error
	// EventTypeFor is the type id that applies to a tenant's events: the tenant's own, else the
	// platform's; ErrNotFound when neither registered it.
	EventTypeFor(tenantID, id string) (events.Type, error)
}

// TriggerReader holds the reads of event triggers, their dead letters and their metrics.
type TriggerReader interface {
	// Trigger reads one trigger of a tenant.
	Trigger(ctx context.Context, tenantID, id string) (trigger.Trigger, error)
	// ListTriggers lists a tenant's triggers. Filters: trigger_id, event_type_id, entrypoint_id,
	// status (eq, startswith), created_at; order: any of them (default created_at).
	ListTriggers(ctx context.Context, tenantID string, q ListQuery) (Page[trigger.Trigger], error)
	// CountTenantTriggers counts a tenant's triggers (the max_triggers quota, total_triggers).
	CountTenantTriggers(ctx context.Context, tenantID string) (int64, error)
	// DueBatches lists up to limit triggers, of any tenant, whose BatchDueAt is at or before now,
	// earliest first.
	DueBatches(ctx context.Context, now time.Time, limit int) ([]trigger.Trigger, error)
	// NextBatchDue is the earliest BatchDueAt of any trigger; nil when no batch waits.
	NextBatchDue(ctx context.Context) (*time.Time, error)
	// DeadLetters lists a trigger's dead letters, oldest first by default. Filters: created_at,
	// invocation_id; order: created_at.
	DeadLetters(ctx context.Context, tenantID, triggerID string, q ListQuery) (Page[trigger.DeadLetter], error)
	// TriggerMetrics returns a trigger's hourly metrics rows from the hour of since on, oldest first.
	TriggerMetrics(ctx context.Context, tenantID, triggerID string, since time.Time) ([]trigger.Hourly, error)
}

// TriggerTx holds the writes of event triggers: the resource, the matching state (the starts and
// pending batches), dead letters and metrics.
type TriggerTx interface {
	// InsertTrigger stores a new trigger with Revision 1; ErrConflict when the tenant has one with
	// the same id.
	InsertTrigger(t *trigger.Trigger) error
	// Trigger is Reader.Trigger inside the transaction.
	Trigger(tenantID, id string) (trigger.Trigger, error)
	// UpdateTrigger replaces the trigger whose Revision equals t.Revision and bumps it; ErrStale
	// when it changed since, ErrNotFound when it is gone.
	UpdateTrigger(t *trigger.Trigger) error
	// DeleteTrigger deletes a trigger with its pending events, dead letters and metrics.
	DeleteTrigger(tenantID, id string) error
	// CountTenantTriggers is Reader.CountTenantTriggers inside the transaction.
	CountTenantTriggers(tenantID string) (int64, error)
	// ActiveTriggers lists a tenant's active triggers of an event type, oldest first.
	ActiveTriggers(tenantID, eventTypeID string) ([]trigger.Trigger, error)
	// InsertTriggerStart records an invocation a trigger started; ErrConflict when the trigger
	// already started one for the same first event (each event starts at most once).
	InsertTriggerStart(s trigger.Start) error
	// TriggerStart reads the start record of an invocation; ErrNotFound when no trigger started it.
	TriggerStart(tenantID, invocationID string) (trigger.Start, error)
	// EndTriggerStart marks the start record of an invocation ended at `at` and returns it; ended is
	// false when it was ended already. ErrNotFound when no trigger started the invocation.
	EndTriggerStart(tenantID, invocationID string, at time.Time) (s trigger.Start, ended bool, err error)
	// AddPending adds an event to a batching trigger's pending batch; ErrConflict when it is
	// there already.
	AddPending(tenantID, triggerID string, ev events.Event) error
	// PendingBatch lists up to limit of a trigger's pending events (seq order) with their arrival
	// times: the next batch.
	PendingBatch(tenantID, triggerID string, limit int) ([]events.Event, error)
	// CountPending counts a trigger's pending events.
	CountPending(tenantID, triggerID string) (int, error)
	// RemovePending deletes a trigger's pending events up to and including seq (a flushed batch).
	RemovePending(tenantID, triggerID string, upToSeq int64) error
	// SetBatchDue sets (or clears, nil) when a trigger's batch is due, without touching its
	// revision.
	SetBatchDue(tenantID, triggerID string, due *time.Time) error
	// ArmBatch sets when a trigger's batch is due unless it is set already, and reports whether it
	// set it.
	ArmBatch(tenantID, triggerID string, due time.Time) (bool, error)
	// InsertDeadLetter records a dead letter; ErrConflict when the invocation has one already.
	InsertDeadLetter(d trigger.DeadLetter) error
	// DeadLetter reads one dead letter of a trigger.
	DeadLetter(tenantID, triggerID, id string) (trigger.DeadLetter, error)
	// TakeDeadLetters deletes and returns up to limit of a trigger's dead letters (ids nil: the
	// oldest; else those ids), oldest first.
	TakeDeadLetters(tenantID, triggerID string, ids []string, limit int) ([]trigger.DeadLetter, error)
	// AddTriggerMetrics adds each delta to its trigger's hourly metrics row.
	AddTriggerMetrics(ds ...trigger.MetricsDelta) error
	// PurgeTriggerHistory deletes up to limit rows of the tenant's trigger history (the retention
	// job): start records of invocations that ended before startsBefore, then hourly metrics rows of
	// hours before metricsBefore. Dead letters stay until they are redriven or purged, and start
	// records of invocations not ended (or whose end was never reported) stay too.
	PurgeTriggerHistory(p TriggerHistoryPurge) (int64, error)
}

// TriggerHistoryPurge says what one Tx.PurgeTriggerHistory batch deletes.
type TriggerHistoryPurge struct {
	TenantID      string
	StartsBefore  time.Time
	MetricsBefore time.Time
	Limit         int
}

// TriggerTotal counts everything that takes the tenant's quotas.max_triggers: its event triggers
// and its webhook triggers.
func TriggerTotal(tx Tx, tenantID string) (int64, error) {
	n, err := tx.CountTenantTriggers(tenantID)
	if err != nil {
		return 0, err
	}
	w, err := tx.CountTenantWebhookTriggers(tenantID)
	return n + w, err
}
