package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SQLite's planner statistics (sqlite_stat1) are kept by PRAGMA optimize: when the store opens
// and then every optimizeEvery, from the checkpointer's connection. optimize analyzes a table only
// when it has none or its size changed enough since (25 times more rows, or 25 times fewer) that
// its statistics are stale; otherwise it returns at once (well under a millisecond). analysisLimit
// bounds the rows each index's analysis reads, so that the first analysis of a table of a million
// invocations takes about a second (measured: 1.1 s at 1.1 million rows, docs/operations.md)
// instead of a read of every index. The writer waits for an analysis in progress (its busy
// timeout), as it does for a checkpoint.
//
// The list queries do not depend on the statistics: each documented filter has an index that
// matches it exactly (migration 00016), which SQLite's planner picks with or without them (the
// plan test checks both). The statistics keep the planner's other choices grounded as the tables
// grow: without any, SQLite guesses every index equally selective.
const (
	optimizeEvery = time.Hour
	analysisLimit = 1000
)

// optimize runs PRAGMA optimize over every table (0x10002: also the tables this connection never
// queried, which is all of them on the checkpointer's connection) on one connection of db.
func optimize(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("optimize: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA analysis_limit = %d", analysisLimit)); err != nil {
		return fmt.Errorf("optimize: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA optimize = 0x10002"); err != nil {
		return fmt.Errorf("optimize: %w", err)
	}
	return nil
}
