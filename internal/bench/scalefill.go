package bench

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/store/scalefill"
)

// scaleChunk is the rows each fill statement writes (one transaction each).
const scaleChunk = 50_000

// FillResult says what one fill wrote and how long it took.
type FillResult struct {
	// Rows is the invocations written (the bench tenant's and the other tenants').
	Rows int `json:"rows"`
	// FillS is the INSERTs' time; RowsPerS their rate.
	FillS    float64 `json:"fill_s"`
	RowsPerS float64 `json:"rows_per_s"`
	// AnalyzeS is PostgreSQL's ANALYZE afterwards (SQLite's statistics are the server's own
	// PRAGMA optimize when it opens the store: see ScaleStage.OpenS).
	AnalyzeS float64 `json:"analyze_s,omitempty"`
	// Bytes is the database's size afterwards (SQLite's file; PostgreSQL's tables and indexes).
	Bytes int64 `json:"bytes"`
}

// scaleFill writes rows from <= i < to of a scalefill series of total rows, in chunks.
type scaleFill struct {
	total    int
	end      time.Time
	progress func(done, total int)
}

func (f scaleFill) run(exec func(stmt string, from, to int) error, stmt string, from, to int) (FillResult, error) {
	res := FillResult{Rows: to - from}
	start := time.Now()
	for i := from; i < to; i += scaleChunk {
		j := min(i+scaleChunk, to)
		if err := exec(stmt, i, j); err != nil {
			return res, fmt.Errorf("fill rows %d-%d: %w", i, j, err)
		}
		f.progress(j, f.total)
	}
	if err := exec(scalefill.TenantHistory, -1, -1); err != nil {
		return res, fmt.Errorf("fill tenant_history: %w", err)
	}
	res.FillS = time.Since(start).Seconds()
	res.RowsPerS = float64(res.Rows) / res.FillS
	return res, nil
}

// sqlite fills the SQLite database at path (no server running on it).
func (f scaleFill) sqlite(ctx context.Context, path string, from, to int) (FillResult, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return FillResult{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	res, err := f.run(func(stmt string, i, j int) error {
		var err error
		if i < 0 {
			_, err = db.ExecContext(ctx, stmt)
		} else {
			_, err = db.ExecContext(ctx, stmt, i, j)
		}
		return err
	}, scalefill.SQLite.Insert(BenchTenant, f.total, f.end), from, to)
	if err != nil {
		return res, err
	}
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return res, err
	}
	err = db.QueryRowContext(ctx, "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").Scan(&res.Bytes)
	return res, err
}

// postgres fills the scenario's database or schema, then runs ANALYZE, as autovacuum would
// within a minute of such a load.
func (f scaleFill) postgres(ctx context.Context, s *pgSchema, from, to int) (FillResult, error) {
	conn, err := s.statsConn(ctx)
	if err != nil {
		return FillResult{}, err
	}
	defer conn.Close(context.Background())
	res, err := f.run(func(stmt string, i, j int) error {
		var err error
		if i < 0 {
			_, err = conn.Exec(ctx, stmt)
		} else {
			_, err = conn.Exec(ctx, stmt, i, j)
		}
		return err
	}, scalefill.Postgres.Insert(BenchTenant, f.total, f.end), from, to)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		return res, err
	}
	res.AnalyzeS = time.Since(start).Seconds()
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, s.schema).Scan(&res.Bytes)
	return res, err
}
