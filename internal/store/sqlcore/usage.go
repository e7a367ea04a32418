package sqlcore

import (
	"context"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// UsageDelta collects what one write adds to the usage aggregates, by hour; the store's upsert
// (each store's writeUsage) adds it to usage_hourly. A write's events almost always fall in one
// hour, so a slice beats a map.
type UsageDelta struct {
	// TenantID and EntrypointID say whose usage it is.
	TenantID, EntrypointID string
	// Hours are the usage added, one entry per hour touched.
	Hours []HourUsage
}

// HourUsage is the usage added to one hour.
type HourUsage struct {
	// Hour is the hour, in hours since the Unix epoch.
	Hour int64
	// Usage is what was added.
	Usage invocation.Usage
}

// Add records what appending e (before → after) adds; events that add nothing cost a type switch.
func (d *UsageDelta) Add(before invocation.Record, e invocation.Event, after invocation.Record) {
	u := invocation.UsageOf(before, e, after)
	if u.IsZero() {
		return
	}
	d.TenantID, d.EntrypointID = after.TenantID, after.EntrypointID
	h := invocation.UsageHour(e.At).Unix() / 3600
	for i := range d.Hours {
		if d.Hours[i].Hour == h {
			d.Hours[i].Usage.Add(u)
			return
		}
	}
	d.Hours = append(d.Hours, HourUsage{Hour: h, Usage: u})
}

// UsageHistory implements store.Reader. The database sums the hourly rows of each bucket, so a
// request reads the aggregates of its range once and never the invocations or their events.
func (s *Reader) UsageHistory(ctx context.Context, tenantID string, q store.UsageQuery) ([]store.UsageRow, error) {
	from, to, width := q.From.Unix()/3600, q.To.Unix()/3600, int64(q.Width/time.Hour)
	if width < 1 || q.From.Unix()%3600 != 0 || q.To.Unix()%3600 != 0 || q.Width%time.Hour != 0 {
		return nil, fmt.Errorf("usage history: bounds and width must be whole hours")
	}
	rows, err := s.Q.QueryContext(ctx, `SELECT (hour - ?) / ? AS bucket, entrypoint_id, `+sumInts(s.D, "invocations", "succeeded", "failed", "canceled",
		"dead_lettered", "compensated", "executions", "duration_ms", "billed_duration_ms", "cpu_time_ms", "memory_mb_ms",
		"egress_bytes")+`, SUM(cost)
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
func (s *Reader) CountTenantEntrypoints(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.Q.QueryRowContext(ctx, "SELECT count(*) FROM entrypoints WHERE tenant_id = ? AND status <> 'archived'", tenantID).Scan(&n)
	return n, err
}
