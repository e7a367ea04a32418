package sqlcore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// StoredInvocationColumns are the columns ScanStoredInvocation reads, in its order.
const StoredInvocationColumns = `id, tenant_id, record, status, entrypoint_ref, entrypoint_id, mode, correlation_id,
	subject_id, entrypoint_owner, last_seq, created_at, updated_at`

// ScanStoredInvocation reads a row of StoredInvocationColumns.
func ScanStoredInvocation(sc interface{ Scan(...any) error }) (store.StoredInvocation, error) {
	var si store.StoredInvocation
	var doc, status, mode, created, updated string
	if err := sc.Scan(&si.ID, &si.TenantID, &doc, &status, &si.EntrypointRef, &si.EntrypointID, &mode, &si.CorrelationID,
		&si.SubjectID, &si.EntrypointOwner, &si.LastSeq, &created, &updated); err != nil {
		return si, err
	}
	doc, err := unpackString(doc)
	if err != nil {
		return si, err
	}
	si.Record, si.Status, si.Mode = json.RawMessage(doc), invocation.Status(status), invocation.Mode(mode)
	// A column that does not parse is reported by the verifier as a difference, not as a failed read.
	if t, err := ParseTS(created); err == nil {
		si.CreatedAt = t
	}
	if t, err := ParseTS(updated); err == nil {
		si.UpdatedAt = t
	}
	// The cursor holds the column's text, so that paging works whatever it holds.
	cur, err := json.Marshal([2]string{created, si.ID})
	if err != nil {
		return si, err
	}
	si.Cursor = base64.RawURLEncoding.EncodeToString(cur)
	return si, nil
}

// InvocationTenants implements store.ProjectionReader: a loose index scan of
// invocations_tenant_created, one probe per tenant.
func (s *Reader) InvocationTenants(ctx context.Context) ([]string, error) {
	rows, err := s.Q.QueryContext(ctx, `WITH RECURSIVE t(id) AS (
		SELECT min(tenant_id) FROM invocations
		UNION ALL
		SELECT (SELECT min(tenant_id) FROM invocations WHERE tenant_id > t.id) FROM t WHERE t.id IS NOT NULL)
		SELECT id FROM t WHERE id IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("invocation tenants: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("invocation tenants: %w", err)
		}
		if !strings.HasPrefix(id, PurgingPrefix) {
			out = append(out, id)
		}
	}
	return out, rows.Err()
}

// StoredInvocations implements store.ProjectionReader.
func (s *Reader) StoredInvocations(ctx context.Context, q store.StoredInvocationQuery) ([]store.StoredInvocation, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	where, args := "tenant_id = ?", []any{q.TenantID}
	if q.After != "" {
		var after [2]string
		raw, err := base64.RawURLEncoding.DecodeString(q.After)
		if err != nil || json.Unmarshal(raw, &after) != nil {
			return nil, fmt.Errorf("stored invocations: %w", store.ErrBadCursor)
		}
		where += " AND (created_at > ? OR (created_at = ? AND id > ?))"
		args = append(args, after[0], after[0], after[1])
	}
	if !q.UpdatedSince.IsZero() {
		where += " AND updated_at >= ?"
		args = append(args, TS(q.UpdatedSince))
	}
	rows, err := s.Q.QueryContext(ctx, "SELECT "+StoredInvocationColumns+" FROM invocations WHERE "+where+
		" ORDER BY created_at, id LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("stored invocations: %w", err)
	}
	defer rows.Close()
	var out []store.StoredInvocation
	for rows.Next() {
		si, err := ScanStoredInvocation(rows)
		if err != nil {
			return nil, fmt.Errorf("stored invocations: %w", err)
		}
		out = append(out, si)
	}
	return out, rows.Err()
}

// ReadLog reads up to limit events of an invocation after afterSeq, checking only that they are
// contiguous.
func ReadLog(ctx context.Context, q Querier, invocationID string, afterSeq int64, limit int) ([]invocation.Event, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, type, data, idempotency_key, engine_attempt, logical_attempt, at
		FROM invocation_events WHERE invocation_id = ? AND seq > ? ORDER BY seq LIMIT ?`, invocationID, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []invocation.Event
	for rows.Next() {
		e := invocation.Event{InvocationID: invocationID}
		var data sql.NullString
		var at string
		if err := rows.Scan(&e.Seq, &e.Type, &data, &e.IdempotencyKey, &e.EngineAttempt, &e.LogicalAttempt, &at); err != nil {
			return nil, err
		}
		if data.String, err = unpackString(data.String); err != nil {
			return nil, fmt.Errorf("invocation %s event %d: %w", invocationID, e.Seq, err)
		}
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		if e.At, err = ParseTS(at); err != nil {
			return nil, fmt.Errorf("invocation %s event %d: %w", invocationID, e.Seq, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if missing := invocation.CheckGaps(afterSeq, out); missing != 0 {
		return nil, &store.GapError{InvocationID: invocationID, Missing: missing}
	}
	return out, nil
}

// InvocationLog implements store.ProjectionReader.
func (s *Reader) InvocationLog(ctx context.Context, q store.EventLogQuery) ([]invocation.Event, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	return ReadLog(ctx, s.Q, q.InvocationID, q.AfterSeq, limit)
}

// EventConsumptions implements store.ProjectionReader.
func (s *Reader) EventConsumptions(ctx context.Context, tenantID, invocationID string) ([]int64, error) {
	return readConsumptions(ctx, s.Q, tenantID, invocationID)
}

// EventConsumptions implements store.ProjectionTx.
func (t *Tx) EventConsumptions(tenantID, id string) ([]int64, error) {
	return readConsumptions(bg, t.Q, tenantID, id)
}

// ReplaceEventConsumptions implements store.ProjectionTx.
func (t *Tx) ReplaceEventConsumptions(tenantID, id string, seqs []int64) error {
	if _, err := t.Q.ExecContext(bg, "DELETE FROM event_consumptions WHERE invocation_id = ? AND tenant_id = ?", id, tenantID); err != nil {
		return err
	}
	for _, seq := range seqs {
		if _, err := t.ConsumeEvent(tenantID, id, seq); err != nil {
			return err
		}
	}
	return nil
}

func readConsumptions(ctx context.Context, q Querier, tenantID, id string) ([]int64, error) {
	rows, err := q.QueryContext(ctx, "SELECT event_seq FROM event_consumptions WHERE invocation_id = ? AND tenant_id = ? ORDER BY event_seq", id, tenantID)
	if err != nil {
		return nil, fmt.Errorf("event consumptions of %s: %w", id, err)
	}
	return scanColumn[int64](rows)
}

// LockInvocation implements store.ProjectionTx: the row stays locked (Dialect.ForUpdate) until the
// transaction ends, so an Append of another process waits and then reads the rewritten projection.
func (t *Tx) LockInvocation(tenantID, id string) (store.StoredInvocation, error) {
	si, err := ScanStoredInvocation(t.Q.QueryRowContext(bg, "SELECT "+StoredInvocationColumns+
		" FROM invocations WHERE id = ? AND tenant_id = ?"+t.D.ForUpdate(), id, tenantID))
	if err != nil {
		return si, NotFound(err, "invocation")
	}
	return si, nil
}

// InvocationLog implements store.ProjectionTx.
func (t *Tx) InvocationLog(id string, after int64) ([]invocation.Event, error) {
	return ReadLog(bg, t.Q, id, after, math.MaxInt32)
}

// RewriteInvocation implements store.ProjectionTx.
func (t *Tx) RewriteInvocation(r invocation.Record) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	res, err := t.Q.ExecContext(bg, `UPDATE invocations SET status = ?, last_seq = ?, record = ?, updated_at = ?, created_at = ?,
		entrypoint_ref = ?, entrypoint_id = ?, mode = ?, correlation_id = ?, subject_id = ?, entrypoint_owner = ?
		WHERE id = ? AND tenant_id = ?`,
		string(r.Status), r.LastSeq, t.D.Pack(doc), TS(r.UpdatedAt), TS(r.CreatedAt), r.EntrypointRef, r.EntrypointID,
		string(r.Mode), r.CorrelationID, r.SubjectID, r.EntrypointOwner, r.ID, r.TenantID)
	if err != nil {
		return fmt.Errorf("rewrite invocation %s: %w", r.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return err
		}
		return fmt.Errorf("invocation %s: %w", r.ID, store.ErrNotFound)
	}
	return nil
}

// UsageInvocations implements store.ProjectionTx.
func (t *Tx) UsageInvocations(tenantID string, from, to time.Time) ([]string, error) {
	rows, err := t.Q.QueryContext(bg, "SELECT id FROM invocations WHERE tenant_id = ? AND created_at < ? AND updated_at >= ? ORDER BY id",
		tenantID, TS(to), TS(from))
	if err != nil {
		return nil, err
	}
	return scanColumn[string](rows)
}

// sumInts is the comma-separated SUMs of the integer columns cols.
func sumInts(d Dialect, cols ...string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = d.SumInt(c)
	}
	return strings.Join(out, ", ")
}

// UsageRows implements store.ProjectionTx.
func (t *Tx) UsageRows(tenantID string, hour time.Time) ([]store.UsageRow, error) {
	h := invocation.UsageHour(hour)
	rows, err := t.Q.QueryContext(bg, `SELECT entrypoint_id, `+sumInts(t.D, "invocations", "succeeded", "failed", "canceled", "dead_lettered",
		"compensated", "executions", "duration_ms", "billed_duration_ms", "cpu_time_ms", "memory_mb_ms", "egress_bytes")+`, SUM(cost)
		FROM usage_hourly WHERE tenant_id = ? AND hour = ? GROUP BY entrypoint_id ORDER BY entrypoint_id`, tenantID, h.Unix()/3600)
	if err != nil {
		return nil, fmt.Errorf("usage rows: %w", err)
	}
	defer rows.Close()
	var out []store.UsageRow
	for rows.Next() {
		r := store.UsageRow{Start: h}
		u := &r.Usage
		if err := rows.Scan(&r.EntrypointID, &u.Invocations, &u.Succeeded, &u.Failed, &u.Canceled, &u.DeadLettered,
			&u.Compensated, &u.Executions, &u.DurationMS, &u.BilledDurationMS, &u.CPUTimeMS, &u.MemoryMBMS, &u.EgressBytes,
			&u.Cost); err != nil {
			return nil, fmt.Errorf("usage rows: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ReplaceUsage implements store.ProjectionTx.
func (t *Tx) ReplaceUsage(tenantID string, hour time.Time, rows []store.UsageRow) error {
	h := invocation.UsageHour(hour).Unix() / 3600
	if _, err := t.Q.ExecContext(bg, "DELETE FROM usage_hourly WHERE tenant_id = ? AND hour = ?", tenantID, h); err != nil {
		return fmt.Errorf("replace usage: %w", err)
	}
	for _, r := range rows {
		if r.Usage.IsZero() {
			continue
		}
		// (On PostgreSQL the rebuilt sum goes to this process's shard; the other shards' rows were
		// deleted above.)
		d := UsageDelta{TenantID: tenantID, EntrypointID: r.EntrypointID, Hours: []HourUsage{{Hour: h, Usage: r.Usage}}}
		if err := t.W.WriteUsage(&d); err != nil {
			return err
		}
	}
	return nil
}
