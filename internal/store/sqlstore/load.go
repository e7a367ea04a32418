package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// loadQueueQuery is TenantLoads' count of each tenant's queue (see sqlcore.TenantLoads), through
// the partial index invocations_runnable. (The subquery's ORDER BY keeps the planner on
// invocations_runnable: grouping straight off the table, it prefers walking all of
// invocations_tenant_inflight to sorting.)
const loadQueueQuery = `SELECT tenant_id, sum(due), sum(1 - due) FROM (SELECT tenant_id, available_at <= ? AS due
		FROM invocations WHERE available_at IS NOT NULL ORDER BY available_at) GROUP BY tenant_id`

// TenantLoads implements store.Reader, in one read transaction (a consistent snapshot).
func (s *Store) TenantLoads(ctx context.Context, now time.Time) ([]store.TenantLoad, error) {
	rtx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("tenant loads: %w", err)
	}
	defer rtx.Rollback() //nolint:errcheck // read-only: nothing to keep
	return sqlcore.TenantLoads(ctx, rtx, now, loadQueueQuery, ts(now))
}
