package upgradetest

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

// unchecked are the columns the row comparison leaves out: the retention job's bookkeeping, which a
// pass may have written in the reference after the copy, and PostgreSQL's usage shard (random per
// process in the reference, 0 for the rows that predate it; reads sum the shards).
var unchecked = map[string]bool{"history_seq": true, "history_bytes": true, "history_finished_at": true, "shard": true}

func testKeyring(t *testing.T) *keyring.Keyring {
	t.Helper()
	key, err := keyring.Generate()
	require.NoError(t, err)
	kr, err := keyring.Parse(key)
	require.NoError(t, err)
	return kr
}

// earlierVersions are 0 (a new database) and every version of migrations but the latest.
func earlierVersions(t *testing.T, migrations []*goose.Source) []int64 {
	t.Helper()
	require.NotEmpty(t, migrations)
	out := []int64{0}
	for _, m := range migrations[:len(migrations)-1] {
		out = append(out, m.Version)
	}
	return out
}

// TestUpgradeSQLite: for every earlier schema version, a database built at that version (goose up
// to it) and filled with the reference's rows as that version's tables hold them is opened by the
// current store, which migrates it; every row of every table the version had is still there, the
// store reads the invocations, their events, the schedule and the secret as the reference does,
// and a server started on it serves them and runs new work.
func TestUpgradeSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kr := testKeyring(t)
	up := newUpstream(t)
	refDir := t.TempDir()
	r := start(t, server.Config{DataDir: refDir}, kr)
	f := populate(t, r, up)
	r.stop()
	ref, err := sqlstore.OpenSQLite(ctx, filepath.Join(refDir, sqlstore.DefaultFile), sqlstore.Options{})
	require.NoError(t, err)
	all := map[string]bool{"invocations": true, "invocation_events": true, "schedules": true, "secrets": true}
	readBack(t, ref, &f, all, true)
	require.NoError(t, ref.Close())
	refPath := filepath.Join(refDir, sqlstore.DefaultFile)

	raw, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	prov, err := goose.NewProvider(goose.DialectSQLite3, raw, sqlstore.Migrations())
	require.NoError(t, err)
	versions := earlierVersions(t, prov.ListSources())
	require.NoError(t, raw.Close())

	for _, v := range versions {
		t.Run(fmt.Sprintf("from_%d", v), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, sqlstore.DefaultFile)
			tables := seedSQLite(t, refPath, path, v)
			st, err := sqlstore.SchemaStatus(ctx, path)
			require.NoError(t, err)
			require.Equal(t, v, st.Current, "the database is at version %d before the upgrade", v)
			require.NotEmpty(t, st.Pending)

			s, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
			require.NoError(t, err, "the current store opens (and migrates) a version %d database", v)
			readBack(t, s, &f, tables, false)
			require.NoError(t, s.Close())
			st, err = sqlstore.SchemaStatus(ctx, path)
			require.NoError(t, err)
			require.Equal(t, st.Latest, st.Current)
			require.Empty(t, st.Pending)
			sameRowsSQLite(t, refPath, path, tables)
			serves(t, server.Config{DataDir: dir}, kr, f, tables, up)
		})
	}
}

// seedSQLite builds the database at path at version (goose up to it) and copies into each of its
// tables the reference's rows, as many columns as the table has at that version: SQL valid at that
// version. It returns the tables the database had.
func seedSQLite(t *testing.T, ref, path string, version int64) map[string]bool {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	db.SetMaxOpenConns(1)
	tables := map[string]bool{}
	if version == 0 {
		require.NoError(t, db.PingContext(ctx))
		return tables
	}
	prov, err := goose.NewProvider(goose.DialectSQLite3, db, sqlstore.Migrations())
	require.NoError(t, err)
	_, err = prov.UpTo(ctx, version)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "ATTACH DATABASE ? AS ref", ref)
	require.NoError(t, err)
	for _, table := range tableNames(t, db) {
		tables[table] = true
		cols := strings.Join(columns(t, db, "main", table), ", ")
		_, err := db.ExecContext(ctx, fmt.Sprintf("INSERT INTO main.%s (%s) SELECT %s FROM ref.%s", table, cols, cols, table))
		require.NoError(t, err, "copy %s at version %d", table, version)
	}
	_, err = db.ExecContext(ctx, "DETACH DATABASE ref")
	require.NoError(t, err)
	return tables
}

func tableNames(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT name FROM main.sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite_%' AND name <> 'goose_db_version' ORDER BY rowid`) // creation order: parents first
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	return out
}

// columns are the table's stored columns (generated ones are left out: they cannot be written).
func columns(t *testing.T, db *sql.DB, schema, table string) []string {
	t.Helper()
	rows, err := db.Query(fmt.Sprintf("SELECT name FROM pragma_table_info('%s', '%s')", table, schema))
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out, "table %s.%s", schema, table)
	return out
}

// sameRowsSQLite: every table the database had before its upgrade holds, column for column in
// the latest schema, exactly the reference's rows (columns added later included: their
// migrations' defaults and backfills give what the current code wrote), unchecked columns aside.
func sameRowsSQLite(t *testing.T, ref, path string, tables map[string]bool) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	db.SetMaxOpenConns(1)
	_, err = db.Exec("ATTACH DATABASE ? AS ref", ref)
	require.NoError(t, err)
	for table := range tables {
		var cols []string
		for _, c := range columns(t, db, "main", table) {
			if !unchecked[c] {
				cols = append(cols, c)
			}
		}
		list := strings.Join(cols, ", ")
		for _, q := range []string{
			fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM main.%s EXCEPT SELECT %s FROM ref.%s)", list, table, list, table),
			fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM ref.%s EXCEPT SELECT %s FROM main.%s)", list, table, list, table),
		} {
			var n int
			require.NoError(t, db.QueryRow(q).Scan(&n))
			require.Zero(t, n, "table %s differs from the reference after the upgrade (%s)", table, q)
		}
	}
}
