package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// The event row keeps the whole event as JSON (doc) plus the columns it is found by.
const eventCols = "seq, doc"

func scanEvent(sc interface{ Scan(...any) error }) (events.Event, error) {
	var e events.Event
	var doc string
	if err := sc.Scan(&e.Seq, &doc); err != nil {
		return e, err
	}
	seq := e.Seq
	if err := json.Unmarshal([]byte(doc), &e); err != nil {
		return e, fmt.Errorf("event %d: %w", seq, err)
	}
	e.Seq = seq
	return e, nil
}

// InsertEvent implements store.Tx.
func (t *tx) InsertEvent(e events.Event) (events.Event, bool, error) {
	doc, err := json.Marshal(e)
	if err != nil {
		return e, false, err
	}
	err = t.t.QueryRowContext(bg, `INSERT INTO events (id, tenant_id, event_type_id, source, subject, received_at, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, id) DO NOTHING RETURNING seq`,
		e.ID, e.TenantID, e.TypeID, e.Source, e.Subject, ts(e.ReceivedAt), string(doc)).Scan(&e.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		old, err := scanEvent(t.t.QueryRowContext(bg, "SELECT "+eventCols+" FROM events WHERE tenant_id = ? AND id = ?", e.TenantID, e.ID))
		return old, false, err
	}
	if err != nil {
		return e, false, err
	}
	return e, true, nil
}

// EventsSince implements store.Tx.
func (t *tx) EventsSince(q store.EventsSinceQuery) ([]events.Event, error) {
	tenantID, typeID, since, afterSeq, unconsumedBy, limit := q.TenantID, q.TypeID, q.Since, q.AfterSeq, q.UnconsumedBy, q.Limit
	rows, err := t.t.QueryContext(bg, "SELECT "+eventCols+` FROM events e
		WHERE tenant_id = ? AND event_type_id = ? AND received_at >= ? AND seq > ?
		AND NOT EXISTS (SELECT 1 FROM event_consumptions c WHERE c.invocation_id = ? AND c.event_seq = e.seq)
		ORDER BY seq LIMIT ?`,
		tenantID, typeID, ts(since), afterSeq, unconsumedBy, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []events.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ConsumeEvent implements store.Tx.
func (t *tx) ConsumeEvent(tenantID, invocationID string, eventSeq int64) (bool, error) {
	res, err := t.t.ExecContext(bg, `INSERT INTO event_consumptions (invocation_id, event_seq, tenant_id) VALUES (?, ?, ?)
		ON CONFLICT (invocation_id, event_seq) DO NOTHING`, invocationID, eventSeq, tenantID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// PutEventWait implements store.Tx.
func (t *tx) PutEventWait(w events.Wait) error {
	_, err := t.t.ExecContext(bg, `INSERT INTO event_waits (invocation_id, seq, tenant_id, event_type_id, filter, since, timeout_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (invocation_id, seq) DO UPDATE SET tenant_id = excluded.tenant_id,
		event_type_id = excluded.event_type_id, filter = excluded.filter, since = excluded.since, timeout_at = excluded.timeout_at`,
		w.InvocationID, w.Seq, w.TenantID, w.TypeID, w.Filter, ts(w.Since), tsPtr(w.TimeoutAt))
	return err
}

// EventWaits implements store.Tx.
func (t *tx) EventWaits(tenantID, typeID string) ([]events.Wait, error) {
	rows, err := t.t.QueryContext(bg, `SELECT invocation_id, seq, filter, since, timeout_at FROM event_waits
		WHERE tenant_id = ? AND event_type_id = ? ORDER BY since, invocation_id, seq`, tenantID, typeID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []events.Wait
	for rows.Next() {
		w := events.Wait{TenantID: tenantID, TypeID: typeID}
		var since string
		var timeout sql.NullString
		if err := rows.Scan(&w.InvocationID, &w.Seq, &w.Filter, &since, &timeout); err != nil {
			return nil, err
		}
		if w.Since, err = parseTS(since); err != nil {
			return nil, err
		}
		if w.TimeoutAt, err = parseTSPtr(timeout); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// DeleteEventWaits implements store.Tx.
func (t *tx) DeleteEventWaits(tenantID, invocationID string) error {
	_, err := t.t.ExecContext(bg, "DELETE FROM event_waits WHERE invocation_id = ? AND tenant_id = ?", invocationID, tenantID)
	return err
}

// Event implements store.Reader.
func (s *Store) Event(ctx context.Context, tenantID, id string) (events.Event, error) {
	e, err := scanEvent(s.r.QueryRowContext(ctx, "SELECT "+eventCols+" FROM events WHERE tenant_id = ? AND id = ?", tenantID, id))
	return e, notFound(err, "event")
}

var eventFields = odata.Schema{
	"event_type_id": {Column: "event_type_id", Type: odata.String, Filter: true, Sort: true},
	"source":        {Column: "source", Type: odata.String, Filter: true, Sort: true},
	"subject":       {Column: "subject", Type: odata.String, Filter: true, Sort: true},
	"received_at":   {Column: "received_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListEvents implements store.Reader.
func (s *Store) ListEvents(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[events.Event], error) {
	return sqlcore.ListPage(ctx, s.r, sqlcore.ListSpec[events.Event]{
		From: "events", Cols: eventCols, Fields: eventFields, Scope: "tenant_id = ?", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "received_at"}},
		Scan:         func(r scanner) (events.Event, error) { return scanEvent(r) },
	}, q)
}
