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

// usageKey is a usage_hourly row (of the store's shard, where it has shards).
type usageKey struct {
	tenantID, entrypointID string
	hour                   int64
}

// UsageBatch is what the closures of a group-committed batch added to the usage aggregates: the
// sums of their deltas, one per usage_hourly row, which the store writes with one upsert per row
// before the batch commits (groupcommit.Options.BeforeCommit) instead of one per closure. Only the
// committer's goroutine uses it.
type UsageBatch struct {
	keys []usageKey
	sums map[usageKey]*invocation.Usage
}

// NewUsageBatch returns an empty UsageBatch.
func NewUsageBatch() *UsageBatch { return &UsageBatch{sums: map[usageKey]*invocation.Usage{}} }

// Reset forgets what was gathered (a batch's run starts).
func (b *UsageBatch) Reset() {
	b.keys = b.keys[:0]
	clear(b.sums)
}

// Add gathers the deltas of a closure that succeeded.
func (b *UsageBatch) Add(ds []UsageDelta) {
	for _, d := range ds {
		for _, h := range d.Hours {
			k := usageKey{tenantID: d.TenantID, entrypointID: d.EntrypointID, hour: h.Hour}
			u := b.sums[k]
			if u == nil {
				u = new(invocation.Usage)
				b.sums[k] = u
				b.keys = append(b.keys, k)
			}
			u.Add(h.Usage)
		}
	}
}

// Take returns what was gathered, and forgets it.
func (b *UsageBatch) Take() *UsageBatch {
	out := &UsageBatch{keys: b.keys, sums: b.sums}
	b.keys, b.sums = nil, map[usageKey]*invocation.Usage{}
	return out
}

// Merge gathers again what o holds (taken, and written in a savepoint that was rolled back).
func (b *UsageBatch) Merge(o *UsageBatch) { b.Add(o.Deltas()) }

// Deltas are the rows gathered, one delta each, in the order they were first touched.
func (b *UsageBatch) Deltas() []UsageDelta {
	out := make([]UsageDelta, len(b.keys))
	for i, k := range b.keys {
		out[i] = UsageDelta{TenantID: k.tenantID, EntrypointID: k.entrypointID, Hours: []HourUsage{{Hour: k.hour, Usage: *b.sums[k]}}}
	}
	return out
}
