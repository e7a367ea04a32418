package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// LockProjections implements store.ProjectionLocker: the database file's lock, held since
// OpenSQLite, already makes this process the only one.
func (s *Store) LockProjections(context.Context) (func() error, error) {
	return func() error { return nil }, nil
}

// LockUsage implements store.ProjectionTx: SQLite has one writer, this transaction.
func (t *tx) LockUsage() error { return nil }

// ReplaceUsage implements store.ProjectionTx.
func (t *tx) ReplaceUsage(tenantID string, hour time.Time, rows []store.UsageRow) error {
	h := invocation.UsageHour(hour).Unix() / 3600
	if _, err := t.t.ExecContext(bg, "DELETE FROM usage_hourly WHERE tenant_id = ? AND hour = ?", tenantID, h); err != nil {
		return fmt.Errorf("replace usage: %w", err)
	}
	for _, r := range rows {
		if r.Usage.IsZero() {
			continue
		}
		d := sqlcore.UsageDelta{TenantID: tenantID, EntrypointID: r.EntrypointID, Hours: []sqlcore.HourUsage{{Hour: h, Usage: r.Usage}}}
		if err := t.writeUsage(&d); err != nil {
			return err
		}
	}
	return nil
}
