package backup_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/backup"
	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

// dataDir makes a data directory with a migrated database holding one marker row, dev credentials
// and a master key file.
func dataDir(t *testing.T, marker string) string {
	t.Helper()
	dir := t.TempDir()
	s, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, sqlstore.DefaultFile), sqlstore.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlstore.DefaultFile))
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO tenants VALUES (?, 1, '{}', 'x', 'x')`, marker)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, backup.DevCredentialsFile), []byte(`{"tenant_id":"dev"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, backup.MasterKeyFile), []byte("KEY\n"), 0o600))
	return dir
}

func tenantsIn(t *testing.T, dir string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlstore.DefaultFile))
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	rows, err := db.Query("SELECT tenant_id FROM tenants ORDER BY tenant_id")
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

func create(t *testing.T, dir string) []byte {
	t.Helper()
	var b bytes.Buffer
	res, err := backup.Create(context.Background(), dir, t.TempDir(), &b, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, backup.MasterKeyFile)}, res.LeftOut)
	require.Equal(t, backup.Format, res.Manifest.Format)
	require.Len(t, res.Manifest.Files, 2)
	return b.Bytes()
}

// TestRoundTrip: a backup restores into an empty directory with the database and the dev
// credentials, never the master key; a second restore needs force, which replaces the database,
// drops the old WAL and keeps the directory's other files.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	b := create(t, dataDir(t, "first"))
	dst := filepath.Join(t.TempDir(), "new")
	m, err := backup.Restore(ctx, bytes.NewReader(b), dst, false)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), m.CreatedAt)
	require.Equal(t, []string{"first"}, tenantsIn(t, dst))
	creds, err := os.ReadFile(filepath.Join(dst, backup.DevCredentialsFile))
	require.NoError(t, err)
	require.JSONEq(t, `{"tenant_id":"dev"}`, string(creds))
	_, err = os.Stat(filepath.Join(dst, backup.MasterKeyFile))
	require.ErrorIs(t, err, os.ErrNotExist)
	st, err := os.Stat(filepath.Join(dst, sqlstore.DefaultFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	second := create(t, dataDir(t, "second"))
	_, err = backup.Restore(ctx, bytes.NewReader(second), dst, false)
	require.ErrorIs(t, err, backup.ErrNotEmpty)
	require.Equal(t, []string{"first"}, tenantsIn(t, dst), "a refused restore changes nothing")
	require.NoError(t, os.WriteFile(filepath.Join(dst, sqlstore.DefaultFile+"-wal"), []byte("stale"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dst, "keep.txt"), []byte("mine"), 0o600))
	_, err = backup.Restore(ctx, bytes.NewReader(second), dst, true)
	require.NoError(t, err)
	require.Equal(t, []string{"second"}, tenantsIn(t, dst))
	_, err = os.Stat(filepath.Join(dst, "keep.txt"))
	require.NoError(t, err, "other files stay")
}

// TestRestoreRefusesWhileServing: a store open on the target holds its lock: the restore fails and
// the database stays.
func TestRestoreRefusesWhileServing(t *testing.T) {
	ctx := context.Background()
	b := create(t, dataDir(t, "new"))
	dst := dataDir(t, "old")
	s, err := sqlstore.OpenSQLite(ctx, filepath.Join(dst, sqlstore.DefaultFile), sqlstore.Options{})
	require.NoError(t, err)
	_, err = backup.Restore(ctx, bytes.NewReader(b), dst, true)
	require.ErrorContains(t, err, "another lark process")
	require.NoError(t, s.Close())
	require.Equal(t, []string{"old"}, tenantsIn(t, dst))
}

// rewrite returns the backup b with fn applied to each entry's header and content.
func rewrite(t *testing.T, b []byte, fn func(h *tar.Header, content []byte) []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		content, err := io.ReadAll(tr)
		require.NoError(t, err)
		content = fn(h, content)
		if content == nil {
			continue
		}
		h.Size = int64(len(content))
		require.NoError(t, tw.WriteHeader(h))
		_, err = tw.Write(content)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return out.Bytes()
}

// TestRestoreRefusesBadBackups: a damaged, truncated, foreign or unknown-format file is refused
// before anything is put in place; so is a database that fails SQLite's integrity check.
func TestRestoreRefusesBadBackups(t *testing.T) {
	ctx := context.Background()
	good := create(t, dataDir(t, "x"))
	flipDB := rewrite(t, good, func(h *tar.Header, c []byte) []byte {
		if h.Name == sqlstore.DefaultFile {
			c[len(c)/2] ^= 0xff
		}
		return c
	})
	noDB := rewrite(t, good, func(h *tar.Header, c []byte) []byte {
		if h.Name == sqlstore.DefaultFile {
			return nil
		}
		return c
	})
	format := rewrite(t, good, func(h *tar.Header, c []byte) []byte {
		if h.Name == backup.ManifestFile {
			var m map[string]any
			require.NoError(t, json.Unmarshal(c, &m))
			m["format"] = "lark-backup/99"
			c, err := json.Marshal(m)
			require.NoError(t, err)
			return c
		}
		return c
	})
	extra := rewrite(t, good, func(h *tar.Header, c []byte) []byte {
		if h.Name == backup.DevCredentialsFile {
			h.Name = "../escape"
		}
		return c
	})
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"damaged":   {flipDB, "SHA-256 does not match"},
		"truncated": {good[:len(good)/2], "truncated"},
		"no db":     {noDB, "lacks lark.db"},
		"format":    {format, "lark-backup/99"},
		"extra":     {extra, "does not describe"},
		"foreign":   {[]byte("not a backup"), "not a backup file"},
	} {
		t.Run(name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "d")
			_, err := backup.Restore(ctx, bytes.NewReader(tc.b), dst, false)
			require.ErrorContains(t, err, tc.want)
			_, err = os.Stat(filepath.Join(dst, sqlstore.DefaultFile))
			require.ErrorIs(t, err, os.ErrNotExist, "nothing is put in place")
		})
	}
}

// TestVerifyFindsCorruption: a database whose pages are damaged fails the integrity check.
func TestVerifyFindsCorruption(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t, "x")
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlstore.DefaultFile))
	require.NoError(t, err)
	for i := range 200 {
		_, err = db.Exec(`INSERT INTO tenants VALUES (?, 1, '{}', 'x', 'x')`, "tenant-with-a-longer-name-"+string(rune('a'+i%26))+time.Duration(i).String())
		require.NoError(t, err)
	}
	_, err = db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	path := filepath.Join(dir, sqlstore.DefaultFile)
	_, err = sqlstore.Verify(ctx, path)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	// Page 2 onwards holds the tables' b-trees: scribble over the middle of the file.
	for i := len(b) / 3; i < len(b)/3+4096 && i < len(b); i++ {
		b[i] = 0x5a
	}
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, err = sqlstore.Verify(ctx, path)
	require.Error(t, err, "a damaged database fails the check")
}

// TestRestoreRefusesNewerSchema: a database a newer binary migrated backs up (the backup is the
// way back), but this binary does not restore it.
func TestRestoreRefusesNewerSchema(t *testing.T) {
	dir := dataDir(t, "x")
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlstore.DefaultFile))
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, 1)")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	b := create(t, dir)
	dst := filepath.Join(t.TempDir(), "d")
	_, err = backup.Restore(context.Background(), bytes.NewReader(b), dst, false)
	require.ErrorContains(t, err, "newer than this binary's version")
	_, err = os.Stat(filepath.Join(dst, sqlstore.DefaultFile))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// writeBlob stores an object in the local blob store of data directory dir.
func writeBlob(t *testing.T, dir, key, content string) {
	t.Helper()
	st, err := blob.OpenDir(filepath.Join(dir, backup.BlobsDir))
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Write(context.Background(), key, strings.NewReader(content), int64(len(content))))
}

// TestBlobsRoundTrip: the local blob store's objects are in the backup (its temporary files are
// not) and a restore puts them in place; a forced restore replaces the target's blob store, so no
// object of a later state outlives the database that named it; a manifest naming a file outside the
// blob store is refused.
func TestBlobsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := dataDir(t, "first")
	key := "tenants/acme/assets/sales.clean/materializations/mat_1/data.json"
	writeBlob(t, src, key, `{"rows": [1, 2]}`)
	writeBlob(t, src, "tenants/acme/assets/sales.clean/materializations/mat_1/_commit.json", `{}`)
	tmp := filepath.Join(src, backup.BlobsDir, "tenants", "acme", blob.TempPrefix+"x")
	require.NoError(t, os.WriteFile(tmp, []byte("half"), 0o600))

	var b bytes.Buffer
	res, err := backup.Create(ctx, src, t.TempDir(), &b, time.Now())
	require.NoError(t, err)
	require.True(t, res.Manifest.Blobs)
	var names []string
	for _, f := range res.Manifest.Files {
		names = append(names, f.Name)
	}
	require.Equal(t, []string{sqlstore.DefaultFile, backup.DevCredentialsFile,
		"blobs/tenants/acme/assets/sales.clean/materializations/mat_1/_commit.json", "blobs/" + key}, names)

	dst := filepath.Join(t.TempDir(), "d")
	_, err = backup.Restore(ctx, bytes.NewReader(b.Bytes()), dst, false)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dst, backup.BlobsDir, filepath.FromSlash(key)))
	require.NoError(t, err)
	require.JSONEq(t, `{"rows": [1, 2]}`, string(got))

	writeBlob(t, dst, "tenants/acme/later.json", `{}`)
	_, err = backup.Restore(ctx, bytes.NewReader(b.Bytes()), dst, true)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dst, backup.BlobsDir, "tenants", "acme", "later.json"))
	require.ErrorIs(t, err, os.ErrNotExist, "the restored blob store replaces the one there")
	_, err = os.Stat(filepath.Join(dst, backup.BlobsDir, filepath.FromSlash(key)))
	require.NoError(t, err)

	escape := rewrite(t, b.Bytes(), func(h *tar.Header, c []byte) []byte {
		if h.Name == backup.ManifestFile {
			return bytes.ReplaceAll(c, []byte(`"blobs/`+key), []byte(`"blobs/../../escape`))
		}
		return c
	})
	_, err = backup.Restore(ctx, bytes.NewReader(escape), filepath.Join(t.TempDir(), "e"), false)
	require.ErrorContains(t, err, "unexpected file")
}
