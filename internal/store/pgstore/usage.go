package pgstore

import (
	"fmt"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// The usage reads and the delta a write collects are in sqlcore; the upsert differs.

// WriteUsage implements sqlcore.Writes: it adds the collected usage to the aggregates, one upsert per hour touched, into this
// process's shard of the row (Store.usageShard).
func (t *tx) WriteUsage(d *sqlcore.UsageDelta) error {
	if t.Optimistic {
		// Gathered, and written once per row for the whole batch before its commit (usageBatch).
		t.usage = append(t.usage, *d)
		return nil
	}
	for _, h := range d.Hours {
		if err := upsertUsage(t.t, d.TenantID, d.EntrypointID, h.Hour, h.Usage, t.usageShard); err != nil {
			return err
		}
	}
	return nil
}

// usageBatch is a committer's sqlcore.UsageBatch, written into its shard of the rows: what its
// optimistic closures added to the usage aggregates in the batch it runs, written once per row
// before the batch commits, or before a closure that is not optimistic runs, so that it sees the
// aggregates exact.
type usageBatch struct {
	*sqlcore.UsageBatch
	shard int16
}

func newUsageBatch(shard int16) *usageBatch {
	return &usageBatch{UsageBatch: sqlcore.NewUsageBatch(), shard: shard}
}

// take returns what was gathered, and forgets it.
func (b *usageBatch) take() *usageBatch { return &usageBatch{UsageBatch: b.Take(), shard: b.shard} }

// write upserts what was gathered in b, in the order the rows were first touched. It keeps it:
// the caller forgets it (take, or the next batch's Reset) once that write cannot be undone.
func (b *usageBatch) write(q rebound) error {
	for _, d := range b.Deltas() {
		h := d.Hours[0]
		if err := upsertUsage(q, d.TenantID, d.EntrypointID, h.Hour, h.Usage, b.shard); err != nil {
			return err
		}
	}
	return nil
}

// upsertUsage adds u to a usage_hourly row of shard.
func upsertUsage(q rebound, tenantID, entrypointID string, hour int64, u invocation.Usage, shard int16) error {
	_, err := q.ExecContext(bg, `INSERT INTO usage_hourly (tenant_id, hour, entrypoint_id, invocations, succeeded, failed,
			canceled, dead_lettered, compensated, executions, duration_ms, billed_duration_ms, cpu_time_ms, memory_mb_ms,
			egress_bytes, cost, shard) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant_id, hour, entrypoint_id, shard) DO UPDATE SET
			invocations = usage_hourly.invocations + excluded.invocations,
			succeeded = usage_hourly.succeeded + excluded.succeeded,
			failed = usage_hourly.failed + excluded.failed,
			canceled = usage_hourly.canceled + excluded.canceled,
			dead_lettered = usage_hourly.dead_lettered + excluded.dead_lettered,
			compensated = usage_hourly.compensated + excluded.compensated,
			executions = usage_hourly.executions + excluded.executions,
			duration_ms = usage_hourly.duration_ms + excluded.duration_ms,
			billed_duration_ms = usage_hourly.billed_duration_ms + excluded.billed_duration_ms,
			cpu_time_ms = usage_hourly.cpu_time_ms + excluded.cpu_time_ms,
			memory_mb_ms = usage_hourly.memory_mb_ms + excluded.memory_mb_ms,
			egress_bytes = usage_hourly.egress_bytes + excluded.egress_bytes,
			cost = usage_hourly.cost + excluded.cost`,
		tenantID, hour, entrypointID, u.Invocations, u.Succeeded, u.Failed, u.Canceled, u.DeadLettered, u.Compensated,
		u.Executions, u.DurationMS, u.BilledDurationMS, u.CPUTimeMS, u.MemoryMBMS, u.EgressBytes, u.Cost, shard)
	if err != nil {
		return fmt.Errorf("usage aggregates: %w", err)
	}
	return nil
}
