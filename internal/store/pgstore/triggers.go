package pgstore

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
	"github.com/larkrun/lark/internal/trigger"
)

// The triggers' reads and writes are in sqlcore; what differs is the event types' scope column
// (PostgreSQL's collation) and the metrics upsert.

var eventTypeFields = odata.Schema{
	"event_type_id": {Column: "id", Type: odata.String, Filter: true, Sort: true},
	"scope":         {Column: `(CASE scope WHEN '' THEN 'platform' ELSE 'tenant' END COLLATE "C")`, Type: odata.String, Filter: true, Sort: true},
	"created_at":    {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListEventTypes implements store.Reader.
func (s *Store) ListEventTypes(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[events.Type], error) {
	return sqlcore.ListPage(ctx, s.r, sqlcore.ListSpec[events.Type]{
		From: "event_types", Cols: "doc", Fields: eventTypeFields, Scope: "scope IN (?, '')", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "event_type_id"}, {Field: "scope"}},
		Scan:         func(r scanner) (events.Type, error) { return sqlcore.ScanEventType(r) },
	}, q)
}

// metricsRowsPerStatement bounds the rows of one metrics upsert (9 parameters each).
const metricsRowsPerStatement = 200

// metricsRow names one hourly metrics row.
type metricsRow struct{ tenantID, triggerID, hour string }

// metricsRows adds up the counters of the deltas of each row and orders the rows by key.
// PostgreSQL refuses an upsert that meets one row twice ("ON CONFLICT DO UPDATE command cannot
// affect row a second time"), which SQLite applies in turn; and the key order makes two processes
// lock the rows they share in the same order.
func metricsRows(ds []trigger.MetricsDelta) ([]metricsRow, []trigger.Counters) {
	sum := make(map[metricsRow]trigger.Counters, len(ds))
	for _, d := range ds {
		k := metricsRow{d.TenantID, d.TriggerID, ts(d.Hour.UTC().Truncate(time.Hour))}
		c := sum[k]
		c.Add(d.Counters)
		sum[k] = c
	}
	keys := make([]metricsRow, 0, len(sum))
	for k := range sum {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b metricsRow) int {
		return cmp.Or(cmp.Compare(a.tenantID, b.tenantID), cmp.Compare(a.triggerID, b.triggerID), cmp.Compare(a.hour, b.hour))
	})
	counters := make([]trigger.Counters, len(keys))
	for i, k := range keys {
		counters[i] = sum[k]
	}
	return keys, counters
}

// AddTriggerMetrics implements store.Tx: the counters of every row (the deltas of one row added up)
// in one upsert per 200 rows, then each latency observation into its row's histogram.
func (t *tx) AddTriggerMetrics(ds ...trigger.MetricsDelta) error {
	keys, counters := metricsRows(ds)
	for start := 0; start < len(keys); start += metricsRowsPerStatement {
		end := min(start+metricsRowsPerStatement, len(keys))
		chunk, sums := keys[start:end], counters[start:end]
		var q strings.Builder
		q.WriteString(`INSERT INTO trigger_metrics (tenant_id, trigger_id, hour, received, filtered_out, triggered,
		succeeded, failed, dead_lettered) VALUES `)
		a := make([]any, 0, 9*len(chunk))
		for i, k := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			c := sums[i]
			a = append(a, k.tenantID, k.triggerID, k.hour, c.Received, c.FilteredOut, c.Triggered, c.Succeeded, c.Failed, c.DeadLettered)
		}
		q.WriteString(` ON CONFLICT (tenant_id, trigger_id, hour) DO UPDATE SET
		received = trigger_metrics.received + excluded.received,
		filtered_out = trigger_metrics.filtered_out + excluded.filtered_out,
		triggered = trigger_metrics.triggered + excluded.triggered,
		succeeded = trigger_metrics.succeeded + excluded.succeeded,
		failed = trigger_metrics.failed + excluded.failed,
		dead_lettered = trigger_metrics.dead_lettered + excluded.dead_lettered`)
		if _, err := t.t.ExecContext(bg, q.String(), a...); err != nil {
			return err
		}
	}
	for _, d := range ds {
		if d.LatencyMS >= 0 {
			if err := t.ObserveLatency(d); err != nil {
				return err
			}
		}
	}
	return nil
}
