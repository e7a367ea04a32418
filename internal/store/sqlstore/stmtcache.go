package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps prepared statements by query text, so that the hot queries are parsed by SQLite
// once per connection instead of on every call (preparing was an eighth of the CPU of a GET and a
// third of the writer's). For the writer, statements are never prepared inside a transaction (its
// single connection is held by the group committer's transaction, so preparing would wait on
// itself): a miss runs unprepared and is prepared after the batch (see cachedTx).
// Query texts are a small, fixed set (filters differ in structure, not in values, which are bound
// parameters); past maxStmts distinct texts, queries run unprepared.
type stmtCache struct {
	db     *sql.DB
	mu     sync.RWMutex
	stmts  map[string]*sql.Stmt
	wanted map[string]bool
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

// peek returns a cached statement without ever preparing one.
func (c *stmtCache) peek(query string) *sql.Stmt {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.stmts[query]
}

// want notes a query to prepare later (see prepareWanted).
func (c *stmtCache) want(query string) {
	c.mu.Lock()
	if c.wanted == nil {
		c.wanted = map[string]bool{}
	}
	if len(c.stmts)+len(c.wanted) < maxStmts {
		c.wanted[query] = true
	}
	c.mu.Unlock()
}

// prepareWanted prepares the noted queries. For the writer it runs between group-commit batches,
// when the single writer connection is free, so preparing cannot wait on a transaction.
func (c *stmtCache) prepareWanted() {
	c.mu.Lock()
	wanted := c.wanted
	c.wanted = nil
	c.mu.Unlock()
	for q := range wanted {
		c.get(context.Background(), q)
	}
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

// cachedTx is a querier over a write transaction. A statement prepared on the writer pool is already
// prepared on the transaction's connection (there is only one), so Tx.StmtContext reuses it without
// parsing; a query not yet prepared runs as is and is queued for preparation after the batch.
type cachedTx struct {
	tx *sql.Tx
	c  *stmtCache
}

func (q cachedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.c.peek(query); st != nil {
		return q.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	q.c.want(query)
	return q.tx.ExecContext(ctx, query, args...)
}

func (q cachedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.c.peek(query); st != nil {
		return q.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	q.c.want(query)
	return q.tx.QueryContext(ctx, query, args...)
}

func (q cachedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.c.peek(query); st != nil {
		return q.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	q.c.want(query)
	return q.tx.QueryRowContext(ctx, query, args...)
}
