package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/store"
)

// A schedule row keeps the resource as JSON (doc) plus the columns it is found by; revision and
// due_at live in columns only.
const scheduleCols = "revision, due_at, doc"

func scanSchedule(sc interface{ Scan(...any) error }) (schedule.Schedule, error) {
	var s schedule.Schedule
	var rev int64
	var due sql.NullString
	var doc string
	if err := sc.Scan(&rev, &due, &doc); err != nil {
		return s, err
	}
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		return s, fmt.Errorf("schedule: %w", err)
	}
	s.Revision = rev
	var err error
	s.DueAt, err = ParseTSPtr(due)
	return s, err
}

func scheduleDoc(s *schedule.Schedule) (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}

// InsertSchedule implements store.Tx.
func (t *Tx) InsertSchedule(s *schedule.Schedule) error {
	s.Revision = 1
	doc, err := scheduleDoc(s)
	if err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO schedules (tenant_id, id, entrypoint_id, name, status, next_run_at, due_at,
		revision, created_at, updated_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.TenantID, s.ID, s.EntrypointID, s.Name, string(s.Status), TSPtr(s.NextRunAt), TSPtr(s.DueAt), s.Revision,
		TS(s.CreatedAt), TS(s.UpdatedAt), doc)
	if dup {
		return fmt.Errorf("schedule %s: %w", s.ID, store.ErrConflict)
	}
	return err
}

// Schedule implements store.Tx.
func (t *Tx) Schedule(tenantID, id string) (schedule.Schedule, error) {
	s, err := scanSchedule(t.Q.QueryRowContext(bg, "SELECT "+scheduleCols+" FROM schedules WHERE tenant_id = ? AND id = ?", tenantID, id))
	return s, NotFound(err, "schedule")
}

// UpdateSchedule implements store.Tx.
func (t *Tx) UpdateSchedule(s *schedule.Schedule) error {
	doc, err := scheduleDoc(s)
	if err != nil {
		return err
	}
	res, err := t.Q.ExecContext(bg, `UPDATE schedules SET entrypoint_id = ?, name = ?, status = ?, next_run_at = ?, due_at = ?,
		revision = revision + 1, updated_at = ?, doc = ? WHERE tenant_id = ? AND id = ? AND revision = ?`,
		s.EntrypointID, s.Name, string(s.Status), TSPtr(s.NextRunAt), TSPtr(s.DueAt), TS(s.UpdatedAt), doc,
		s.TenantID, s.ID, s.Revision)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var one int
		err := t.Q.QueryRowContext(bg, "SELECT 1 FROM schedules WHERE tenant_id = ? AND id = ?", s.TenantID, s.ID).Scan(&one)
		if err != nil {
			return NotFound(err, "schedule")
		}
		return fmt.Errorf("schedule %s: %w", s.ID, store.ErrStale)
	}
	s.Revision++
	return nil
}

// DeleteSchedule implements store.Tx.
func (t *Tx) DeleteSchedule(tenantID, id string) error {
	res, err := t.Q.ExecContext(bg, "DELETE FROM schedules WHERE tenant_id = ? AND id = ?", tenantID, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("schedule %s: %w", id, store.ErrNotFound)
	}
	_, err = t.Q.ExecContext(bg, "DELETE FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ?", tenantID, id)
	return err
}

// CountTenantSchedules implements store.Tx.
func (t *Tx) CountTenantSchedules(tenantID string) (int64, error) {
	var n int64
	err := t.Q.QueryRowContext(bg, "SELECT count(*) FROM schedules WHERE tenant_id = ?", tenantID).Scan(&n)
	return n, err
}

// CountTenantSchedules implements store.Reader.
func (s *Reader) CountTenantSchedules(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.Q.QueryRowContext(ctx, "SELECT count(*) FROM schedules WHERE tenant_id = ?", tenantID).Scan(&n)
	return n, err
}

// Schedule implements store.Reader.
func (s *Reader) Schedule(ctx context.Context, tenantID, id string) (schedule.Schedule, error) {
	sc, err := scanSchedule(s.Q.QueryRowContext(ctx, "SELECT "+scheduleCols+" FROM schedules WHERE tenant_id = ? AND id = ?", tenantID, id))
	return sc, NotFound(err, "schedule")
}

// DueSchedules implements store.Reader.
func (s *Reader) DueSchedules(ctx context.Context, now time.Time, limit int) ([]schedule.Schedule, error) {
	rows, err := s.Q.QueryContext(ctx, "SELECT "+scheduleCols+" FROM schedules"+s.D.IndexedBy("schedules_due")+`
		WHERE due_at IS NOT NULL AND due_at <= `+s.D.OpaqueText("?")+` ORDER BY due_at LIMIT `+s.D.OpaqueInt("?"), TS(now), limit)
	return ScanAll(rows, err, func(r *sql.Rows) (schedule.Schedule, error) { return scanSchedule(r) })
}

// NextScheduleDue implements store.Reader.
func (s *Reader) NextScheduleDue(ctx context.Context) (*time.Time, error) {
	var due sql.NullString
	if err := s.Q.QueryRowContext(ctx, "SELECT min(due_at) FROM schedules WHERE due_at IS NOT NULL").Scan(&due); err != nil {
		return nil, err
	}
	return ParseTSPtr(due)
}

var scheduleFields = odata.Schema{
	"schedule_id":   {Column: "id", Type: odata.String, Filter: true, Sort: true},
	"entrypoint_id": {Column: "entrypoint_id", Type: odata.String, Filter: true, Sort: true},
	"name":          {Column: "name", Type: odata.String, Filter: true, Sort: true},
	"status":        {Column: "status", Type: odata.String, Filter: true, Sort: true},
	"created_at":    {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
	"next_run_at":   {Column: "next_run_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListSchedules implements store.Reader.
func (s *Reader) ListSchedules(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[schedule.Schedule], error) {
	return ListPage(ctx, s.Q, ListSpec[schedule.Schedule]{
		From: "schedules", Cols: scheduleCols, Fields: scheduleFields, Scope: "tenant_id = ?", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Nullable:     map[string]bool{"next_run_at": true},
		Scan:         func(r Scanner) (schedule.Schedule, error) { return scanSchedule(r) },
	}, q)
}

// Runs: the row keeps the run as JSON plus its columns; state lives in a column only.
const runCols = "state, doc"

func scanRun(sc interface{ Scan(...any) error }, extra ...any) (schedule.Run, error) {
	var r schedule.Run
	var state, doc string
	if err := sc.Scan(append([]any{&state, &doc}, extra...)...); err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return r, fmt.Errorf("schedule run: %w", err)
	}
	r.State = schedule.RunState(state)
	return r, nil
}

// InsertScheduleRun implements store.Tx.
func (t *Tx) InsertScheduleRun(r schedule.Run) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var inv any
	if r.InvocationID != "" {
		inv = r.InvocationID
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO schedule_runs (tenant_id, schedule_id, id, scheduled_at, kind, state,
		invocation_id, recorded_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.TenantID, r.ScheduleID, r.ID, TS(r.ScheduledAt), string(r.Kind), string(r.State), inv, TS(r.RecordedAt), string(doc))
	if dup {
		return fmt.Errorf("schedule %s run at %s: %w", r.ScheduleID, TS(r.ScheduledAt), store.ErrConflict)
	}
	return err
}

// UpdateScheduleRun implements store.Tx.
func (t *Tx) UpdateScheduleRun(r schedule.Run) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var inv any
	if r.InvocationID != "" {
		inv = r.InvocationID
	}
	res, err := t.Q.ExecContext(bg, `UPDATE schedule_runs SET state = ?, invocation_id = ?, recorded_at = ?, doc = ?
		WHERE tenant_id = ? AND schedule_id = ? AND id = ?`,
		string(r.State), inv, TS(r.RecordedAt), string(doc), r.TenantID, r.ScheduleID, r.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("schedule run %s: %w", r.ID, store.ErrNotFound)
	}
	return nil
}

func (t *Tx) runsWhere(tenantID, scheduleID, where string, limit int) ([]schedule.Run, error) {
	rows, err := t.Q.QueryContext(bg, "SELECT "+runCols+" FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ? AND "+where+" LIMIT ?",
		tenantID, scheduleID, limit)
	return scanRuns(rows, err, tenantID)
}

// scanRuns reads the runs of a query of one tenant (and closes it).
func scanRuns(rows *sql.Rows, err error, tenantID string) ([]schedule.Run, error) {
	return ScanAll(rows, err, func(r *sql.Rows) (schedule.Run, error) {
		run, err := scanRun(r)
		run.TenantID = tenantID
		return run, err
	})
}

// PendingRuns implements store.Tx.
func (t *Tx) PendingRuns(tenantID, scheduleID string, limit int) ([]schedule.Run, error) {
	return t.runsWhere(tenantID, scheduleID, "state = 'pending' ORDER BY scheduled_at", limit)
}

// WithdrawRuns implements store.Tx.
func (t *Tx) WithdrawRuns(tenantID, scheduleID string, after time.Time) ([]schedule.Run, error) {
	rows, err := t.Q.QueryContext(bg, "DELETE FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ? AND scheduled_at > ? "+
		"AND kind = 'scheduled' AND state = 'started' RETURNING "+runCols, tenantID, scheduleID, TS(after))
	return scanRuns(rows, err, tenantID)
}

// StartedRuns implements store.Tx.
func (t *Tx) StartedRuns(tenantID, scheduleID string, limit int) ([]schedule.Run, error) {
	return t.runsWhere(tenantID, scheduleID, "state = 'started' ORDER BY scheduled_at DESC", limit)
}

// The history view: each run with its invocation's status when it started one.
const runsView = `(SELECT r.tenant_id, r.schedule_id, r.id, r.scheduled_at, r.kind, r.state, r.doc,
	CASE WHEN r.state = 'started' THEN coalesce(i.status, 'purged') ELSE r.state END AS status,
	coalesce(i.status, '') AS invocation_status
	FROM schedule_runs r LEFT JOIN invocations i ON i.id = r.invocation_id AND i.tenant_id = r.tenant_id) AS runs`

var runFields = odata.Schema{
	"status":       {Column: "status", Type: odata.String, Filter: true, Sort: true},
	"kind":         {Column: "kind", Type: odata.String, Filter: true, Sort: true},
	"scheduled_at": {Column: "scheduled_at", Type: odata.Time, Filter: true, Sort: true},
}

// ScheduleRuns implements store.Reader.
func (s *Reader) ScheduleRuns(ctx context.Context, tenantID, scheduleID string, q store.ListQuery) (store.Page[schedule.Run], error) {
	return ListPage(ctx, s.Q, ListSpec[schedule.Run]{
		From: runsView, Cols: runCols + ", invocation_status", Fields: runFields,
		Scope: "tenant_id = ? AND schedule_id = ?", ScopeArgs: []any{tenantID, scheduleID},
		DefaultOrder: []odata.OrderItem{{Field: "scheduled_at", Desc: true}},
		Scan: func(rows Scanner) (schedule.Run, error) {
			var st string
			r, err := scanRun(rows, &st)
			r.TenantID, r.InvocationStatus = tenantID, st
			return r, err
		},
	}, q)
}

// PurgeScheduleRuns implements store.Tx.
func (t *Tx) PurgeScheduleRuns(tenantID string, before time.Time, limit int) (int64, error) {
	res, err := t.Q.ExecContext(bg, `DELETE FROM schedule_runs WHERE tenant_id = ? AND (schedule_id, id) IN (SELECT schedule_id, id
		FROM schedule_runs WHERE tenant_id = ? AND recorded_at < ? AND state <> 'pending' ORDER BY recorded_at LIMIT ?)`,
		tenantID, tenantID, TS(before), limit)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if int(n) >= limit {
		return n, nil
	}
	// Finished backfills, one at a time within the bound.
	rows, err := t.Q.QueryContext(bg, `SELECT id, doc FROM backfills WHERE tenant_id = ? AND state IN ('succeeded', 'failed', 'canceled')`, tenantID)
	if err != nil {
		return n, err
	}
	var old []string
	for rows.Next() {
		var id, doc string
		if err := rows.Scan(&id, &doc); err != nil {
			rows.Close()
			return n, err
		}
		var b struct {
			CompletedAt *time.Time `json:"completed_at"`
		}
		if json.Unmarshal([]byte(doc), &b) == nil && b.CompletedAt != nil && b.CompletedAt.Before(before) {
			old = append(old, id)
		}
	}
	rows.Close()
	for _, id := range old {
		left := int64(limit) - n
		if left <= 0 {
			break
		}
		res, err := t.Q.ExecContext(bg, `DELETE FROM backfill_partitions WHERE tenant_id = ? AND backfill_id = ? AND id IN
			(SELECT id FROM backfill_partitions WHERE tenant_id = ? AND backfill_id = ? LIMIT ?)`, tenantID, id, tenantID, id, left)
		if err != nil {
			return n, err
		}
		k, _ := res.RowsAffected()
		n += k
		if k < left {
			if _, err := t.Q.ExecContext(bg, "DELETE FROM backfills WHERE tenant_id = ? AND id = ?", tenantID, id); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
