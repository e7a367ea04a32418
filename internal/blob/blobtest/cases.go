package blobtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/larkrun/lark/internal/blob"
)

func testWriteRead(t *testing.T, c *Case) {
	for _, n := range []int{0, 1, 4096, 1<<20 + 7} {
		name := fmt.Sprintf("obj-%d", n)
		want := pattern(n, byte(n))
		c.Put(t, name, want)
		if got := c.Get(t, name); !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes, not the %d written", name, len(got), len(want))
		}
		info, err := c.Store.Stat(c.Ctx, c.Key(name))
		if err != nil || info.Size != int64(n) || info.Modified.IsZero() {
			t.Fatalf("Stat %s = %+v, %v; want size %d and a time", name, info, err, n)
		}
		if ok, err := blob.Exists(c.Ctx, c.Store, c.Key(name)); !ok || err != nil {
			t.Fatalf("Exists %s = %v, %v", name, ok, err)
		}
	}
	// Keys with dots, spaces, '=' (attempt=N) and non-ASCII are plain keys.
	for _, name := range []string{"a/attempt=3/_commit.json", "x.y/z .parquet", "é/ü"} {
		c.Put(t, name, []byte(name))
		if got := c.Get(t, name); string(got) != name {
			t.Fatalf("%s: read %q", name, got)
		}
	}
}

func testMissing(t *testing.T, c *Case) {
	_, _, err := c.Store.Read(c.Ctx, c.Key("nope"), 10)
	wantErr(t, "Read of a missing key", err, blob.ErrNotFound)
	_, err = c.Store.Stat(c.Ctx, c.Key("nope"))
	wantErr(t, "Stat of a missing key", err, blob.ErrNotFound)
	wantMissing(t, c, "nope")
	// A folder of other keys is no object.
	c.Put(t, "dir/leaf", []byte("x"))
	_, err = c.Store.Stat(c.Ctx, c.Key("dir"))
	wantErr(t, "Stat of a folder", err, blob.ErrNotFound)
	_, _, err = c.Store.Read(c.Ctx, c.Key("dir"), 10)
	wantErr(t, "Read of a folder", err, blob.ErrNotFound)
	_, err = c.Store.Stat(c.Ctx, c.Key("dir/leaf/below"))
	wantErr(t, "Stat below an object", err, blob.ErrNotFound)
}

func testOverwrite(t *testing.T, c *Case) {
	c.Put(t, "k", pattern(1000, 1))
	c.Put(t, "k", pattern(10, 2))
	if got := c.Get(t, "k"); !bytes.Equal(got, pattern(10, 2)) {
		t.Fatalf("after an overwrite read %d bytes, not the new 10", len(got))
	}
}

func testWrongSize(t *testing.T, c *Case) {
	c.Put(t, "k", []byte("old"))
	for _, tc := range []struct {
		data []byte
		size int64
	}{{[]byte("short"), 10}, {[]byte("longer than said"), 4}, {[]byte("x"), 0}} {
		for _, op := range []string{"Write", "Create"} {
			name := "k"
			write := c.Store.Write
			if op == "Create" {
				name, write = "fresh", c.Store.Create
			}
			err := write(c.Ctx, c.Key(name), bytes.NewReader(tc.data), tc.size)
			if err == nil {
				t.Fatalf("%s of %d bytes declared %d: no error", op, len(tc.data), tc.size)
			}
		}
		if got := c.Get(t, "k"); string(got) != "old" {
			t.Fatalf("a failed Write left %q, not the old object", got)
		}
		wantMissing(t, c, "fresh")
	}
	err := c.Store.Write(c.Ctx, c.Key("k"), bytes.NewReader(nil), -1)
	if err == nil {
		t.Fatal("Write with size -1: no error")
	}
}

func testFailingReader(t *testing.T, c *Case) {
	c.Put(t, "k", []byte("old"))
	if err := c.Store.Write(c.Ctx, c.Key("k"), &failingReader{n: 5000}, 10000); err == nil {
		t.Fatal("Write from a failing reader: no error")
	}
	if got := c.Get(t, "k"); string(got) != "old" {
		t.Fatalf("a failed Write left %q, not the old object", got)
	}
	if err := c.Store.Create(c.Ctx, c.Key("new"), &failingReader{n: 5000}, 10000); err == nil {
		t.Fatal("Create from a failing reader: no error")
	}
	wantMissing(t, c, "new")
	keys, err := c.Store.List(c.Ctx, c.Prefix, "", 0)
	if err != nil || !slices.Equal(keys, []string{c.Key("k")}) {
		t.Fatalf("List after failed writes = %q, %v; want only k", keys, err)
	}
}

func testCanceledContext(t *testing.T, c *Case) {
	ctx, cancel := context.WithCancel(c.Ctx)
	cancel()
	if err := c.Store.Write(ctx, c.Key("k"), strings.NewReader("data"), 4); err == nil {
		t.Fatal("Write with a canceled context: no error")
	}
	if err := c.Store.Create(ctx, c.Key("k"), strings.NewReader("data"), 4); err == nil {
		t.Fatal("Create with a canceled context: no error")
	}
	wantMissing(t, c, "k")
}

// testAtomicOverwrite: while objects of two sizes and contents replace each other, every read
// sees one of them whole.
func testAtomicOverwrite(t *testing.T, c *Case) {
	a, b := pattern(64<<10, 'a'), pattern(96<<10+3, 'b')
	c.Put(t, "k", a)
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := blob.ReadAll(c.Ctx, c.Store, c.Key("k"), 1<<20)
				if err != nil {
					errs <- fmt.Errorf("read during overwrites: %w", err)
					return
				}
				if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
					errs <- fmt.Errorf("read %d bytes: neither object whole", len(got))
					return
				}
			}
		})
	}
	for i := range 20 {
		data := a
		if i%2 == 0 {
			data = b
		}
		c.Put(t, "k", data)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func testCreate(t *testing.T, c *Case) {
	if err := c.Store.Create(c.Ctx, c.Key("m/_commit.json"), strings.NewReader("first"), 5); err != nil {
		t.Fatalf("first Create: %v", err)
	}
	err := c.Store.Create(c.Ctx, c.Key("m/_commit.json"), strings.NewReader("second!"), 7)
	wantErr(t, "second Create", err, blob.ErrExists)
	if got := c.Get(t, "m/_commit.json"); string(got) != "first" {
		t.Fatalf("after a refused Create read %q, want the first object", got)
	}
	// Create over an object that Write put there, and again after a Delete.
	c.Put(t, "w", []byte("w"))
	wantErr(t, "Create over a written object", c.Store.Create(c.Ctx, c.Key("w"), strings.NewReader("x"), 1), blob.ErrExists)
	if err := c.Store.Delete(c.Ctx, c.Key("w")); err != nil {
		t.Fatal(err)
	}
	if err := c.Store.Create(c.Ctx, c.Key("w"), strings.NewReader("again"), 5); err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
	if got := c.Get(t, "w"); string(got) != "again" {
		t.Fatalf("read %q after Create", got)
	}
}

// testCreateRace: of concurrent Creates of one key, exactly one succeeds, and its object is there.
func testCreateRace(t *testing.T, c *Case) {
	const n = 8
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Go(func() {
			data := pattern(2048, byte(i))
			results[i] = c.Store.Create(c.Ctx, c.Key("marker"), bytes.NewReader(data), int64(len(data)))
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range results {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("Creates %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, blob.ErrExists):
			t.Fatalf("Create %d: %v, want ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no Create succeeded")
	}
	if got := c.Get(t, "marker"); !bytes.Equal(got, pattern(2048, byte(winner))) {
		t.Fatal("the object is not the successful Create's")
	}
}

func testReadBound(t *testing.T, c *Case) {
	c.Put(t, "k", pattern(100, 0))
	_, _, err := c.Store.Read(c.Ctx, c.Key("k"), 99)
	wantErr(t, "Read over the bound", err, blob.ErrTooLarge)
	_, err = blob.ReadAll(c.Ctx, c.Store, c.Key("k"), 99)
	wantErr(t, "ReadAll over the bound", err, blob.ErrTooLarge)
	rc, size, err := c.Store.Read(c.Ctx, c.Key("k"), 100)
	if err != nil || size != 100 {
		t.Fatalf("Read at the bound = %d, %v", size, err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(got, pattern(100, 0)) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
}

func testDelete(t *testing.T, c *Case) {
	c.Put(t, "a/b/c", []byte("x"))
	c.Put(t, "a/d", []byte("y"))
	for range 2 { // idempotent
		if err := c.Store.Delete(c.Ctx, c.Key("a/b/c")); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	wantMissing(t, c, "a/b/c")
	if err := c.Store.Delete(c.Ctx, c.Key("never/was")); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if got := c.Get(t, "a/d"); string(got) != "y" {
		t.Fatal("Delete removed a sibling")
	}
	// The key's folder can hold an object again.
	c.Put(t, "a/b", []byte("z"))
	if got := c.Get(t, "a/b"); string(got) != "z" {
		t.Fatal("object where a deleted folder was")
	}
}
