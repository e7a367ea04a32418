package blob

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
)

// Dir is the local directory store: one file per object, at the key's path under the directory.
// Every access goes through an os.Root, so no key and no symbolic link left in the directory
// reaches a file outside it. A write goes to a temporary file in the object's folder, is synced,
// and renamed over the key (Create: hard-linked to it, which fails when the key exists), then the
// folder is synced: a reader sees a whole object or none, and a crash leaves at most a temporary
// file, which List and Read never show. Objects are files of mode 0600 in folders of mode 0700.
type Dir struct {
	root *os.Root
	name string
}

// OpenDir opens the local store in dir, creating it (mode 0700) when missing.
func OpenDir(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blob store %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("blob store %s: %w", dir, err)
	}
	name, err := filepath.Abs(dir)
	if err != nil {
		name = dir
	}
	return &Dir{root: root, name: name}, nil
}

// String names the store for logs.
func (d *Dir) String() string { return "file://" + d.name }

// Close releases the directory handle.
func (d *Dir) Close() error { return d.root.Close() }

// Write implements Store.
func (d *Dir) Write(ctx context.Context, key string, r io.Reader, size int64) error {
	tmp, err := d.stage(ctx, "write", key, r, size)
	if err != nil {
		return err
	}
	if err := d.root.Rename(tmp, key); err != nil {
		_ = d.root.Remove(tmp)
		return fmt.Errorf("write %s: %w", key, fsError(err))
	}
	return d.syncDir(key)
}

// Create implements Store: the temporary file is hard-linked to the key, which fails when a file
// is there (link(2) never replaces), so exactly one of concurrent Creates succeeds, and only with
// a complete, synced file.
func (d *Dir) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	tmp, err := d.stage(ctx, "create", key, r, size)
	if err != nil {
		return err
	}
	defer func() { _ = d.root.Remove(tmp) }()
	if err := d.root.Link(tmp, key); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if st, serr := d.root.Lstat(key); serr == nil && st.IsDir() {
				return fmt.Errorf("create %s: %w", key, ErrConflict)
			}
			return fmt.Errorf("create %s: %w", key, ErrExists)
		}
		return fmt.Errorf("create %s: %w", key, fsError(err))
	}
	return d.syncDir(key)
}

// stage writes exactly size bytes of r to a new synced temporary file in key's folder (created as
// needed) and returns its name. A Delete may remove the folder between its creation and the
// file's: the folder is created again, a few times.
func (d *Dir) stage(ctx context.Context, op, key string, r io.Reader, size int64) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if err := checkSize(op, key, size); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s %s: %w", op, key, err)
	}
	var f *os.File
	var tmp string
	for try := 0; ; try++ {
		if err := d.root.MkdirAll(path.Dir(key), 0o700); err != nil {
			return "", fmt.Errorf("%s %s: %w", op, key, fsError(err))
		}
		tmp = path.Join(path.Dir(key), TempPrefix+randomHex())
		var err error
		f, err = d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || try == 3 {
			return "", fmt.Errorf("%s %s: %w", op, key, fsError(err))
		}
	}
	_, err := io.Copy(f, &exactReader{ctx: ctx, r: r, left: size})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = d.root.Remove(tmp)
		return "", fmt.Errorf("%s %s: %w", op, key, err)
	}
	return tmp, nil
}

// syncDir syncs the folder of key, so that the rename or link that published it survives a crash.
func (d *Dir) syncDir(key string) error {
	f, err := d.root.Open(path.Dir(key))
	if err != nil {
		return fmt.Errorf("sync folder of %s: %w", key, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync folder of %s: %w", key, err)
	}
	return nil
}

// Read implements Store.
func (d *Dir) Read(ctx context.Context, key string, max int64) (io.ReadCloser, int64, error) {
	if err := ValidKey(key); err != nil {
		return nil, 0, fmt.Errorf("read: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", key, err)
	}
	f, err := d.root.Open(key)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", key, notFound(err))
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = ErrNotFound
	} else if err == nil && st.Size() > max {
		err = fmt.Errorf("%w: %d bytes, bound %d", ErrTooLarge, st.Size(), max)
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("read %s: %w", key, err)
	}
	return &checkedReader{rc: f, left: st.Size()}, st.Size(), nil
}

// Stat implements Store.
func (d *Dir) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, fmt.Errorf("stat: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, err)
	}
	st, err := d.root.Stat(key)
	if err == nil && !st.Mode().IsRegular() {
		err = ErrNotFound
	}
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, notFound(err))
	}
	return Info{Size: st.Size(), Modified: st.ModTime()}, nil
}

// Delete implements Store, then removes the folders the object leaves empty (a Write racing to
// fill one creates it again).
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	st, err := d.root.Lstat(key)
	if err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if st.IsDir() {
		return nil // a folder of other keys, not an object
	}
	if err := d.root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if d.root.Remove(dir) != nil {
			break // not empty (or gone): its parents are not empty either
		}
	}
	return nil
}

// Copy implements Store: the source's file is hard-linked to a temporary name and renamed over
// the destination (objects are never changed in place, so sharing the file is a copy), or, where
// the filesystem has no hard links, copied byte by byte through Write.
func (d *Dir) Copy(ctx context.Context, from, to string) error {
	if err := ValidKey(from); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if err := ValidKey(to); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	info, err := d.Stat(ctx, from)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if from == to {
		return nil // renaming a hard link over its own file would leave the link behind
	}
	if err := d.root.MkdirAll(path.Dir(to), 0o700); err != nil {
		return fmt.Errorf("copy %s to %s: %w", from, to, fsError(err))
	}
	tmp := path.Join(path.Dir(to), TempPrefix+randomHex())
	if err := d.root.Link(from, tmp); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("copy %s: %w", from, ErrNotFound)
		}
		return d.copyBytes(ctx, from, to, info.Size)
	}
	if err := d.root.Rename(tmp, to); err != nil {
		_ = d.root.Remove(tmp)
		return fmt.Errorf("copy %s to %s: %w", from, to, fsError(err))
	}
	return d.syncDir(to)
}

// copyBytes copies from to to through Read and Write.
func (d *Dir) copyBytes(ctx context.Context, from, to string, size int64) error {
	rc, n, err := d.Read(ctx, from, size)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer func() { _ = rc.Close() }()
	return d.Write(ctx, to, rc, n)
}

// fsError maps the filesystem's answer to a key on a path through a file, or to a folder where an
// object should be, to ErrConflict.
func fsError(err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) ||
		errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("%w (%w)", ErrConflict, err)
	}
	return err
}

// notFound maps a missing file, or a path through a file, to ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return ErrNotFound
	}
	return err
}

// randomHex is a name no other writer picks.
func randomHex() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
