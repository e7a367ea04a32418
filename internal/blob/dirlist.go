package blob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// List implements Store by walking the folders in key order. A folder's entries are sorted with
// each subfolder's name followed by a slash, the way its keys start, so the walk yields keys in
// byte order ("a-c" before "a/b"); a subfolder wholly before after, or outside prefix, is not
// entered. Temporary files and anything but regular files and folders are skipped.
func (d *Dir) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	if err := ValidPrefix(prefix); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	if after != "" {
		if err := ValidKey(after); err != nil {
			return nil, fmt.Errorf("list: after: %w", err)
		}
	}
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	w := &walk{d: d, ctx: ctx, prefix: prefix, after: after, limit: limit}
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
	}
	if err := w.folder(start); err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	return w.keys, nil
}

// walk is one List's walk.
type walk struct {
	d             *Dir
	ctx           context.Context
	prefix, after string
	limit         int
	keys          []string
}

// entry is a folder's entry as it sorts among keys: a file's name, or a subfolder's with a slash.
type entry struct {
	sortName string
	dir      bool
}

// folder walks dir ("." for the top), appending keys until the page is full.
func (w *walk) folder(dir string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	entries, err := w.entries(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if len(w.keys) == w.limit {
			return nil
		}
		key := e.sortName
		if dir != "." {
			key = dir + "/" + e.sortName
		}
		if !w.mayHold(key, e.dir) {
			continue
		}
		if e.dir {
			if err := w.folder(strings.TrimSuffix(key, "/")); err != nil {
				return err
			}
			continue
		}
		w.keys = append(w.keys, key)
	}
	return nil
}

// mayHold tells whether key (a file's), or the keys under it (a folder's, ending with a slash),
// may be on the page: they start with the prefix, and sort after after.
func (w *walk) mayHold(key string, dir bool) bool {
	if dir {
		if !strings.HasPrefix(key, w.prefix) && !strings.HasPrefix(w.prefix, key) {
			return false
		}
		return w.after == "" || key > w.after || strings.HasPrefix(w.after, key)
	}
	return strings.HasPrefix(key, w.prefix) && key > w.after
}

// entries reads dir's entries sorted as keys; a missing folder (or a file where a folder is
// expected) has none.
func (w *walk) entries(dir string) ([]entry, error) {
	f, err := w.d.root.Open(dir)
	if err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	defer func() { _ = f.Close() }()
	des, err := f.ReadDir(-1)
	if err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, TempPrefix):
		case de.IsDir():
			out = append(out, entry{sortName: name + "/", dir: true})
		case de.Type()&fs.ModeType == 0:
			out = append(out, entry{sortName: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].sortName < out[j].sortName })
	return out, nil
}
