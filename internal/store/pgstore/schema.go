package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/larkrun/lark/internal/store/migration"
)

// versionTableExists counts goose's version table as goose's unqualified queries find it (through
// the search_path): 0 in a new schema.
const versionTableExists = `SELECT count(*) FROM (SELECT to_regclass('` + migration.Table + `') AS t) v WHERE t IS NOT NULL`

// Migrations returns the PostgreSQL migrations this binary embeds, as goose reads them: tests
// build databases at earlier versions with them.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationsFS, "migrations")
	if err != nil {
		panic(err) // the embedded directory is there by construction
	}
	return sub
}

// schemaOf names the database and schema the pool's connections use ("db.schema").
func schemaOf(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var where string
	if err := pool.QueryRow(ctx, "SELECT current_database() || '.' || coalesce(current_schema(), '')").Scan(&where); err != nil {
		return "", fmt.Errorf("open store: %w", err)
	}
	if strings.HasSuffix(where, ".") {
		return "", errors.New("open store: no schema: the search_path names no schema that exists")
	}
	return where, nil
}

// newProvider is goose's provider of the migrations on db, whose runs take an advisory lock: the
// lock id is the schema's (where), so processes sharing one schema migrate in turn and other
// schemas of the database (tests, other deployments) do not wait for each other.
func newProvider(db *sql.DB, where string) (*goose.Provider, error) {
	h := fnv.New64a()
	h.Write([]byte("lark.migrate." + where))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)), lock.WithLockTimeout(1, 600))
	if err != nil {
		return nil, err
	}
	prov, err := goose.NewProvider(goose.DialectPostgres, db, Migrations(), goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return prov, nil
}

func schemaStatus(ctx context.Context, db *sql.DB, prov *goose.Provider) (migration.Status, error) {
	applied, err := migration.ReadApplied(ctx, db, versionTableExists)
	if err != nil {
		return migration.Status{}, err
	}
	var vs []int64
	var ps []string
	for _, s := range prov.ListSources() {
		vs = append(vs, s.Version)
		ps = append(ps, s.Path)
	}
	return migration.Compute(migration.FromPaths(vs, ps), applied), nil
}

// prepareSchema refuses a database newer than the binary, and one that is behind it unless
// migrate; with migrate it applies the pending migrations under the advisory lock (a process that
// migrated meanwhile leaves nothing to apply).
func prepareSchema(ctx context.Context, db *sql.DB, prov *goose.Provider, migrate bool) error {
	st, err := schemaStatus(ctx, db, prov)
	if err != nil {
		return err
	}
	if err := st.Check(migrate); err != nil {
		return err
	}
	if len(st.Pending) == 0 {
		return nil
	}
	if _, err := prov.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// migrateOn checks the schema (prepareSchema) on a pool of its own with pool's settings but no
// statement_timeout: a migration's statements on a large database may run longer than the bound
// the store's own statements have.
func migrateOn(ctx context.Context, pool *pgxpool.Pool, where string, migrate bool) (err error) {
	cfg := pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = 2, 0
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "0"
	mp, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer mp.Close()
	db := stdlib.OpenDBFromPool(mp)
	defer func() { err = errors.Join(err, db.Close()) }()
	prov, err := newProvider(db, where)
	if err != nil {
		return err
	}
	return prepareSchema(ctx, db, prov, migrate)
}

// withDB runs fn on a pool of one connection to url.
func withDB(ctx context.Context, url string, fn func(db *sql.DB, prov *goose.Provider) error) (err error) {
	pool, err := connect(ctx, url, Options{MaxConns: 2, StatementTimeout: -1}) // migrations may run long
	if err != nil {
		return err
	}
	defer pool.Close()
	where, err := schemaOf(ctx, pool)
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(pool)
	defer func() { err = errors.Join(err, db.Close()) }()
	prov, err := newProvider(db, where)
	if err != nil {
		return err
	}
	return fn(db, prov)
}

// SchemaStatus reads where the schema of the database at url stands against this binary's
// migrations, without writing anything or waiting for the migration lock.
func SchemaStatus(ctx context.Context, url string) (st migration.Status, err error) {
	err = withDB(ctx, url, func(db *sql.DB, prov *goose.Provider) error {
		st, err = schemaStatus(ctx, db, prov)
		return err
	})
	return st, err
}

// MigrateUp applies the pending migrations to the database at url and returns its status before
// and after. It runs under the same advisory lock as a server's start, so it is safe while servers
// run on the database (they go on serving the schema they know: only run it for a release whose
// notes say its migrations are compatible with the running one, or with the servers stopped). A
// database newer than the binary is refused (migration.TooNewError).
func MigrateUp(ctx context.Context, url string) (before, after migration.Status, err error) {
	err = withDB(ctx, url, func(db *sql.DB, prov *goose.Provider) error {
		if before, err = schemaStatus(ctx, db, prov); err != nil {
			return err
		}
		if err := prepareSchema(ctx, db, prov, true); err != nil {
			return err
		}
		after, err = schemaStatus(ctx, db, prov)
		return err
	})
	return before, after, err
}
