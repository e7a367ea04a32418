package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

// ErrNotEmpty is Restore's error for a target directory that holds files, without force.
var ErrNotEmpty = errors.New("the target data directory is not empty (--force replaces its database)")

// Restore puts the backup read from r in place in dataDir (created, mode 0700, when absent). It
// refuses a directory that holds anything unless force; then it replaces the database (and its
// WAL, which belongs to the old one), the dev credentials when the backup has them and the local
// blob store when the backup holds one (Manifest.Blobs), and leaves the other files (the master
// key) alone. Before anything is replaced, every file must match the
// manifest, the database must pass SQLite's integrity check and its schema must be one this binary
// may serve; the database's lock is held while the files move, so a server running on dataDir
// fails the restore.
func Restore(ctx context.Context, r io.Reader, dataDir string, force bool) (m Manifest, err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	if len(entries) > 0 && !force {
		return m, fmt.Errorf("restore into %s: %w", dataDir, ErrNotEmpty)
	}
	tmp, err := os.MkdirTemp(dataDir, ".lark-restore-")
	if err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
	if m, err = extract(r, tmp); err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	st, err := sqlstore.Verify(ctx, filepath.Join(tmp, sqlstore.DefaultFile))
	if err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	// A schema newer than this binary's is refused (an older one is migrated at the next start).
	if err := st.Check(true); err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	if st.Current != m.SchemaVersion {
		return m, fmt.Errorf("restore: the database is at schema version %d, the manifest says %d", st.Current, m.SchemaVersion)
	}
	db := filepath.Join(dataDir, sqlstore.DefaultFile)
	lock, err := sqlstore.Lock(db)
	if err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	defer func() { err = errors.Join(err, lock.Close()) }()
	// The old database's WAL and shared memory would be replayed into the new one: they go first.
	for _, p := range []string{db + "-wal", db + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return m, fmt.Errorf("restore: %w", err)
		}
	}
	for _, f := range m.Files {
		if isBlob(f.Name) {
			continue
		}
		if err := os.Rename(filepath.Join(tmp, f.Name), filepath.Join(dataDir, f.Name)); err != nil {
			return m, fmt.Errorf("restore: %w", err)
		}
	}
	if m.Blobs {
		if err := replaceBlobs(tmp, dataDir); err != nil {
			return m, fmt.Errorf("restore: the blob store: %w", err)
		}
	}
	return m, syncDir(dataDir)
}

// replaceBlobs puts the blob store restored under tmp in place of dataDir's (moved into tmp, which
// the caller removes).
func replaceBlobs(tmp, dataDir string) error {
	restored, current := filepath.Join(tmp, BlobsDir), filepath.Join(dataDir, BlobsDir)
	if err := os.MkdirAll(restored, 0o700); err != nil {
		return err
	}
	old := filepath.Join(tmp, BlobsDir+".old")
	moved := true
	if err := os.Rename(current, old); errors.Is(err, os.ErrNotExist) {
		moved = false
	} else if err != nil {
		return err
	}
	if err := os.Rename(restored, current); err != nil {
		if moved {
			err = errors.Join(err, os.Rename(old, current))
		}
		return err
	}
	return nil
}

// allowed are the files a backup may hold besides its manifest and its blobs.
var allowed = map[string]bool{sqlstore.DefaultFile: true, DevCredentialsFile: true}

// isBlob reports whether a backup's file name is an object of the local blob store (BlobsDir/key).
func isBlob(name string) bool {
	key, ok := strings.CutPrefix(name, BlobsDir+"/")
	return ok && blob.ValidKey(key) == nil
}

// extract reads the archive into dir and checks every file against the manifest.
func extract(r io.Reader, dir string) (Manifest, error) {
	var m Manifest
	zr, err := gzip.NewReader(r)
	if err != nil {
		return m, fmt.Errorf("not a backup file: %w", err)
	}
	tr := tar.NewReader(zr)
	h, err := tr.Next()
	if err != nil {
		return m, fmt.Errorf("not a backup file: %w", err)
	}
	if h.Name != ManifestFile || h.Size > maxManifest {
		return m, fmt.Errorf("not a backup file: it does not start with its manifest")
	}
	mb, err := io.ReadAll(io.LimitReader(tr, maxManifest))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		return m, fmt.Errorf("the manifest: %w", err)
	}
	if m.Format != Format {
		return m, fmt.Errorf("the backup's format is %q; this binary reads %q", m.Format, Format)
	}
	want := map[string]File{}
	for _, f := range m.Files {
		if !allowed[f.Name] && (!m.Blobs || !isBlob(f.Name)) {
			return m, fmt.Errorf("the manifest names an unexpected file %q", f.Name)
		}
		if f.Name == DevCredentialsFile && f.Size > maxSmallFile {
			return m, fmt.Errorf("%s: larger than %d bytes", f.Name, maxSmallFile)
		}
		want[f.Name] = f
	}
	if _, ok := want[sqlstore.DefaultFile]; !ok {
		return m, errors.New("the backup holds no database")
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("read the backup: %w", err)
		}
		f, ok := want[h.Name]
		if !ok || h.Typeflag != tar.TypeReg || h.Size != f.Size {
			return m, fmt.Errorf("the backup holds %q (%d bytes), which its manifest does not describe", h.Name, h.Size)
		}
		if err := save(tr, filepath.Join(dir, filepath.FromSlash(f.Name)), f); err != nil {
			return m, err
		}
		delete(want, h.Name)
	}
	if len(want) > 0 {
		var missing []string
		for name := range want {
			missing = append(missing, name)
		}
		slices.Sort(missing)
		return m, fmt.Errorf("the backup lacks %s, which its manifest names: it is truncated", strings.Join(missing, ", "))
	}
	return m, zr.Close()
}

// save writes f's content from r to path (mode 0600, its folders 0700) and checks its size and
// digest.
func save(r io.Reader, path string, f File) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size))
	if err != nil {
		return fmt.Errorf("%s: %w (the backup is truncated or damaged)", f.Name, err)
	}
	if n != f.Size {
		return fmt.Errorf("%s: %d bytes, the manifest says %d: the backup is truncated", f.Name, n, f.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("%s: its SHA-256 does not match the manifest's: the backup is damaged", f.Name)
	}
	return out.Sync()
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
