package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
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

// WriteUsage implements sqlcore.Writes: it gathers d for the batch's usage write (or, outside a
// committer's batch, writes it).
func (t *tx) WriteUsage(d *sqlcore.UsageDelta) error {
	if t.batch == nil {
		for _, h := range d.Hours {
			if err := upsertUsage(t.t, sqlcore.UsageKey{TenantID: d.TenantID, EntrypointID: d.EntrypointID, Hour: h.Hour}, h.Usage); err != nil {
				return err
			}
		}
		return nil
	}
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
	if t.batch == nil {
		return nil
	}
	taken := t.batch.Take()
	t.flushed = append(t.flushed, taken)
	return writeUsage(t.t, taken)
}

// finish settles the closure's usage once it has run: what it gathered joins the batch when it
// succeeded; what it flushed (rolled back with it) is gathered again when it failed.
func (t *tx) finish(err error) {
	if t.batch == nil {
		return
	}
	if err != nil {
		for _, f := range t.flushed {
			t.batch.Merge(f)
		}
		return
	}
	t.batch.Add(t.usage)
}

// execer is what the usage upsert runs on: a closure's statements (cachedTx), or the batch's
// transaction before its commit.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// writeUsage upserts every row of b.
func writeUsage(q execer, b *sqlcore.UsageBatch) error {
	return b.Each(func(k sqlcore.UsageKey, u invocation.Usage) error { return upsertUsage(q, k, u) })
}

// upsertUsage adds u to the usage_hourly row k.
func upsertUsage(q execer, k sqlcore.UsageKey, u invocation.Usage) error {
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
		k.TenantID, k.Hour, k.EntrypointID, u.Invocations, u.Succeeded, u.Failed, u.Canceled, u.DeadLettered, u.Compensated,
		u.Executions, u.DurationMS, u.BilledDurationMS, u.CPUTimeMS, u.MemoryMBMS, u.EgressBytes, u.Cost)
	if err != nil {
		return fmt.Errorf("usage aggregates: %w", err)
	}
	return nil
}
