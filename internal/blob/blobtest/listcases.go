package blobtest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/larkrun/lark/internal/blob"
)

// names are keys whose byte order differs from a folder-by-folder walk's ("a-c" < "a/b" since
// '-' < '/'), with an '=' segment and a folder deeper than the rest.
var names = []string{"a-c", "a/b", "a/b0", "a/c/d/e", "a=1/x", "b", "c/attempt=1/data", "c/attempt=10/data", "c/attempt=2/data"}

// keysOf is names under the case's prefix, sorted.
func (c *Case) keysOf(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = c.Key(n)
	}
	slices.Sort(out)
	return out
}

func (c *Case) putAll(t *testing.T, names []string) {
	for _, n := range names {
		c.Put(t, n, []byte(n))
	}
}

func testList(t *testing.T, c *Case) {
	keys, err := c.Store.List(c.Ctx, c.Prefix, "", 0)
	if err != nil || len(keys) != 0 {
		t.Fatalf("List of an empty prefix = %q, %v", keys, err)
	}
	c.putAll(t, names)
	keys, err = c.Store.List(c.Ctx, c.Prefix, "", 0)
	if want := c.keysOf(names...); err != nil || !slices.Equal(keys, want) {
		t.Fatalf("List =\n%q, %v; want\n%q", keys, err, want)
	}
}

func testListPages(t *testing.T, c *Case) {
	c.putAll(t, names)
	for _, limit := range []int{1, 2, 4} {
		var all []string
		after := ""
		for range 20 {
			page, err := c.Store.List(c.Ctx, c.Prefix, after, limit)
			if err != nil {
				t.Fatalf("List after %q: %v", after, err)
			}
			if len(page) > limit {
				t.Fatalf("page of %d keys, limit %d", len(page), limit)
			}
			all = append(all, page...)
			if len(page) < limit {
				break
			}
			after = page[len(page)-1]
		}
		if want := c.keysOf(names...); !slices.Equal(all, want) {
			t.Fatalf("pages of %d =\n%q; want\n%q", limit, all, want)
		}
	}
	// after need not be a stored key.
	page, err := c.Store.List(c.Ctx, c.Prefix, c.Key("a/bz"), 2)
	if want := c.keysOf("a/c/d/e", "a=1/x"); err != nil || !slices.Equal(page, want) {
		t.Fatalf("List after a/bz = %q, %v; want %q", page, err, want)
	}
}

func testListPrefix(t *testing.T, c *Case) {
	c.putAll(t, names)
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"a/", []string{"a/b", "a/b0", "a/c/d/e"}},
		{"a/b", []string{"a/b", "a/b0"}},
		{"a", []string{"a-c", "a/b", "a/b0", "a/c/d/e", "a=1/x"}},
		{"c/attempt=1", []string{"c/attempt=1/data", "c/attempt=10/data"}},
		{"c/attempt=1/", []string{"c/attempt=1/data"}},
		{"nothing/", nil},
	} {
		keys, err := c.Store.List(c.Ctx, c.Key(tc.prefix), "", 0)
		if want := c.keysOf(tc.want...); err != nil || !slices.Equal(keys, want) {
			t.Fatalf("List %q = %q, %v; want %q", tc.prefix, keys, err, want)
		}
	}
}

func testCopy(t *testing.T, c *Case) {
	c.Put(t, "staging/data", []byte("v1"))
	c.Put(t, "final/data", []byte("older"))
	if err := c.Store.Copy(c.Ctx, c.Key("staging/data"), c.Key("final/data")); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if err := c.Store.Copy(c.Ctx, c.Key("staging/data"), c.Key("new/deep/data")); err != nil {
		t.Fatalf("Copy to a new folder: %v", err)
	}
	c.Put(t, "staging/data", []byte("v2")) // the copies keep what they copied
	for _, k := range []string{"final/data", "new/deep/data"} {
		if got := c.Get(t, k); string(got) != "v1" {
			t.Fatalf("%s = %q, want the copied v1", k, got)
		}
	}
	if err := c.Store.Delete(c.Ctx, c.Key("staging/data")); err != nil {
		t.Fatal(err)
	}
	if got := c.Get(t, "final/data"); string(got) != "v1" {
		t.Fatal("deleting the source changed the copy")
	}
	wantErr(t, "Copy of a missing key", c.Store.Copy(c.Ctx, c.Key("staging/data"), c.Key("x")), blob.ErrNotFound)
	wantMissing(t, c, "x")
	if err := c.Store.Copy(c.Ctx, c.Key("final/data"), c.Key("final/data")); err != nil {
		t.Fatalf("Copy onto itself: %v", err)
	}
	if got := c.Get(t, "final/data"); string(got) != "v1" {
		t.Fatal("Copy onto itself changed the object")
	}
	keys, _ := c.Store.List(c.Ctx, c.Prefix, "", 0)
	if want := c.keysOf("final/data", "new/deep/data"); !slices.Equal(keys, want) {
		t.Fatalf("List after copies = %q, want %q", keys, want)
	}
}

// BadKeys are keys every store refuses with blob.ErrInvalidKey.
var BadKeys = []string{"", "/a", "a/", "a//b", "a/../b", "..", "a/./b", ".", "a\x00b", "a\nb", `a\b`,
	strings.Repeat("k", blob.MaxKeyBytes+1), strings.Repeat("s", blob.MaxSegmentBytes+1), "a/" + blob.TempPrefix + "x", "\xff"}

func testInvalidKeys(t *testing.T, c *Case) {
	s, ctx := c.Store, c.Ctx
	for _, k := range BadKeys {
		_, _, rerr := s.Read(ctx, k, 10)
		_, serr := s.Stat(ctx, k)
		for op, err := range map[string]error{
			"Write":  s.Write(ctx, k, strings.NewReader("x"), 1),
			"Create": s.Create(ctx, k, strings.NewReader("x"), 1),
			"Read":   rerr, "Stat": serr,
			"Delete":    s.Delete(ctx, k),
			"Copy from": s.Copy(ctx, k, c.Key("ok")),
			"Copy to":   s.Copy(ctx, c.Key("ok"), k),
		} {
			if !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("%s %q: %v, want ErrInvalidKey", op, k, err)
			}
		}
		if k != "" {
			if _, err := s.List(ctx, k, "", 0); !errors.Is(err, blob.ErrInvalidKey) && k != "a/" {
				t.Errorf("List prefix %q: %v, want ErrInvalidKey", k, err)
			}
			if _, err := s.List(ctx, c.Prefix, k, 0); !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("List after %q: %v, want ErrInvalidKey", k, err)
			}
		}
	}
	wantMissing(t, c, "ok")
}

// testConflict: an object and a folder of the same name may or may not live side by side (S3 can,
// a filesystem cannot); a store that refuses says ErrConflict and changes nothing.
func testConflict(t *testing.T, c *Case) {
	c.Put(t, "f", []byte("file"))
	err := c.Store.Write(c.Ctx, c.Key("f/below"), strings.NewReader("x"), 1)
	if err != nil && !errors.Is(err, blob.ErrConflict) {
		t.Fatalf("Write below an object: %v, want nil or ErrConflict", err)
	}
	c.Put(t, "d/below", []byte("x"))
	err = c.Store.Write(c.Ctx, c.Key("d"), strings.NewReader("x"), 1)
	if err != nil && !errors.Is(err, blob.ErrConflict) {
		t.Fatalf("Write over a folder: %v, want nil or ErrConflict", err)
	}
	err = c.Store.Create(c.Ctx, c.Key("d"), strings.NewReader("x"), 1)
	if err != nil && !errors.Is(err, blob.ErrConflict) && !errors.Is(err, blob.ErrExists) {
		t.Fatalf("Create over a folder: %v, want nil, ErrExists or ErrConflict", err)
	}
	if got := c.Get(t, "f"); string(got) != "file" {
		t.Fatal("a refused write changed the object")
	}
	if got := c.Get(t, "d/below"); string(got) != "x" {
		t.Fatal("a refused write changed the folder's object")
	}
}
