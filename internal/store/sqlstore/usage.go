package sqlstore

import (
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// The usage reads and the delta a write collects are in sqlcore; the upsert differs.
//
// A closure's usage is gathered (WriteUsage), joins its batch's sums when the closure succeeded,
// and is written once per row for the whole batch just before it commits (sqlcore.UsageBatch): a
// batch of n invocations of one entrypoint upserts its usage row once, not n times. Nothing in a
// batch reads the aggregates but the projection rebuild (UsageRows, ReplaceUsage), which first
// writes what the batch gathered so far.

// WriteUsage implements sqlcore.Writes: it gathers d for the batch's usage write.
func (t *tx) WriteUsage(d *sqlcore.UsageDelta) error {
	t.usage = append(t.usage, *d)
	return nil
}

// UsageRows implements store.ProjectionTx, over the aggregates with the batch's gathered usage
// written.
func (t *tx) UsageRows(tenantID string, hour time.Time) ([]store.UsageRow, error) {
	if err := t.flushUsage(); err != nil {
		return nil, err
	}
	return t.Tx.UsageRows(tenantID, hour)
}

// ReplaceUsage implements store.ProjectionTx: the batch's gathered usage is written first, so that
// the rows it replaces hold it as they would have without the batching.
func (t *tx) ReplaceUsage(tenantID string, hour time.Time, rows []store.UsageRow) error {
	if err := t.flushUsage(); err != nil {
		return err
	}
	return t.Tx.ReplaceUsage(tenantID, hour, rows)
}

// flushUsage writes what the batch gathered before this closure, inside the closure's savepoint:
// if the closure fails, finish gathers it again.
func (t *tx) flushUsage() error {
	taken := t.batch.Take()
	t.flushed = append(t.flushed, taken)
	return writeUsage(t.t, taken)
}

// finish settles the closure's usage once it has run: what it gathered joins the batch when it
// succeeded; what it flushed (rolled back with it) is gathered again when it failed.
func (t *tx) finish(err error) {
	if err != nil {
		for _, f := range t.flushed {
			t.batch.Merge(f)
		}
		return
	}
	t.batch.Add(t.usage)
}

// writeUsage upserts what b gathered, in the order its rows were first touched. It keeps it: the
// caller forgets it (Take, or the next batch's Reset) once that write cannot be undone.
func writeUsage(q cachedTx, b *sqlcore.UsageBatch) error {
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
