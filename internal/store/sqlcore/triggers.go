package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/trigger"
)

// Event types: the row keeps the type as JSON (doc) plus its scope and id.

// ScanEventType reads an event type's row (its doc).
func ScanEventType(sc interface{ Scan(...any) error }) (events.Type, error) {
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
func (t *Tx) InsertEventType(et events.Type) error {
	doc, err := json.Marshal(et)
	if err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, "INSERT INTO event_types (scope, id, created_at, doc) VALUES (?, ?, ?, ?)",
		et.TenantID, et.ID, TS(et.CreatedAt), string(doc))
	if dup {
		return fmt.Errorf("event type %s: %w", et.ID, store.ErrConflict)
	}
	return err
}

// DeleteEventType implements store.Tx.
func (t *Tx) DeleteEventType(scope, id string) error {
	res, err := t.Q.ExecContext(bg, "DELETE FROM event_types WHERE scope = ? AND id = ?", scope, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("event type %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// EventTypeFor implements store.Tx.
func (t *Tx) EventTypeFor(tenantID, id string) (events.Type, error) {
	et, err := ScanEventType(t.Q.QueryRowContext(bg, `SELECT doc FROM event_types WHERE scope IN (?, '') AND id = ?
		ORDER BY scope DESC LIMIT 1`, tenantID, id))
	return et, NotFound(err, "event type")
}

// EventType implements store.Reader.
func (s *Reader) EventType(ctx context.Context, scope, id string) (events.Type, error) {
	et, err := ScanEventType(s.Q.QueryRowContext(ctx, "SELECT doc FROM event_types WHERE scope = ? AND id = ?", scope, id))
	return et, NotFound(err, "event type")
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
	tr.BatchDueAt, err = ParseTSPtr(due)
	return tr, err
}

// InsertTrigger implements store.Tx.
func (t *Tx) InsertTrigger(tr *trigger.Trigger) error {
	tr.Revision = 1
	doc, err := json.Marshal(tr)
	if err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO triggers (tenant_id, id, event_type_id, entrypoint_id, status, batch_due_at,
		revision, created_at, updated_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tr.TenantID, tr.ID, tr.EventTypeID, tr.EntrypointID, string(tr.Status), TSPtr(tr.BatchDueAt), tr.Revision,
		TS(tr.CreatedAt), TS(tr.UpdatedAt), string(doc))
	if dup {
		return fmt.Errorf("trigger %s: %w", tr.ID, store.ErrConflict)
	}
	return err
}

// Trigger implements store.Tx.
func (t *Tx) Trigger(tenantID, id string) (trigger.Trigger, error) {
	tr, err := scanTrigger(t.Q.QueryRowContext(bg, "SELECT "+triggerCols+" FROM triggers WHERE tenant_id = ? AND id = ?", tenantID, id))
	return tr, NotFound(err, "trigger")
}

// UpdateTrigger implements store.Tx.
func (t *Tx) UpdateTrigger(tr *trigger.Trigger) error {
	doc, err := json.Marshal(tr)
	if err != nil {
		return err
	}
	res, err := t.Q.ExecContext(bg, `UPDATE triggers SET event_type_id = ?, entrypoint_id = ?, status = ?, batch_due_at = ?,
		revision = revision + 1, updated_at = ?, doc = ? WHERE tenant_id = ? AND id = ? AND revision = ?`,
		tr.EventTypeID, tr.EntrypointID, string(tr.Status), TSPtr(tr.BatchDueAt), TS(tr.UpdatedAt), string(doc),
		tr.TenantID, tr.ID, tr.Revision)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var one int
		if err := t.Q.QueryRowContext(bg, "SELECT 1 FROM triggers WHERE tenant_id = ? AND id = ?", tr.TenantID, tr.ID).Scan(&one); err != nil {
			return NotFound(err, "trigger")
		}
		return fmt.Errorf("trigger %s: %w", tr.ID, store.ErrStale)
	}
	tr.Revision++
	return nil
}

// DeleteTrigger implements store.Tx.
func (t *Tx) DeleteTrigger(tenantID, id string) error {
	res, err := t.Q.ExecContext(bg, "DELETE FROM triggers WHERE tenant_id = ? AND id = ?", tenantID, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("trigger %s: %w", id, store.ErrNotFound)
	}
	for _, table := range []string{"trigger_pending", "trigger_dead_letters", "trigger_metrics"} {
		if _, err := t.Q.ExecContext(bg, "DELETE FROM "+table+" WHERE tenant_id = ? AND trigger_id = ?", tenantID, id); err != nil {
			return err
		}
	}
	return nil
}

// CountTenantTriggers implements store.Tx.
func (t *Tx) CountTenantTriggers(tenantID string) (int64, error) {
	var n int64
	err := t.Q.QueryRowContext(bg, "SELECT count(*) FROM triggers WHERE tenant_id = ?", tenantID).Scan(&n)
	return n, err
}

// CountTenantTriggers implements store.Reader.
func (s *Reader) CountTenantTriggers(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.Q.QueryRowContext(ctx, "SELECT count(*) FROM triggers WHERE tenant_id = ?", tenantID).Scan(&n)
	return n, err
}

// ActiveTriggers implements store.Tx.
func (t *Tx) ActiveTriggers(tenantID, eventTypeID string) ([]trigger.Trigger, error) {
	rows, err := t.Q.QueryContext(bg, "SELECT "+triggerCols+" FROM triggers"+t.D.IndexedBy("triggers_match")+`
		WHERE tenant_id = ? AND event_type_id = ? AND status = 'active' ORDER BY created_at, id`, tenantID, eventTypeID)
	return ScanAll(rows, err, func(r *sql.Rows) (trigger.Trigger, error) { return scanTrigger(r) })
}

// Trigger implements store.Reader.
func (s *Reader) Trigger(ctx context.Context, tenantID, id string) (trigger.Trigger, error) {
	tr, err := scanTrigger(s.Q.QueryRowContext(ctx, "SELECT "+triggerCols+" FROM triggers WHERE tenant_id = ? AND id = ?", tenantID, id))
	return tr, NotFound(err, "trigger")
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
func (s *Reader) ListTriggers(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[trigger.Trigger], error) {
	return ListPage(ctx, s.Q, ListSpec[trigger.Trigger]{
		From: "triggers", Cols: triggerCols, Fields: triggerFields, Scope: "tenant_id = ?", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Scan:         func(r Scanner) (trigger.Trigger, error) { return scanTrigger(r) },
	}, q)
}

// DueBatches implements store.Reader.
func (s *Reader) DueBatches(ctx context.Context, now time.Time, limit int) ([]trigger.Trigger, error) {
	rows, err := s.Q.QueryContext(ctx, "SELECT "+triggerCols+" FROM triggers"+s.D.IndexedBy("triggers_batch_due")+`
		WHERE batch_due_at IS NOT NULL AND batch_due_at <= `+s.D.OpaqueText("?")+` ORDER BY batch_due_at LIMIT `+s.D.OpaqueInt("?"), TS(now), limit)
	return ScanAll(rows, err, func(r *sql.Rows) (trigger.Trigger, error) { return scanTrigger(r) })
}

// NextBatchDue implements store.Reader.
func (s *Reader) NextBatchDue(ctx context.Context) (*time.Time, error) {
	var due sql.NullString
	if err := s.Q.QueryRowContext(ctx, "SELECT min(batch_due_at) FROM triggers WHERE batch_due_at IS NOT NULL").Scan(&due); err != nil {
		return nil, err
	}
	return ParseTSPtr(due)
}

// startDoc is the JSON part of a trigger_starts row.
type startDoc struct {
	EventSeqs []int64         `json:"event_seqs"`
	EventIDs  []string        `json:"event_ids"`
	Params    json.RawMessage `json:"params"`
}

// InsertTriggerStart implements store.Tx.
func (t *Tx) InsertTriggerStart(s trigger.Start) error {
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
	// The duplicate check covers the primary key and the partial unique index on the first event
	// alike (on PostgreSQL, ON CONFLICT DO NOTHING without a target).
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO trigger_starts (tenant_id, invocation_id, trigger_id, first_seq, received_at,
		started_at, redrive, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, s.TenantID, s.InvocationID, s.TriggerID,
		s.EventSeqs[0], TS(s.ReceivedAt), TS(s.StartedAt), redrive, string(doc))
	if dup {
		return fmt.Errorf("trigger %s event %d: %w", s.TriggerID, s.EventSeqs[0], store.ErrConflict)
	}
	return err
}

// TriggerStart implements store.Tx.
func (t *Tx) TriggerStart(tenantID, invocationID string) (trigger.Start, error) {
	s := trigger.Start{TenantID: tenantID, InvocationID: invocationID}
	var recv, started, doc string
	err := t.Q.QueryRowContext(bg, `SELECT trigger_id, received_at, started_at, redrive, doc FROM trigger_starts
		WHERE tenant_id = ? AND invocation_id = ?`, tenantID, invocationID).Scan(&s.TriggerID, &recv, &started, &s.Redrive, &doc)
	if err != nil {
		return s, NotFound(err, "trigger start")
	}
	var d startDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return s, fmt.Errorf("trigger start: %w", err)
	}
	s.EventSeqs, s.EventIDs, s.Params = d.EventSeqs, d.EventIDs, d.Params
	if s.ReceivedAt, err = ParseTS(recv); err != nil {
		return s, err
	}
	s.StartedAt, err = ParseTS(started)
	return s, err
}

// EndTriggerStart implements store.Tx.
func (t *Tx) EndTriggerStart(tenantID, invocationID string, at time.Time) (trigger.Start, bool, error) {
	s, err := t.TriggerStart(tenantID, invocationID)
	if err != nil {
		return s, false, err
	}
	res, err := t.Q.ExecContext(bg, "UPDATE trigger_starts SET ended_at = ? WHERE tenant_id = ? AND invocation_id = ? AND ended_at IS NULL",
		TS(at), tenantID, invocationID)
	if err != nil {
		return s, false, err
	}
	n, err := res.RowsAffected()
	return s, n == 1, err
}

// AddPending implements store.Tx.
func (t *Tx) AddPending(tenantID, triggerID string, ev events.Event) error {
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, "INSERT INTO trigger_pending (tenant_id, trigger_id, event_seq) VALUES (?, ?, ?)",
		tenantID, triggerID, ev.Seq)
	if dup {
		return fmt.Errorf("trigger %s event %d: %w", triggerID, ev.Seq, store.ErrConflict)
	}
	return err
}

// PendingBatch implements store.Tx. A pending event the retention job purged meanwhile is left out.
func (t *Tx) PendingBatch(tenantID, triggerID string, limit int) ([]events.Event, error) {
	rows, err := t.Q.QueryContext(bg, `SELECT e.seq, e.doc FROM trigger_pending p JOIN events e ON e.seq = p.event_seq
		WHERE p.tenant_id = ? AND p.trigger_id = ? ORDER BY p.event_seq LIMIT ?`, tenantID, triggerID, limit)
	return ScanAll(rows, err, func(r *sql.Rows) (events.Event, error) { return ScanEvent(r) })
}

// CountPending implements store.Tx.
func (t *Tx) CountPending(tenantID, triggerID string) (int, error) {
	var n int
	err := t.Q.QueryRowContext(bg, "SELECT count(*) FROM trigger_pending WHERE tenant_id = ? AND trigger_id = ?", tenantID, triggerID).Scan(&n)
	return n, err
}

// RemovePending implements store.Tx.
func (t *Tx) RemovePending(tenantID, triggerID string, upToSeq int64) error {
	_, err := t.Q.ExecContext(bg, "DELETE FROM trigger_pending WHERE tenant_id = ? AND trigger_id = ? AND event_seq <= ?",
		tenantID, triggerID, upToSeq)
	return err
}

// SetBatchDue implements store.Tx.
func (t *Tx) SetBatchDue(tenantID, triggerID string, due *time.Time) error {
	_, err := t.Q.ExecContext(bg, "UPDATE triggers SET batch_due_at = ? WHERE tenant_id = ? AND id = ?", TSPtr(due), tenantID, triggerID)
	return err
}

// ArmBatch implements store.Tx.
func (t *Tx) ArmBatch(tenantID, triggerID string, due time.Time) (bool, error) {
	res, err := t.Q.ExecContext(bg, "UPDATE triggers SET batch_due_at = ? WHERE tenant_id = ? AND id = ? AND batch_due_at IS NULL",
		TS(due), tenantID, triggerID)
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
func (t *Tx) InsertDeadLetter(d trigger.DeadLetter) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO trigger_dead_letters (tenant_id, trigger_id, id, invocation_id, created_at, doc)
		VALUES (?, ?, ?, ?, ?, ?)`, d.TenantID, d.TriggerID, d.ID, d.InvocationID, TS(d.CreatedAt), string(doc))
	if dup {
		return fmt.Errorf("dead letter of %s: %w", d.InvocationID, store.ErrConflict)
	}
	return err
}

// DeadLetter implements store.Tx.
func (t *Tx) DeadLetter(tenantID, triggerID, id string) (trigger.DeadLetter, error) {
	d, err := scanDeadLetter(t.Q.QueryRowContext(bg, "SELECT doc FROM trigger_dead_letters WHERE tenant_id = ? AND trigger_id = ? AND id = ?",
		tenantID, triggerID, id))
	return d, NotFound(err, "dead letter")
}

// TakeDeadLetters implements store.Tx.
func (t *Tx) TakeDeadLetters(tenantID, triggerID string, ids []string, limit int) ([]trigger.DeadLetter, error) {
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
	rows, err := t.Q.QueryContext(bg, q, a...)
	out, err := ScanAll(rows, err, func(r *sql.Rows) (trigger.DeadLetter, error) { return scanDeadLetter(r) })
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
func (s *Reader) DeadLetters(ctx context.Context, tenantID, triggerID string, q store.ListQuery) (store.Page[trigger.DeadLetter], error) {
	return ListPage(ctx, s.Q, ListSpec[trigger.DeadLetter]{
		From: "trigger_dead_letters", Cols: "doc", Fields: deadLetterFields, Scope: "tenant_id = ? AND trigger_id = ?",
		ScopeArgs: []any{tenantID, triggerID}, DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Scan: func(r Scanner) (trigger.DeadLetter, error) { return scanDeadLetter(r) },
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

// ObserveLatency counts d's latency in its hourly row's histogram (the row exists): the last step of
// the stores' AddTriggerMetrics. The row is locked (by the store's upsert before, and
// Dialect.ForUpdate here), so another process's count is never lost between the read and the write.
func (t *Tx) ObserveLatency(d trigger.MetricsDelta) error {
	hour := TS(d.Hour.UTC().Truncate(time.Hour))
	var raw string
	if err := t.Q.QueryRowContext(bg, "SELECT latency FROM trigger_metrics WHERE tenant_id = ? AND trigger_id = ? AND hour = ?"+t.D.ForUpdate(),
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
	_, err = t.Q.ExecContext(bg, "UPDATE trigger_metrics SET latency = ? WHERE tenant_id = ? AND trigger_id = ? AND hour = ?",
		string(b), d.TenantID, d.TriggerID, hour)
	return err
}

// TriggerMetrics implements store.Reader.
func (s *Reader) TriggerMetrics(ctx context.Context, tenantID, triggerID string, since time.Time) ([]trigger.Hourly, error) {
	rows, err := s.Q.QueryContext(ctx, `SELECT hour, received, filtered_out, triggered, succeeded, failed, dead_lettered, latency
		FROM trigger_metrics WHERE tenant_id = ? AND trigger_id = ? AND hour >= ? ORDER BY hour`,
		tenantID, triggerID, TS(since.UTC().Truncate(time.Hour)))
	return ScanAll(rows, err, func(r *sql.Rows) (trigger.Hourly, error) {
		var h trigger.Hourly
		var hour, lat string
		if err := r.Scan(&hour, &h.Received, &h.FilteredOut, &h.Triggered, &h.Succeeded, &h.Failed, &h.DeadLettered, &lat); err != nil {
			return h, err
		}
		var err error
		if h.Hour, err = ParseTS(hour); err != nil {
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
func (t *Tx) PurgeTriggerHistory(p store.TriggerHistoryPurge) (int64, error) {
	res, err := t.Q.ExecContext(bg, `DELETE FROM trigger_starts WHERE tenant_id = ? AND invocation_id IN
		(SELECT invocation_id FROM trigger_starts WHERE tenant_id = ? AND ended_at IS NOT NULL AND ended_at < ? LIMIT ?)`,
		p.TenantID, p.TenantID, TS(p.StartsBefore), p.Limit)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil || n >= int64(p.Limit) {
		return n, err
	}
	res, err = t.Q.ExecContext(bg, `DELETE FROM trigger_metrics WHERE (tenant_id, trigger_id, hour) IN
		(SELECT tenant_id, trigger_id, hour FROM trigger_metrics WHERE tenant_id = ? AND hour < ? LIMIT ?)`,
		p.TenantID, TS(p.MetricsBefore), int64(p.Limit)-n)
	if err != nil {
		return n, err
	}
	m, err := res.RowsAffected()
	return n + m, err
}
