package upgradetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store/migration"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// schemaName is the schema a pgtest URL selects.
func schemaName(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	s := p.Query().Get("search_path")
	require.NotEmpty(t, s)
	return s
}

// TestUpgradePostgres is TestUpgradeSQLite on PostgreSQL: each earlier version in a schema of its
// own, filled from the reference schema's rows, upgraded by the current store.
func TestUpgradePostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kr := testKeyring(t)
	up := newUpstream(t)
	refURL := pgtest.Schema(t)
	r := start(t, server.Config{Store: refURL}, kr)
	f := populate(t, r, up)
	r.stop()
	ref, err := pgstore.Open(ctx, refURL, pgstore.Options{MaxConns: 2})
	require.NoError(t, err)
	all := map[string]bool{"invocations": true, "invocation_events": true, "schedules": true, "secrets": true}
	readBack(t, ref, &f, all, true)
	require.NoError(t, ref.Close())
	refSchema := schemaName(t, refURL)

	db, err := sql.Open("pgx", refURL)
	require.NoError(t, err)
	prov, err := goose.NewProvider(goose.DialectPostgres, db, pgstore.Migrations())
	require.NoError(t, err)
	versions := earlierVersions(t, prov.ListSources())
	require.NoError(t, db.Close())

	for _, v := range versions {
		t.Run(fmt.Sprintf("from_%d", v), func(t *testing.T) {
			u := pgtest.Schema(t)
			tables := seedPostgres(t, refSchema, u, v)
			st, err := pgstore.SchemaStatus(ctx, u)
			require.NoError(t, err)
			require.Equal(t, v, st.Current)
			require.NotEmpty(t, st.Pending)
			s, err := pgstore.Open(ctx, u, pgstore.Options{MaxConns: 2})
			require.NoError(t, err, "the current store opens (and migrates) a version %d database", v)
			readBack(t, s, &f, tables, false)
			require.NoError(t, s.Close())
			sameRowsPostgres(t, refSchema, u, tables)
			serves(t, server.Config{Store: u}, kr, f, tables, up)
		})
	}
}

// seedPostgres builds the schema of u at version and copies the reference schema's rows into each
// of its tables, as many columns as the table has at that version.
func seedPostgres(t *testing.T, refSchema, u string, version int64) map[string]bool {
	t.Helper()
	ctx := context.Background()
	tables := map[string]bool{}
	if version == 0 {
		return tables
	}
	db, err := sql.Open("pgx", u)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	prov, err := goose.NewProvider(goose.DialectPostgres, db, pgstore.Migrations())
	require.NoError(t, err)
	_, err = prov.UpTo(ctx, version)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	for _, table := range pgTables(t, conn) {
		tables[table] = true
		cols := strings.Join(pgColumns(t, conn, table), ", ")
		_, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s.%s", table, cols, cols,
			pgx.Identifier{refSchema}.Sanitize(), table))
		require.NoError(t, err, "copy %s at version %d", table, version)
	}
	require.NoError(t, tx.Commit(ctx))
	return tables
}

func pgTables(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	// In creation order (the oids grow), so that parents are filled before the tables that refer to them.
	rows, err := conn.Query(context.Background(), `SELECT c.relname::text FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname <> 'goose_db_version'
		ORDER BY c.oid`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

// pgColumns are the table's stored, writable columns.
func pgColumns(t *testing.T, conn *pgx.Conn, table string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER' ORDER BY ordinal_position`, table)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, names)
	return names
}

// sameRowsPostgres is sameRowsSQLite on PostgreSQL.
func sameRowsPostgres(t *testing.T, refSchema, u string, tables map[string]bool) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(ctx)
	ref := pgx.Identifier{refSchema}.Sanitize()
	for table := range tables {
		var cols []string
		for _, c := range pgColumns(t, conn, table) {
			if !unchecked[c] {
				cols = append(cols, c)
			}
		}
		list := strings.Join(cols, ", ")
		for _, q := range []string{
			fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM %s EXCEPT SELECT %s FROM %s.%s) d", list, table, list, ref, table),
			fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM %s.%s EXCEPT SELECT %s FROM %s) d", list, ref, table, list, table),
		} {
			var n int
			require.NoError(t, conn.QueryRow(ctx, q).Scan(&n))
			require.Zero(t, n, "table %s differs from the reference after the upgrade (%s)", table, q)
		}
	}
}

// TestPostgresRefusesNewerSchema: a schema a newer binary migrated is refused at open, migrations
// on or off, naming both versions; with NoMigrate a schema behind the binary is refused until
// MigrateUp brings it up.
func TestPostgresRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.Schema(t)
	db, err := sql.Open("pgx", u)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	prov, err := goose.NewProvider(goose.DialectPostgres, db, pgstore.Migrations())
	require.NoError(t, err)
	_, err = prov.UpTo(ctx, 1)
	require.NoError(t, err)

	_, err = pgstore.Open(ctx, u, pgstore.Options{MaxConns: 2, NoMigrate: true})
	var behind *migration.BehindError
	require.True(t, errors.As(err, &behind), "got %v", err)
	require.ErrorContains(t, err, "lark migrate up")
	before, after, err := pgstore.MigrateUp(ctx, u)
	require.NoError(t, err)
	require.Equal(t, int64(1), before.Current)
	require.Equal(t, after.Latest, after.Current)
	s, err := pgstore.Open(ctx, u, pgstore.Options{MaxConns: 2, NoMigrate: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	_, err = db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, true)")
	require.NoError(t, err)
	for _, noMigrate := range []bool{false, true} {
		_, err = pgstore.Open(ctx, u, pgstore.Options{MaxConns: 2, NoMigrate: noMigrate})
		var tooNew *migration.TooNewError
		require.True(t, errors.As(err, &tooNew), "got %v", err)
		require.Equal(t, int64(999), tooNew.Current)
		require.ErrorContains(t, err, "newer than this binary's version")
	}
	st, err := pgstore.SchemaStatus(ctx, u)
	require.NoError(t, err)
	require.Equal(t, []int64{999}, st.Unknown)
}
