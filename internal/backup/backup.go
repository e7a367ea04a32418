// Package backup makes and restores backups of the SQLite store's data directory: one gzipped tar
// file holding a consistent snapshot of the database (taken while a server serves it), the dev
// credentials when there are some, and a manifest (format, time, schema version, and the size and
// SHA-256 of each file). The master key is never in it: a backup and the key that opens its
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
	"os"
	"path/filepath"
	"time"

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
)

// maxSmallFile bounds the manifest and the dev credentials in a backup.
const maxSmallFile = 64 << 10

// Manifest describes a backup.
type Manifest struct {
	Format        string    `json:"format"`
	CreatedAt     time.Time `json:"created_at"`
	SchemaVersion int64     `json:"schema_version"`
	Files         []File    `json:"files"`
}

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
// if present, and the manifest. scratch is a directory for the snapshot until it is written to w
// (it needs room for a copy of the database); "" is the system's temporary directory.
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
	paths := []string{db}
	// The dev credentials are copied first, so that what is described is what is written.
	creds, err := readSmall(filepath.Join(dataDir, DevCredentialsFile))
	switch {
	case err == nil:
		p := filepath.Join(tmp, DevCredentialsFile)
		if err := os.WriteFile(p, creds, 0o600); err != nil {
			return res, fmt.Errorf("backup: %w", err)
		}
		paths = append(paths, p)
	case !errors.Is(err, os.ErrNotExist):
		return res, fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, MasterKeyFile)); err == nil {
		res.LeftOut = append(res.LeftOut, filepath.Join(dataDir, MasterKeyFile))
	}
	m := Manifest{Format: Format, CreatedAt: now.UTC(), SchemaVersion: st.Current}
	for _, p := range paths {
		f, err := describe(p)
		if err != nil {
			return res, fmt.Errorf("backup: %w", err)
		}
		m.Files = append(m.Files, f)
	}
	if err := write(w, m, paths); err != nil {
		return res, fmt.Errorf("backup: %w", err)
	}
	res.Manifest = m
	return res, nil
}

// describe is the manifest entry of the file at path.
func describe(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, err
	}
	return File{Name: filepath.Base(path), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// write writes the archive: the manifest first, then the files in its order.
func write(w io.Writer, m Manifest, paths []string) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: ManifestFile, Mode: 0o600, Size: int64(len(mb)), ModTime: m.CreatedAt}); err != nil {
		return err
	}
	if _, err := tw.Write(mb); err != nil {
		return err
	}
	for i, p := range paths {
		if err := addFile(tw, p, m.Files[i], m.CreatedAt); err != nil {
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
