package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// Invocation implements store.Reader.
func (s *Store) Invocation(ctx context.Context, tenantID, id string) (invocation.Record, error) {
	return readRecord(ctx, s.r, tenantID, id)
}

func readRecord(ctx context.Context, q querier, tenantID, id string) (invocation.Record, error) {
	var doc string
	var r invocation.Record
	err := q.QueryRowContext(ctx, "SELECT record FROM invocations WHERE id = ? AND tenant_id = ?", id, tenantID).Scan(&doc)
	if err != nil {
		return r, notFound(err, "invocation")
	}
	err = json.Unmarshal([]byte(doc), &r)
	return r, err
}

// Events implements store.Reader.
func (s *Store) Events(ctx context.Context, tenantID, invocationID string, afterSeq int64, limit int) ([]invocation.Event, error) {
	rec, err := readRecord(ctx, s.r, tenantID, invocationID)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, type, data, idempotency_key, engine_attempt, logical_attempt, at
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
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		if e.At, err = parseTS(at); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if missing := invocation.CheckGaps(afterSeq, out); missing != 0 {
		return nil, &store.GapError{InvocationID: invocationID, Missing: missing}
	}
	// A short page must reach the projection's high-water mark: a lost tail is a gap too. The record
	// was read first, so concurrent appends can only put the log ahead of it, never behind.
	last := afterSeq
	if n := len(out); n > 0 {
		last = out[n-1].Seq
	}
	if len(out) < limit && last < rec.LastSeq {
		return nil, &store.GapError{InvocationID: invocationID, Missing: last + 1}
	}
	return out, nil
}

func (t *tx) writeRecord(r invocation.Record, insert bool) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if insert {
		_, err = t.t.ExecContext(bg, `INSERT INTO invocations (id, tenant_id, entrypoint_ref, entrypoint_id, status, mode,
			correlation_id, last_seq, record, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.TenantID, r.EntrypointRef, r.EntrypointID, string(r.Status), string(r.Mode), r.CorrelationID,
			r.LastSeq, string(doc), ts(r.CreatedAt), ts(r.UpdatedAt))
		if isUnique(err) {
			return fmt.Errorf("invocation %s: %w", r.ID, store.ErrConflict)
		}
		return err
	}
	_, err = t.t.ExecContext(bg, `UPDATE invocations SET status = ?, last_seq = ?, record = ?, updated_at = ? WHERE id = ?`,
		string(r.Status), r.LastSeq, string(doc), ts(r.UpdatedAt), r.ID)
	return err
}

func (t *tx) insertEvent(e invocation.Event) error {
	if e.IdempotencyKey == "" {
		return errors.New("invocation event: idempotency key required")
	}
	var data any
	if len(e.Data) > 0 {
		data = string(e.Data)
	}
	_, err := t.t.ExecContext(bg, `INSERT INTO invocation_events (invocation_id, seq, type, data, idempotency_key,
		engine_attempt, logical_attempt, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		e.InvocationID, e.Seq, string(e.Type), data, e.IdempotencyKey, e.EngineAttempt, e.LogicalAttempt, ts(e.At))
	if isUnique(err) {
		return fmt.Errorf("invocation %s event seq %d: %w", e.InvocationID, e.Seq, store.ErrConflict)
	}
	return err
}

// CreateInvocation implements store.Tx.
func (t *tx) CreateInvocation(first invocation.Event) (invocation.Record, error) {
	if first.Type != invocation.EventCreated {
		return invocation.Record{}, fmt.Errorf("first event must be %q", invocation.EventCreated)
	}
	first.Seq = 1
	r, err := invocation.Apply(invocation.Record{}, first)
	if err != nil {
		return r, err
	}
	if r.ID == "" || r.TenantID == "" || r.ID != first.InvocationID {
		return r, errors.New("created event must carry the invocation id and tenant")
	}
	if err := t.writeRecord(r, true); err != nil {
		return r, err
	}
	return r, t.insertEvent(first)
}

// AppendEvents implements store.Tx.
func (t *tx) AppendEvents(tenantID, invocationID string, events []invocation.Event) (invocation.Record, []invocation.Event, error) {
	r, err := readRecord(bg, t.t, tenantID, invocationID)
	if err != nil {
		return r, nil, err
	}
	seen := map[string]bool{}
	var appended []invocation.Event
	for _, e := range events {
		if e.IdempotencyKey == "" {
			return r, nil, errors.New("invocation event: idempotency key required")
		}
		if seen[e.IdempotencyKey] {
			continue
		}
		seen[e.IdempotencyKey] = true
		var one int
		err := t.t.QueryRowContext(bg, "SELECT 1 FROM invocation_events WHERE invocation_id = ? AND idempotency_key = ?",
			invocationID, e.IdempotencyKey).Scan(&one)
		if err == nil {
			continue
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return r, nil, err
		}
		e.InvocationID = invocationID
		e.Seq = r.LastSeq + 1
		if r, err = invocation.Apply(r, e); err != nil {
			return r, nil, err
		}
		if err := t.insertEvent(e); err != nil {
			return r, nil, err
		}
		appended = append(appended, e)
	}
	if len(appended) > 0 {
		if err := t.writeRecord(r, false); err != nil {
			return r, nil, err
		}
	}
	return r, appended, nil
}

func jsonUnmarshal(doc string, v any) error { return json.Unmarshal([]byte(doc), v) }

// Invocation implements store.Tx.
func (t *tx) Invocation(tenantID, invocationID string) (invocation.Record, error) {
	return readRecord(bg, t.t, tenantID, invocationID)
}
