package server

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// modes returns the permission bits of the data directory's files.
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		out[e.Name()] = info.Mode().Perm()
	}
	return out
}

// TestDataFilesArePrivate: the database, its -wal and -shm files, the lock file and the dev
// credentials are 0600, under any umask; files left 0644 by an older version are tightened.
func TestDataFilesArePrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	var logs bytes.Buffer
	cfg := Config{DataDir: dir, AdminToken: "op", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	srv, err := New(ctx, cfg)
	require.NoError(t, err)
	creds, err := LoadOrCreateDevAdmin(dir)
	require.NoError(t, err)
	require.NoError(t, srv.ProvisionDev(ctx, &creds)) // writes: the -wal file exists
	got := modes(t, dir)
	for _, name := range []string{"lark.db", "lark.db-wal", "lark.db-shm", "lark.db.lock", "dev-credentials.json"} {
		require.Contains(t, got, name)
		require.Equal(t, fs.FileMode(0o600), got[name], "%s: %v", name, got)
	}
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), st.Mode().Perm(), "a data directory Lark creates is 0700")
	require.NotContains(t, logs.String(), "accessible to other users")
	require.NoError(t, srv.Close())

	// An older version's 0644 files and an open directory: tightened, and a warning.
	for _, name := range []string{"lark.db", "lark.db-wal", "lark.db-shm", "lark.db.lock"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			require.NoError(t, os.Chmod(filepath.Join(dir, name), 0o644))
		}
	}
	require.NoError(t, os.Chmod(dir, 0o755))
	srv, err = New(ctx, cfg)
	require.NoError(t, err)
	defer srv.Close()
	for name, m := range modes(t, dir) {
		switch name {
		case "dev-credentials.json":
		case "blobs": // the blob store's folder (blob.Dir: folders 0700, objects 0600)
			require.Equal(t, fs.FileMode(0o700), m, "%s", name)
		default:
			require.Equal(t, fs.FileMode(0o600), m, "%s", name)
		}
	}
	require.Contains(t, logs.String(), "accessible to other users")
}
