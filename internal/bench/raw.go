package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, as Lark's store uses it
)

// RawResult is the async scenario's baseline: the same rows' lifecycle written straight into the
// same SQLite database by one writer.
type RawResult struct {
	Rows int `json:"rows"`
	// Synchronous is the setting the rows were written with (the server's --sqlite-synchronous).
	Synchronous string  `json:"synchronous"`
	BatchRows   int     `json:"batch_rows"`
	RecordLen   int     `json:"record_bytes"`
	TotalS      float64 `json:"total_s"`
	// Lifecycles per second: one row's insert (queued) + update (running) + update (succeeded).
	LifecycleRate float64 `json:"lifecycles_per_s"`
	InsertRate    float64 `json:"insert_rows_per_s"`
	RunningRate   float64 `json:"update_running_rows_per_s"`
	SucceededRate float64 `json:"update_succeeded_rows_per_s"`
	CPUS          float64 `json:"cpu_s"` // of this process while it ran
}

// rawTable is the scratch table; it is dropped afterwards.
const rawTable = "lark_bench_raw_lifecycle"

// sampleRecord is a real invocation record from the database: one that succeeded, else any.
func sampleRecord(ctx context.Context, db *sql.DB) (string, error) {
	var rec string
	err := db.QueryRowContext(ctx, `SELECT record FROM invocations WHERE status = 'succeeded' ORDER BY rowid DESC LIMIT 1`).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		err = db.QueryRowContext(ctx, `SELECT record FROM invocations ORDER BY rowid DESC LIMIT 1`).Scan(&rec)
	}
	if err != nil {
		return "", fmt.Errorf("a sample invocation record: %w", err)
	}
	return rec, nil
}

// OpenSQLite opens path as Lark's writer does: WAL, the given synchronous setting (FULL or NORMAL,
// as lark serve's --sqlite-synchronous), busy timeout, immediate transactions, one connection.
func OpenSQLite(ctx context.Context, path, synchronous string) (*sql.DB, error) {
	synchronous = strings.ToUpper(synchronous)
	if synchronous != "FULL" && synchronous != "NORMAL" {
		return nil, fmt.Errorf("synchronous must be FULL or NORMAL, got %q", synchronous)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)"+
		"&_pragma=synchronous("+synchronous+")&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// RawLifecycles writes n invocation-shaped rows (id, tenant_id, status, record like a real one of
// the invocations table, created_at, updated_at; indexed like it on (tenant_id, status)) into a
// scratch table of the SQLite database at path (opened with synchronous as Lark's writer), then moves each to running and then to succeeded,
// batch rows per transaction, and drops the table. Lark writes the same three states per
// invocation (plus its events, lease and queue columns), so the rate is a ceiling for it.
func RawLifecycles(ctx context.Context, path, synchronous string, n, batch int) (RawResult, error) {
	res := RawResult{Rows: n, BatchRows: batch, Synchronous: strings.ToUpper(synchronous)}
	if n <= 0 || batch <= 0 {
		return res, fmt.Errorf("raw baseline: n and batch must be positive")
	}
	db, err := OpenSQLite(ctx, path, synchronous)
	if err != nil {
		return res, fmt.Errorf("raw baseline: open %s: %w", path, err)
	}
	defer db.Close()
	record, err := sampleRecord(ctx, db)
	if err != nil {
		return res, fmt.Errorf("raw baseline: %w", err)
	}
	res.RecordLen = len(record)
	records := map[string]string{}
	for _, st := range []string{"queued", "running", "succeeded"} {
		records[st] = withStatus(record, st)
	}

	if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS `+rawTable); err != nil {
		return res, err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+rawTable+` (
  id         TEXT PRIMARY KEY,
  tenant_id  TEXT NOT NULL,
  status     TEXT NOT NULL,
  record     TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
) STRICT`); err != nil {
		return res, err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+rawTable) //nolint:errcheck // best-effort cleanup of the scratch table
	if _, err := db.ExecContext(ctx, `CREATE INDEX `+rawTable+`_tenant_status ON `+rawTable+` (tenant_id, status)`); err != nil {
		return res, err
	}

	id := func(i int) string { return fmt.Sprintf("inv_%032x", i) }
	now := func() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }
	// pass runs stmt over every row, batch rows per transaction.
	pass := func(query string, args func(i int) []any) (float64, error) {
		t0 := time.Now()
		for lo := 0; lo < n; lo += batch {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return 0, err
			}
			stmt, err := tx.PrepareContext(ctx, query)
			if err != nil {
				tx.Rollback()
				return 0, err
			}
			for i := lo; i < min(lo+batch, n); i++ {
				r, err := stmt.ExecContext(ctx, args(i)...)
				if err == nil {
					var k int64
					if k, err = r.RowsAffected(); err == nil && k != 1 {
						err = fmt.Errorf("row %d: %d rows affected", i, k)
					}
				}
				if err != nil {
					stmt.Close()
					tx.Rollback()
					return 0, err
				}
			}
			stmt.Close()
			if err := tx.Commit(); err != nil {
				return 0, err
			}
		}
		return time.Since(t0).Seconds(), nil
	}

	cpu0 := selfCPU()
	start := time.Now()
	insS, err := pass(`INSERT INTO `+rawTable+` (id, tenant_id, status, record, created_at, updated_at) VALUES (?, ?, 'queued', ?, ?, ?)`,
		func(i int) []any { t := now(); return []any{id(i), BenchTenant, records["queued"], t, t} })
	if err != nil {
		return res, fmt.Errorf("raw baseline: insert: %w", err)
	}
	runS, err := pass(`UPDATE `+rawTable+` SET status = 'running', record = ?, updated_at = ? WHERE id = ?`,
		func(i int) []any { return []any{records["running"], now(), id(i)} })
	if err != nil {
		return res, fmt.Errorf("raw baseline: update running: %w", err)
	}
	sucS, err := pass(`UPDATE `+rawTable+` SET status = 'succeeded', record = ?, updated_at = ? WHERE id = ?`,
		func(i int) []any { return []any{records["succeeded"], now(), id(i)} })
	if err != nil {
		return res, fmt.Errorf("raw baseline: update succeeded: %w", err)
	}
	res.TotalS = time.Since(start).Seconds()
	res.CPUS = selfCPU() - cpu0
	res.LifecycleRate = float64(n) / res.TotalS
	res.InsertRate, res.RunningRate, res.SucceededRate = float64(n)/insS, float64(n)/runS, float64(n)/sucS
	if _, err := db.ExecContext(ctx, `DROP TABLE `+rawTable); err != nil {
		return res, fmt.Errorf("raw baseline: drop the scratch table: %w", err)
	}
	return res, nil
}

// withStatus sets a record's "status":"…" member (the record stays the same size, give or take
// the status's length).
func withStatus(record, status string) string {
	const key = `"status":"`
	i := strings.Index(record, key)
	if i < 0 {
		return record
	}
	j := strings.IndexByte(record[i+len(key):], '"')
	if j < 0 {
		return record
	}
	return record[:i+len(key)] + status + record[i+len(key)+j:]
}
