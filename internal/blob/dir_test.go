package blob_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/blob/blobtest"
)

func TestDirConformance(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blob.Store {
		d, err := blob.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// No key reaches outside the directory: not by its own segments (ValidKey), not through a
// symbolic link left inside it, whether to a folder or to a file outside.
func TestDirEscape(t *testing.T) {
	t.Parallel()
	outside, root := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "filelink")); err != nil {
		t.Fatal(err)
	}
	d, err := blob.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	ctx := t.Context()
	for _, k := range []string{"link/secret", "filelink", "../" + filepath.Base(outside) + "/secret"} {
		if got, err := blob.ReadAll(ctx, d, k, 100); err == nil {
			t.Errorf("Read %q = %q: reached outside the directory", k, got)
		}
		if _, err := d.Stat(ctx, k); err == nil {
			t.Errorf("Stat %q reached outside the directory", k)
		}
		_ = d.Write(ctx, k, strings.NewReader("x"), 1)
		_ = d.Create(ctx, k+"2", strings.NewReader("x"), 1)
		_ = d.Delete(ctx, k)
		_ = d.Copy(ctx, k, "copied")
	}
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 1 {
		t.Errorf("the folder outside has %d entries, %v: written through the store", len(ents), err)
	}
	if got, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(got) != "outside" {
		t.Errorf("the file outside is %q, %v: changed through the store", got, err)
	}
	keys, err := d.List(ctx, "", "", 0)
	if err != nil || slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "link") && k != "filelink2" }) {
		t.Errorf("List = %q, %v; links are not objects", keys, err)
	}
}

// A crash mid-write leaves a temporary file: never listed or read as an object, and the objects
// are files of mode 0600 in folders of mode 0700.
func TestDirTemporaryFilesAndModes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d, err := blob.OpenDir(filepath.Join(root, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	ctx := t.Context()
	if err := d.Write(ctx, "a/b", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(root, "blobs", "a", blob.TempPrefix+"crashed")
	if err := os.WriteFile(left, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := d.List(ctx, "", "", 0)
	if err != nil || !slices.Equal(keys, []string{"a/b"}) {
		t.Fatalf("List = %q, %v; want only a/b", keys, err)
	}
	for path, want := range map[string]os.FileMode{"blobs": 0o700, "blobs/a": 0o700, "blobs/a/b": 0o600} {
		st, err := os.Stat(filepath.Join(root, path))
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, st.Mode().Perm(), err, want)
		}
	}
}
