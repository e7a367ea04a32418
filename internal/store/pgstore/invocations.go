package pgstore

import (
	"errors"
	"fmt"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// The invocations' reads and writes are in sqlcore; the event insert differs (sqlcore.Writes).

// InsertInvocationEvent implements sqlcore.Writes: it inserts e unless its idempotency key is
// already in the log, and reports whether it did.
// A row already at e's seq (another process appended to the same invocation meanwhile) is
// store.ErrConflict. Neither conflict may fail the statement, since an error aborts a PostgreSQL
// transaction: the insert does nothing on any conflict, and a second read tells the two apart. In an
// optimistic closure it is expected to insert (sqlcore.Tx.ExpectOne; see pipeline.go).
func (t *tx) InsertInvocationEvent(e invocation.Event) (bool, error) {
	if e.IdempotencyKey == "" {
		return false, errors.New("invocation event: idempotency key required")
	}
	var data any
	if len(e.Data) > 0 {
		data = string(e.Data)
	}
	res, err := t.t.ExecContext(t.ExpectOne(), `INSERT INTO invocation_events (invocation_id, seq, type, data, idempotency_key,
		engine_attempt, logical_attempt, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		e.InvocationID, e.Seq, string(e.Type), data, e.IdempotencyKey, e.EngineAttempt, e.LogicalAttempt, ts(e.At))
	dup, err := conflicted(res, err)
	if err != nil || !dup {
		return !dup, err
	}
	var logged bool
	if err := t.t.QueryRowContext(bg, "SELECT EXISTS (SELECT 1 FROM invocation_events WHERE invocation_id = ? AND idempotency_key = ?)",
		e.InvocationID, e.IdempotencyKey).Scan(&logged); err != nil {
		return false, err
	}
	if logged {
		return false, nil
	}
	return false, fmt.Errorf("invocation %s event seq %d: %w", e.InvocationID, e.Seq, store.ErrConflict)
}

// InsertInvocationEvents implements sqlcore.Writes with multi-row inserts that do nothing on any
// conflict (an error would abort the transaction). In an optimistic closure each is expected to
// insert all its rows (sqlcore.ExpectRows): a pipelined transaction where one did not is replayed
// without pipelining, where the count is read.
func (t *tx) InsertInvocationEvents(es []invocation.Event) (bool, error) {
	return sqlcore.InsertEventChunks(t.t, es, func(chunk []invocation.Event) (int64, error) {
		ctx := bg
		if t.Optimistic {
			ctx = sqlcore.ExpectRows(bg, int64(len(chunk)))
		}
		res, err := t.t.ExecContext(ctx, sqlcore.InsertEventsSQL(len(chunk), "ON CONFLICT DO NOTHING"),
			sqlcore.EventArgs(chunk, func(b []byte) string { return string(b) })...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}
