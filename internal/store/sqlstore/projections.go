package sqlstore

import (
	"context"
)

// LockProjections implements store.ProjectionLocker: the database file's lock, held since
// OpenSQLite, already makes this process the only one.
func (s *Store) LockProjections(context.Context) (func() error, error) {
	return func() error { return nil }, nil
}

// LockUsage implements store.ProjectionTx: SQLite has one writer, this transaction.
func (t *tx) LockUsage() error { return nil }
