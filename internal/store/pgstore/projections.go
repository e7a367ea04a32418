package pgstore

import (
	"context"
	"fmt"

	"github.com/larkrun/lark/internal/store"
)

// LockProjections implements store.ProjectionLocker with a session advisory lock on a connection
// taken from the pool for as long as the lock is held.
func (s *Store) LockProjections(ctx context.Context) (func() error, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("projection lock: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))", store.ProjectionLockKey).Scan(&ok); err != nil {
		conn.Release()
		return nil, fmt.Errorf("projection lock: %w", err)
	}
	if !ok {
		conn.Release()
		return nil, fmt.Errorf("projection lock: another projection rebuild holds it: %w", store.ErrConflict)
	}
	return func() error {
		defer conn.Release()
		var released bool
		if err := conn.QueryRow(context.Background(), "SELECT pg_advisory_unlock($1, hashtext(current_schema()))", store.ProjectionLockKey).Scan(&released); err != nil {
			return fmt.Errorf("projection unlock: %w", err)
		}
		return nil
	}, nil
}

// LockUsage implements store.ProjectionTx. SHARE ROW EXCLUSIVE conflicts with the ROW EXCLUSIVE
// lock an upsert takes: a transaction that already added to the aggregates commits first (and its
// events are then visible to this one), one that has not yet waits and adds its share after the
// replacement.
func (t *tx) LockUsage() error {
	_, err := t.t.ExecContext(bg, "LOCK TABLE usage_hourly IN SHARE ROW EXCLUSIVE MODE")
	return err
}
