package sqlstore

import (
	"fmt"

	"github.com/larkrun/lark/internal/store/sqlcore"
)

// The usage reads and the delta a write collects are in sqlcore; the upsert differs.

// WriteUsage implements sqlcore.Writes: it adds the collected usage to the aggregates, one upsert
// per hour touched, or, in a batched closure (newTx), to its batch's, written before the commit.
func (t *tx) WriteUsage(d *sqlcore.UsageDelta) error {
	if t.batched {
		if len(d.Hours) > 0 {
			t.usage = append(t.usage, *d)
		}
		return nil
	}
	return upsertUsage(t.t, *d)
}

// writeUsageBatch upserts what b gathered, in the order its rows were first touched. It keeps it:
// the caller forgets it (Take, or the next batch's Reset) once that write cannot be undone.
func writeUsageBatch(q cachedTx, b *sqlcore.UsageBatch) error {
	for _, d := range b.Deltas() {
		if err := upsertUsage(q, d); err != nil {
			return err
		}
	}
	return nil
}

// upsertUsage adds d to the aggregates, one upsert per hour.
func upsertUsage(q cachedTx, d sqlcore.UsageDelta) error {
	for _, h := range d.Hours {
		u := h.Usage
		_, err := q.ExecContext(bg, `INSERT INTO usage_hourly (tenant_id, hour, entrypoint_id, invocations, succeeded, failed,
			canceled, dead_lettered, compensated, executions, duration_ms, billed_duration_ms, cpu_time_ms, memory_mb_ms,
			egress_bytes, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant_id, hour, entrypoint_id) DO UPDATE SET
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
			d.TenantID, h.Hour, d.EntrypointID, u.Invocations, u.Succeeded, u.Failed, u.Canceled, u.DeadLettered, u.Compensated,
			u.Executions, u.DurationMS, u.BilledDurationMS, u.CPUTimeMS, u.MemoryMBMS, u.EgressBytes, u.Cost)
		if err != nil {
			return fmt.Errorf("usage aggregates: %w", err)
		}
	}
	return nil
}
