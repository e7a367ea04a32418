package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3 is the store over S3-compatible object storage (AWS S3, MinIO, versitygw, SeaweedFS, ...),
// through minio-go: what several nodes share. S3 writes are atomic by themselves (an object
// appears whole when its PUT, or its multipart upload's completion, succeeds). Errors name the
// operation and the key, never the credentials.
type S3 struct {
	client *minio.Client
	cfg    S3Config
	secret []string // the credentials' strings, scrubbed from any error text
}

// OpenS3 builds the store; it sends nothing (the first call reaches the server).
func OpenS3(cfg S3Config, creds S3Credentials) (*S3, error) {
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(creds.AccessKey, creds.SecretKey, creds.SessionToken),
		Secure: cfg.Secure, Region: cfg.Region,
	})
	s := &S3{client: client, cfg: cfg}
	for _, v := range []string{creds.AccessKey, creds.SecretKey, creds.SessionToken} {
		if v != "" {
			s.secret = append(s.secret, v)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("s3 store %s: %w", cfg, s.scrub(err))
	}
	return s, nil
}

// String is the store's URL, without credentials.
func (s *S3) String() string { return s.cfg.String() }

// Close implements Store (the client holds nothing that needs closing).
func (s *S3) Close() error { return nil }

// Write implements Store.
func (s *S3) Write(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.checkWrite("write", key, size); err != nil {
		return err
	}
	in, err := body(ctx, "write", key, r, size)
	if err != nil {
		return err
	}
	_, err = s.client.PutObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, in, size,
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	return s.fail("write", key, err)
}

// Create implements Store with a conditional PUT (If-None-Match: *), which the server refuses
// (412) when the key exists: atomic on servers that implement it (AWS S3 since 2024, MinIO,
// versitygw). A HEAD first answers ErrExists without uploading. A server that answers 501 to the
// condition fails the call unless the URL says conditional=false, when Create is that HEAD then
// a plain PUT: a duplicate found later fails, but two concurrent Creates may both succeed, the
// last one's object staying. A server that ignores the header silently behaves the same way;
// the conformance suite (blobtest) detects it. A 409 (another conditional write of the key in
// flight) is ErrExists too. Objects written by Create are at most 5 GiB (one PUT).
func (s *S3) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.checkWrite("create", key, size); err != nil {
		return err
	}
	if _, err := s.Stat(ctx, key); err == nil {
		return fmt.Errorf("create %s: %w", key, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("create: %w", err)
	}
	in, err := body(ctx, "create", key, r, size)
	if err != nil {
		return err
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
	if s.cfg.Conditional {
		opts.SetMatchETagExcept("*")
	}
	_, err = s.client.PutObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, in, size, opts)
	switch minio.ToErrorResponse(err).StatusCode {
	case http.StatusPreconditionFailed, http.StatusConflict:
		return fmt.Errorf("create %s: %w", key, ErrExists)
	case http.StatusNotImplemented:
		return fmt.Errorf("create %s: the server does not implement conditional writes (If-None-Match); "+
			"add conditional=false to the blob store URL to accept a Create that is not atomic", key)
	}
	return s.fail("create", key, err)
}

// checkWrite checks a write's key and size.
func (s *S3) checkWrite(op, key string, size int64) error {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkSize(op, key, size)
}

// body is what an upload of size bytes from r sends. The client does not read the reader of an
// empty object: its emptiness is checked here.
func body(ctx context.Context, op, key string, r io.Reader, size int64) (io.Reader, error) {
	e := &exactReader{ctx: ctx, r: r, left: size}
	if size == 0 {
		if err := e.atEnd(); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op, key, err)
		}
	}
	return e, nil
}

// Read implements Store: one GET (minio-go's Object would send a second request, conditional on
// the first's ETag, which fails when the object was replaced in between), whose headers give the
// size before the body is read.
func (s *S3) Read(ctx context.Context, key string, max int64) (io.ReadCloser, int64, error) {
	if err := ValidKey(key); err != nil {
		return nil, 0, fmt.Errorf("read: %w", err)
	}
	body, info, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, s.fail("read", key, err)
	}
	if info.Size > max {
		_ = body.Close()
		return nil, 0, fmt.Errorf("read %s: %w: %d bytes, bound %d", key, ErrTooLarge, info.Size, max)
	}
	return &checkedReader{rc: body, left: info.Size}, info.Size, nil
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, fmt.Errorf("stat: %w", err)
	}
	info, err := s.client.StatObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.fail("stat", key, err)
	}
	return Info{Size: info.Size, Modified: info.LastModified}, nil
}

// Delete implements Store (S3's DELETE of a missing key succeeds already).
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	err := s.client.RemoveObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, minio.RemoveObjectOptions{})
	if errors.Is(s.fail("delete", key, err), ErrNotFound) {
		return nil
	}
	return s.fail("delete", key, err)
}

// List implements Store with ListObjectsV2 (StartAfter, MaxKeys), which S3 answers in byte
// order. Keys under the store's prefix that are not valid keys (written by other tools) are
// skipped.
func (s *S3) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	if err := ValidPrefix(prefix); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	opts := minio.ListObjectsOptions{Prefix: s.cfg.Prefix + prefix, Recursive: true}
	if after != "" {
		if err := ValidKey(after); err != nil {
			return nil, fmt.Errorf("list: after: %w", err)
		}
		opts.StartAfter = s.cfg.Prefix + after
	}
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	opts.MaxKeys = limit
	lctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine once the page is full
	keys := []string{}
	for obj := range s.client.ListObjects(lctx, s.cfg.Bucket, opts) {
		if obj.Err != nil {
			return nil, s.fail("list", prefix, obj.Err)
		}
		key := strings.TrimPrefix(obj.Key, s.cfg.Prefix)
		if ValidKey(key) != nil || key <= after {
			continue
		}
		if keys = append(keys, key); len(keys) == limit {
			break
		}
	}
	return keys, nil
}

// Copy implements Store with CopyObject, on the server (sources up to 5 GiB).
func (s *S3) Copy(ctx context.Context, from, to string) error {
	if err := ValidKey(from); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if err := ValidKey(to); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if from == to { // S3 refuses to copy an object onto itself unchanged
		_, err := s.Stat(ctx, from)
		return err
	}
	_, err := s.client.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: s.cfg.Bucket, Object: s.cfg.Prefix + to},
		minio.CopySrcOptions{Bucket: s.cfg.Bucket, Object: s.cfg.Prefix + from})
	return s.fail("copy "+from+" to", to, err)
}

// fail maps the server's answer for key to the package's errors, wrapped with op and key; other
// errors keep only their text, with the credentials scrubbed from it (and the context's errors).
func (s *S3) fail(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var sentinel error
	resp := minio.ToErrorResponse(err)
	switch {
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrSize), errors.Is(err, ErrNotFound):
		sentinel = err
	case resp.Code == "NoSuchKey": // (not any 404: versitygw answers an unknown access key with one)
		sentinel = ErrNotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		sentinel = err
	case resp.Code == "ObjectParentIsFile" || resp.Code == "ExistingObjectIsDirectory":
		sentinel = ErrConflict
	}
	if sentinel != nil {
		return fmt.Errorf("%s %s: %w", op, key, sentinel)
	}
	return fmt.Errorf("%s %s: %s", op, key, s.scrub(err).Error())
}

// scrub returns err's text with every credential string replaced.
func (s *S3) scrub(err error) error {
	msg := err.Error()
	for _, v := range s.secret {
		msg = strings.ReplaceAll(msg, v, "[REDACTED]")
	}
	return errors.New(msg)
}
