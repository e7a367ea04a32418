package pgstore

import (
	"context"

	"github.com/larkrun/lark/internal/store/sqlcore"
)

// dialect is PostgreSQL's sqlcore.Dialect.
type dialect struct{}

var _ sqlcore.Dialect = dialect{}

// InsertIgnoreConflict implements sqlcore.Dialect with ON CONFLICT DO NOTHING (see conflicted):
// PostgreSQL aborts a transaction at its first error, so the insert never lets a unique key fail.
// The callers pass ctx from sqlcore.Tx.ExpectOne: in an optimistic closure a pipelined transaction
// goes on without waiting for the insert, and is replayed unpipelined in the rare case it met a
// conflict.
func (dialect) InsertIgnoreConflict(ctx context.Context, q sqlcore.Querier, insert string, args ...any) (bool, error) {
	return conflicted(q.ExecContext(ctx, insert+" ON CONFLICT DO NOTHING", args...))
}

// ForUpdate implements sqlcore.Dialect: the row stays locked until the transaction ends, so a
// writer of another process waits for it.
func (dialect) ForUpdate() string { return " FOR UPDATE" }

// SumInt implements sqlcore.Dialect: PostgreSQL's SUM of a bigint is a numeric.
func (dialect) SumInt(expr string) string { return "SUM(" + expr + ")::bigint" }

// JSONArrayContains implements sqlcore.Dialect. lark_json_array (migrations) yields an empty array
// for a column PostgreSQL cannot parse as one.
func (dialect) JSONArrayContains(col, ph string) string {
	return "(EXISTS (SELECT 1 FROM jsonb_array_elements(lark_json_array(" + col + ")) AS el(v)" +
		" WHERE jsonb_typeof(el.v) = 'string' AND el.v #>> '{}' IN (" + ph + ")))"
}

// CountIf implements sqlcore.Dialect with an aggregate FILTER.
func (dialect) CountIf(cond string) string { return "count(*) FILTER (WHERE " + cond + ")" }

// IndexedBy implements sqlcore.Dialect: PostgreSQL's planner picks the index itself.
func (dialect) IndexedBy(string) string { return "" }

// JSONField implements sqlcore.Dialect with lark_json_field (a function of the schema's first
// migration), NULL for a document PostgreSQL cannot parse.
func (dialect) JSONField(col, field string) string {
	return "lark_json_field(" + col + ", '" + field + "')"
}

// Pack implements sqlcore.Dialect: PostgreSQL compresses large values itself (TOAST) and has
// concurrent writers, so documents are stored as text.
func (dialect) Pack(doc []byte) string { return string(doc) }

// DocLen implements sqlcore.Dialect: the text's length (a TOASTed value's uncompressed length).
func (dialect) DocLen(col string) string { return "octet_length(" + col + ")" }

// ForUpdateSkipLocked implements sqlcore.Dialect: a claimer in another process skips the rows
// rather than waiting or taking them too.
func (dialect) ForUpdateSkipLocked() string { return "\n\t\tFOR UPDATE SKIP LOCKED" }

// Offset implements sqlcore.Dialect.
func (dialect) Offset() string { return "OFFSET ?" }

// Queue implements sqlcore.Dialect: the queued invocations' own table (migration 00005), kept by
// a trigger on invocations and vacuumed by the store every few seconds (queueVacuum), so that the
// entries claims leave behind do not pile up in front of every queue read.
func (dialect) Queue(string) string { return "invocation_queue" }

// OpaqueText implements sqlcore.Dialect: PostgreSQL plans a prepared statement generically after
// its first executions, so a bound value is left as it is.
func (dialect) OpaqueText(ph string) string { return ph }

// OpaqueInt implements sqlcore.Dialect, as OpaqueText.
func (dialect) OpaqueInt(ph string) string { return ph }

// DueWork implements sqlcore.Dialect: the queue's oldest due rows, and a lock on each one's
// invocations row (as every writer of an invocation takes), skipping those another transaction
// holds. The conditions on i are checked again on the row's latest version once it is locked, so
// a row another claimer took and committed in the meantime is left out.
func (dialect) DueWork() string {
	return `SELECT i.tenant_id, i.id, i.entrypoint_ref, i.available_at FROM invocation_queue q JOIN invocations i ON i.id = q.id
		WHERE q.tenant_id = ?1 AND q.entrypoint_ref = ?2 AND q.available_at <= ?3
		AND i.tenant_id = ?1 AND i.available_at IS NOT NULL AND i.available_at <= ?3
		ORDER BY q.available_at LIMIT ?4 FOR UPDATE OF i SKIP LOCKED`
}
