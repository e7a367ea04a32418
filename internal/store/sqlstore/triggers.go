package sqlstore

import (
	"context"
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
	"scope":         {Column: "CASE scope WHEN '' THEN 'platform' ELSE 'tenant' END", Type: odata.String, Filter: true, Sort: true},
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

// AddTriggerMetrics implements store.Tx: the counters of every delta in one upsert per 200 rows,
// then each latency observation into its row's histogram.
func (t *tx) AddTriggerMetrics(ds ...trigger.MetricsDelta) error {
	for start := 0; start < len(ds); start += metricsRowsPerStatement {
		chunk := ds[start:min(start+metricsRowsPerStatement, len(ds))]
		var q strings.Builder
		q.WriteString(`INSERT INTO trigger_metrics (tenant_id, trigger_id, hour, received, filtered_out, triggered,
		succeeded, failed, dead_lettered) VALUES `)
		a := make([]any, 0, 9*len(chunk))
		for i, d := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			a = append(a, d.TenantID, d.TriggerID, ts(d.Hour.UTC().Truncate(time.Hour)), d.Received, d.FilteredOut, d.Triggered,
				d.Succeeded, d.Failed, d.DeadLettered)
		}
		q.WriteString(` ON CONFLICT (tenant_id, trigger_id, hour) DO UPDATE SET received = received + excluded.received,
		filtered_out = filtered_out + excluded.filtered_out, triggered = triggered + excluded.triggered,
		succeeded = succeeded + excluded.succeeded, failed = failed + excluded.failed,
		dead_lettered = dead_lettered + excluded.dead_lettered`)
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
