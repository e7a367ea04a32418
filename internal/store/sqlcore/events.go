package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

// EventCols are the columns ScanEvent reads: the event row keeps the whole event as JSON (doc)
// beside the columns it is found by.
const EventCols = "seq, doc"

// ScanEvent reads a row of EventCols.
func ScanEvent(sc interface{ Scan(...any) error }) (events.Event, error) {
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

// EventsSince implements store.Tx.
func (t *Tx) EventsSince(q store.EventsSinceQuery) ([]events.Event, error) {
	tenantID, typeID, since, afterSeq, unconsumedBy, limit := q.TenantID, q.TypeID, q.Since, q.AfterSeq, q.UnconsumedBy, q.Limit
	rows, err := t.Q.QueryContext(bg, "SELECT "+EventCols+` FROM events e
		WHERE tenant_id = ? AND event_type_id = ? AND received_at >= ? AND seq > ?
		AND NOT EXISTS (SELECT 1 FROM event_consumptions c WHERE c.invocation_id = ? AND c.event_seq = e.seq)
		ORDER BY seq LIMIT ?`,
		tenantID, typeID, TS(since), afterSeq, unconsumedBy, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []events.Event
	for rows.Next() {
		e, err := ScanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ConsumeEvent implements store.Tx.
func (t *Tx) ConsumeEvent(tenantID, invocationID string, eventSeq int64) (bool, error) {
	res, err := t.Q.ExecContext(bg, `INSERT INTO event_consumptions (invocation_id, event_seq, tenant_id) VALUES (?, ?, ?)
		ON CONFLICT (invocation_id, event_seq) DO NOTHING`, invocationID, eventSeq, tenantID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// PutEventWait implements store.Tx.
func (t *Tx) PutEventWait(w events.Wait) error {
	_, err := t.Q.ExecContext(bg, `INSERT INTO event_waits (invocation_id, seq, tenant_id, event_type_id, filter, since, timeout_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (invocation_id, seq) DO UPDATE SET tenant_id = excluded.tenant_id,
		event_type_id = excluded.event_type_id, filter = excluded.filter, since = excluded.since, timeout_at = excluded.timeout_at`,
		w.InvocationID, w.Seq, w.TenantID, w.TypeID, w.Filter, TS(w.Since), TSPtr(w.TimeoutAt))
	return err
}

// EventWaits implements store.Tx.
func (t *Tx) EventWaits(tenantID, typeID string) ([]events.Wait, error) {
	rows, err := t.Q.QueryContext(bg, `SELECT invocation_id, seq, filter, since, timeout_at FROM event_waits
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
		if w.Since, err = ParseTS(since); err != nil {
			return nil, err
		}
		if w.TimeoutAt, err = ParseTSPtr(timeout); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// DeleteEventWaits implements store.Tx.
func (t *Tx) DeleteEventWaits(tenantID, invocationID string) error {
	_, err := t.Q.ExecContext(bg, "DELETE FROM event_waits WHERE invocation_id = ? AND tenant_id = ?", invocationID, tenantID)
	return err
}

// Event implements store.Reader.
func (s *Reader) Event(ctx context.Context, tenantID, id string) (events.Event, error) {
	e, err := ScanEvent(s.Q.QueryRowContext(ctx, "SELECT "+EventCols+" FROM events WHERE tenant_id = ? AND id = ?", tenantID, id))
	return e, NotFound(err, "event")
}

var eventFields = odata.Schema{
	"event_type_id": {Column: "event_type_id", Type: odata.String, Filter: true, Sort: true},
	"source":        {Column: "source", Type: odata.String, Filter: true, Sort: true},
	"subject":       {Column: "subject", Type: odata.String, Filter: true, Sort: true},
	"received_at":   {Column: "received_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListEvents implements store.Reader.
func (s *Reader) ListEvents(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[events.Event], error) {
	return ListPage(ctx, s.Q, ListSpec[events.Event]{
		From: "events", Cols: EventCols, Fields: eventFields, Scope: "tenant_id = ?", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "received_at"}},
		Scan:         func(r Scanner) (events.Event, error) { return ScanEvent(r) },
	}, q)
}

// EventRowsPerInsert bounds the rows of one multi-row insert of invocation events (InsertEventsSQL):
// 8 parameters a row keeps a statement far below either database's limit on bound parameters,
// and a store's statement cache holds one text per row count up to it.
const EventRowsPerInsert = 64

// InsertEventsSQL is the multi-row INSERT of n invocation events (n <= EventRowsPerInsert), its
// arguments in EventArgs' order, followed by suffix (the store's ON CONFLICT clause).
func InsertEventsSQL(n int, suffix string) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO invocation_events (invocation_id, seq, type, data, idempotency_key, engine_attempt, logical_attempt, at) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
	}
	b.WriteString(" ")
	b.WriteString(suffix)
	return b.String()
}

// EventArgs are the arguments of InsertEventsSQL for es, each event's data stored as pack makes
// it (NULL when it has none).
func EventArgs(es []invocation.Event, pack func([]byte) string) []any {
	args := make([]any, 0, 8*len(es))
	for _, e := range es {
		var data any
		if len(e.Data) > 0 {
			data = pack(e.Data)
		}
		args = append(args, e.InvocationID, e.Seq, string(e.Type), data, e.IdempotencyKey, e.EngineAttempt, e.LogicalAttempt, TS(e.At))
	}
	return args
}

// InsertEventChunks runs the multi-row inserts of es, at most EventRowsPerInsert rows each, with
// exec (which runs one statement of those rows and reports how many it inserted, 0 when it
// inserted none and the transaction goes on), and reports whether every row was inserted. At the
// first statement that inserted fewer it stops, and deletes what it and the earlier ones inserted:
// the rows of es's seqs. No other row can be there: the transaction holds the projection, whose
// last_seq is the log's last (es[0].Seq-1), until it ends (SQLite's one writer; PostgreSQL's row
// lock, or, in an optimistic transaction, the projection's conditional update, which fails and
// rolls it all back when another process appended meanwhile).
func InsertEventChunks(q Querier, es []invocation.Event, exec func(chunk []invocation.Event) (int64, error)) (bool, error) {
	for rest := es; len(rest) > 0; {
		n := min(len(rest), EventRowsPerInsert)
		got, err := exec(rest[:n])
		if err != nil {
			return false, err
		}
		if got != int64(n) {
			_, err := q.ExecContext(bg, "DELETE FROM invocation_events WHERE invocation_id = ? AND seq BETWEEN ? AND ?",
				es[0].InvocationID, es[0].Seq, es[len(es)-1].Seq)
			return false, err
		}
		rest = rest[n:]
	}
	return true, nil
}
