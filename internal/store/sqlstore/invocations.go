package sqlstore

import (
	"errors"
	"fmt"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// The invocations' reads and writes are in sqlcore; the event insert differs (sqlcore.Writes).

// InsertInvocationEvent implements sqlcore.Writes: it inserts e unless its idempotency key is
// already in the log, and reports whether it did. Large data is stored packed (sqlcore.Pack).
func (t *tx) InsertInvocationEvent(e invocation.Event) (bool, error) {
	if e.IdempotencyKey == "" {
		return false, errors.New("invocation event: idempotency key required")
	}
	var data any
	if len(e.Data) > 0 {
		data = sqlcore.Pack(e.Data)
	}
	res, err := t.t.ExecContext(bg, `INSERT INTO invocation_events (invocation_id, seq, type, data, idempotency_key,
		engine_attempt, logical_attempt, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (invocation_id, idempotency_key) DO NOTHING`,
		e.InvocationID, e.Seq, string(e.Type), data, e.IdempotencyKey, e.EngineAttempt, e.LogicalAttempt, ts(e.At))
	if isUnique(err) {
		return false, fmt.Errorf("invocation %s event seq %d: %w", e.InvocationID, e.Seq, store.ErrConflict)
	}
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// InsertInvocationEvents implements sqlcore.Writes with multi-row inserts. A key already in the
// log is skipped (ON CONFLICT DO NOTHING) and a row at one of the seqs fails the statement, which
// SQLite then undoes alone: either way the statement inserted fewer than its rows.
func (t *tx) InsertInvocationEvents(es []invocation.Event) (bool, error) {
	return sqlcore.InsertEventChunks(t.t, es, func(chunk []invocation.Event) (int64, error) {
		res, err := t.t.ExecContext(bg, sqlcore.InsertEventsSQL(len(chunk), "ON CONFLICT (invocation_id, idempotency_key) DO NOTHING"),
			sqlcore.EventArgs(chunk, sqlcore.Pack)...)
		if isUnique(err) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}
