package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pressly/goose/v3"

	"github.com/larkrun/lark/internal/store/migration"
)

// DefaultFile is the name of the database file in a data directory (lark serve --data).
const DefaultFile = "lark.db"

// versionTableExists counts goose's version table (0 in a new database).
const versionTableExists = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '` + migration.Table + `'`

// Migrations returns the SQLite migrations this binary embeds, as goose reads them (one
// NNNNN_name.sql file each): tests build databases at earlier versions with them.
func Migrations() fs.FS {
	sub, err := fs.Sub(sqliteMigrations, "migrations/sqlite")
	if err != nil {
		panic(err) // the embedded directory is there by construction
	}
	return sub
}

func newProvider(db *sql.DB) (*goose.Provider, error) {
	prov, err := goose.NewProvider(goose.DialectSQLite3, db, Migrations())
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return prov, nil
}

// known lists the migrations prov knows.
func known(prov *goose.Provider) []migration.Migration {
	var vs []int64
	var ps []string
	for _, s := range prov.ListSources() {
		vs = append(vs, s.Version)
		ps = append(ps, s.Path)
	}
	return migration.FromPaths(vs, ps)
}

func schemaStatus(ctx context.Context, db *sql.DB, prov *goose.Provider) (migration.Status, error) {
	applied, err := migration.ReadApplied(ctx, db, versionTableExists)
	if err != nil {
		return migration.Status{}, err
	}
	return migration.Compute(known(prov), applied), nil
}

// prepareSchema refuses a database newer than the binary, and one that is behind it unless
// migrate; with migrate it applies the pending migrations.
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

// openExisting opens the existing database file at path on one connection, read-only unless
// write: it never creates a database.
func openExisting(ctx context.Context, path string, write bool) (*sql.DB, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no database at %s (a server creates it at its first start)", path)
	}
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a database file", path)
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	if !write {
		dsn += "&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), db.Close())
	}
	return db, nil
}

// SchemaStatus reads where the schema of the database file at path stands against this binary's
// migrations, without writing anything: a server may be serving the database meanwhile.
func SchemaStatus(ctx context.Context, path string) (migration.Status, error) {
	db, err := openExisting(ctx, path, false)
	if err != nil {
		return migration.Status{}, err
	}
	st, err := statusOf(ctx, db)
	return st, errors.Join(err, db.Close())
}

func statusOf(ctx context.Context, db *sql.DB) (migration.Status, error) {
	prov, err := newProvider(db)
	if err != nil {
		return migration.Status{}, err
	}
	return schemaStatus(ctx, db, prov)
}

// MigrateUp applies the pending migrations to the database file at path and returns its status
// before and after. It takes the database's lock, so it fails while a server has the database
// open; a database newer than the binary is refused (migration.TooNewError).
func MigrateUp(ctx context.Context, path string) (before, after migration.Status, err error) {
	if _, err := os.Stat(path); err != nil {
		return before, after, fmt.Errorf("no database at %s: %w", path, err)
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return before, after, err
	}
	defer func() { err = errors.Join(err, lock.Close()) }()
	db, err := openExisting(ctx, path, true)
	if err != nil {
		return before, after, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	prov, err := newProvider(db)
	if err != nil {
		return before, after, err
	}
	if before, err = schemaStatus(ctx, db, prov); err != nil {
		return before, after, err
	}
	if err := prepareSchema(ctx, db, prov, true); err != nil {
		return before, after, err
	}
	after, err = schemaStatus(ctx, db, prov)
	return before, after, err
}

// Snapshot writes a consistent copy of the database file at path to dst, a path that must not
// exist yet, while a server may be serving the database: VACUUM INTO on a connection of its own
// copies one read transaction's view, every transaction committed before it began and none after,
// and blocks neither the server's writer nor its readers (WAL). The copy is compact and holds no
// WAL: a single file. It is made with mode FileMode.
func Snapshot(ctx context.Context, path, dst string) (err error) {
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("snapshot: %s already exists", dst)
	}
	// Not query_only: SQLite counts VACUUM INTO as a write, though it only reads this database.
	db, err := openExisting(ctx, path, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return fmt.Errorf("snapshot of %s: %w", path, err)
	}
	return os.Chmod(dst, FileMode)
}

// Verify checks the database file at path (a backup's, before it is put in place of a data
// directory's): SQLite's integrity check must find nothing. It returns where its schema stands
// against this binary's migrations (Status.Check says whether the binary may serve it).
func Verify(ctx context.Context, path string) (st migration.Status, err error) {
	db, err := openExisting(ctx, path, false)
	if err != nil {
		return st, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check(20)")
	if err != nil {
		return st, fmt.Errorf("integrity check of %s: %w", path, err)
	}
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return st, errors.Join(fmt.Errorf("integrity check of %s: %w", path, err), rows.Close())
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return st, fmt.Errorf("integrity check of %s: %w", path, err)
	}
	if len(problems) > 0 {
		return st, fmt.Errorf("integrity check of %s failed: %q", path, problems)
	}
	return statusOf(ctx, db)
}

// Lock takes the lock a server holds on the database file at path while it has it open (the file
// path + ".lock"): it fails while a server runs on it. Close the returned file to release it.
func Lock(path string) (*os.File, error) { return lockFile(path + ".lock") }
