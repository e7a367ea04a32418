package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/sqlstore"
)

// run runs the lark command line with args and returns its output and error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := root()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), err
}

// TestMigrateCommands: status lists what is pending on a database built at an earlier version,
// up applies it, status then says none; --no-migrate and the default reach the server config.
func TestMigrateCommands(t *testing.T) {
	t.Setenv("LARK_STORE", "")
	t.Setenv("LARK_DATA", "")
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlstore.DefaultFile))
	require.NoError(t, err)
	prov, err := goose.NewProvider(goose.DialectSQLite3, db, sqlstore.Migrations())
	require.NoError(t, err)
	sources := prov.ListSources()
	latest := sources[len(sources)-1]
	_, err = prov.UpTo(context.Background(), 12)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	out, err := run(t, "migrate", "status", "--data", dir)
	require.NoError(t, err)
	require.Contains(t, out, "current version: 12\n")
	require.Contains(t, out, fmt.Sprintf("latest known:    %d\n", latest.Version))
	require.Contains(t, out, "  13 00013_webhooks.sql\n")
	require.Contains(t, out, "  15 00015_leader_lease.sql\n")
	require.Contains(t, out, "  16 00016_list_indexes.sql\n")
	require.Contains(t, out, "  17 00017_invocation_events_rowid.sql\n")
	require.Contains(t, out, "  18 00018_assets.sql\n")
	require.Contains(t, out, "  19 00019_worker_nonces.sql\n")
	require.Contains(t, out, "  20 00020_identity_providers.sql\n")
	require.Contains(t, out, "  21 00021_workers.sql\n")
	require.Contains(t, out, fmt.Sprintf("  %d %s\n", latest.Version, filepath.Base(latest.Path)), "the latest is pending too")

	out, err = run(t, "migrate", "up", "--data", dir)
	require.NoError(t, err)
	require.Contains(t, out, "applied 13 00013_webhooks.sql\n")
	require.Contains(t, out, fmt.Sprintf("schema version 12 -> %d", latest.Version))
	out, err = run(t, "migrate", "status", "--data", dir)
	require.NoError(t, err)
	require.Contains(t, out, "pending:         none")
	out, err = run(t, "migrate", "up", "--data", dir)
	require.NoError(t, err)
	require.Contains(t, out, "nothing to apply")

	_, err = run(t, "migrate", "status", "--data", t.TempDir())
	require.ErrorContains(t, err, "no database at")
	_, err = run(t, "backup", "--to", filepath.Join(t.TempDir(), "b"), "--store", "postgres://db.example/lark")
	require.ErrorContains(t, err, "pg_dump")
	require.ErrorContains(t, err, "Backup and restore")

	f, c := parsed(t)
	require.NoError(t, f.check(c))
	cfg, err := f.config("", nil)
	require.NoError(t, err)
	require.False(t, cfg.NoMigrate, "migrations run at start by default")
	f, c = parsed(t, "--no-migrate")
	require.NoError(t, f.check(c))
	cfg, err = f.config("", nil)
	require.NoError(t, err)
	require.True(t, cfg.NoMigrate)
}
