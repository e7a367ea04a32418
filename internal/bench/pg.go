package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// isPostgres reports whether the store flag names a PostgreSQL database.
func isPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// pgSchema is one scenario's own place in the --store server: a database of its own when the role
// may create one (then PostgreSQL's commit counter, kept per database, counts this scenario's
// server alone), else a schema in the --store database (then the commit counter is the whole
// database's). It is created before the scenario's server starts and dropped, with everything in
// it, when the scenario ends, so no scenario sees another's rows.
type pgSchema struct {
	base   string // the --store URL
	name   string // of the database or schema, and the server's application_name
	url    string // what the scenario's server is given
	db     bool   // a database of its own (else a schema)
	schema string // where its tables are: "public" in its own database, else name
}

// newPGSchema creates a database (or, when that is refused, a schema) named after the scenario with
// a random suffix.
func newPGSchema(ctx context.Context, base, scenario string) (*pgSchema, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	name := "lark_bench_" + scenario + "_" + hex.EncodeToString(b[:])
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	s := &pgSchema{base: base, name: name}
	q := u.Query()
	q.Set("application_name", name) // so that settle can see when the server's connections are gone
	if dbErr := s.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); dbErr == nil {
		s.db, s.schema = true, "public"
		u.Path = "/" + name
		q.Del("search_path")
	} else {
		if err := s.exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
			return nil, fmt.Errorf("PostgreSQL: create database %s: %w; create schema: %w", name, dbErr, err)
		}
		s.schema = name
		q.Set("search_path", name)
	}
	u.RawQuery = q.Encode()
	s.url = u.String()
	return s, nil
}

func (s *pgSchema) exec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.base)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// drop removes the database (closing any connection left) or the schema, and everything in it.
func (s *pgSchema) drop() error {
	if s.db {
		return s.exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{s.name}.Sanitize()+" WITH (FORCE)")
	}
	return s.exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.name}.Sanitize()+" CASCADE")
}

// statsConn connects where the scenario's tables are, under another application_name than its
// server's.
func (s *pgSchema) statsConn(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(s.url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "lark_bench_stats"
	return pgx.ConnectConfig(ctx, cfg)
}

// settle waits until no connection of the scenario's server is left (they flush their statistics
// when they exit) and the scenario's counters stopped moving, at most 10 s.
func (s *pgSchema) settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := s.statsConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var prev pgCounters
	for i := 0; ; i++ {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, s.name).Scan(&left); err != nil {
			return err
		}
		c, err := s.counters(ctx, conn)
		if err != nil {
			return err
		}
		c.Commits = 0 // this loop's own queries commit
		if left == 0 && i > 0 && c == prev {
			return nil
		}
		prev = c
		select {
		case <-ctx.Done():
			return fmt.Errorf("the server's connections or statistics did not settle: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// read reads the counters (after settle, for a finished server).
func (s *pgSchema) read(ctx context.Context) (pgCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := s.statsConn(ctx)
	if err != nil {
		return pgCounters{}, err
	}
	defer conn.Close(context.Background())
	return s.counters(ctx, conn)
}

func (s *pgSchema) counters(ctx context.Context, conn *pgx.Conn) (pgCounters, error) {
	var c pgCounters
	if err := conn.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.Commits); err != nil {
		return c, err
	}
	err := conn.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins),0)::bigint, coalesce(sum(n_tup_upd),0)::bigint, coalesce(sum(n_tup_del),0)::bigint
		FROM pg_stat_user_tables WHERE schemaname = $1`, s.schema).Scan(&c.Inserted, &c.Updated, &c.Deleted)
	return c, err
}

// pgCounters are PostgreSQL's own write counters: commits of the whole database (every
// transaction, read-only ones included, and any other client's) and rows written in the schema's
// tables.
type pgCounters struct {
	Commits, Inserted, Updated, Deleted int64
}

// StoreWrites is what PostgreSQL counted while a scenario ran: commits (pg_stat_database's
// xact_commit: read-only transactions count; of the scenario's own database, or of the whole --store
// database when the scenario has a schema there, so another client's count too) and rows inserted,
// updated and deleted in the scenario's tables (pg_stat_user_tables, exact), also per unit of
// work (an invocation for async, a step for workflow10). Provisioning and registration are
// included; they are a few dozen rows.
type StoreWrites struct {
	Per           string  `json:"per"`
	Units         int     `json:"units"`
	Commits       int64   `json:"commits"`
	RowsInserted  int64   `json:"rows_inserted"`
	RowsUpdated   int64   `json:"rows_updated"`
	RowsDeleted   int64   `json:"rows_deleted"`
	CommitsPer    float64 `json:"commits_per_unit"`
	RowsPer       float64 `json:"rows_written_per_unit"`
	CommitsSource string  `json:"commits_source"`
}

func storeWrites(before, after pgCounters, per string, units int, ownDB bool) *StoreWrites {
	w := &StoreWrites{Per: per, Units: units, Commits: after.Commits - before.Commits,
		RowsInserted: after.Inserted - before.Inserted, RowsUpdated: after.Updated - before.Updated,
		RowsDeleted:   after.Deleted - before.Deleted,
		CommitsSource: "pg_stat_database.xact_commit of the whole --store database, other clients included (read-only transactions included)"}
	if ownDB {
		w.CommitsSource = "pg_stat_database.xact_commit of the scenario's own database (read-only transactions included)"
	}
	if units > 0 {
		w.CommitsPer = float64(w.Commits) / float64(units)
		w.RowsPer = float64(w.RowsInserted+w.RowsUpdated+w.RowsDeleted) / float64(units)
	}
	return w
}

// PGRawResult is the async scenario's baseline on PostgreSQL: the floor of a PostgreSQL queue on
// this machine. Rows invocation-shaped rows are inserted as queued, BatchRows per statement; then
// Workers workers each loop: SELECT … FOR UPDATE SKIP LOCKED LIMIT ClaimRows and mark them running
// (one transaction), then mark them succeeded (another), until none is left.
type PGRawResult struct {
	Rows      int     `json:"rows"`
	BatchRows int     `json:"batch_rows"`
	Workers   int     `json:"workers"`
	ClaimRows int     `json:"claim_rows"`
	RecordLen int     `json:"record_bytes"`
	InsertS   float64 `json:"insert_s"`
	ProcessS  float64 `json:"claim_complete_s"`
	TotalS    float64 `json:"total_s"`
	// LifecycleRate is Rows ÷ TotalS: one insert, one claim to running, one update to succeeded.
	LifecycleRate float64 `json:"lifecycles_per_s"`
	Commits       int64   `json:"commits"`
	CPUS          float64 `json:"cpu_s"` // of this process while it ran
}

// pgRawTable is the baseline's scratch table, in the scenario's schema (dropped with it).
const pgRawTable = "lark_bench_raw_lifecycle"

// RawPGLifecycles runs the PostgreSQL raw baseline in the schema dbURL selects (search_path),
// taking a real invocation record from that schema's invocations table as every row's payload.
// mark, when not nil, is called with "measure" before the first insert and "end" after the last
// completion, while the pool's connections are still open (to read their backends' CPU).
func RawPGLifecycles(ctx context.Context, dbURL string, n, batch, workers, claim int, mark func(phase string)) (PGRawResult, error) {
	if mark == nil {
		mark = func(string) {}
	}
	res := PGRawResult{Rows: n, BatchRows: batch, Workers: workers, ClaimRows: claim}
	if n <= 0 || batch <= 0 || workers <= 0 || claim <= 0 {
		return res, fmt.Errorf("raw baseline: sizes must be positive")
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return res, err
	}
	cfg.MaxConns = int32(workers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	var record string
	err = pool.QueryRow(ctx, `SELECT record FROM invocations ORDER BY (status = 'succeeded') DESC LIMIT 1`).Scan(&record)
	if err != nil {
		return res, fmt.Errorf("raw baseline: a sample record: %w", err)
	}
	res.RecordLen = len(record)
	queued, running, succeeded := withStatus(record, "queued"), withStatus(record, "running"), withStatus(record, "succeeded")
	for _, q := range []string{
		`DROP TABLE IF EXISTS ` + pgRawTable,
		`CREATE TABLE ` + pgRawTable + ` (
  id         TEXT PRIMARY KEY,
  tenant_id  TEXT NOT NULL,
  status     TEXT NOT NULL,
  record     TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL)`,
		`CREATE INDEX ` + pgRawTable + `_tenant_status ON ` + pgRawTable + ` (tenant_id, status)`,
		`CREATE INDEX ` + pgRawTable + `_queue ON ` + pgRawTable + ` (status, created_at)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return res, fmt.Errorf("raw baseline: %w", err)
		}
	}
	now := func() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }
	mark("measure")
	cpu0 := selfCPU()
	t0 := time.Now()
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		ids := make([]string, 0, hi-lo)
		for i := lo; i < hi; i++ {
			ids = append(ids, fmt.Sprintf("inv_%032x", i))
		}
		ts := now()
		if _, err := pool.Exec(ctx, `INSERT INTO `+pgRawTable+` (id, tenant_id, status, record, created_at, updated_at)
			SELECT id, 'bench', 'queued', $2, $3, $3 FROM unnest($1::text[]) AS id`, ids, queued, ts); err != nil {
			return res, fmt.Errorf("raw baseline: insert: %w", err)
		}
	}
	t1 := time.Now()
	var done atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ids, err := pgRawClaim(ctx, pool, running, now(), claim)
				if err != nil {
					errc <- err
					return
				}
				if len(ids) == 0 {
					return
				}
				if _, err := pool.Exec(ctx, `UPDATE `+pgRawTable+` SET status = 'succeeded', record = $2, updated_at = $3 WHERE id = ANY($1)`,
					ids, succeeded, now()); err != nil {
					errc <- err
					return
				}
				done.Add(int64(len(ids)))
			}
		}()
	}
	wg.Wait()
	mark("end") // before the pool closes: its backends' CPU is read while they live
	close(errc)
	if err := <-errc; err != nil {
		return res, fmt.Errorf("raw baseline: claim and complete: %w", err)
	}
	t2 := time.Now()
	if got := done.Load(); got != int64(n) {
		return res, fmt.Errorf("raw baseline: %d of %d rows completed", got, n)
	}
	res.CPUS = selfCPU() - cpu0
	res.InsertS, res.ProcessS, res.TotalS = t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), t2.Sub(t0).Seconds()
	res.LifecycleRate = float64(n) / res.TotalS
	res.Commits = int64((n+batch-1)/batch) + 2*int64((n+claim-1)/claim)
	return res, nil
}

// pgRawClaim takes up to k queued rows, oldest first, skipping rows another worker holds, and marks
// them running, in one transaction.
func pgRawClaim(ctx context.Context, pool *pgxpool.Pool, record, ts string, k int) ([]string, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(ctx, `SELECT id FROM `+pgRawTable+` WHERE status = 'queued' ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED`, k)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE `+pgRawTable+` SET status = 'running', record = $2, updated_at = $3 WHERE id = ANY($1)`, ids, record, ts); err != nil {
		return nil, err
	}
	return ids, tx.Commit(ctx)
}
