// Package blob stores objects by key: the blob store that asset outputs are written to (004 §16,
// "Output Commit Protocol", and §17, "Provider Adapters"). One interface, Store, with two
// implementations that pass one conformance suite (blobtest): Dir, a local directory (the default,
// under the data directory, for a single node), and S3, any S3-compatible object storage (for
// several nodes, which must all see the same objects).
//
// Keys are slash-separated paths checked by ValidKey, the same on both stores; callers compose
// tenant-scoped prefixes themselves. Objects are immutable values: a Write replaces the whole
// object at once, so a reader sees the old object or the new one, never a mix or a part.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Errors a Store returns, wrapped with the operation and the key; test them with errors.Is.
var (
	// ErrNotFound: no object has the key (Read, Stat, Copy's source).
	ErrNotFound = errors.New("blob: object not found")
	// ErrExists: Create found an object at the key already (the commit marker's "fails if exists").
	ErrExists = errors.New("blob: object already exists")
	// ErrTooLarge: the object is larger than the caller's bound (Read).
	ErrTooLarge = errors.New("blob: object larger than the bound")
	// ErrInvalidKey: the key or prefix breaks ValidKey's rules.
	ErrInvalidKey = errors.New("blob: invalid key")
	// ErrSize: the reader handed to Write or Create did not yield exactly the declared size.
	ErrSize = errors.New("blob: reader did not yield the declared size")
	// ErrConflict: the key names a folder of other keys, or one of its folders is an object. A
	// filesystem (Dir; an S3 server over a filesystem) cannot hold both "a" and "a/b"; S3 proper
	// can. Callers keep objects and prefixes apart (an output's files sit under its own prefix).
	ErrConflict = errors.New("blob: key conflicts with a folder or an object on its path")
)

// MaxListLimit bounds one List page; a limit of 0 or less asks for this many.
const MaxListLimit = 1000

// Info describes a stored object.
type Info struct {
	Size     int64     // bytes
	Modified time.Time // when it was last written (the store's clock)
}

// Store is a blob store. Every method takes a context that bounds it, and checks its keys with
// ValidKey before it does anything else. Implementations are safe for concurrent use.
type Store interface {
	// Write stores size bytes from r at key, replacing any object there. It is atomic: until it
	// returns, readers see the previous object (or none); an error leaves that previous state. A
	// reader that yields fewer or more than size bytes fails it with ErrSize.
	Write(ctx context.Context, key string, r io.Reader, size int64) error
	// Create is Write that fails with ErrExists when an object is at key already: of concurrent
	// Creates of one key, exactly one succeeds (the S3 store's guarantee depends on the server;
	// see S3.Create).
	Create(ctx context.Context, key string, r io.Reader, size int64) error
	// Read opens the object at key and returns it with its size. An object larger than max bytes
	// is not opened: ErrTooLarge. The caller closes the reader; a reader that ends before size
	// bytes fails with io.ErrUnexpectedEOF.
	Read(ctx context.Context, key string, max int64) (io.ReadCloser, int64, error)
	// Stat describes the object at key (ErrNotFound without one).
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the object at key; deleting a missing object succeeds.
	Delete(ctx context.Context, key string) error
	// List returns, in byte order, at most limit keys that start with prefix and sort after
	// after ("" for the first page). A page of limit keys may have a next one: pass its last key
	// as after. prefix is matched as a string ("a/b" matches "a/b/c" and "a/bc"); its complete
	// segments and after follow ValidKey's rules.
	List(ctx context.Context, prefix, after string, limit int) ([]string, error)
	// Copy stores a copy of the object at from under to, replacing any object there, atomically
	// like Write (on the server's side where it can: S3's CopyObject, a hard link on disk).
	Copy(ctx context.Context, from, to string) error
	// Close releases what the store holds (a directory handle); it does not delete anything.
	Close() error
}

// Exists tells whether an object is at key.
func Exists(ctx context.Context, s Store, key string) (bool, error) {
	_, err := s.Stat(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	default:
		return false, err
	}
}

// ReadAll reads the whole object at key, at most max bytes (ErrTooLarge beyond).
func ReadAll(ctx context.Context, s Store, key string, max int64) ([]byte, error) {
	rc, size, err := s.Read(ctx, key, max)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	buf := make([]byte, size)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return buf, nil
}

// exactReader yields exactly size bytes of r, failing with ErrSize when r ends early or has more:
// the last bytes are withheld until r's end is confirmed, so that a consumer never receives all
// size bytes of a reader that is too long, and an upload of them cannot complete. It also stops at
// ctx's end.
type exactReader struct {
	ctx   context.Context
	r     io.Reader
	left  int64
	ended bool // the reader's end was confirmed
}

func (e *exactReader) Read(p []byte) (int, error) {
	if err := e.ctx.Err(); err != nil {
		return 0, err
	}
	if e.left == 0 {
		if err := e.atEnd(); err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	switch {
	case e.left == 0:
		if err := e.atEnd(); err != nil {
			return 0, err
		}
		return n, nil
	case errors.Is(err, io.EOF):
		return n, ErrSize
	}
	return n, err
}

// atEnd confirms, once, that the reader has nothing past the declared size.
func (e *exactReader) atEnd() error {
	if e.ended {
		return nil
	}
	var probe [1]byte
	m, err := io.ReadFull(e.r, probe[:])
	if m > 0 {
		return ErrSize
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	e.ended = true
	return nil
}

// checkedReader fails with io.ErrUnexpectedEOF when its reader ends before size bytes, and never
// yields more than size.
type checkedReader struct {
	rc   io.ReadCloser
	left int64
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if c.left > 0 {
			return n, io.ErrUnexpectedEOF
		}
		err = nil
	}
	if c.left == 0 && err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func (c *checkedReader) Close() error { return c.rc.Close() }

// checkSize refuses a negative size or bound.
func checkSize(op, key string, size int64) error {
	if size < 0 {
		return fmt.Errorf("%s %s: negative size %d", op, key, size)
	}
	return nil
}
