package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/migration"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

// atVersion builds a database file at version of the embedded migrations and returns its path.
func atVersion(t *testing.T, version int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), sqlstore.DefaultFile)
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	prov, err := goose.NewProvider(goose.DialectSQLite3, db, sqlstore.Migrations())
	require.NoError(t, err)
	_, err = prov.UpTo(context.Background(), version)
	require.NoError(t, err)
	return path
}

// TestRefusesNewerSchema: a database a newer binary migrated (a version this one does not know)
// is refused at open, with or without migrations, naming both versions; status reports it.
func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), sqlstore.DefaultFile)
	s, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	before, err := sqlstore.SchemaStatus(ctx, path)
	require.NoError(t, err)
	require.Empty(t, before.Pending)
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, 1)")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	for _, noMigrate := range []bool{false, true} {
		_, err = sqlstore.OpenSQLite(ctx, path, sqlstore.Options{NoMigrate: noMigrate})
		var tooNew *migration.TooNewError
		require.True(t, errors.As(err, &tooNew), "got %v", err)
		require.Equal(t, int64(999), tooNew.Current)
		require.Equal(t, before.Latest, tooNew.Latest)
		require.ErrorContains(t, err, "version 999")
		require.ErrorContains(t, err, "newer than this binary's version")
	}
	st, err := sqlstore.SchemaStatus(ctx, path)
	require.NoError(t, err)
	require.Equal(t, []int64{999}, st.Unknown)
	_, _, err = sqlstore.MigrateUp(ctx, path)
	require.ErrorContains(t, err, "newer than this binary's version", "migrate up refuses it too")
}

// TestNoMigrate: with NoMigrate a database behind the binary is refused, telling the operator to
// run `lark migrate up`; MigrateUp brings it to the latest version (refused while a store has it
// open), after which NoMigrate opens it.
func TestNoMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := atVersion(t, 7)
	_, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{NoMigrate: true})
	var behind *migration.BehindError
	require.True(t, errors.As(err, &behind), "got %v", err)
	require.Equal(t, int64(7), behind.Current)
	require.ErrorContains(t, err, "lark migrate up")
	st, err := sqlstore.SchemaStatus(ctx, path)
	require.NoError(t, err)
	require.Equal(t, int64(7), st.Current, "the refused open changed nothing")
	require.Equal(t, int64(8), st.Pending[0].Version)
	require.Equal(t, "00008_backfills.sql", st.Pending[0].Name)

	before, after, err := sqlstore.MigrateUp(ctx, path)
	require.NoError(t, err)
	require.Equal(t, int64(7), before.Current)
	require.Equal(t, after.Latest, after.Current)
	require.Empty(t, after.Pending)
	s, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{NoMigrate: true})
	require.NoError(t, err)
	require.NoError(t, s.Ping(ctx))
	_, _, err = sqlstore.MigrateUp(ctx, path)
	require.ErrorContains(t, err, "another lark process", "migrate up waits for no server")
	st, err = sqlstore.SchemaStatus(ctx, path)
	require.NoError(t, err, "status reads while a store has the database open")
	require.Empty(t, st.Pending)
	require.NoError(t, s.Close())

	_, err = sqlstore.SchemaStatus(ctx, filepath.Join(t.TempDir(), "missing.db"))
	require.ErrorContains(t, err, "no database at")
}

// TestEventLogIsARowidTable: the event log's rows, which carry params and results of up to a few
// MB, live in a rowid table, its key in an index of its own: in a WITHOUT ROWID table SQLite reads
// a row that overflows its page whole at every key comparison, on the one writer. Events written
// before migration 17 are kept.
func TestEventLogIsARowidTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := atVersion(t, 16)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`INSERT INTO invocations (id, tenant_id, entrypoint_ref, entrypoint_id, status, mode, correlation_id, last_seq, record, created_at, updated_at)
		VALUES ('inv_1', 't', 'ep_1', 'ep', 'queued', 'async', 'c', 1, '{}', '2026-01-01', '2026-01-01')`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO invocation_events (invocation_id, seq, type, data, idempotency_key, engine_attempt, logical_attempt, at)
		VALUES ('inv_1', 1, 'created', '{}', 'k1', 0, 1, '2026-01-01')`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err = sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	var ddl string
	require.NoError(t, db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'invocation_events'`).Scan(&ddl))
	require.NotContains(t, ddl, "WITHOUT ROWID")
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM invocation_events WHERE invocation_id = 'inv_1' AND idempotency_key = 'k1'`).Scan(&n))
	require.Equal(t, 1, n, "the events written before the migration are kept")
}
