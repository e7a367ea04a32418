// Package blobtest is the conformance suite of blob stores: Run(t, open) runs every case in
// parallel, each under a fresh prefix of a store from open, so that every implementation
// (blob.Dir, blob.S3 against a real server) is held to the same behaviour.
package blobtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/larkrun/lark/internal/blob"
)

// Open returns the store a case runs on: a fresh one, or a shared one (each case writes under a
// prefix of its own and deletes what it wrote).
type Open func(t *testing.T) blob.Store

// Run runs every case on stores from open.
func Run(t *testing.T, open Open) {
	cases := []struct {
		name string
		run  func(t *testing.T, c *Case)
	}{
		{"WriteRead", testWriteRead},
		{"Missing", testMissing},
		{"Overwrite", testOverwrite},
		{"WrongSize", testWrongSize},
		{"FailingReader", testFailingReader},
		{"CanceledContext", testCanceledContext},
		{"AtomicOverwrite", testAtomicOverwrite},
		{"Create", testCreate},
		{"CreateRace", testCreateRace},
		{"ReadBound", testReadBound},
		{"Delete", testDelete},
		{"List", testList},
		{"ListPages", testListPages},
		{"ListPrefix", testListPrefix},
		{"Copy", testCopy},
		{"InvalidKeys", testInvalidKeys},
		{"Conflict", testConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &Case{Store: open(t), Prefix: "blobtest/" + tc.name + "-" + randomHex() + "/", Ctx: t.Context()}
			t.Cleanup(func() { c.cleanup(t) })
			tc.run(t, c)
		})
	}
}

// Case is one case's store, its own prefix and its context.
type Case struct {
	Store  blob.Store
	Prefix string
	Ctx    context.Context
}

// Key is name under the case's prefix.
func (c *Case) Key(name string) string { return c.Prefix + name }

// Put writes data at name, failing the test on an error.
func (c *Case) Put(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := c.Store.Write(c.Ctx, c.Key(name), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Write %s: %v", name, err)
	}
}

// Get reads the object at name, failing the test on an error.
func (c *Case) Get(t *testing.T, name string) []byte {
	t.Helper()
	got, err := blob.ReadAll(c.Ctx, c.Store, c.Key(name), 1<<30)
	if err != nil {
		t.Fatalf("Read %s: %v", name, err)
	}
	return got
}

// cleanup deletes every object under the case's prefix (a shared bucket stays clean).
func (c *Case) cleanup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		keys, err := c.Store.List(ctx, c.Prefix, "", blob.MaxListLimit)
		if err != nil || len(keys) == 0 {
			if err != nil {
				t.Errorf("cleanup: %v", err)
			}
			return
		}
		for _, k := range keys {
			if err := c.Store.Delete(ctx, k); err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
		}
	}
}

// wantErr fails the test unless err is target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// wantMissing fails the test unless no object is at name.
func wantMissing(t *testing.T, c *Case, name string) {
	t.Helper()
	ok, err := blob.Exists(c.Ctx, c.Store, c.Key(name))
	if err != nil || ok {
		t.Fatalf("Exists %s = %v, %v; want false, nil", name, ok, err)
	}
}

// pattern is n bytes that differ with seed and position, so a mix of two objects shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i%251)
	}
	return b
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// failingReader yields n bytes, then fails.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("reader broke")
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}
