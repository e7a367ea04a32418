package sqlstore

import (
	"context"
	"database/sql/driver"

	"modernc.org/sqlite"

	"github.com/larkrun/lark/internal/store/sqlcore"
)

// dialect is SQLite's sqlcore.Dialect.
type dialect struct{}

var _ sqlcore.Dialect = dialect{}

// InsertIgnoreConflict implements sqlcore.Dialect: SQLite reports a unique violation as the
// statement's error and leaves the transaction usable.
func (dialect) InsertIgnoreConflict(ctx context.Context, q sqlcore.Querier, insert string, args ...any) (bool, error) {
	_, err := q.ExecContext(ctx, insert, args...)
	if isUnique(err) {
		return true, nil
	}
	return false, err
}

// ForUpdate implements sqlcore.Dialect: SQLite's single writer needs no row lock.
func (dialect) ForUpdate() string { return "" }

// SumInt implements sqlcore.Dialect: SQLite's SUM of integers is an integer.
func (dialect) SumInt(expr string) string { return "SUM(" + expr + ")" }

// JSONArrayContains implements sqlcore.Dialect: a column SQLite's JSON functions cannot parse
// counts as an empty array.
func (dialect) JSONArrayContains(col, ph string) string {
	return "(json_valid(" + col + ") AND EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(" + col + ") THEN " + col +
		" ELSE '[]' END) WHERE json_each.value IN (" + ph + ")))"
}

// CountIf implements sqlcore.Dialect: SQLite's comparisons are 0 or 1, so their sum counts.
func (dialect) CountIf(cond string) string { return "coalesce(sum(" + cond + "), 0)" }

// IndexedBy implements sqlcore.Dialect with SQLite's INDEXED BY.
func (dialect) IndexedBy(index string) string { return " INDEXED BY " + index }

// JSONField implements sqlcore.Dialect: NULL when SQLite's JSON functions cannot parse the
// document (malformed, or nested deeper than they go). Records stored since
// invocation.MaxJSONDepth are always parseable; older ones may not be. A packed document (
// sqlcore.Pack, text that starts with '~') is read by lark_json_field, which unpacks it.
func (dialect) JSONField(col, field string) string {
	return "(CASE WHEN substr(" + col + ", 1, 1) = '~' THEN lark_json_field(" + col + ", '" + field + "') WHEN json_valid(" + col +
		") THEN json_extract(" + col + ", '$." + field + "') END)"
}

// Pack implements sqlcore.Dialect: SQLite's one writer stores large documents packed.
func (dialect) Pack(doc []byte) string { return sqlcore.Pack(doc) }

// DocLen implements sqlcore.Dialect: a packed document's length is lark_doc_len's.
func (dialect) DocLen(col string) string {
	return "(CASE WHEN substr(" + col + ", 1, 1) = '~' THEN lark_doc_len(" + col + ") ELSE octet_length(" + col + ") END)"
}

// The SQL functions lark_json_field(doc, field) and lark_doc_len(doc) are sqlcore.JSONFieldOf and
// sqlcore.UnpackedLen: JSONField's and DocLen's readers of packed documents.
func init() {
	sqlite.MustRegisterDeterministicScalarFunction("lark_doc_len", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		switch v := args[0].(type) {
		case string:
			return int64(sqlcore.UnpackedLen(v)), nil
		case []byte:
			return int64(sqlcore.UnpackedLen(v)), nil
		}
		return nil, nil
	})
	sqlite.MustRegisterDeterministicScalarFunction("lark_json_field", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		field, _ := args[1].(string)
		switch v := args[0].(type) {
		case []byte:
			return sqlcore.JSONFieldOf(v, field), nil
		case string:
			return sqlcore.JSONFieldOf([]byte(v), field), nil
		}
		return nil, nil
	})
}

// ForUpdateSkipLocked implements sqlcore.Dialect: SQLite's single writer needs no row lock.
func (dialect) ForUpdateSkipLocked() string { return "" }

// Offset implements sqlcore.Dialect: SQLite's OFFSET needs a LIMIT (-1: none).
func (dialect) Offset() string { return "LIMIT -1 OFFSET ?" }

// Queue implements sqlcore.Dialect: the queue is invocations itself, read through its partial
// index (SQLite deletes an index entry with its row version: no dead entries pile up in front).
func (d dialect) Queue(index string) string { return "invocations" + d.IndexedBy(index) }

// OpaqueText implements sqlcore.Dialect: SQLite's planner evaluates a bare parameter, a cast, a
// unary plus or a COLLATE, not a concatenation; the term stays usable by an index.
func (dialect) OpaqueText(ph string) string { return "(" + ph + " || '')" }

// OpaqueInt implements sqlcore.Dialect, as OpaqueText with an addition.
func (dialect) OpaqueInt(ph string) string { return "(" + ph + " + 0)" }

// DueWork implements sqlcore.Dialect over invocations_queue_entrypoint (one writer: no locks).
func (d dialect) DueWork() string {
	return `SELECT tenant_id, id, entrypoint_ref, available_at FROM invocations INDEXED BY invocations_queue_entrypoint
		WHERE tenant_id = ` + d.OpaqueText("?1") + ` AND entrypoint_ref = ` + d.OpaqueText("?2") + ` AND available_at IS NOT NULL
		AND available_at <= ` + d.OpaqueText("?3") + ` ORDER BY available_at LIMIT ` + d.OpaqueInt("?4")
}
