package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps prepared statements of the read pool by query text, so that the hot queries are
// parsed by SQLite once per connection instead of on every call (preparing was an eighth of the CPU
// of a GET). It is not used for the writer: its single connection is held by the group committer's
// transaction, so preparing there would wait on itself.
// Query texts are a small, fixed set (filters differ in structure, not in values, which are bound
// parameters); past maxStmts distinct texts, queries run unprepared.
type stmtCache struct {
	db    *sql.DB
	mu    sync.RWMutex
	stmts map[string]*sql.Stmt
}

const maxStmts = 512

func newStmtCache(db *sql.DB) *stmtCache { return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}} }

func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.RLock()
	st := c.stmts[query]
	c.mu.RUnlock()
	if st != nil {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st = c.stmts[query]; st != nil || len(c.stmts) >= maxStmts {
		return st
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil // the unprepared call will report the error
	}
	c.stmts[query] = st
	return st
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts = map[string]*sql.Stmt{}
}

// cachedDB is a querier over the read pool that uses cached statements.
type cachedDB struct{ c *stmtCache }

func (q cachedDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.c.get(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.c.db.ExecContext(ctx, query, args...)
}

func (q cachedDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.c.get(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.c.db.QueryContext(ctx, query, args...)
}

func (q cachedDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.c.get(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.c.db.QueryRowContext(ctx, query, args...)
}
