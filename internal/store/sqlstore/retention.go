package sqlstore

import "github.com/larkrun/lark/internal/store/sqlcore"

// The retention job's reads and deletes are in sqlcore; the reopening differs (SQLite walks rowids
// through its index).

// ReopenHistory implements store.Tx.
func (t *tx) ReopenHistory(tenantID string, limit int) (int64, error) {
	res, err := t.t.ExecContext(bg, `UPDATE invocations SET history_seq = NULL WHERE rowid IN
		(SELECT rowid FROM invocations INDEXED BY invocations_reopened WHERE tenant_id = ? AND `+sqlcore.Reopened+` LIMIT ?)`, tenantID, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
