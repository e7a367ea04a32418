package pgstore

import (
	"errors"
	"fmt"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
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
