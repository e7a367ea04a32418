package pgstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
	"github.com/larkrun/lark/internal/trigger"
)

// Event types: the row keeps the type as JSON (doc) plus its scope and id.

func scanEventType(sc interface{ Scan(...any) error }) (events.Type, error) {
	var t events.Type
	var doc string
	if err := sc.Scan(&doc); err != nil {
		return t, err
	}
	if err := json.Unmarshal([]byte(doc), &t); err != nil {
		return t, fmt.Errorf("event type: %w", err)
	}
	return t, nil
}

// InsertEventType implements store.Tx.
func (t *tx) InsertEventType(et events.Type) error {
	doc, err := json.Marshal(et)
	if err != nil {
		return err
	}
	res, err := t.t.ExecContext(bg, "INSERT INTO event_types (scope, id, created_at, doc) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
		et.TenantID, et.ID, ts(et.CreatedAt), string(doc))
	return conflictErr(res, err, func() error { return fmt.Errorf("event type %s: %w", et.ID, store.ErrConflict) })
}

// DeleteEventType implements store.Tx.
func (t *tx) DeleteEventType(scope, id string) error {
	res, err := t.t.ExecContext(bg, "DELETE FROM event_types WHERE scope = ? AND id = ?", scope, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("event type %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// EventTypeFor implements store.Tx.
func (t *tx) EventTypeFor(tenantID, id string) (events.Type, error) {
	et, err := scanEventType(t.t.QueryRowContext(bg, `SELECT doc FROM event_types WHERE scope IN (?, '') AND id = ?
		ORDER BY scope DESC LIMIT 1`, tenantID, id))
	return et, notFound(err, "event type")
}

// EventType implements store.Reader.
func (s *Store) EventType(ctx context.Context, scope, id string) (events.Type, error) {
	et, err := scanEventType(s.r.QueryRowContext(ctx, "SELECT doc FROM event_types WHERE scope = ? AND id = ?", scope, id))
	return et, notFound(err, "event type")
}

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
		Scan:         func(r scanner) (events.Type, error) { return scanEventType(r) },
	}, q)
}

// Triggers: the row keeps the resource as JSON (doc) plus the columns it is found by; revision and
// batch_due_at live in columns only.
const triggerCols = "revision, batch_due_at, doc"

func scanTrigger(sc interface{ Scan(...any) error }) (trigger.Trigger, error) {
	var tr trigger.Trigger
	var rev int64
	var due sql.NullString
	var doc string
	if err := sc.Scan(&rev, &due, &doc); err != nil {
		return tr, err
	}
	if err := json.Unmarshal([]byte(doc), &tr); err != nil {
		return tr, fmt.Errorf("trigger: %w", err)
	}
	tr.Revision = rev
	var err error
	tr.BatchDueAt, err = parseTSPtr(due)
	return tr, err
}

// InsertTrigger implements store.Tx.
func (t *tx) InsertTrigger(tr *trigger.Trigger) error {
	tr.Revision = 1
	doc, err := json.Marshal(tr)
	if err != nil {
		return err
	}
	res, err := t.t.ExecContext(bg, `INSERT INTO triggers (tenant_id, id, event_type_id, entrypoint_id, status, batch_due_at,
		revision, created_at, updated_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		tr.TenantID, tr.ID, tr.EventTypeID, tr.EntrypointID, string(tr.Status), tsPtr(tr.BatchDueAt), tr.Revision,
		ts(tr.CreatedAt), ts(tr.UpdatedAt), string(doc))
	return conflictErr(res, err, func() error { return fmt.Errorf("trigger %s: %w", tr.ID, store.ErrConflict) })
}

// Trigger implements store.Tx.
func (t *tx) Trigger(tenantID, id string) (trigger.Trigger, error) {
	tr, err := scanTrigger(t.t.QueryRowContext(bg, "SELECT "+triggerCols+" FROM triggers WHERE tenant_id = ? AND id = ?", tenantID, id))
	return tr, notFound(err, "trigger")
}

// UpdateTrigger implements store.Tx.
func (t *tx) UpdateTrigger(tr *trigger.Trigger) error {
	doc, err := json.Marshal(tr)
	if err != nil {
		return err
	}
	res, err := t.t.ExecContext(bg, `UPDATE triggers SET event_type_id = ?, entrypoint_id = ?, status = ?, batch_due_at = ?,
		revision = revision + 1, updated_at = ?, doc = ? WHERE tenant_id = ? AND id = ? AND revision = ?`,
		tr.EventTypeID, tr.EntrypointID, string(tr.Status), tsPtr(tr.BatchDueAt), ts(tr.UpdatedAt), string(doc),
		tr.TenantID, tr.ID, tr.Revision)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var one int
		if err := t.t.QueryRowContext(bg, "SELECT 1 FROM triggers WHERE tenant_id = ? AND id = ?", tr.TenantID, tr.ID).Scan(&one); err != nil {
			return notFound(err, "trigger")
		}
		return fmt.Errorf("trigger %s: %w", tr.ID, store.ErrStale)
	}
	tr.Revision++
	return nil
}

// DeleteTrigger implements store.Tx.
func (t *tx) DeleteTrigger(tenantID, id string) error {
	res, err := t.t.ExecContext(bg, "DELETE FROM triggers WHERE tenant_id = ? AND id = ?", tenantID, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("trigger %s: %w", id, store.ErrNotFound)
	}
	for _, table := range []string{"trigger_pending", "trigger_dead_letters", "trigger_metrics"} {
		if _, err := t.t.ExecContext(bg, "DELETE FROM "+table+" WHERE tenant_id = ? AND trigger_id = ?", tenantID, id); err != nil {
			return err
		}
	}
	return nil
}

// CountTenantTriggers implements store.Tx.
func (t *tx) CountTenantTriggers(tenantID string) (int64, error) {
	var n int64
	err := t.t.QueryRowContext(bg, "SELECT count(*) FROM triggers WHERE tenant_id = ?", tenantID).Scan(&n)
	return n, err
}

// CountTenantTriggers implements store.Reader.
func (s *Store) CountTenantTriggers(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM triggers WHERE tenant_id = ?", tenantID).Scan(&n)
	return n, err
}

// ActiveTriggers implements store.Tx.
func (t *tx) ActiveTriggers(tenantID, eventTypeID string) ([]trigger.Trigger, error) {
	rows, err := t.t.QueryContext(bg, "SELECT "+triggerCols+` FROM triggers
		WHERE tenant_id = ? AND event_type_id = ? AND status = 'active' ORDER BY created_at, id`, tenantID, eventTypeID)
	return sqlcore.ScanAll(rows, err, func(r *sql.Rows) (trigger.Trigger, error) { return scanTrigger(r) })
}

// Trigger implements store.Reader.
func (s *Store) Trigger(ctx context.Context, tenantID, id string) (trigger.Trigger, error) {
	tr, err := scanTrigger(s.r.QueryRowContext(ctx, "SELECT "+triggerCols+" FROM triggers WHERE tenant_id = ? AND id = ?", tenantID, id))
	return tr, notFound(err, "trigger")
}

var triggerFields = odata.Schema{
	"trigger_id":    {Column: "id", Type: odata.String, Filter: true, Sort: true},
	"event_type_id": {Column: "event_type_id", Type: odata.String, Filter: true, Sort: true},
	"entrypoint_id": {Column: "entrypoint_id", Type: odata.String, Filter: true, Sort: true},
	"status":        {Column: "status", Type: odata.String, Filter: true, Sort: true},
	"created_at":    {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
	"updated_at":    {Column: "updated_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListTriggers implements store.Reader.
func (s *Store) ListTriggers(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[trigger.Trigger], error) {
	return sqlcore.ListPage(ctx, s.r, sqlcore.ListSpec[trigger.Trigger]{
		From: "triggers", Cols: triggerCols, Fields: triggerFields, Scope: "tenant_id = ?", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Scan:         func(r scanner) (trigger.Trigger, error) { return scanTrigger(r) },
	}, q)
}

// DueBatches implements store.Reader.
func (s *Store) DueBatches(ctx context.Context, now time.Time, limit int) ([]trigger.Trigger, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+triggerCols+` FROM triggers
		WHERE batch_due_at IS NOT NULL AND batch_due_at <= ? ORDER BY batch_due_at LIMIT ?`, ts(now), limit)
	return sqlcore.ScanAll(rows, err, func(r *sql.Rows) (trigger.Trigger, error) { return scanTrigger(r) })
}

// NextBatchDue implements store.Reader.
func (s *Store) NextBatchDue(ctx context.Context) (*time.Time, error) {
	var due sql.NullString
	if err := s.r.QueryRowContext(ctx, "SELECT min(batch_due_at) FROM triggers WHERE batch_due_at IS NOT NULL").Scan(&due); err != nil {
		return nil, err
	}
	return parseTSPtr(due)
}

// startDoc is the JSON part of a trigger_starts row.
type startDoc struct {
	EventSeqs []int64         `json:"event_seqs"`
	EventIDs  []string        `json:"event_ids"`
	Params    json.RawMessage `json:"params"`
}

// InsertTriggerStart implements store.Tx.
func (t *tx) InsertTriggerStart(s trigger.Start) error {
	if len(s.EventSeqs) == 0 {
		return fmt.Errorf("trigger start %s: no events", s.InvocationID)
	}
	doc, err := json.Marshal(startDoc{EventSeqs: s.EventSeqs, EventIDs: s.EventIDs, Params: s.Params})
	if err != nil {
		return err
	}
	redrive := 0
	if s.Redrive {
		redrive = 1
	}
	// ON CONFLICT DO NOTHING without a target covers the primary key and the partial unique index on
	// the first event alike, as SQLite's unique-constraint error does.
	res, err := t.t.ExecContext(bg, `INSERT INTO trigger_starts (tenant_id, invocation_id, trigger_id, first_seq, received_at,
		started_at, redrive, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, s.TenantID, s.InvocationID, s.TriggerID,
		s.EventSeqs[0], ts(s.ReceivedAt), ts(s.StartedAt), redrive, string(doc))
	return conflictErr(res, err, func() error {
		return fmt.Errorf("trigger %s event %d: %w", s.TriggerID, s.EventSeqs[0], store.ErrConflict)
	})
}

// TriggerStart implements store.Tx.
func (t *tx) TriggerStart(tenantID, invocationID string) (trigger.Start, error) {
	s := trigger.Start{TenantID: tenantID, InvocationID: invocationID}
	var recv, started, doc string
	err := t.t.QueryRowContext(bg, `SELECT trigger_id, received_at, started_at, redrive, doc FROM trigger_starts
		WHERE tenant_id = ? AND invocation_id = ?`, tenantID, invocationID).Scan(&s.TriggerID, &recv, &started, &s.Redrive, &doc)
	if err != nil {
		return s, notFound(err, "trigger start")
	}
	var d startDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return s, fmt.Errorf("trigger start: %w", err)
	}
	s.EventSeqs, s.EventIDs, s.Params = d.EventSeqs, d.EventIDs, d.Params
	if s.ReceivedAt, err = parseTS(recv); err != nil {
		return s, err
	}
	s.StartedAt, err = parseTS(started)
	return s, err
}

// EndTriggerStart implements store.Tx.
func (t *tx) EndTriggerStart(tenantID, invocationID string, at time.Time) (trigger.Start, bool, error) {
	s, err := t.TriggerStart(tenantID, invocationID)
	if err != nil {
		return s, false, err
	}
	res, err := t.t.ExecContext(bg, "UPDATE trigger_starts SET ended_at = ? WHERE tenant_id = ? AND invocation_id = ? AND ended_at IS NULL",
		ts(at), tenantID, invocationID)
	if err != nil {
		return s, false, err
	}
	n, err := res.RowsAffected()
	return s, n == 1, err
}

// AddPending implements store.Tx.
func (t *tx) AddPending(tenantID, triggerID string, ev events.Event) error {
	res, err := t.t.ExecContext(bg, "INSERT INTO trigger_pending (tenant_id, trigger_id, event_seq) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
		tenantID, triggerID, ev.Seq)
	return conflictErr(res, err, func() error { return fmt.Errorf("trigger %s event %d: %w", triggerID, ev.Seq, store.ErrConflict) })
}

// PendingBatch implements store.Tx. A pending event the retention job purged meanwhile is left out.
func (t *tx) PendingBatch(tenantID, triggerID string, limit int) ([]events.Event, error) {
	rows, err := t.t.QueryContext(bg, `SELECT e.seq, e.doc FROM trigger_pending p JOIN events e ON e.seq = p.event_seq
		WHERE p.tenant_id = ? AND p.trigger_id = ? ORDER BY p.event_seq LIMIT ?`, tenantID, triggerID, limit)
	return sqlcore.ScanAll(rows, err, func(r *sql.Rows) (events.Event, error) { return sqlcore.ScanEvent(r) })
}

// CountPending implements store.Tx.
func (t *tx) CountPending(tenantID, triggerID string) (int, error) {
	var n int
	err := t.t.QueryRowContext(bg, "SELECT count(*) FROM trigger_pending WHERE tenant_id = ? AND trigger_id = ?", tenantID, triggerID).Scan(&n)
	return n, err
}

// RemovePending implements store.Tx.
func (t *tx) RemovePending(tenantID, triggerID string, upToSeq int64) error {
	_, err := t.t.ExecContext(bg, "DELETE FROM trigger_pending WHERE tenant_id = ? AND trigger_id = ? AND event_seq <= ?",
		tenantID, triggerID, upToSeq)
	return err
}

// SetBatchDue implements store.Tx.
func (t *tx) SetBatchDue(tenantID, triggerID string, due *time.Time) error {
	_, err := t.t.ExecContext(bg, "UPDATE triggers SET batch_due_at = ? WHERE tenant_id = ? AND id = ?", tsPtr(due), tenantID, triggerID)
	return err
}

// ArmBatch implements store.Tx.
func (t *tx) ArmBatch(tenantID, triggerID string, due time.Time) (bool, error) {
	res, err := t.t.ExecContext(bg, "UPDATE triggers SET batch_due_at = ? WHERE tenant_id = ? AND id = ? AND batch_due_at IS NULL",
		ts(due), tenantID, triggerID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func scanDeadLetter(sc interface{ Scan(...any) error }) (trigger.DeadLetter, error) {
	var d trigger.DeadLetter
	var doc string
	if err := sc.Scan(&doc); err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return d, fmt.Errorf("dead letter: %w", err)
	}
	return d, nil
}

// InsertDeadLetter implements store.Tx.
func (t *tx) InsertDeadLetter(d trigger.DeadLetter) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	res, err := t.t.ExecContext(bg, `INSERT INTO trigger_dead_letters (tenant_id, trigger_id, id, invocation_id, created_at, doc)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, d.TenantID, d.TriggerID, d.ID, d.InvocationID, ts(d.CreatedAt), string(doc))
	return conflictErr(res, err, func() error { return fmt.Errorf("dead letter of %s: %w", d.InvocationID, store.ErrConflict) })
}

// DeadLetter implements store.Tx.
func (t *tx) DeadLetter(tenantID, triggerID, id string) (trigger.DeadLetter, error) {
	d, err := scanDeadLetter(t.t.QueryRowContext(bg, "SELECT doc FROM trigger_dead_letters WHERE tenant_id = ? AND trigger_id = ? AND id = ?",
		tenantID, triggerID, id))
	return d, notFound(err, "dead letter")
}

// TakeDeadLetters implements store.Tx.
func (t *tx) TakeDeadLetters(tenantID, triggerID string, ids []string, limit int) ([]trigger.DeadLetter, error) {
	where := "tenant_id = ? AND trigger_id = ?"
	a := []any{tenantID, triggerID}
	if ids != nil {
		if len(ids) == 0 {
			return nil, nil
		}
		where += " AND id IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ") + ")"
		for _, id := range ids {
			a = append(a, id)
		}
	}
	q := "DELETE FROM trigger_dead_letters WHERE tenant_id = ? AND trigger_id = ? AND id IN (SELECT id FROM trigger_dead_letters WHERE " +
		where + " ORDER BY created_at, id LIMIT ?) RETURNING doc"
	a = append([]any{tenantID, triggerID}, append(a, limit)...)
	rows, err := t.t.QueryContext(bg, q, a...)
	out, err := sqlcore.ScanAll(rows, err, func(r *sql.Rows) (trigger.DeadLetter, error) { return scanDeadLetter(r) })
	if err != nil {
		return nil, err
	}
	// RETURNING gives no order: oldest first.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && (out[j].CreatedAt.Before(out[j-1].CreatedAt) ||
			(out[j].CreatedAt.Equal(out[j-1].CreatedAt) && out[j].ID < out[j-1].ID)); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

var deadLetterFields = odata.Schema{
	"dead_letter_id": {Column: "id", Type: odata.String, Filter: true, Sort: true},
	"invocation_id":  {Column: "invocation_id", Type: odata.String, Filter: true, Sort: true},
	"created_at":     {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
}

// DeadLetters implements store.Reader.
func (s *Store) DeadLetters(ctx context.Context, tenantID, triggerID string, q store.ListQuery) (store.Page[trigger.DeadLetter], error) {
	return sqlcore.ListPage(ctx, s.r, sqlcore.ListSpec[trigger.DeadLetter]{
		From: "trigger_dead_letters", Cols: "doc", Fields: deadLetterFields, Scope: "tenant_id = ? AND trigger_id = ?",
		ScopeArgs: []any{tenantID, triggerID}, DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Scan: func(r scanner) (trigger.DeadLetter, error) { return scanDeadLetter(r) },
	}, q)
}

// latencyBucket is the histogram bucket of a latency in ms.
func latencyBucket(ms int64) int {
	for i, b := range trigger.LatencyBounds {
		if ms <= b {
			return i
		}
	}
	return len(trigger.LatencyBounds)
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
			if err := t.observeLatency(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// observeLatency counts d's latency in its hourly row's histogram (the row exists). The row is locked
// (by the upsert before, and FOR UPDATE here), so another process's count is never lost between the
// read and the write.
func (t *tx) observeLatency(d trigger.MetricsDelta) error {
	hour := ts(d.Hour.UTC().Truncate(time.Hour))
	var raw string
	if err := t.t.QueryRowContext(bg, "SELECT latency FROM trigger_metrics WHERE tenant_id = ? AND trigger_id = ? AND hour = ? FOR UPDATE",
		d.TenantID, d.TriggerID, hour).Scan(&raw); err != nil {
		return err
	}
	var counts []int64
	if err := json.Unmarshal([]byte(raw), &counts); err != nil {
		return fmt.Errorf("trigger metrics: %w", err)
	}
	if len(counts) != len(trigger.LatencyBounds)+1 {
		counts = make([]int64, len(trigger.LatencyBounds)+1)
	}
	counts[latencyBucket(d.LatencyMS)]++
	b, err := json.Marshal(counts)
	if err != nil {
		return err
	}
	_, err = t.t.ExecContext(bg, "UPDATE trigger_metrics SET latency = ? WHERE tenant_id = ? AND trigger_id = ? AND hour = ?",
		string(b), d.TenantID, d.TriggerID, hour)
	return err
}

// TriggerMetrics implements store.Reader.
func (s *Store) TriggerMetrics(ctx context.Context, tenantID, triggerID string, since time.Time) ([]trigger.Hourly, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT hour, received, filtered_out, triggered, succeeded, failed, dead_lettered, latency
		FROM trigger_metrics WHERE tenant_id = ? AND trigger_id = ? AND hour >= ? ORDER BY hour`,
		tenantID, triggerID, ts(since.UTC().Truncate(time.Hour)))
	return sqlcore.ScanAll(rows, err, func(r *sql.Rows) (trigger.Hourly, error) {
		var h trigger.Hourly
		var hour, lat string
		if err := r.Scan(&hour, &h.Received, &h.FilteredOut, &h.Triggered, &h.Succeeded, &h.Failed, &h.DeadLettered, &lat); err != nil {
			return h, err
		}
		var err error
		if h.Hour, err = parseTS(hour); err != nil {
			return h, err
		}
		if err := json.Unmarshal([]byte(lat), &h.Latency); err != nil {
			return h, fmt.Errorf("trigger metrics: %w", err)
		}
		if len(h.Latency) != len(trigger.LatencyBounds)+1 {
			h.Latency = make([]int64, len(trigger.LatencyBounds)+1)
		}
		return h, nil
	})
}

// PurgeTriggerHistory implements store.Tx.
func (t *tx) PurgeTriggerHistory(p store.TriggerHistoryPurge) (int64, error) {
	res, err := t.t.ExecContext(bg, `DELETE FROM trigger_starts WHERE tenant_id = ? AND invocation_id IN
		(SELECT invocation_id FROM trigger_starts WHERE tenant_id = ? AND ended_at IS NOT NULL AND ended_at < ? LIMIT ?)`,
		p.TenantID, p.TenantID, ts(p.StartsBefore), p.Limit)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil || n >= int64(p.Limit) {
		return n, err
	}
	res, err = t.t.ExecContext(bg, `DELETE FROM trigger_metrics WHERE (tenant_id, trigger_id, hour) IN
		(SELECT tenant_id, trigger_id, hour FROM trigger_metrics WHERE tenant_id = ? AND hour < ? LIMIT ?)`,
		p.TenantID, ts(p.MetricsBefore), int64(p.Limit)-n)
	if err != nil {
		return n, err
	}
	m, err := res.RowsAffected()
	return n + m, err
}
