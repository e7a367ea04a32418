package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/blob"
)

// TestBlobStore: by default the blob store is the data directory's blobs folder; --blob-store
// names another, and a bad one stops the start with an error naming the flag.
func TestBlobStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := New(ctx, Config{DataDir: dir})
	require.NoError(t, err)
	require.NoError(t, srv.Blobs.Write(ctx, "t/x", strings.NewReader("x"), 1))
	_, err = os.Stat(filepath.Join(dir, "blobs", "t", "x"))
	require.NoError(t, err)
	require.NoError(t, srv.Close())

	other := t.TempDir()
	srv, err = New(ctx, Config{DataDir: t.TempDir(), BlobStore: "file://" + other})
	require.NoError(t, err)
	ok, err := blob.Exists(ctx, srv.Blobs, "t/x")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, srv.Close())

	for _, bad := range []string{"gs://bucket", "s3://", "s3://bucket?endpoint=127.0.0.1:1&unknown=1"} {
		_, err = New(ctx, Config{DataDir: t.TempDir(), BlobStore: bad})
		require.ErrorContains(t, err, "--blob-store", bad)
	}
}
