package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// usageDelta collects what one write adds to the usage aggregates, by hour. A write's events almost
// always fall in one hour, so a slice beats a map.
type usageDelta struct {
	tenantID, entrypointID string
	hours                  []hourUsage
}

type hourUsage struct {
	hour int64 // hours since the Unix epoch
	u    invocation.Usage
}

// add records what appending e (before → after) adds; events that add nothing cost a type switch.
func (d *usageDelta) add(before invocation.Record, e invocation.Event, after invocation.Record) {
	u := invocation.UsageOf(before, e, after)
	if u.IsZero() {
		return
	}
	d.tenantID, d.entrypointID = after.TenantID, after.EntrypointID
	h := invocation.UsageHour(e.At).Unix() / 3600
	for i := range d.hours {
		if d.hours[i].hour == h {
			d.hours[i].u.Add(u)
			return
		}
	}
	d.hours = append(d.hours, hourUsage{hour: h, u: u})
}

// writeUsage adds the collected usage to the aggregates, one upsert per hour touched, into this
// process's shard of the row (Store.usageShard).
func (t *tx) writeUsage(d *usageDelta) error {
	for _, h := range d.hours {
		u := h.u
		_, err := t.t.ExecContext(bg, `INSERT INTO usage_hourly (tenant_id, hour, entrypoint_id, invocations, succeeded, failed,
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
			d.tenantID, h.hour, d.entrypointID, u.Invocations, u.Succeeded, u.Failed, u.Canceled, u.DeadLettered, u.Compensated,
			u.Executions, u.DurationMS, u.BilledDurationMS, u.CPUTimeMS, u.MemoryMBMS, u.EgressBytes, u.Cost, t.usageShard)
		if err != nil {
			return fmt.Errorf("usage aggregates: %w", err)
		}
	}
	return nil
}

// UsageHistory implements store.Reader. The database sums the hourly rows of each bucket, so a
// request reads the aggregates of its range once and never the invocations or their events.
func (s *Store) UsageHistory(ctx context.Context, tenantID string, q store.UsageQuery) ([]store.UsageRow, error) {
	from, to, width := q.From.Unix()/3600, q.To.Unix()/3600, int64(q.Width/time.Hour)
	if width < 1 || q.From.Unix()%3600 != 0 || q.To.Unix()%3600 != 0 || q.Width%time.Hour != 0 {
		return nil, fmt.Errorf("usage history: bounds and width must be whole hours")
	}
	rows, err := s.r.QueryContext(ctx, `SELECT (hour - ?) / ? AS bucket, entrypoint_id, SUM(invocations)::bigint, SUM(succeeded)::bigint,
		SUM(failed)::bigint, SUM(canceled)::bigint, SUM(dead_lettered)::bigint, SUM(compensated)::bigint, SUM(executions)::bigint, SUM(duration_ms)::bigint,
		SUM(billed_duration_ms)::bigint, SUM(cpu_time_ms)::bigint, SUM(memory_mb_ms)::bigint, SUM(egress_bytes)::bigint, SUM(cost)
		FROM usage_hourly WHERE tenant_id = ? AND hour >= ? AND hour < ?
		GROUP BY bucket, entrypoint_id ORDER BY bucket, entrypoint_id`, from, width, tenantID, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.UsageRow
	for rows.Next() {
		var b int64
		var r store.UsageRow
		u := &r.Usage
		if err := rows.Scan(&b, &r.EntrypointID, &u.Invocations, &u.Succeeded, &u.Failed, &u.Canceled, &u.DeadLettered,
			&u.Compensated, &u.Executions, &u.DurationMS, &u.BilledDurationMS, &u.CPUTimeMS, &u.MemoryMBMS, &u.EgressBytes,
			&u.Cost); err != nil {
			return nil, err
		}
		r.Start = time.Unix((from+b*width)*3600, 0).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// CountTenantEntrypoints implements store.Reader.
func (s *Store) CountTenantEntrypoints(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM entrypoints WHERE tenant_id = ? AND status <> 'archived'", tenantID).Scan(&n)
	return n, err
}
