package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// loadQueueQuery is TenantLoads' count of each tenant's queue (see sqlcore.TenantLoads), in the
// table of the queued invocations (migration 00005).
const loadQueueQuery = `SELECT tenant_id, count(*) FILTER (WHERE available_at <= ?), count(*) FILTER (WHERE available_at > ?)
		FROM invocation_queue GROUP BY tenant_id`

// TenantLoads implements store.Reader, in one read transaction (a consistent snapshot).
func (s *Store) TenantLoads(ctx context.Context, now time.Time) ([]store.TenantLoad, error) {
	rtx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("tenant loads: %w", err)
	}
	defer rtx.Rollback() //nolint:errcheck // read-only: nothing to keep
	n := ts(now)
	return sqlcore.TenantLoads(ctx, rebound{rtx}, now, loadQueueQuery, n, n)
}
