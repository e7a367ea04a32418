package sqlstore

import (
	"context"
	"database/sql"

	"github.com/larkrun/lark/internal/store/sqlcore"
)

// The backfills' reads and writes are in sqlcore; the scan of the active ones differs.

// ActiveBackfills implements store.Reader.
func (s *Store) ActiveBackfills(ctx context.Context, limit int) ([][2]string, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT tenant_id, id FROM backfills INDEXED BY backfills_active WHERE state IN ('running', 'paused') LIMIT ?", limit)
	return sqlcore.ScanAll(rows, err, func(r *sql.Rows) ([2]string, error) {
		var k [2]string
		err := r.Scan(&k[0], &k[1])
		return k, err
	})
}
