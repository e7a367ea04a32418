// Package backup makes and restores backups of the SQLite store's data directory: one gzipped tar
// file holding a consistent snapshot of the database (taken while a server serves it), the dev
// credentials when there are some, the objects of the local blob store (DAG asset outputs), and a
// manifest (format, time, schema version, and the size and SHA-256 of each file). The master key is never in it: a backup and the key that opens its
// secrets are kept apart (docs/operations.md, "Backup and restore").
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
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

// Format names the layout of a backup file; Restore refuses another.
const Format = "lark-backup/1"

// Names of the files of a data directory a backup holds, beside the database.
const (
	ManifestFile       = "manifest.json"
	DevCredentialsFile = "dev-credentials.json"
	// MasterKeyFile is the master key `lark dev` keeps in its data directory: never backed up.
	MasterKeyFile = "master.key"
	// BlobsDir is the folder of the local blob store in a data directory (the default
	// --blob-store); its objects are in a backup as files named BlobsDir/<key>.
	BlobsDir = "blobs"
)

// maxSmallFile bounds the dev credentials in a backup; maxManifest its manifest (about 100,000
// files).
const (
	maxSmallFile = 64 << 10
	maxManifest  = 16 << 20
)

// Manifest describes a backup.
type Manifest struct {
	Format        string    `json:"format"`
	CreatedAt     time.Time `json:"created_at"`
	SchemaVersion int64     `json:"schema_version"`
	// Blobs says that the backup holds the data directory's local blob store (its objects are the
	// files named blobs/…, perhaps none): a restore replaces the target's with it.
	Blobs bool   `json:"blobs,omitempty"`
	Files []File `json:"files"`
}

// entry is a file to put in a backup: the backup's own copy (path) and its name in the backup.
type entry struct{ path, name string }

// File is one file of a backup.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Result is what Create wrote and what it left out.
type Result struct {
	Manifest Manifest
	// LeftOut are files of the data directory deliberately not in the backup (the master key).
	LeftOut []string
}

// Create writes a backup of the SQLite store in dataDir to w, while a server may be serving it: a
// snapshot of the database (sqlstore.Snapshot, checked with sqlstore.Verify), the dev credentials
// if present, the objects of the local blob store (snapshotBlobs, after the database: every object
// the snapshot refers to is there), and the manifest. scratch is a directory for the snapshot until
// it is written to w (it needs room for a copy of the database, and of the blobs when it is on
// another file system); "" is the system's temporary directory.
func Create(ctx context.Context, dataDir, scratch string, w io.Writer, now time.Time) (res Result, err error) {
	tmp, err := os.MkdirTemp(scratch, ".lark-backup-")
	if err != nil {
		return res, fmt.Errorf("backup: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
	db := filepath.Join(tmp, sqlstore.DefaultFile)
	if err := sqlstore.Snapshot(ctx, filepath.Join(dataDir, sqlstore.DefaultFile), db); err != nil {
		return res, fmt.Errorf("backup: %w", err)
	}
	st, err := sqlstore.Verify(ctx, db)
	if err != nil {
		return res, fmt.Errorf("backup: the snapshot: %w", err)
	}
	files := []entry{{db, sqlstore.DefaultFile}}
	// The dev credentials are copied first, so that what is described is what is written.
	creds, err := readSmall(filepath.Join(dataDir, DevCredentialsFile))
	switch {
	case err == nil:
		p := filepath.Join(tmp, DevCredentialsFile)
		if err := os.WriteFile(p, creds, 0o600); err != nil {
			return res, fmt.Errorf("backup: %w", err)
		}
		files = append(files, entry{p, DevCredentialsFile})
	case !errors.Is(err, os.ErrNotExist):
		return res, fmt.Errorf("backup: %w", err)
	}
	blobs, err := snapshotBlobs(filepath.Join(dataDir, BlobsDir), filepath.Join(tmp, BlobsDir))
	if err != nil {
		return res, fmt.Errorf("backup: the blob store: %w", err)
	}
	files = append(files, blobs...)
	if _, err := os.Stat(filepath.Join(dataDir, MasterKeyFile)); err == nil {
		res.LeftOut = append(res.LeftOut, filepath.Join(dataDir, MasterKeyFile))
	}
	m := Manifest{Format: Format, CreatedAt: now.UTC(), SchemaVersion: st.Current, Blobs: true}
	for _, e := range files {
		f, err := describe(e)
		if err != nil {
			return res, fmt.Errorf("backup: %w", err)
		}
		m.Files = append(m.Files, f)
	}
	if err := write(w, m, files); err != nil {
		return res, fmt.Errorf("backup: %w", err)
	}
	res.Manifest = m
	return res, nil
}

// snapshotBlobs links (or, across file systems, copies) every object of the local blob store in
// src into dst and returns them. A link keeps an object as it is at that moment, since the store
// never rewrites a file in place (blob.Dir: written aside, then renamed or linked over the key);
// temporary files are left out, and an object deleted meanwhile is gone. A missing src has none.
func snapshotBlobs(src, dst string) ([]entry, error) {
	var out []entry
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == src && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), blob.TempPrefix) {
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return err
		}
		if err := os.Link(p, to); err != nil {
			err = copyFile(p, to)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted since the folder was read
			}
			if err != nil {
				return err
			}
		}
		out = append(out, entry{to, BlobsDir + "/" + filepath.ToSlash(rel)})
		return nil
	})
	return out, err
}

// copyFile copies the file at from to a new file at to (mode 0600).
func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	_, err = io.Copy(out, in)
	return err
}

// describe is the manifest entry of the file e.
func describe(e entry) (File, error) {
	f, err := os.Open(e.path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, err
	}
	return File{Name: e.name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// write writes the archive: the manifest first, then the files in its order.
func write(w io.Writer, m Manifest, files []entry) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if len(mb) > maxManifest {
		return fmt.Errorf("the manifest of %d files would be %d bytes, more than a backup holds (%d)", len(m.Files), len(mb), maxManifest)
	}
	if err := tw.WriteHeader(&tar.Header{Name: ManifestFile, Mode: 0o600, Size: int64(len(mb)), ModTime: m.CreatedAt}); err != nil {
		return err
	}
	if _, err := tw.Write(mb); err != nil {
		return err
	}
	for i, e := range files {
		if err := addFile(tw, e.path, m.Files[i], m.CreatedAt); err != nil {
			return err
		}
	}
	return errors.Join(tw.Close(), zw.Close())
}

func addFile(tw *tar.Writer, path string, f File, at time.Time) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := tw.WriteHeader(&tar.Header{Name: f.Name, Mode: 0o600, Size: f.Size, ModTime: at}); err != nil {
		return err
	}
	// Exactly the size described (the files are the backup's own copies).
	if _, err := io.CopyN(tw, in, f.Size); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	return nil
}

// readSmall reads a file of at most maxSmallFile bytes.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSmallFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSmallFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxSmallFile)
	}
	return b, nil
}
